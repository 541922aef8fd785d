"""The job repository: finished jobs Rotary's estimators learn from (Liu dissertation §3.3.1).

:class:`JobRepository` opens a SQLite file (the default) or any SQLAlchemy URL, creates the
tables of :mod:`.schema` if needed, and stores :class:`JobRecord` values. Reading returns
plain records; estimators take lists of them and never touch the database.

``JobRepository.packaged()`` is an in-memory repository seeded with the learning curves and the
measured peak memory that ship with cohabit (``cohabit/data/learning_curves``, see :mod:`.seed`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine, create_engine, func, select
from sqlalchemy.orm import Session

from .schema import RepoBase, RepoJob, RepoTiming

__all__ = ["DEFAULT_PATH", "JobRecord", "JobRepository", "Timing"]

#: Where ``JobRepository()`` keeps its file when no path is given.
DEFAULT_PATH = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "cohabit" / "jobrepo.sqlite"


@dataclass(frozen=True, slots=True)
class Timing:
    """Measured time of one step (first step discarded) and of one epoch on ``device``."""

    device: str
    step_s: float
    epoch_s: float | None = None


@dataclass(frozen=True)
class JobRecord:
    """One finished job as the repository keeps it (``accuracy[i]`` is after epoch ``i + 1``)."""

    model: str
    dataset: str
    accuracy: tuple[float, ...] = ()
    num_parameters: int | None = None
    batch_size: int | None = None
    optimizer: str | None = None
    learning_rate: float | None = None
    peak_mem_mb: float | None = None
    timings: tuple[Timing, ...] = field(default_factory=tuple)
    name: str = ""
    source: str = "run"

    def __post_init__(self) -> None:
        if not self.model or not self.dataset:
            raise ValueError(f"a job record needs a model and a dataset, got {self.model!r}, {self.dataset!r}")
        object.__setattr__(self, "accuracy", tuple(float(a) for a in self.accuracy))
        object.__setattr__(self, "timings", tuple(self.timings))

    def epoch_time(self, device: str) -> float | None:
        """Measured epoch time on ``device`` (None if not measured there)."""
        for t in self.timings:
            if t.device == device and t.epoch_s is not None:
                return t.epoch_s
        return None


def _url(path: str | os.PathLike[str] | None) -> str:
    if path is None:
        path = DEFAULT_PATH
    text = str(path)
    if "://" in text:
        return text
    Path(text).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{Path(text).expanduser()}"


class JobRepository:
    """Finished jobs in a database (SQLite file by default, ``sqlite://`` for memory, or any URL)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.url = _url(path)
        self.engine: Engine = create_engine(self.url)
        RepoBase.metadata.create_all(self.engine)
        self._cache: list[JobRecord] | None = None

    @classmethod
    def packaged(cls) -> JobRepository:
        """An in-memory repository seeded with cohabit's packaged learning curves and the measured
        peak memory of its real torch workloads."""
        from .seed import packaged_memory_records, packaged_records

        repo = cls("sqlite://")
        repo.add_many(packaged_records() + packaged_memory_records())
        return repo

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> JobRepository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- writing
    def add(self, record: JobRecord) -> int:
        """Store one finished job; returns its row id."""
        return self.add_many([record])[0]

    def add_many(self, records: Iterable[JobRecord]) -> list[int]:
        rows = [_row(r) for r in records]
        with Session(self.engine) as s, s.begin():
            s.add_all(rows)
            s.flush()
            ids = [r.id for r in rows]
        self._cache = None
        return ids

    # ---------------------------------------------------------------- reading
    def __len__(self) -> int:
        with Session(self.engine) as s:
            return int(s.scalar(select(func.count()).select_from(RepoJob)) or 0)

    def records(self, *, dataset: str | None = None, model: str | None = None) -> list[JobRecord]:
        """Stored jobs, in insertion order, optionally only those of ``dataset`` / ``model``."""
        if self._cache is None:
            with Session(self.engine) as s:
                self._cache = [_record(r) for r in s.scalars(select(RepoJob).order_by(RepoJob.id))]
        return [r for r in self._cache
                if (dataset is None or r.dataset == dataset) and (model is None or r.model == model)]

    def datasets(self) -> Sequence[str]:
        return sorted({r.dataset for r in self.records()})


def _row(r: JobRecord) -> RepoJob:
    return RepoJob(
        name=r.name, model=r.model, dataset=r.dataset, num_parameters=r.num_parameters, batch_size=r.batch_size,
        optimizer=r.optimizer, learning_rate=r.learning_rate, accuracy=list(r.accuracy), peak_mem_mb=r.peak_mem_mb,
        source=r.source, timings=[RepoTiming(device=t.device, step_s=t.step_s, epoch_s=t.epoch_s) for t in r.timings],
    )


def _record(row: RepoJob) -> JobRecord:
    return JobRecord(
        model=row.model, dataset=row.dataset, accuracy=tuple(row.accuracy or ()), num_parameters=row.num_parameters,
        batch_size=row.batch_size, optimizer=row.optimizer, learning_rate=row.learning_rate,
        peak_mem_mb=row.peak_mem_mb, name=row.name, source=row.source,
        timings=tuple(Timing(t.device, t.step_s, t.epoch_s) for t in row.timings),
    )
