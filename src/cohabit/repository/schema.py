"""The job repository's tables (SQLAlchemy 2 declarative models; Rotary-DLT §3.3.1).

Rotary "stores the information of the historical DLT jobs in a repository ... model
architecture, training hyperparameters, training epochs, and evaluation accuracy", so that
its estimators (TEE, TME, TTR in :mod:`cohabit.models`) can learn from similar jobs.

* ``repo_jobs``: one finished job: model, dataset, number of parameters, batch size,
  optimizer, learning rate, the per-epoch accuracy (a JSON list, epoch 1 first), the peak
  device memory it needed at its batch size (MB, when measured), and where the row came
  from (``seed`` for the packaged learning curves, ``run`` for jobs cohabit ran).
* ``repo_timings``: per job and device, the measured step time (first step discarded,
  as TTR records it) and epoch time.

The schema is its own (``RepoBase``), not the service's Alembic-managed one: the repository
is a file of its own (SQLite by default) that a service can point at as well.
"""

from __future__ import annotations

from sqlalchemy import JSON, Float, ForeignKey, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class RepoBase(DeclarativeBase):
    pass


class RepoJob(RepoBase):
    __tablename__ = "repo_jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    model: Mapped[str] = mapped_column(String(100), index=True)
    dataset: Mapped[str] = mapped_column(String(100), index=True)
    num_parameters: Mapped[int | None] = mapped_column(Integer, nullable=True)
    batch_size: Mapped[int | None] = mapped_column(Integer, nullable=True)
    optimizer: Mapped[str | None] = mapped_column(String(50), nullable=True)
    learning_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    accuracy: Mapped[list] = mapped_column(JSON, default=list)
    peak_mem_mb: Mapped[float | None] = mapped_column(Float, nullable=True)
    source: Mapped[str] = mapped_column(String(20), default="run")
    timings: Mapped[list[RepoTiming]] = relationship(back_populates="job", cascade="all, delete-orphan",
                                                     lazy="selectin")


class RepoTiming(RepoBase):
    __tablename__ = "repo_timings"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("repo_jobs.id"), index=True)
    device: Mapped[str] = mapped_column(String(100))
    step_s: Mapped[float] = mapped_column(Float)
    epoch_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    job: Mapped[RepoJob] = relationship(back_populates="timings")
