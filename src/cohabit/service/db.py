"""The service's tables (SQLAlchemy 2 declarative models). The schema itself is created and
upgraded by the Alembic migrations in ``migrations/`` (``tests/test_service_store.py`` checks
that the migrations and these models agree).

* ``tenants`` / ``tokens``: who may call the API; tokens are stored as SHA-256 digests only.
* ``jobs``: one row per submitted job (spec as JSON, state, pending reason, times, progress).
  ``seq`` is the public job id and the queue order.
* ``events``: the append-only :class:`~cohabit.engine.record.Record` events, one row each
  (``time`` in seconds since the service's epoch, ``job`` the scheduler's job id).
* ``allocations``: where each running job runs (written *before* the launch: write-ahead).
* ``checkpoints``: the newest checkpoint known for each job.
* ``policy``: the active policy and its parameters (one row).
* ``meta``: key/value (the service epoch).
"""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Meta(Base):
    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Tenant(Base):
    __tablename__ = "tenants"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    max_gpus: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_running: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created: Mapped[float] = mapped_column(Float)


class Token(Base):
    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of the token
    created: Mapped[float] = mapped_column(Float)


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_jobs_tenant_idem"),
        Index("ix_jobs_state_seq", "state", "seq"),
        Index("ix_jobs_tenant_seq", "tenant_id", "seq"),
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"))
    name: Mapped[str] = mapped_column(String(200), index=True)
    spec: Mapped[dict] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(20))
    pending_reason: Mapped[str] = mapped_column(Text, default="")
    reason: Mapped[str] = mapped_column(Text, default="")
    submit_time: Mapped[float] = mapped_column(Float)
    start_time: Mapped[float | None] = mapped_column(Float, nullable=True)
    end_time: Mapped[float | None] = mapped_column(Float, nullable=True)
    iterations: Mapped[float] = mapped_column(Float, default=0.0)
    total_iterations: Mapped[int | None] = mapped_column(Integer, nullable=True)
    gpus: Mapped[float] = mapped_column(Float, default=0.0)
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    hold_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    runs: Mapped[int] = mapped_column(Integer, default=0)  # launches (start, resume, move)


class EventRow(Base):
    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    time: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(32))
    job: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    data: Mapped[dict] = mapped_column(JSON)


class AllocationRow(Base):
    __tablename__ = "allocations"
    job_seq: Mapped[int] = mapped_column(ForeignKey("jobs.seq"), primary_key=True)
    nodes: Mapped[list] = mapped_column(JSON)
    alloc: Mapped[dict] = mapped_column(JSON)
    pids: Mapped[list] = mapped_column(JSON)
    since: Mapped[float] = mapped_column(Float)
    from_checkpoint: Mapped[bool] = mapped_column(Boolean)


class CheckpointRow(Base):
    __tablename__ = "checkpoints"
    job_seq: Mapped[int] = mapped_column(ForeignKey("jobs.seq"), primary_key=True)
    iteration: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    time: Mapped[float] = mapped_column(Float)


class PolicyRow(Base):
    __tablename__ = "policy"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    spec: Mapped[str] = mapped_column(String(200))
    updated: Mapped[float] = mapped_column(Float)
