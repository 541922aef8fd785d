"""Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning", OSDI'21): re-allocate GPUs every interval to maximise a fairness-weighted mean of the
jobs' goodput speed-ups, while each job adapts its batch size (and learning rate) to its GPUs.

What the paper does, and how it maps here:

* **Per-job goodput model (§3, PolluxAgent).** Each job reports, every ``report_interval``
  seconds, its batch (atomic per-GPU batch, accumulation steps), the measured step and
  synchronisation times, its gradient statistics (``grad_sqr``, ``grad_var``) and its batch
  limits (``JobView.metrics``; the simulator sends them with ``SimConfig.pollux_goodput``).
  The throughput model is refitted whenever a new (nodes, replicas, atomic batch) configuration
  was measured, and the efficiency term uses the latest gradient statistics
  (:mod:`cohabit.models.goodput`). A job that never reported has no model: its speed-up is
  taken as linear in its GPUs, and it gets at most one GPU.
* **Speed-up (§4.1).** ``SPEEDUP_j(A) = max_batch GOODPUT_j(A) / max_batch GOODPUT_j(A_fair)``
  where ``A_fair`` is an exclusive ``1/J`` share of the cluster's GPUs (consolidated on the
  fewest nodes) and ``J`` the number of active jobs. A job's allocation of ``K`` GPUs is valued
  as on ``ceil(K / GPUs per node)`` nodes, or on its current nodes when ``K`` is what it holds.
* **Fitness (§4.1).** ``FITNESS_p = (1/J sum_j SPEEDUP_j^p)^(1/p)`` with the fairness
  exponent ``p`` (paper default ``-1``: a harmonic mean, which strongly favours giving every
  job some GPUs; ``p = 1`` is the plain sum; ``p = 0``, the geometric mean, is the limit).
  Speed-ups get ``+1e-3`` so that a job without GPUs counts as very slow, not infinitely so.
* **Re-allocation penalty (§4.1).** A job whose allocation changes has its speed-up multiplied
  by ``max(T_j - R_j delta, 0) / (T_j + delta)`` with ``T_j`` its age, ``R_j`` the re-allocations
  it has had (resumes, resizes, migrations) and ``delta = restart_penalty_s`` (30 s, the
  simulated checkpoint-restore), so frequent re-allocation of young jobs does not pay.
* **Exploration limit (§4.1).** A job may get at most ``max_growth`` (2) times the most GPUs it
  ever ran on (at least 1), within its ``n_max`` and the replicas its largest batch can feed.
* **Allocation search (§4.2).** The paper searches allocation matrices (jobs x nodes) with a
  genetic algorithm. Here the search is split in two: (1) replica counts: since the fitness is
  a sum over jobs of a per-job term once placements are consolidated, the counts that maximise
  it under the cluster's GPU total are found *exactly* by dynamic programming over jobs and
  GPUs (``O(J x K x G)``, milliseconds for the paper's 64 GPUs); ties go to jobs with less
  attained service (the paper's job order); (2) placement: jobs that keep their count keep
  their GPUs; the others are placed consolidated-first (:func:`~.placement.consolidated_first`
  via :func:`~.targets.apply_targets`: shrinks and pauses first, then growths and starts in
  order of attained service). The search is deterministic. Not modelled: interference
  avoidance (the paper forbids two distributed jobs on one node; consolidated placement makes
  that rare) and cluster auto-scaling.
* **Interval.** Pollux re-allocates every 60 s (``interval``; the scheduler's
  ``decision_period``: the policy is asked only at multiples of it).
* **Batch size and learning rate (§3.3).** Chosen by each job for the GPUs it gets (the
  simulator does it with ``SimConfig.adaptive_batch``, which ``adapts_batch`` asks for).

Jobs without GPU demand are started in arrival order where they fit, outside the search.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..engine.actions import Plan
from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from ..models.goodput import BatchLimits, GoodputModel, Observation, ThroughputParams, fit_throughput
from .base import BasePolicy
from .targets import apply_targets, consolidated_placer
from .params import build

_EPS = 1e-3  # added to every speed-up in the fitness (a job without GPUs is very slow, not infinitely)
_LIMITS = ("init_batch_size", "max_batch_size", "min_local_bsz", "max_local_bsz")
_RUN = ("atomic_bsz", "step_time", "sync_time", "grad_sqr", "grad_var")


class _Learned:
    """What the policy learned about one job from its reports."""

    __slots__ = ("obs", "params", "limits", "grad", "max_k")

    def __init__(self) -> None:
        self.obs: dict[tuple[int, int, int], Observation] = {}
        self.params: ThroughputParams | None = None
        self.limits: BatchLimits | None = None
        self.grad: tuple[float, float] | None = None
        self.max_k = 0

    def model(self) -> GoodputModel | None:
        if self.params is None or self.limits is None or self.grad is None:
            return None
        return GoodputModel(self.params, self.limits, *self.grad)


def _last(job: JobView, name: str) -> float | None:
    hist = job.metrics.get(name)
    return hist[-1][1] if hist else None


class Pollux(BasePolicy):
    name = "pollux"
    adapts_batch = True  # the jobs choose their batch size per allocation (simulator: SimConfig.adaptive_batch)

    def __init__(self, p: float = -1.0, interval: float = 60.0, restart_penalty_s: float = 30.0,
                 max_growth: float = 2.0, report_interval: float = 60.0) -> None:
        for key, value, lo, hi in (("p", p, -10.0, 1.0), ("interval", interval, 0.1, 86400.0),
                                   ("restart_penalty_s", restart_penalty_s, 0.0, 86400.0),
                                   ("max_growth", max_growth, 1.0, 64.0),
                                   ("report_interval", report_interval, 0.1, 86400.0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
                raise ValueError(f"{key} must be a number in [{lo:g}, {hi:g}], got {value!r}")
        self.p = float(p)
        self.decision_period = float(interval)
        self.report_interval = float(report_interval)
        self.restart_penalty_s = float(restart_penalty_s)
        self.max_growth = float(max_growth)
        self._jobs: dict[str, _Learned] = {}

    # ------------------------------------------------------------------ observations
    def on_progress(self, job: JobView, view: ClusterView) -> None:
        st = self._jobs.setdefault(job.id, _Learned())
        k = job.n_workers
        st.max_k = max(st.max_k, k)
        if st.limits is None and all(_last(job, n) is not None for n in _LIMITS):
            a, b, c, d = (int(_last(job, n)) for n in _LIMITS)  # type: ignore[arg-type]
            st.limits = BatchLimits(a, b, c, d)
        run = [_last(job, n) for n in _RUN]
        if any(v is None for v in run) or k < 1:
            return
        atomic, step, sync, sqr, var = run  # type: ignore[misc]
        st.grad = (float(sqr), float(var))  # type: ignore[arg-type]
        key = (len(set(job.placement[:k])), k, int(atomic))  # type: ignore[arg-type]
        if key not in st.obs and step > 0:  # type: ignore[operator]
            st.obs[key] = Observation(key[0], k, key[2], float(step), float(sync))  # type: ignore[arg-type]
            st.params = fit_throughput(list(st.obs.values()))

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._jobs.pop(job.id, None)

    # ------------------------------------------------------------------ decisions
    def decide(self, view: ClusterView) -> Plan:
        g = view.resource_index("gpu")
        active = [*view.running.values(), *view.paused.values(), *view.pending.values()]
        if not active:
            return []
        gpu_jobs = [j for j in active if g is not None and j.spec.workers.demand["gpu"] > 0]
        targets: dict[str, int] = {}
        if gpu_jobs:
            targets.update(self._counts(view, gpu_jobs))
        for job in active:  # jobs without GPUs: arrival order where they fit
            if job.id not in targets and job.state is not JobState.RUNNING:
                targets[job.id] = view.target_workers(job)
        order = sorted(active, key=lambda j: (j.attained_service(view.now), j.seq))
        return apply_targets(view, targets, order, consolidated_placer, reason="pollux re-allocation")

    def _counts(self, view: ClusterView, jobs: Sequence[JobView]) -> dict[str, int]:
        """Replica counts maximising the fitness (dynamic program over jobs and GPUs)."""
        g = view.resource_index("gpu")
        assert g is not None
        cap = view.capacity[:, g]
        per_node = max(int(cap.max()), 1)
        total = int(cap.sum())
        n_jobs = len(jobs)
        fair = max(math.ceil(total / n_jobs), 1)
        order = sorted(range(n_jobs), key=lambda i: (jobs[i].attained_service(view.now), jobs[i].seq))
        rank = {i: r for r, i in enumerate(order)}
        choices: list[tuple[np.ndarray, np.ndarray]] = []  # per job: (counts, utilities)
        for i, job in enumerate(jobs):
            counts = self._allowed(job, total)
            speed = self._speedups(view, job, counts, fair, per_node)
            cur = job.n_workers if job.state is JobState.RUNNING else 0
            pen = np.where(counts == cur, 1.0, self._penalty(job, view.now))
            x = np.where(counts > 0, pen * speed, 0.0) + _EPS
            util = np.log(x) if self.p == 0 else (np.sign(self.p) * x ** self.p)
            util = util + np.where(counts > 0, 1e-9 * (n_jobs - rank[i]) / n_jobs, 0.0)  # ties: less service first
            choices.append((counts, util))
        units = [max(math.ceil(float(j.spec.workers.demand["gpu"])), 1) for j in jobs]
        picked = _knapsack(choices, units, total)
        return {job.id: int(k) for job, k in zip(jobs, picked)}

    def _allowed(self, job: JobView, total: int) -> np.ndarray:
        """0 and the replica counts the job may get now (exploration limit, n_min / n_max, batch)."""
        st = self._jobs.get(job.id)
        lo, hi = job.spec.min_workers, job.spec.max_workers
        seen = max(st.max_k if st is not None else 0, job.n_workers)
        top = min(hi, max(int(self.max_growth * seen), 1), total)
        if st is not None and st.limits is not None:
            top = min(top, max(st.limits.max_batch // max(st.limits.min_local, 1), 1))
        top = max(top, lo)
        return np.concatenate(([0], np.arange(lo, top + 1)))

    def _speedups(self, view: ClusterView, job: JobView, counts: np.ndarray, fair: int, per_node: int) -> np.ndarray:
        st = self._jobs.get(job.id)
        model = st.model() if st is not None else None
        if model is None:
            return counts / fair
        nodes = np.maximum(np.ceil(counts / per_node), 1).astype(int)
        if job.state is JobState.RUNNING and job.n_workers in counts:
            nodes[counts == job.n_workers] = len(set(job.placement[: job.n_workers]))
        reps = np.maximum(counts, 1)
        good, _ = model.best(np.append(nodes, max(math.ceil(fair / per_node), 1)), np.append(reps, fair))
        base = good[-1]
        if not base > 0:  # the fair share is more replicas than the job's batch can feed
            base = float(good[:-1].max()) if good[:-1].max() > 0 else 0.0
        if not base > 0:
            return counts / fair
        return np.where(counts > 0, good[:-1] / base, 0.0)

    def _penalty(self, job: JobView, now: float) -> float:
        """Re-allocation penalty: ``max(T - R delta, 0) / (T + delta)`` (§4.1)."""
        delta = self.restart_penalty_s
        age = max(now - job.spec.submit_time, 0.0)
        restarts = job.preemptions + job.resizes + job.migrations
        if age + delta <= 0:
            return 1.0
        return max(age - restarts * delta, 0.0) / (age + delta)


def _knapsack(choices: Sequence[tuple[np.ndarray, np.ndarray]], units: Sequence[int], capacity: int) -> list[int]:
    """Pick one count per job maximising the summed utility with ``sum(count x units) <= capacity``.

    ``choices[j] = (counts, utilities)``; count 0 (utility ``choices[j][1][0]``) is always allowed.
    Exact dynamic program: ``best[c]`` = the largest total utility of the jobs so far using ``c``
    GPUs; ``O(jobs x counts x capacity)``, vectorised over ``c``."""
    neg = -np.inf
    best = np.full(capacity + 1, neg)
    best[0] = 0.0
    picks: list[np.ndarray] = []
    for (counts, util), unit in zip(choices, units):
        new = np.full(capacity + 1, neg)
        arg = np.zeros(capacity + 1, dtype=np.int64)
        for idx, (k, u) in enumerate(zip(counts.tolist(), util.tolist())):
            cost = k * unit
            if cost > capacity:
                break
            cand = np.full(capacity + 1, neg)
            cand[cost:] = best[: capacity + 1 - cost] + u
            better = cand > new
            new = np.where(better, cand, new)
            arg = np.where(better, idx, arg)
        best = new
        picks.append(arg)
    c = int(np.argmax(best))
    out: list[int] = []
    for (counts, _), unit, arg in zip(reversed(choices), reversed(units), reversed(picks)):
        k = int(counts[arg[c]])
        out.append(k)
        c -= k * unit
    return out[::-1]


def make(oracle: bool = False, **params: object) -> Pollux:
    return build(Pollux, params, policy="pollux")
