"""Gavel's LAS: max-min fairness over time fractions (Narayanan et al., OSDI'20, §4.1), heterogeneity-agnostic.

Gavel's ``max_min_fairness`` policy solves the LP

    maximize  min_j  (s_j / w_j) * sum_t X[j][t]
    s.t.      sum_j s_j X[j][t] <= N_t  (GPUs of type t),   sum_t X[j][t] <= 1,   X >= 0

where ``s_j`` is job j's GPU count (scale factor), ``w_j`` its priority weight and every
throughput is taken as 1 (the agnostic variant: a GPU is a GPU). Its optimum level is unique but
its solution is not when some job is capped by ``sum_t X <= 1``; this module returns the
max-min fair (water-filling) point of that optimum face: every job's GPU share ``s_j * X_j``
rises with ``w_j`` at one rate until the job has all its time (``X_j = 1``) or the GPUs are all
given, and a job's time is split over the types in proportion to their GPU counts (the split
Gavel's solver returns for the agnostic problem, e.g. 0.22 / 0.22 / 0.22 on 8+8+8 GPUs).
Uses only the jobs' declared GPU counts and weights (attained service enters through the
round mechanism's time received, :mod:`.rounds`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...engine.job import JobView
from ...engine.view import ClusterView
from ..params import build
from .rounds import Allocation, GavelRounds


def max_min_times(scale: Sequence[float], weight: Sequence[float], gpus: float) -> list[float]:
    """Fraction of time ``X_j`` of each job: the water-filling solution of the LP above pooled over types.

    Shares ``s_j X_j = min(s_j, lam * w_j)`` with the largest ``lam`` such that the shares fit in
    ``gpus`` (or every job has all its time)."""
    if any(s <= 0 for s in scale) or any(w <= 0 for w in weight):
        raise ValueError("scale factors and weights must be > 0")
    n = len(scale)
    if n == 0:
        return []
    if sum(scale) <= gpus:
        return [1.0] * n
    # jobs in order of the level at which they are capped (s_j / w_j); raise lam through them
    order = sorted(range(n), key=lambda j: scale[j] / weight[j])
    left, wsum = float(gpus), float(sum(weight))
    lam = 0.0
    for j in order:
        if scale[j] / weight[j] * wsum <= left:  # j is capped before the GPUs run out
            left -= scale[j]
            wsum -= weight[j]
        else:
            lam = left / wsum
            break
    else:
        return [1.0] * n
    return [min(1.0, lam * weight[j] / scale[j]) for j in range(n)]


class GavelLAS(GavelRounds):
    """Max-min fair time fractions (:func:`max_min_times`) enforced in Gavel's rounds."""

    name = "gavel-las"

    def allocation(self, view: ClusterView, jobs: list[JobView], types: Mapping[str, float]) -> Allocation:
        total = sum(types.values())
        if not jobs or total <= 0:
            return {}
        scale = [max(self._gpus_of(view, j), 1.0) for j in jobs]
        x = max_min_times(scale, [float(j.spec.weight) for j in jobs], total)
        return {j.id: {t: xj * n / total for t, n in types.items()} for j, xj in zip(jobs, x)}


def make(oracle: bool = False, **params: object) -> GavelLAS:
    return build(GavelLAS, params, policy="gavel-las")
