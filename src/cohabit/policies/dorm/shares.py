"""Theoretical shares ŝ_i of Dorm's fairness loss (Sun et al., §IV-A-2, Eq. 2).

Dorm measures fairness against the allocation that weighted Dominant
Resource Fairness would give (Ghodsi et al., NSDI'11). Here that allocation
is computed by DRF's *progressive filling* in whole containers:

* every application starts with 0 containers;
* repeatedly, among the applications that are not saturated, the one with the
  smallest *weighted* dominant share (dominant share / weight; ties: earlier
  arrival) gets one more container of its demand vector d_i;
* an application is saturated when it holds n_max containers or its next
  container no longer fits in what is left of the cluster's *pooled*
  capacity (the sum over servers, as in the DRF paper; which server a
  container lands on is the MILP's business, Eq. 6);
* the filling stops when every application is saturated.

The result is the count n̂_i per application and its unweighted dominant share
ŝ_i = n̂_i · δ_i, with δ_i = max_k d_{i,k} / Σ_h c_{h,k} the dominant share of
one container (Eq. 2's s_i for one container). Shares are computed with the
colleague's weighted-DRF bookkeeping (:class:`cohabit.policies.drf.TenantShares`),
one "tenant" per application.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..drf import TenantShares

_TOL = 1e-9


@dataclass(frozen=True, slots=True)
class AppDemand:
    """What the optimizer needs to know about one application (Dorm's d, w, n_max, n_min)."""

    id: str
    demand: np.ndarray  # per-container demand over the cluster's resource columns
    weight: float = 1.0
    n_min: int = 1
    n_max: int = 1


def inverse_capacity(capacity: np.ndarray) -> np.ndarray:
    """1 / Σ_h c_{h,k} per resource k (0 where the cluster has none of k). ``capacity``: (servers, resources)."""
    total = np.asarray(capacity, dtype=float).sum(axis=0)
    return np.where(total > _TOL, 1.0 / np.where(total > _TOL, total, 1.0), 0.0)


def container_share(demand: np.ndarray, inv_capacity: np.ndarray) -> float:
    """δ_i: dominant share of one container, max_k d_{i,k} / Σ_h c_{h,k}."""
    return float((np.asarray(demand, dtype=float) * inv_capacity).max(initial=0.0))


def drf_containers(apps: Sequence[AppDemand], capacity: np.ndarray) -> dict[str, int]:
    """Weighted DRF by progressive filling in whole containers (see module doc): app id -> n̂_i."""
    inv = inverse_capacity(capacity)
    left = np.asarray(capacity, dtype=float).sum(axis=0).copy()
    book = TenantShares(inv, {}, {a.id: float(a.weight) for a in apps}, {a.id: k for k, a in enumerate(apps)})
    count = {a.id: 0 for a in apps}
    by_id = {a.id: a for a in apps}
    heap = [(0.0, k, a.id) for k, a in enumerate(apps) if a.n_max > 0]
    heapq.heapify(heap)
    while heap:
        _, order, aid = heapq.heappop(heap)
        app = by_id[aid]
        d = np.asarray(app.demand, dtype=float)
        if count[aid] >= app.n_max or (left - d < -_TOL).any():
            continue  # saturated: leaves the filling for good
        left -= d
        count[aid] += 1
        book.add(aid, d)
        heapq.heappush(heap, (book.share(aid), order, aid))
    return count


def theoretical_shares(apps: Sequence[AppDemand], capacity: np.ndarray) -> dict[str, float]:
    """ŝ_i for every application: the unweighted dominant share of its DRF container count."""
    inv = inverse_capacity(capacity)
    n = drf_containers(apps, capacity)
    return {a.id: n[a.id] * container_share(a.demand, inv) for a in apps}


def fairness_loss(counts: dict[str, int], apps: Sequence[AppDemand], capacity: np.ndarray,
                  shares: dict[str, float] | None = None) -> float:
    """Eq. 2: Σ_i |s_i − ŝ_i| with s_i = δ_i · (containers held); apps absent from ``counts`` hold 0."""
    inv = inverse_capacity(capacity)
    hat = theoretical_shares(apps, capacity) if shares is None else shares
    return float(sum(abs(counts.get(a.id, 0) * container_share(a.demand, inv) - hat[a.id]) for a in apps))


def utilization(counts: dict[str, int], apps: Sequence[AppDemand], capacity: np.ndarray) -> float:
    """Eq. 1: Σ_k u_k, the sum over resources of the allocated fraction of the cluster total."""
    inv = inverse_capacity(capacity)
    return float(sum(counts.get(a.id, 0) * float((np.asarray(a.demand, dtype=float) * inv).sum()) for a in apps))
