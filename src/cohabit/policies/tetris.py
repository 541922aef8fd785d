"""Tetris: multi-resource packing (Grandl et al., "Multi-Resource Packing for Cluster
Schedulers", SIGCOMM'14).

**Alignment** (§3.2): for a task with peak demand vector ``d`` and a machine
with free vector ``f``, both normalised by the machine's capacity, the
alignment score is the dot product ``sum_r (d_r / C_r) * (f_r / C_r)`` over
every resource of the cluster. Among the waiting jobs and the machines that
can take one of their tasks, Tetris picks the best-scoring (job, machine)
pair, reserves, and repeats until nothing else fits. A job here is a gang of
identical workers (plus parameter servers): its score is that of its first
task's best machine, and its tasks are then placed one at a time on the
machine with the best alignment given what the earlier tasks took (parameter
servers likewise, with their own demand).

**SRTF blend** (§3.3): ``score = alignment + eps * p`` where ``p`` in [0, 1]
favours jobs with less *remaining work* (remaining time x the job's demand,
normalised by cluster capacity; ``p = 1 - work / max work`` among the
candidates, 0 for unknown). As in the paper, ``eps`` is scaled by the mean
alignment over the mean ``p`` of the candidates, so ``epsilon=1`` weighs the
two terms equally on average and ``epsilon=0`` is pure packing. Remaining time
is estimated from observable data only, the way :class:`~.srtf.SRTF` does
(declared iterations x measured or historical seconds per iteration, else the
mean finished run time minus time run so far); ``use_oracle=True`` reads the
true lengths instead (the policy is then named ``tetris[oracle]`` and needs
``--oracle``).

**Fairness knob** (§3.4): with ``fairness=f`` in [0, 1), only the
``ceil((1 - f) * #jobs)`` waiting jobs whose tenants are furthest below their
fair share (lowest weighted dominant share, as in DRF) are candidates;
``f=0`` (default) is the efficiency-only Tetris.

Non-preemptive: running tasks are never paused (Tetris packs free resources).
"""

from __future__ import annotations

import math

import numpy as np

from ..engine.actions import Plan
from ..engine.job import JobView
from ..engine.oracle import Oracle
from ..engine.view import ClusterView
from .base import BasePolicy
from .drf import TenantShares, job_usage
from .placement import Draft
from .spread import place_with, start_or_resume, waiting_in_order
from .srtf import SRTF


def alignment(free: np.ndarray, capacity: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Per node: dot product of the capacity-normalised demand and free vectors."""
    safe = np.where(capacity > 0, capacity, np.inf)
    return ((demand / safe) * (free / safe)).sum(axis=1)


def aligned_chooser(fit: np.ndarray, free: np.ndarray, capacity: np.ndarray, demand: np.ndarray,
                    n: int) -> list[int] | None:
    """Tasks one at a time, each on the feasible node with the best alignment now."""
    if fit.sum() < n:
        return None
    left = fit.astype(np.int64).copy()
    f = free.copy()
    score = alignment(f, capacity, demand)
    score[left <= 0] = -np.inf
    safe = np.where(capacity > 0, capacity, np.inf)
    out: list[int] = []
    for _ in range(n):
        node = int(np.argmax(score))
        out.append(node)
        left[node] -= 1
        f[node] -= demand
        score[node] = -np.inf if left[node] <= 0 else float(((demand / safe[node]) * (f[node] / safe[node])).sum())
    return out


class Tetris(BasePolicy):
    """Alignment packing with the SRTF blend and the fairness knob (see module doc)."""

    def __init__(self, epsilon: float = 1.0, fairness: float = 0.0, use_oracle: bool = False) -> None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or not math.isfinite(epsilon) \
                or epsilon < 0:
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        if isinstance(fairness, bool) or not isinstance(fairness, int | float) or not 0 <= fairness < 1:
            raise ValueError(f"fairness must lie in [0, 1), got {fairness!r}")
        if not isinstance(use_oracle, bool):
            raise ValueError(f"use_oracle must be True or False, got {use_oracle!r}")
        self.epsilon = float(epsilon)
        self.fairness = float(fairness)
        self.uses_oracle = use_oracle
        self._estimator = SRTF(use_oracle=use_oracle)
        self.name = "tetris[oracle]" if use_oracle else "tetris"

    def bind_oracle(self, oracle: Oracle) -> None:
        self._estimator.bind_oracle(oracle)

    # ------------------------------------------------------------ candidates
    def _candidates(self, view: ClusterView, waiting: list[JobView]) -> list[JobView]:
        if self.fairness <= 0 or len(waiting) <= 1:
            return waiting
        shares = TenantShares(view, waiting)
        keep = math.ceil((1.0 - self.fairness) * len(waiting))
        ranked = sorted(waiting, key=lambda j: (shares.share(j.spec.tenant), j.seq))
        return ranked[:keep]

    def _srtf_term(self, view: ClusterView, jobs: list[JobView]) -> np.ndarray:
        """``p`` per job: 1 for no remaining work, 0 for the most (or unknown)."""
        if self.epsilon == 0 or not jobs:
            return np.zeros(len(jobs))
        total = view.capacity.sum(axis=0)
        inv = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)
        work = np.array([self._estimator.remaining(j, view) * float((job_usage(view, j) * inv).sum())
                         for j in jobs])
        known = np.isfinite(work)
        p = np.zeros(len(jobs))
        if known.any():
            top = work[known].max()
            p[known] = 1.0 - work[known] / top if top > 0 else 1.0
        return p

    # ---------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Plan:
        waiting = waiting_in_order(view)
        if not waiting:
            return []
        jobs = self._candidates(view, waiting)
        draft = Draft(view)
        cap = view.capacity
        # group jobs by worker shape: alignment is computed once per shape and pick
        shape_of: dict[bytes, int] = {}
        shapes: list[np.ndarray] = []
        idx = np.empty(len(jobs), dtype=np.int64)
        need = np.empty(len(jobs), dtype=np.int64)
        for k, job in enumerate(jobs):
            w = view.demand_vector(job)
            key = w.tobytes()
            if key not in shape_of:
                shape_of[key] = len(shapes)
                shapes.append(w)
            idx[k] = shape_of[key]
            need[k] = view.target_workers(job)
        p = self._srtf_term(view, jobs)
        alive = np.ones(len(jobs), dtype=bool)
        plan: Plan = []
        while alive.any():
            free = draft.free
            best = np.full(len(shapes), -np.inf)
            room = np.zeros(len(shapes), dtype=np.int64)
            for s, w in enumerate(shapes):
                fit = draft.tasks_fit(w)
                ok = fit > 0
                if ok.any():
                    best[s] = alignment(free[ok], cap[ok], w).max()
                    room[s] = int(np.minimum(fit, 1 << 40).sum())
            feasible = alive & (room[idx] >= need) & np.isfinite(best[idx])
            if not feasible.any():
                break
            a = best[idx]
            eps = 0.0
            if self.epsilon > 0 and p[feasible].mean() > 0:
                eps = self.epsilon * a[feasible].mean() / p[feasible].mean()
            score = np.where(feasible, a + eps * p, -np.inf)
            k = int(np.argmax(score))  # ties: earliest arrival (argmax takes the first)
            alive[k] = False
            placement = place_with(draft, jobs[k], aligned_chooser, n_workers=int(need[k]))
            if placement is not None:
                plan.append(start_or_resume(jobs[k], placement))
        return plan


def make(oracle: bool = False) -> Tetris:
    return Tetris(use_oracle=oracle)
