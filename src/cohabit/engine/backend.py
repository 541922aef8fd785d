"""The Backend protocol: what executes a plan (simulator, local processes, Ray).

The scheduler calls ``launch`` / ``halt`` with allocations it has already
checked (``launch_pack`` for a ``Pack`` action, on a :class:`PackingBackend`),
and asks the backend to ``advance`` time, receiving the events that
happened (a job finished, reported progress, failed). The simulator jumps
time; real backends wait on the wall clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from collections.abc import Sequence
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
    # What the job actually used (ground truth in the simulator, measured in real runs) over the
    # interval [since, until]: data used ({resource: mean amount in capacity units}), since, until.
    # Recorded for metrics only; never shown to policies (no JobView field reads it).
    USED = "used"
    # Several jobs' periodic reports at one time, as columns (the simulator's report grid): data jobs,
    # iterations, iter_time, loss (one entry per job); each is what a PROGRESS event with metrics
    # {"loss": ...} would carry. ``job`` is "" (the event is nobody's own).
    REPORTS = "reports"


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
        """Stop ``job`` at ``now``; save a checkpoint first if ``checkpoint``.

        A member of a pack is *unpacked*: it alone is stopped (and checkpointed); the other
        members keep training in the pack."""

    def next_event_time(self) -> float | None:
        """Time of the next internal event if known (simulator), else None."""

    def advance(self, until: float) -> tuple[float, list[BackendEvent]]:
        """Move the world to the first event at or before ``until`` (or to ``until``).

        Returns the time reached and the events that happened at it.
        """

    def close(self) -> None:
        """Release whatever the backend holds (processes, connections)."""

    # Optional: ``job_ended(job, now)``, called by the scheduler when a job ends (finished, stopped,
    # cancelled), for a backend that holds something of it after its halt (LocalBackend's tiers).


class UsageBackend(Backend, Protocol):
    """A backend that also reports what jobs use (``USED`` events). At the end of a run the
    scheduler calls ``drain_usage`` before ``close`` for the samples not yet reported."""

    def drain_usage(self, now: float) -> list[BackendEvent]:
        """``USED`` events covering every running job's use up to ``now`` not yet reported."""


class PackingBackend(Backend, Protocol):
    """A backend that can also run packs (the optional ``launch_pack``); for any other backend the
    scheduler rejects the ``Pack`` action as ``Unsupported``."""

    def launch_pack(self, device: tuple[int, int], specs: Sequence[JobSpec], allocs: Sequence[Allocation],
                    now: float, *, from_checkpoint: Sequence[bool]) -> None:
        """Train ``specs`` jointly as one packed model on ``device`` (Liu, Pack, §2.1.2).

        Each spec joins the pack already training on ``device`` (whose members keep going) or
        forms it; ``from_checkpoint[i]`` restores member ``i`` from its own checkpoint. A member
        leaves through ``halt`` or by finishing (FINISHED for that member only; misaligned step
        counts, §2.2.3)."""


class SharingBackend(Backend, Protocol):
    """A backend that can also change a running job's share in place (the optional ``set_share``,
    for the ``SetShare`` action); for any other backend the scheduler rejects it as ``Unsupported``."""

    def set_share(self, job: str, alloc: Allocation, now: float) -> None:
        """``job`` keeps running on its node with ``alloc`` (new CPU cores / memory) from ``now``;
        a real backend applies it at the job's next batch or iteration boundary."""
