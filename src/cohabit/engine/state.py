"""The job state machine.

submitted -> pending -> running <-> paused -> finished / stopped-early / failed / cancelled.
A job that can never fit the cluster goes submitted -> rejected.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    SUBMITTED = "submitted"
    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"
    STOPPED_EARLY = "stopped-early"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(
    {JobState.FINISHED, JobState.STOPPED_EARLY, JobState.FAILED, JobState.CANCELLED, JobState.REJECTED}
)

_ALLOWED: dict[JobState, frozenset[JobState]] = {
    JobState.SUBMITTED: frozenset({JobState.PENDING, JobState.REJECTED, JobState.CANCELLED}),
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.STOPPED_EARLY, JobState.CANCELLED}),
    JobState.RUNNING: frozenset(
        {JobState.RUNNING, JobState.PAUSED, JobState.FINISHED, JobState.STOPPED_EARLY, JobState.FAILED,
         JobState.CANCELLED}
    ),
    JobState.PAUSED: frozenset({JobState.RUNNING, JobState.STOPPED_EARLY, JobState.FAILED, JobState.CANCELLED}),
}


class IllegalTransition(ValueError):
    pass


def check_transition(job_id: str, old: JobState, new: JobState) -> None:
    """Raise :class:`IllegalTransition` unless ``old -> new`` is an edge of the state machine."""
    if new not in _ALLOWED.get(old, frozenset()):
        raise IllegalTransition(f"job {job_id!r}: cannot go from {old} to {new}")
