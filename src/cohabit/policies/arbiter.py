"""Epoch-based resource arbitration: the mechanism shared by Rotary-AQP and its baselines.

Rotary (Liu dissertation §3.1.4, Alg. 3 and Alg. 4) runs progressive jobs in *running epochs*:
a job granted resources holds them for at least one epoch; when its epoch ends it becomes
*active* again and competes with the waiting jobs for the next one. The policies differ only
in how they order the active jobs (``priority``), how long a job's epoch is (``epoch_length``)
and whether they admit it (``admit``: Rotary-AQP's memory check). This base class does the
rest, identically for every policy:

1. running jobs still inside their epoch keep their placement;
2. the other jobs (running ones whose epoch ended, paused and pending ones) are ordered by
   ``priority`` and granted one task each while the cluster has room (the ``Draft`` uses the
   ledger's own fit rules) and ``admit`` agrees: Alg. 4's "allocate 1 core to job";
3. a running job not granted the next epoch is paused (checkpointed), a paused one granted it
   is resumed, a pending one started; a running one granted it continues in place.

Ratchet's triggering rule (``ratchet=True``, :meth:`cohabit.ratchet.CheckpointTrigger.worth_preempting`)
decides which jobs may be checkpointed: a running job whose remaining work (batches left x its
measured seconds per batch) is no longer than a pause costs (``switch_cost_s``: checkpoint,
restart, restore) keeps running past its epoch instead of being paused and restored for
nothing. A pause itself always lands on a batch boundary (the task finishes the batch it is
in), so no operator is cut and redone.

Completion criteria (met, or the WITHIN deadline passed) are enforced by the engine, not here.
A job's latest observed ``accuracy`` metric is its progress (the envelope estimate a query
reports every batch; a training job's evaluation accuracy).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.actions import Pause, Plan, Resume, Start
from ..engine.job import JobView
from ..engine.view import ClusterView
from ..ratchet.trigger import CheckpointTrigger
from ..spec.criteria import MetricTarget
from .base import BasePolicy
from .placement import Draft


def latest_accuracy(job: JobView) -> float:
    """The job's latest reported ``accuracy`` (0 before its first report)."""
    series = job.metrics.get("accuracy")
    return float(series[-1][1]) if series else 0.0


def target_accuracy(job: JobView, default: float = 1.0) -> float:
    """The accuracy the job's criterion asks for (``default`` without an accuracy target)."""
    c = job.spec.criteria
    if isinstance(c, MetricTarget) and c.metric == "accuracy" and c.op in (">=", ">"):
        return float(c.value)
    return default


def absolute_deadline(job: JobView) -> float:
    """Submission time plus the criterion's WITHIN seconds (or the job's ``deadline``); inf without one."""
    c = job.spec.criteria
    within = getattr(c, "within", None) or getattr(c, "budget", None)
    if within is not None and getattr(within, "unit", None) == "seconds":
        return job.spec.submit_time + float(within.amount)
    if job.spec.absolute_deadline is not None:
        return job.spec.absolute_deadline
    return float("inf")


class EpochArbiter(BasePolicy):
    """Running epochs, priority order, pause/resume (module docstring). Subclasses set ``priority``."""

    name = "arbiter"

    def __init__(self, epoch_s: float = 2.0, ratchet: bool = True, switch_cost_s: float = 1.0) -> None:
        if not epoch_s > 0:
            raise ValueError(f"epoch_s must be > 0 seconds, got {epoch_s!r}")
        if not switch_cost_s >= 0:
            raise ValueError(f"switch_cost_s must be >= 0 seconds, got {switch_cost_s!r}")
        self.epoch_s = float(epoch_s)
        self.ratchet = bool(ratchet)
        self.switch_cost_s = float(switch_cost_s)
        self.tick_interval = self.epoch_s / 4
        self._epoch_start: dict[str, float] = {}
        self._last_granted: dict[str, float] = {}

    # ------------------------------------------------------------ for subclasses
    def priority(self, job: JobView, view: ClusterView) -> tuple[float, ...]:  # pragma: no cover - abstract
        """Sort key: smaller runs first."""
        raise NotImplementedError

    def epoch_length(self, job: JobView, view: ClusterView) -> float:
        """Seconds a granted job keeps its resources before it is re-arbitrated."""
        return self.epoch_s

    def begin_round(self, view: ClusterView, jobs: Sequence[JobView]) -> None:
        """Called once per decision before ``priority`` / ``admit`` (estimates, budgets)."""

    def admit(self, job: JobView, view: ClusterView) -> bool:
        """Whether ``job`` may take resources this round (checked before it is placed)."""
        return True

    def charge(self, job: JobView, view: ClusterView) -> None:
        """``job`` holds resources this round (granted, or inside its epoch): count it in budgets."""

    def remaining_s(self, job: JobView, view: ClusterView) -> float | None:
        """Seconds of work ``job`` has left by its measured speed (None before it was measured)."""
        if not job.iter_time or job.spec.iterations is None:
            return None
        return max(0.0, job.spec.iterations - job.iterations_done(view.now)) * job.iter_time

    def _keeps_running(self, job: JobView, view: ClusterView, start: float) -> bool:
        if view.now - start < self.epoch_length(job, view):
            return True
        return self.ratchet and not CheckpointTrigger.worth_preempting(self.remaining_s(job, view), self.switch_cost_s)

    # ------------------------------------------------------------------- engine
    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._epoch_start.pop(job.id, None)

    def decide(self, view: ClusterView) -> Plan:
        now = view.now
        locked: list[JobView] = []
        active: list[JobView] = []
        for job in view.running.values():
            start = self._epoch_start.setdefault(job.id, now)
            (locked if self._keeps_running(job, view, start) else active).append(job)
        active += list(view.paused.values()) + list(view.pending.values())
        if not active:
            return []
        self.begin_round(view, locked + active)
        draft = Draft(view)
        for job in active:
            if job.id in view.running:
                draft.give_back(job)  # its epoch is over: it competes for the next one
        for job in locked:
            self.charge(job, view)  # locked jobs hold their memory in the round's budget
        granted: list[tuple[JobView, tuple[int, ...]]] = []
        for job in sorted(active, key=lambda j: (*self.priority(j, view), j.seq)):
            if not self.admit(job, view):
                continue
            if job.id in view.running:
                placement: tuple[int, ...] | None = job.placement if draft.reserve(job, job.placement) else None
            else:
                placement = draft.place(job)
            if placement is None:
                continue
            self.charge(job, view)
            granted.append((job, placement))
        chosen = {j.id for j, _ in granted}
        plan: Plan = [Pause(j.id, "epoch ended: not granted the next one") for j in active
                      if j.id in view.running and j.id not in chosen]
        for job, placement in granted:
            self._epoch_start[job.id] = now
            self._last_granted[job.id] = now
            if job.id in view.paused:
                plan.append(Resume(job.id, placement))
            elif job.id in view.pending:
                plan.append(Start(job.id, placement))
        return plan
