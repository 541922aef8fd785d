"""Harmony's dynamic regrouping (Lee et al., §IV-B4).

* :func:`similar_job` — a waiting job whose iteration time and computation/communication
  ratio at the group's DoP are both within 5% of the finished job's: it takes the slot.
* :func:`similar_bunch` — else a few waiting jobs whose summed iteration time and whose ratio
  of summed computation to summed communication are within 5% of the finished job's.
* :func:`choose` — else the scheduler regroups incrementally: the finished job's group plus
  the smallest groups, one more at a time; among those decisions it keeps the one that moves
  the fewest jobs unless one moving more gains over 5%, and does nothing if the gain over the
  current state is under 5%.
* :func:`assign_nodes` — machines for new groups, reusing a group's own machines when it
  keeps its size so that its jobs need not move.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .algorithm import JobStat

TOLERANCE = 0.05


def _close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol * abs(b)


def similar_job(finished: JobStat, waiting: Sequence[JobStat], m: int, tol: float = TOLERANCE) -> JobStat | None:
    """The waiting job most like ``finished`` at DoP ``m`` (iteration time and comp/comm ratio
    both within ``tol``), or None."""
    t_f = finished.t_itr(m)
    r_f = finished.c1 / m / finished.net
    best, best_d = None, float("inf")
    for w in waiting:
        t_w, r_w = w.t_itr(m), w.c1 / m / w.net
        if _close(t_w, t_f, tol) and _close(r_w, r_f, tol):
            d = abs(t_w - t_f) / t_f + abs(r_w - r_f) / r_f
            if d < best_d:
                best, best_d = w, d
    return best


def similar_bunch(finished: JobStat, waiting: Sequence[JobStat], m: int, tol: float = TOLERANCE,
                  max_size: int = 3, max_candidates: int = 40) -> list[JobStat] | None:
    """Two or three waiting jobs whose summed iteration time and summed-COMP / summed-COMM ratio
    at DoP ``m`` are within ``tol`` of ``finished``'s (the closest such bunch), or None."""
    t_f = finished.t_itr(m)
    r_f = finished.c1 / m / finished.net
    cands = [w for w in waiting if w.t_itr(m) < t_f * (1 + tol)][:max_candidates]
    if len(cands) < 2:
        return None
    cpu = np.array([w.c1 / m for w in cands])
    net = np.array([w.net for w in cands])
    best, best_d = None, float("inf")
    for size in range(2, max_size + 1):
        for combo in itertools.combinations(range(len(cands)), size):
            c, n = cpu[list(combo)].sum(), net[list(combo)].sum()
            t, r = c + n, c / n
            if _close(t, t_f, tol) and _close(r, r_f, tol):
                d = abs(t - t_f) / t_f + abs(r - r_f) / r_f
                if d < best_d:
                    best, best_d = [cands[i] for i in combo], d
        if best is not None:
            return best  # fewer jobs first
    return None


@dataclass
class Option:
    """A regrouping decision: predicted score (whole cluster) and the running jobs it moves."""

    score: float
    moved: int
    payload: object = None


def choose(current_score: float, options: Sequence[Option], gain: float = TOLERANCE) -> Option | None:
    """The option with the fewest moved jobs, unless one moving more improves the score by more
    than ``gain`` over it; None if the chosen one does not beat ``current_score`` by ``gain``."""
    if not options:
        return None
    ranked = sorted(options, key=lambda o: (o.moved, -o.score))
    pick = ranked[0]
    for o in ranked[1:]:
        if o.score > pick.score * (1 + gain):
            pick = o
    if pick.score <= current_score * (1 + gain):
        return None
    return pick


def assign_nodes(new_groups: Sequence[tuple[Sequence[str], int]], old_groups: Sequence[tuple[Sequence[int], Sequence[str]]],
                 pool: Sequence[int]) -> list[tuple[int, ...]] | None:
    """Machines for each new group ``(jobs, m)`` from ``pool`` (the scope's machines). A new group
    of the same size as an old group sharing jobs with it gets that group's machines (most
    shared jobs first), so those jobs stay in place; the rest take free machines in order."""
    out: list[tuple[int, ...] | None] = [None] * len(new_groups)
    left = set(pool)
    pairs = []
    for i, (jobs, m) in enumerate(new_groups):
        js = set(jobs)
        for k, (nodes, members) in enumerate(old_groups):
            if len(nodes) == m:
                shared = len(js & set(members))
                if shared:
                    pairs.append((-shared, i, k))
    used_old: set[int] = set()
    for _, i, k in sorted(pairs):
        if out[i] is None and k not in used_old and set(old_groups[k][0]) <= left:
            out[i] = tuple(old_groups[k][0])
            used_old.add(k)
            left -= set(old_groups[k][0])
    rest = sorted(left)
    for i, (_, m) in enumerate(new_groups):
        if out[i] is None:
            if len(rest) < m:
                return None
            out[i], rest = tuple(rest[:m]), rest[m:]
    return [o for o in out if o is not None]
