"""Optimus+Oracle as the Pollux artifact runs it: marginal-gain GPUs from the true work and step times.

The Pollux paper (Qiao et al., OSDI'21, §5.2) compares Pollux with "Optimus+Oracle": Optimus's
allocation (Peng et al., EuroSys'18, §4.1: give every job its minimum, then hand out one worker at
a time to the largest marginal reduction of remaining time) fed with the *true* remaining iterations
and step times instead of Optimus's online fits. cohabit's ``optimus`` learns both from what jobs
report (the information barrier); this policy is the oracle variant, read line by line from the
artifact (petuum/adaptdl, branch ``osdi21-artifact``, ``simulator/optimus.py`` and the job info of
``simulator/simulator.py``), so that ``bench/fidelity_pollux.py`` compares the same policy on both
simulators. It reads the ground truth only through the oracle's :class:`~cohabit.engine.oracle.WorkModel`
(``uses_oracle``: the scheduler refuses to run it without ``--oracle``).

Every round (``interval``, the artifact's 60 s; the loop's ``decision_period``):

1. **Remaining work** ``Q_j``: the true iterations at the job's batch size from the end of the epoch
   it is in to the end of its last epoch, ``I(B, E - 1) - I(B, e)`` (``get_iteration``), or 1 when it
   is in its last epoch. ``e`` is the epoch of the progress the job reported (extrapolated to now).
2. **Minimum first.** In arrival order, every job gets one GPU while GPUs last (the artifact's
   ``min_replicas = 1``; a job asking for more than one worker at least gets ``n_min``); the others
   get none this round.
3. **Marginal gain.** Each further GPU goes to the job with the largest ``(T(n) - T(n + 1)) Q_j``
   (first in arrival order on ties) until the GPUs run out or no gain is positive, where ``T(n)`` is
   the true seconds per iteration of the job's batch on ``n`` GPUs packed ``g`` per node (``g``: the
   cluster's GPUs per node): local batch ``ceil(B / n)``, ``ceil(local / max_local) - 1``
   accumulation steps (at least one on one GPU), per-GPU batch capped so the total stays within the
   largest profiled batch, ``T = step + s (step - sync)`` (``predict_step_time``).
   **Limits**: at most ``B // min_local`` GPUs (``max_replicas``), one for the applications in
   ``single_replica`` (the artifact's rule for NCF), never above the job's ``n_max``.
4. **Placement.** A job whose GPU count is unchanged keeps its GPUs; every other job gives its GPUs
   back, and then, fewest GPUs first, is placed on the nodes with the most free GPUs first, split over
   nodes as needed (``Counter.most_common``). A running job whose count changed is resized (a
   checkpoint and restore: the physics ``pollux-artifact`` charges the artifact's 30 s), one set to
   zero is paused.

Jobs without a work model (traces without Pollux profiles) get their minimum in arrival order and
no more (their gain is unknown); jobs without GPUs and parameter-server jobs start in arrival order
where they fit, after the GPU jobs' round. Nothing here learns: the policy's only inputs are the oracle, the
jobs' arrival order and sizes, and their reported progress.
"""

from __future__ import annotations

import math

import numpy as np

from ..engine.actions import Pause, Plan, Resize, Resume, Start
from ..engine.job import JobView
from ..engine.oracle import Oracle, WorkModel
from ..engine.state import JobState
from ..engine.view import ClusterView
from .base import BasePolicy, place_in_order
from .params import build
from .placement import Draft, fill

_EPS = 1e-8


def packed(n: int, per_node: int) -> tuple[int, ...]:
    """``n`` GPUs packed ``per_node`` to a node: (4, 4, 1) for 9 on 4-GPU nodes."""
    out: list[int] = []
    while sum(out) < n:
        out.append(min(n - sum(out), per_node))
    return tuple(out)


def predicted_step_time(model: WorkModel, n: int, per_node: int) -> float:
    """Seconds per iteration of the job's batch on ``n`` GPUs packed ``per_node`` to a node (module
    docstring, step 3; the artifact's ``OptimusPolicy.predict_step_time``)."""
    _, max_batch, _, max_local = model.batch_limits
    local = math.ceil(model.batch_size / n - _EPS)
    accum = math.ceil(local / max_local - _EPS) - 1
    if n == 1:
        accum = max(1, accum)
    atomic = math.ceil(local / (accum + 1) - _EPS)
    atomic = max(min(atomic, max_batch // (n * (accum + 1))), 1)
    step, sync = model.step_time(packed(n, per_node), atomic)
    return step + (step - sync) * accum


class OptimusOracle(BasePolicy):
    """See the module docstring. ``single_replica``: comma-separated applications (models) held to one GPU."""

    uses_oracle = True

    def __init__(self, interval: float = 60.0, single_replica: str = "ncf") -> None:
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 < interval < math.inf:
            raise ValueError(f"interval must be a finite number of seconds > 0, got {interval!r}")
        self.decision_period = float(interval)
        self.single_replica = frozenset(s.strip() for s in str(single_replica).split(",") if s.strip())
        self.name = "optimus-oracle"
        self._oracle: Oracle | None = None
        self._times: dict[str, dict[int, float]] = {}  # per job: GPUs -> predicted seconds per iteration

    def bind_oracle(self, oracle: Oracle) -> None:
        self._oracle = oracle

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._times.pop(job.id, None)

    # ------------------------------------------------------------------ the artifact's rule
    def _model(self, job: JobView) -> WorkModel | None:
        if self._oracle is None:
            raise RuntimeError("optimus-oracle reads the oracle: run it with --oracle (Scheduler(oracle=...))")
        return self._oracle.work_model(job.id)

    def remaining(self, job: JobView, model: WorkModel, now: float) -> float:
        """``Q_j``: true iterations left at the job's batch from the end of its current epoch (step 1)."""
        epoch = model.epoch(job.iterations_done(now))
        last = model.epochs - 1
        if last <= epoch:
            return 1.0
        return model.iterations_after_epoch(last) - model.iterations_after_epoch(epoch)

    def max_replicas(self, job: JobView, model: WorkModel | None) -> int:
        """The most GPUs the job may get (step 3's limits)."""
        if model is None:
            return max(job.spec.min_workers, 1)
        if job.spec.model in self.single_replica:
            return 1
        return max(min(model.batch_size // model.batch_limits[2], job.spec.max_workers), 1)

    def _step_time(self, job: JobView, model: WorkModel, n: int, per_node: int) -> float:
        times = self._times.setdefault(job.id, {})
        t = times.get(n)
        if t is None:
            t = times[n] = predicted_step_time(model, n, per_node)
        return t

    def counts(self, view: ClusterView, jobs: list[JobView]) -> dict[str, int]:
        """GPUs per job (steps 1-3)."""
        g = view.gpu_col
        assert g is not None
        cap = view.capacity[:, g]
        per_node = max(int(cap.max()), 1)
        gpus = float(cap.sum())
        now = view.now
        models = {j.id: self._model(j) for j in jobs}
        left = {j.id: self.remaining(j, m, now) for j in jobs if (m := models[j.id]) is not None}
        unit = {j.id: float(j.spec.workers.demand["gpu"]) for j in jobs}  # GPUs per worker (Pollux jobs: 1)
        n: dict[str, int] = {}
        gain: dict[str, float] = {}

        def gain_of(job: JobView) -> float:
            m, k = models[job.id], n[job.id]
            if m is None or k + 1 > self.max_replicas(job, m) or gpus < unit[job.id]:
                return 0.0
            return (self._step_time(job, m, k, per_node) - self._step_time(job, m, k + 1, per_node)) * left[job.id]

        for job in sorted(jobs, key=lambda j: max(j.spec.min_workers, 1)):  # stable: arrival order
            need = max(job.spec.min_workers, 1)
            if need * unit[job.id] > gpus + 1e-9:
                n[job.id], gain[job.id] = 0, 0.0
                continue
            n[job.id] = need
            gpus -= need * unit[job.id]
            gain[job.id] = gain_of(job)
        by_id = {j.id: j for j in jobs}
        while gain:
            fits = {k: v for k, v in gain.items() if unit[k] <= gpus + 1e-9}
            if not fits or max(fits.values()) <= 0:
                break
            key = max(fits, key=fits.__getitem__)  # the first of the largest, in the order above
            n[key] += 1
            gain[key] = gain_of(by_id[key])  # before the GPUs are taken, as the artifact does
            gpus -= unit[key]
        return n

    # ------------------------------------------------------------------ decisions
    def decide(self, view: ClusterView) -> Plan:
        active = sorted((*view.running.values(), *view.paused.values(), *view.pending.values()), key=lambda j: j.seq)
        gpu = view.gpu_col is not None
        jobs = [j for j in active if gpu and j.spec.workers.demand.get("gpu", 0.0) > 0 and not j.spec.num_ps]
        ids = {j.id for j in jobs}
        others = [j for j in active if j.state is not JobState.RUNNING and j.id not in ids]
        draft = Draft(view)
        if not jobs:
            return place_in_order(view, others, draft.place)
        target = self.counts(view, jobs)
        plan: Plan = []
        moved: list[JobView] = []
        for job in jobs:
            if job.state is JobState.RUNNING and job.n_workers == target[job.id]:
                continue  # same count: keeps its GPUs
            if job.state is JobState.RUNNING:
                draft.give_back(job)
                if target[job.id] == 0:
                    plan.append(Pause(job.id, reason="optimus-oracle: no GPU left for it this round"))
                    continue
            if target[job.id] > 0:
                moved.append(job)
        placed: list[tuple[JobView, tuple[int, ...]]] = []
        for job in sorted(moved, key=lambda j: target[j.id]):  # stable: fewest GPUs first, then arrival
            placement = self._most_free_first(draft, job, target[job.id], view)
            if placement is not None:
                placed.append((job, placement))
            elif job.state is JobState.RUNNING:  # other resources than GPUs do not fit
                plan.append(Pause(job.id, reason="optimus-oracle: its new size does not fit"))
        plan += self._in_order(view, plan, placed)
        return plan + place_in_order(view, others, draft.place)  # jobs without GPUs, and PS jobs: arrival order

    @staticmethod
    def _in_order(view: ClusterView, pauses: Plan, placed: list[tuple[JobView, tuple[int, ...]]]) -> Plan:
        """Start, resume and resize ``placed`` in an order the scheduler can apply one action at a time.

        The round's placements fit together once every moved job has given its GPUs back, but a
        resize releases its job's old GPUs only when it is applied: an action waits until the GPUs
        it takes are free. If the resizes left form a cycle (each waits for another's GPUs), the
        first of them is paused and resumed on its new GPUs: the same checkpoint and restore."""
        free = np.array(view.free, dtype=float)
        paused_now = {a.job for a in pauses}

        def held(job: JobView) -> np.ndarray:
            out = np.zeros_like(free)
            for node in job.placement:
                out[node] += view.demand_vector(job)
            return out

        for job in view.running.values():
            if job.id in paused_now:
                free += held(job)
        plan: Plan = []
        todo = list(placed)
        while todo:
            for i, (job, placement) in enumerate(todo):
                after = free.copy()
                if job.state is JobState.RUNNING and job.id not in paused_now:
                    after += held(job)
                for node in placement:
                    after[node] -= view.demand_vector(job)
                if (after >= -1e-9).all():
                    free = after
                    del todo[i]
                    if job.id in paused_now or job.state is JobState.PAUSED:
                        plan.append(Resume(job.id, placement))
                    elif job.state is JobState.RUNNING:
                        plan.append(Resize(job.id, placement))
                    else:
                        plan.append(Start(job.id, placement))
                    break
            else:  # nothing fits yet: a cycle of resizes
                job = next((j for j, _ in todo if j.state is JobState.RUNNING and j.id not in paused_now), None)
                if job is None:  # cannot happen when the placements fit together; the rest waits a round
                    break
                plan.append(Pause(job.id, reason="optimus-oracle: resized through a pause (its GPUs form a cycle)"))
                paused_now.add(job.id)
                free += held(job)
        return plan

    @staticmethod
    def _most_free_first(draft: Draft, job: JobView, n: int, view: ClusterView) -> tuple[int, ...] | None:
        """``n`` workers on the nodes with the most room first (reserved in ``draft``)."""
        fit = draft.tasks_fit(view.demand_vector(job))
        workers = fill(fit, n, np.argsort(-fit, kind="stable"))
        if workers is None or not draft.reserve(job, tuple(workers)):
            return None
        return tuple(workers)


def make(oracle: bool = False, **params: object) -> OptimusOracle:
    """Optimus+Oracle (the Pollux artifact's); it always reads the oracle, so runs need ``--oracle``."""
    return build(OptimusOracle, params, policy="optimus-oracle")
