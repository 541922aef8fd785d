"""Ground truth of a simulated job: what the simulator knows and policies must not.

A trace gives each job a real length (``duration``) or an amount of work; the
simulator turns that into progress. None of this is reachable from a
``ClusterView``: trace loaders return :class:`TraceJob` pairs, the scheduler
receives only ``TraceJob.spec`` and the ``SimBackend`` keeps the truth.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.job import JobSpec


@dataclass(frozen=True, slots=True)
class JobTruth:
    """Ground truth of one job.

    * ``iterations``: total work in iterations. When the trace gives none, the
      simulator uses nominal iterations of one second each at the reference
      placement (``iterations = ceil(duration)``).
    * ``duration``: seconds the job ran in the trace at its reference size
      (``ref_workers`` workers, consolidated, alone). ``None`` when the
      length comes from a profile (Pollux applications, PS jobs).
    * ``app``: profile key for profile-driven jobs (Pollux application name,
      PS model name); ``None`` for duration-driven GPU-trace jobs.
    """

    iterations: int
    duration: float | None = None
    ref_workers: int = 1
    app: str | None = None

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {self.iterations}")
        if self.duration is not None and not self.duration > 0:
            raise ValueError(f"duration must be > 0, got {self.duration}")
        if self.ref_workers < 1:
            raise ValueError(f"ref_workers must be >= 1, got {self.ref_workers}")


@dataclass(frozen=True, slots=True)
class TraceJob:
    """A job as read from a trace: the public spec and the hidden truth."""

    spec: JobSpec
    truth: JobTruth
