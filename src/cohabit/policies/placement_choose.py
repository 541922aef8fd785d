"""Where a job's workers go on a draft's free room: :func:`consolidated_first` (one node if one can hold them all,
else the nodes with most room first) and :func:`fill` (tasks over nodes in a given order), shared by the policies
and by :meth:`.placement.Draft.place`. Split from :mod:`.placement` (the draft itself), which re-exports them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..engine.actions import Placement
from ..engine.job import JobView

if TYPE_CHECKING:
    from .placement import Draft


def fill(fit: np.ndarray, n: int, order: np.ndarray) -> list[int] | None:
    """Assign ``n`` tasks to nodes in ``order``, taking up to ``fit[node]`` on each."""
    out: list[int] = []
    for node in order:
        k = int(min(fit[node], n - len(out)))
        if k > 0:
            out.extend([int(node)] * k)
            if len(out) == n:
                return out
    return None


#: clusters of at most this many nodes choose a job's workers in Python lists (:func:`_workers_small`); numpy's
#: per-call cost dominates there, its vector passes win on larger ones
SMALL_CLUSTER = 64


def _workers_small(fit: list[int], n: int) -> list[int] | None:
    """:func:`consolidated_first`'s worker nodes from the per-node fits as a list: the node that can hold all
    ``n`` and is left with least room (the first such, as ``argmin`` finds it); else the nodes that take most
    first, ties in index order (a stable sort), each filled up to its fit; None if they cannot hold ``n``."""
    best, room = -1, 0
    for i, f in enumerate(fit):
        if f >= n and (best < 0 or f < room):
            best, room = i, f
    if best >= 0:
        return [best] * n
    if sum(fit) < n:
        return None
    out: list[int] = []
    for node in sorted(range(len(fit)), key=fit.__getitem__, reverse=True):
        k = min(fit[node], n - len(out))
        if k > 0:
            out.extend([node] * k)
            if len(out) == n:
                return out
    return None


def consolidated_first(draft: Draft, job: JobView, n_workers: int | None = None,
                       nodes: Sequence[int] | None = None) -> Placement | None:
    """All workers on one node if one can hold them (best fit: the node left with the least
    room); else spread over the nodes with most room first, so the job spans as few nodes
    as possible. Parameter servers then go where most room is left. ``nodes``: the workers
    only on these nodes (None: any)."""
    w, n = draft.view.shape(job)
    if n_workers is not None:
        n = n_workers
    fit = draft.tasks_fit(w)
    if nodes is not None:
        mask = np.zeros(len(fit), dtype=bool)
        mask[list(nodes)] = True
        fit = np.where(mask, fit, 0)
    if len(fit) <= SMALL_CLUSTER:
        got = _workers_small(fit.tolist(), n)
        if got is None:
            return None
        workers = got
    else:
        whole = np.flatnonzero(fit >= n)
        if whole.size:
            node = int(whole[np.argmin(fit[whole])])
            workers = [node] * n
        else:
            if np.add.reduce(fit) < n:  # (fit.sum() without the method wrapper)
                return None
            workers = fill(fit, n, np.argsort(-fit, kind="stable"))
            if workers is None:
                return None
    p = draft.view.ps_demand_vector(job)
    if p is None or job.spec.num_ps == 0:
        return tuple(workers)
    free = draft._arrays()[0].copy()
    for node in workers:
        free[node] -= w
    need = p > 1e-9
    ps_fit = (np.floor((free[:, need] + 1e-9) / p[need]).min(axis=1) if need.any()
              else np.full(len(free), job.spec.num_ps))
    ps = fill(np.maximum(ps_fit, 0), job.spec.num_ps, np.argsort(-ps_fit, kind="stable"))
    return None if ps is None else tuple(workers + ps)
