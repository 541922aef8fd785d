"""Tetris' room arithmetic (see :mod:`.tetris`): the alignment score of §3.2, the tasks' nodes one at a time,
and the bounds and checks a round reads from the free room without a pass over the nodes."""

from __future__ import annotations

import numpy as np

from ..engine.actions import Placement
from ..engine.alloc import take_many
from ..engine.view import ClusterView
from .placement_rows import less_times, row_of

#: the ledger's tolerance in a fit (``engine.alloc.fit_counts``: ``floor((free + EPS) / demand)`` per node)
_EPS = 1e-9


def room_slack(total: list[float], n_nodes: int) -> list[float]:
    """Per resource: what :func:`could_take` adds to a free total so that it bounds the tasks the nodes take
    from above: the fit's tolerance on every node (``n_nodes * EPS``) and far more than the rounding of a
    sum of floats (``1e-9`` of the total)."""
    return [n_nodes * _EPS + 1e-9 * (1.0 + abs(t)) for t in total]


def could_take(total: list[float], slack: list[float], demand: list[tuple[int, float]], n: int) -> bool:
    """False only when the nodes cannot take ``n`` tasks of ``demand`` together (its needed resources as
    ``(column, amount)``), judged from the free room summed over the nodes (``total``, with ``slack`` from
    :func:`room_slack`): a node takes at most ``floor((free + EPS) / amount)`` tasks in each needed resource
    (``fit_counts``), so the nodes together at most ``(total + n_nodes * EPS) / amount``. True is no promise:
    the room may be split across nodes."""
    for c, v in demand:
        if total[c] + slack[c] < n * v:
            return False
    return True


def alignment(free: np.ndarray, capacity: np.ndarray, demand: np.ndarray,
              safe: np.ndarray | None = None) -> np.ndarray:
    """Per node: dot product of the capacity-normalised demand and free vectors (``safe``: the capacity with
    inf for 0, if the caller has it)."""
    if safe is None:
        safe = np.where(capacity > 0, capacity, np.inf)
    return ((demand / safe) * (free / safe)).sum(axis=1)


def aligned_chooser(fit: np.ndarray, free: np.ndarray, capacity: np.ndarray, demand: np.ndarray,
                    n: int) -> list[int] | None:
    """Tasks one at a time, each on the feasible node with the best alignment now."""
    if fit.sum() < n:
        return None
    safe = np.where(capacity > 0, capacity, np.inf)
    score = alignment(free, capacity, demand, safe)
    score[fit <= 0] = -np.inf
    return aligned_tasks(score, fit, free, safe, demand, n)


def aligned_tasks(score: np.ndarray, fit: np.ndarray, free: np.ndarray, safe: np.ndarray, demand: np.ndarray,
                  n: int) -> list[int]:
    """:func:`aligned_chooser`'s nodes for ``n`` tasks, given the alignment per node now (``score``, -inf where
    ``fit`` takes no task; overwritten) and enough room (``fit.sum() >= n``)."""
    node = int(score.argmax())
    out: list[int] = [node]
    if n > 1:  # (the copies below only serve the later tasks)
        left = fit.astype(np.int64)
        f = free.copy()
        for _ in range(n - 1):
            left[node] -= 1
            f[node] -= demand
            score[node] = -np.inf if left[node] <= 0 else \
                float(((demand / safe[node]) * (f[node] / safe[node])).sum())
            node = int(score.argmax())
            out.append(node)
    return out


def reserve_fits(view: ClusterView, w: np.ndarray, placement: Placement) -> bool:
    """Whether ``Draft(view).reserve(job, placement)`` succeeds for a job without parameter servers whose workers
    have the demand row ``w``, without making the draft: :meth:`Draft.reserve <.placement.Draft.reserve>`'s test on
    the ledger's rows, the same float operations (a node's ``k`` tasks taken from its free row by
    :func:`~.placement_rows.less_times`, their GPU shares from its device row by
    :func:`~cohabit.engine.alloc.take_many`) with nothing written back (``tests/test_tetris_index.py`` compares the
    two answers)."""
    counts: dict[int, int] = {}
    for node in placement:
        counts[node] = counts.get(node, 0) + 1
    as_list, exact = row_of(w)
    g = view.gpu_col
    free, dev = view.free, view.device_free
    for node, k in counts.items():
        if less_times(free[node].tolist(), as_list, k, exact) is None:
            return False
    if g is not None:
        share = as_list[g]
        for node, k in counts.items():
            if take_many(dev[node].tolist(), [share] * k) is None:
                return False
    return True
