"""Plan actions: what a policy asks the scheduler to do.

A :class:`Placement` gives one node index per task, workers first then
parameter servers (``JobSpec.task_demands`` order). The scheduler checks every
action against its allocation ledger before the backend sees it; an action
that would over-allocate a node or that does not fit the job's state is
rejected with its reason, recorded, and the scheduler carries on.

``Colocate``, ``Pack`` and ``SetShare`` are defined here so that policies can
name them; backends that do not support them reject them with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..spec.resources import Resources

Placement = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Start:
    """Start a pending job on ``placement`` (one node index per task)."""

    job: str
    placement: Placement


@dataclass(frozen=True, slots=True)
class Pause:
    """Checkpoint a running job and release its resources (preemption)."""

    job: str
    reason: str = "preempted"


@dataclass(frozen=True, slots=True)
class Resume:
    """Restore a paused job from its checkpoint on ``placement``."""

    job: str
    placement: Placement


@dataclass(frozen=True, slots=True)
class Migrate:
    """Checkpoint a running job and restore it on ``placement`` (same task count)."""

    job: str
    placement: Placement


@dataclass(frozen=True, slots=True)
class Resize:
    """Change a running job's worker count (Dorm: checkpoint, re-create, resume).

    ``placement`` has ``n_workers + num_ps`` entries.
    """

    job: str
    placement: Placement


@dataclass(frozen=True, slots=True)
class Stop:
    """End a job before completion (early stopping, deadline, user request)."""

    job: str
    reason: str
    outcome: Literal["stopped-early", "cancelled"] = "stopped-early"


@dataclass(frozen=True, slots=True)
class Colocate:
    """Run ``jobs`` together on ``nodes`` (Harmony subtask pipelining, Gandiva packing)."""

    jobs: tuple[str, ...]
    nodes: tuple[int, ...]
    mode: str = "share"  # "share": time-share GPUs; "pipelined" (Harmony) comes with subtasks


@dataclass(frozen=True, slots=True)
class Pack:
    """Train ``jobs`` jointly as one packed model on ``device`` (Liu, Pack)."""

    jobs: tuple[str, ...]
    device: tuple[int, int]  # (node index, gpu index)


@dataclass(frozen=True, slots=True)
class SetShare:
    """Set the resource share of a running job (Rotary arbitration)."""

    job: str
    share: Resources


Action = Start | Pause | Resume | Migrate | Resize | Stop | Colocate | Pack | SetShare
Plan = list[Action]
