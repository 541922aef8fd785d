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


GROUP_MODES = ("pipelined", "naive")
"""Colocate modes where the jobs form a group that holds whole machines (see ``Ledger``)."""


@dataclass(frozen=True, slots=True)
class Colocate:
    """Run ``jobs`` together on ``nodes`` (Harmony subtask pipelining, Gandiva packing).

    * ``mode="share"``: start or resume ``jobs[0]`` time-sharing the GPUs already in use on
      ``nodes`` (one node per task); ``jobs[1:]`` name the intended hosts. The ledger gives each
      task the device with the fewest jobs on its node (a free one first); with ``on_hosts``, only
      devices the hosts hold (so the guest shares exactly its partner's GPUs: Gavel's job pairs).
    * ``mode="pipelined"`` (Harmony, Lee et al.): ``jobs`` form a job group holding the machines
      ``nodes``; each job runs a worker on every machine (DoP = ``len(nodes)``) and its
      parameter servers co-located, and their COMP / COMM subtasks are interleaved by the
      runtime. Pending jobs start, paused jobs resume, running jobs elsewhere move in at an
      iteration boundary; members already in the group stay.
    * ``mode="naive"``: the same group of machines, shared without subtask coordination (the
      naively co-located baseline).
    """

    jobs: tuple[str, ...]
    nodes: tuple[int, ...]
    mode: str = "share"
    on_hosts: bool = False


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
