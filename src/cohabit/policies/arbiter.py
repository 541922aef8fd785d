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

Two optional refinements, used by Rotary-AQP (``policies/rotary_aqp.py``) and its baselines:
:meth:`EpochArbiter.epoch_span` makes a job's running epoch a multiple of its epochs (Rotary-AQP's
adaptive running epoch), and ``switch_cost_s`` applies Ratchet's triggering rule
(:meth:`cohabit.ratchet.CheckpointTrigger.worth_preempting`): a job whose remaining work, by its
measured speed, is no longer than a pause costs (checkpoint, restart, restore) is not preempted.
With ``extra_cores`` (Rotary-AQP), the cores a node has left after every granted job got its one
are dealt one at a time round the granted query jobs there, in priority order (Alg. 4's "allocate
extra 1 core", :meth:`EpochArbiter.deal_extra_cores`), as ``SetShare`` actions; they are dealt anew
every round, so a job holds its base core for its running epoch but its extra cores only until the
next decision.

Jobs end on their completion criteria through the engine (``engine/criteria.py``), not here.
A job's epochs are those its criterion tracker counted, else its reported ``epoch`` metric,
else its reported iterations over ``iterations / epochs`` of its spec.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..engine.actions import Pause, Placement, Plan, Resume, SetShare, Start
from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from ..ratchet.trigger import CheckpointTrigger
from ..spec.resources import Resources
from .base import BasePolicy
from .placement import Draft

__all__ = ["EpochArbiter", "epochs_done", "remaining_s"]


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


def view_cpu(job: JobView) -> float:
    """CPU cores of one worker task of ``job``'s demand."""
    return float(job.spec.workers.demand.get("cpu", 0.0))


def remaining_s(job: JobView, now: float) -> float | None:
    """Seconds of work ``job`` has left by its measured speed (None before it was measured or
    without a declared length)."""
    if not job.iter_time or job.spec.iterations is None:
        return None
    return max(0.0, job.spec.iterations - job.iterations_done(now)) * job.iter_time


class EpochArbiter(BasePolicy):
    """Base of the arbitration policies: rank, keep locked jobs, fill, preempt at epoch ends."""

    name = "arbiter"

    #: Ratchet's preemption rule: seconds a pause costs (None: off, every epoch end may preempt).
    switch_cost_s: float | None = None
    #: Alg. 4's extra cores: spare cores of a node go to the granted jobs there (``SetShare``).
    extra_cores: bool = False

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

    def epoch_span(self, job: JobView) -> float:
        """Epochs a placed job keeps its place for (its running epoch); 1 unless a subclass adapts it."""
        return 1.0

    def rr_key(self, job: JobView) -> tuple[float, int]:
        """Round-robin order: never run first, then least recently run; arrival order breaks ties."""
        return (self._last_ran.get(job.id, -1.0), job.seq)

    # ---------------------------------------------------------------- mechanism
    def locked(self, job: JobView, now: float) -> bool:
        """A running job that has not completed its running epoch since it was placed cannot be
        preempted; nor, with ``switch_cost_s``, one that would finish before a pause pays off."""
        start = self._placed_at.get(job.id)
        if start is None or epochs_done(job, now) < start + self.epoch_span(job) - 1e-9:
            return True
        return self.switch_cost_s is not None and not CheckpointTrigger.worth_preempting(
            remaining_s(job, now), self.switch_cost_s)

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
            elif self.extra_cores:
                draft.give_back_extra(j)  # a locked job keeps its core; its extra cores are dealt anew
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
        placing: Plan = []
        for job, p in chosen:
            self._placed_at[job.id] = epochs_done(job, now)
            self._last_ran[job.id] = now
            placing.append(Resume(job.id, p) if job.state is JobState.PAUSED else Start(job.id, p))
        if not self.extra_cores:
            return plan + placing
        where = {j.id: j.placement for j in running if j.id in keep} | {j.id: p for j, p in chosen}
        shrink, grow = self.deal_extra_cores(view, draft, [j for j in ranked if j.id in where], where)
        return plan + shrink + placing + grow  # cores taken back before anyone is placed on them

    def can_share(self, job: JobView) -> bool:
        """Whether ``job`` may get extra cores (``extra_cores``): single-task query jobs, whose
        runtime changes DuckDB's ``threads`` at the next batch."""
        return job.spec.kind == "query" and job.spec.num_ps == 0 and view_cpu(job) > 0

    def deal_extra_cores(self, view: ClusterView, draft: Draft, granted: Sequence[JobView],
                         where: dict[str, Placement]) -> tuple[Plan, Plan]:
        """Alg. 4's second loop of RESOURCEARBITRATION: "while D != 0: for job j_k in PQ: allocate
        extra 1 core to j_k". ``granted``: the jobs granted a core this round, in priority order;
        ``where``: their nodes. The spare cores of each node (``draft`` after every grant) go one at a
        time round the granted jobs on that node, in priority order. Returns the ``SetShare``
        actions lowering a share (to be applied before anything is placed) and those raising one."""
        col = view.resource_index("cpu")
        if col is None:
            return [], []
        free = draft.free
        by_node: dict[int, list[JobView]] = {}
        for j in granted:
            p = where[j.id]
            if len(p) == 1 and self.can_share(j):
                by_node.setdefault(p[0], []).append(j)
        cores = {j.id: view_cpu(j) for js in by_node.values() for j in js}
        for node, js in by_node.items():
            spare = int(np.floor(float(free[node, col]) + 1e-9))
            while spare > 0:
                for j in js:
                    if spare == 0:
                        break
                    cores[j.id] += 1.0
                    spare -= 1
        shrink: Plan = []
        grow: Plan = []
        for js in by_node.values():
            for j in js:
                alloc = view.allocation_of(j.id) if j.state is JobState.RUNNING else None
                now_cpu = float(alloc.total.get("cpu", 0.0)) if alloc is not None else view_cpu(j)
                want = cores[j.id]
                if abs(want - now_cpu) > 1e-9:
                    (shrink if want < now_cpu else grow).append(SetShare(j.id, Resources(cpu=want)))
        return shrink, grow

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
