"""MLF-H task priorities: MLFS Eq. 2-6 (Wang, Liu, Shen, CoNEXT'20, §3.3.1).

Every input is something a scheduler observes: the job's urgency and deadline (spec), the
partition sizes and dependency graph (spec), iterations done and the measured seconds per
iteration (progress reports), the reported loss history, and the job's waiting time.

Tasks of a job are numbered as in :mod:`cohabit.spec.graph` (replica-major, then the
parameter servers). A job without a graph has one task per worker, each holding the whole
model (``S_k^J = 1``) with no dependencies between them.

Units (the paper gives none): times in Eq. 4 are in hours, so ``1/(d - t)`` and ``1/r`` are
per hour and ``w`` is hours waited. A deadline already passed counts as one minute away.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...engine.job import JobView

_HOUR = 3600.0
_MIN_LEFT_H = 1.0 / 60.0


@dataclass(frozen=True)
class PriorityParams:
    """Weights of Eq. 3-6 with the paper's defaults (§4.1)."""

    alpha: float = 0.3
    gamma: float = 0.8
    gamma_d: float = 0.3
    gamma_r: float = 0.3
    gamma_w: float = 0.35
    use_urgency: bool = True  # ablation of Fig. 6: L^J in Eq. 2
    use_deadline: bool = True  # ablation of Fig. 6: the deadline term of Eq. 4

    def __post_init__(self) -> None:
        for name in ("alpha",):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma!r}")
        for name in ("gamma_d", "gamma_r", "gamma_w"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite weight >= 0, got {v!r}")


def loss_reduction_share(job: JobView) -> float:
    """δl_{I-1} / Σ_{j<I} δl_j (Eq. 2) from the reported loss history.

    The last report interval's loss drop per iteration stands for δl_{I-1}; the drop since
    the first report stands for the sum. With fewer than two reports (nothing measured yet)
    the share is 1: the next iteration is the most important one yet."""
    hist = job.metrics.get("loss")
    if not hist or len(hist) < 2:
        return 1.0
    (i0, l0), (ia, la), (ib, lb) = hist[0], hist[-2], hist[-1]
    total = l0 - lb
    if ib <= ia or total <= 0:
        return 0.0 if total <= 0 and len(hist) > 2 else 1.0
    per_iter = max(la - lb, 0.0) / (ib - ia)
    return min(per_iter / total, 1.0)


def estimated_iter_time(job: JobView, fallback: float) -> float:
    """Measured seconds per iteration, or ``fallback`` (sample running time) before any report."""
    return job.iter_time if job.iter_time else fallback


def remaining_seconds(job: JobView, now: float, fallback_iter: float) -> float:
    """Estimated remaining running time of the job: iterations left x measured iteration time."""
    total = job.spec.iterations
    if total is None:
        return math.inf
    left = max(total - job.iterations_done(now), 0.0)
    return left * estimated_iter_time(job, fallback_iter)


def _structure(job: JobView) -> tuple[list[tuple[int, ...]], np.ndarray, np.ndarray, int]:
    """(children per worker task, size share per worker task, depth-to-sink per task, #workers)."""
    g = job.spec.graph
    if g is None:
        n = job.spec.workers.count
        return [()] * n, np.ones(n), np.zeros(n), n
    p = g.num_partitions
    kids: list[tuple[int, ...]] = []
    for t in range(g.num_tasks):
        r = t // p
        kids.append(tuple(r * p + c for c in g.children[t % p]))
    height = [0] * p
    for part in reversed(g.layers):
        height[part] = max((height[c] + 1 for c in g.children[part]), default=0)
    share = np.array([g.size_shares[t % p] for t in range(g.num_tasks)])
    depth = np.array([height[t % p] for t in range(g.num_tasks)], dtype=float)
    return kids, share, depth, g.num_tasks


def _propagate(base: np.ndarray, kids: list[tuple[int, ...]], order: list[int], gamma: float) -> np.ndarray:
    """Eq. 3 / Eq. 5: P_k = base_k + γ Σ_{i ∈ child(k)} P_i, children first."""
    out = base.copy()
    for t in order:
        if kids[t]:
            out[t] = base[t] + gamma * sum(out[c] for c in kids[t])
    return out


def task_priorities(job: JobView, now: float, params: PriorityParams, fallback_iter: float = 60.0,
                    max_deadline: float = 7 * 24 * _HOUR, cache: dict | None = None) -> np.ndarray:
    """P_{k,J} (Eq. 6) of every task of ``job``: workers (graph order) then parameter servers.
    ``cache`` (a dict the caller keeps) memoises the job's graph structure by job id.

    A parameter server gets the highest priority of its job (§3.3.1): the job's largest
    worker priority plus γ times the sum over the tasks it serves, so it is strictly first."""
    hit = cache.get(job.id) if cache is not None else None
    if hit is None:
        kids, share, height, n = _structure(job)
        g = job.spec.graph
        if g is None:
            order = list(range(n))
        else:
            p = g.num_partitions
            order = [r * p + part for r in range(g.replicas) for part in reversed(g.layers)]
        hit = (kids, share, height, n, order)
        if cache is not None:
            cache[job.id] = hit
    kids, share, height, n, order = hit
    # Eq. 2 (ML features)
    it = job.iterations_done(now) + 1.0
    urgency = job.spec.urgency if params.use_urgency else 1.0
    ml_base = urgency * (1.0 / it) * loss_reduction_share(job) * share
    p_ml = _propagate(ml_base, kids, order, params.gamma)  # Eq. 3
    # Eq. 4 (computation features), hours
    remaining_h = remaining_seconds(job, now, fallback_iter) / _HOUR
    if not math.isfinite(remaining_h):
        remaining_h = max_deadline / _HOUR
    deadline = job.spec.absolute_deadline
    d_job_h = (deadline if deadline is not None else job.spec.submit_time + max_deadline) / _HOUR
    layers = float(height.max() + 1.0)
    # task deadline: the job's deadline less the share of the remaining time its descendants need
    d_task = d_job_h - remaining_h * (height / layers)
    left = np.maximum(d_task - now / _HOUR, _MIN_LEFT_H)
    r_task = np.maximum(remaining_h * share, 1.0 / _HOUR)  # this task's part of the remaining work
    w_h = job.waiting_time(now) / _HOUR
    c_base = (params.gamma_d * (1.0 / left) if params.use_deadline else 0.0) + params.gamma_r / r_task \
        + params.gamma_w * w_h
    p_c = _propagate(np.broadcast_to(c_base, (n,)).astype(float), kids, order, params.gamma)  # Eq. 5
    workers = params.alpha * p_ml + (1.0 - params.alpha) * p_c  # Eq. 6
    num_ps = job.spec.num_ps
    if num_ps == 0:
        return workers
    top = float(workers.max()) + params.gamma * float(workers.sum())
    return np.concatenate([workers, np.full(num_ps, top)])
