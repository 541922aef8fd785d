"""The Backend protocol: what executes a plan (simulator, local processes, Ray).

The scheduler calls ``launch`` / ``halt`` with allocations it has already
checked, and asks the backend to ``advance`` time, receiving the events that
happened (a job finished, reported progress, failed). The simulator jumps
time; real backends wait on the wall clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from ..spec.job import JobSpec
from .ledger import Allocation


class BackendEventKind(StrEnum):
    PROGRESS = "progress"  # data: iterations (done so far), iter_time (measured s/iteration);
    # optional compute_s / comm_s (seconds/iteration computing and communicating: subtask times)
    FINISHED = "finished"
    FAILED = "failed"  # data: reason
    # The backend lost the job's placement (its node went away): the job stopped at its last
    # checkpoint and must be placed again. data: reason; optional iterations (at that checkpoint)
    EVICTED = "evicted"


@dataclass(frozen=True, slots=True)
class BackendEvent:
    time: float
    kind: BackendEventKind
    job: str
    data: dict[str, Any] = field(default_factory=dict)


class Unsupported(Exception):
    """The backend cannot carry out this kind of action (e.g. Pack in a backend without packing)."""


class Backend(Protocol):
    def launch(self, spec: JobSpec, alloc: Allocation, now: float, *, from_checkpoint: bool) -> None:
        """Run ``spec`` on ``alloc`` from ``now``, restoring its checkpoint if ``from_checkpoint``."""

    def halt(self, job: str, now: float, *, checkpoint: bool) -> None:
        """Stop ``job`` at ``now``; save a checkpoint first if ``checkpoint``."""

    def next_event_time(self) -> float | None:
        """Time of the next internal event if known (simulator), else None."""

    def advance(self, until: float) -> tuple[float, list[BackendEvent]]:
        """Move the world to the first event at or before ``until`` (or to ``until``).

        Returns the time reached and the events that happened at it.
        """

    def close(self) -> None:
        """Release whatever the backend holds (processes, connections)."""
