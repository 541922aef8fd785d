"""Epoch-granular resource arbitration: the mechanism shared by Rotary-DLT and its baselines.

Rotary (Liu dissertation §3.1.4) assigns each active job to at most one resource; "a job
holds on to a particular resource for at least an epoch", and "when the jobs complete the
current epoch, they can be checkpointed ... if they are not granted resources for the next
running epoch" (§3.1.3). An :class:`EpochArbiter` does exactly that at every decision:

1. rank every active job (running, paused, pending) by the subclass's :meth:`EpochArbiter.rank`;
2. a running job that has not completed an epoch since it was (re)placed keeps its place
   (it is *locked*); the others are preemptible;
3. walk the ranking and give each job room (a running job keeps its current placement,
   others get a consolidated placement that also passes :meth:`EpochArbiter.admissible`,
   Rotary's memory check), until nothing more fits;
4. pause (checkpoint) the preemptible running jobs that did not get room, then start or
   resume the chosen ones.

Jobs end on their completion criteria through the engine (``engine/criteria.py``), not here.
A job's epochs are those its criterion tracker counted, else its reported ``epoch`` metric,
else its reported iterations over ``iterations / epochs`` of its spec.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.actions import Pause, Placement, Plan, Resume, Start
from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft

__all__ = ["EpochArbiter", "epochs_done"]


def epochs_done(job: JobView, now: float) -> float:
    """Epochs the job has completed, from what it reported (see the module doc)."""
    tr = job.criterion
    if tr is not None and (tr.evaluations or tr.iters_per_epoch):
        return tr.epochs_done
    ep = job.metrics.get("epoch")
    if ep:
        return float(ep[-1][1])
    spec = job.spec
    if spec.iterations and spec.epochs:
        return job.iterations_done(now) / (spec.iterations / spec.epochs)
    return 0.0


class EpochArbiter(BasePolicy):
    """Base of the arbitration policies: rank, keep locked jobs, fill, preempt at epoch ends."""

    name = "arbiter"

    def __init__(self) -> None:
        self._placed_at: dict[str, float] = {}  # job -> epochs done when it was last placed
        self._last_ran: dict[str, float] = {}  # job -> last time it was seen running (round-robin)

    # ---------------------------------------------------------------- hooks for subclasses
    def rank(self, view: ClusterView, jobs: Sequence[JobView]) -> list[JobView]:  # pragma: no cover - abstract
        """Active jobs, most deserving first."""
        raise NotImplementedError

    def admissible(self, view: ClusterView, job: JobView, node: int) -> bool:
        """Whether ``job`` may run on ``node`` beyond fitting its declared demand (Rotary: memory)."""
        return True

    def rr_key(self, job: JobView) -> tuple[float, int]:
        """Round-robin order: never run first, then least recently run; arrival order breaks ties."""
        return (self._last_ran.get(job.id, -1.0), job.seq)

    # ---------------------------------------------------------------- mechanism
    def locked(self, job: JobView, now: float) -> bool:
        """A running job that has not completed an epoch since it was placed cannot be preempted."""
        start = self._placed_at.get(job.id)
        return start is None or epochs_done(job, now) < start + 1.0 - 1e-9

    def decide(self, view: ClusterView) -> Plan:
        now = view.now
        running = list(view.running.values())
        for j in running:
            self._last_ran[j.id] = now
            self._placed_at.setdefault(j.id, epochs_done(j, now))
        active = running + list(view.paused.values()) + list(view.pending.values())
        if not active:
            return []
        ranked = self.rank(view, active)
        draft = Draft(view)
        locked = {j.id for j in running if self.locked(j, now)}
        for j in running:
            if j.id not in locked:
                draft.give_back(j)
        chosen: list[tuple[JobView, Placement]] = []
        keep: set[str] = set(locked)
        for job in ranked:
            if job.id in locked:
                continue
            if job.state is JobState.RUNNING:
                if draft.reserve(job, job.placement):
                    keep.add(job.id)
                continue
            p = self._place(view, draft, job)
            if p is not None:
                chosen.append((job, p))
        plan: Plan = [Pause(j.id, reason="arbitration: not granted the next epoch")
                      for j in running if j.id not in keep]
        for job, p in chosen:
            self._placed_at[job.id] = epochs_done(job, now)
            self._last_ran[job.id] = now
            plan.append(Resume(job.id, p) if job.state is JobState.PAUSED else Start(job.id, p))
        return plan

    def _place(self, view: ClusterView, draft: Draft, job: JobView) -> Placement | None:
        """A placement for ``job`` that fits and is admissible, reserved in ``draft``; None if none."""
        if job.spec.num_ps == 0 and view.target_workers(job) == 1:
            fit = draft.tasks_fit(view.demand_vector(job))
            for node in range(len(fit)):
                if fit[node] >= 1 and self.admissible(view, job, node) and draft.reserve(job, (node,)):
                    return (node,)
            return None
        saved = draft.save()
        p = draft.place(job)
        if p is not None and not all(self.admissible(view, job, n) for n in set(p)):
            draft.restore(saved)
            return None
        return p

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._placed_at.pop(job.id, None)
        self._last_ran.pop(job.id, None)
