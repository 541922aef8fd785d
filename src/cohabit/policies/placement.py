"""Placement helpers shared by policies: consolidate on few nodes when possible, else spread.

All work on the view's read-only free-capacity matrix; they return a
``Placement`` (one node index per task, workers first then parameter servers)
or ``None`` when the job does not fit now.
"""

from __future__ import annotations

import numpy as np

from ..engine.actions import Placement
from ..engine.job import JobView
from ..engine.view import ClusterView


def pack_tasks(fit: np.ndarray, n: int, order: np.ndarray) -> list[int] | None:
    """Assign ``n`` tasks to nodes in ``order``, taking up to ``fit[node]`` on each."""
    out: list[int] = []
    for node in order:
        k = int(min(fit[node], n - len(out)))
        if k > 0:
            out.extend([int(node)] * k)
            if len(out) == n:
                return out
    return None


def consolidated_first(view: ClusterView, job: JobView, n_workers: int | None = None) -> Placement | None:
    """Best-fit all workers on one node if any node can hold them; else spread over the
    nodes with most room first (fewest nodes). Parameter servers go on the least
    loaded nodes that fit them."""
    n = job.spec.workers.count if n_workers is None else n_workers
    fit = view.tasks_fit(view.demand_vector(job))
    whole = np.flatnonzero(fit >= n)
    if whole.size:
        # best fit: the node that can take the fewest extra tasks of this kind
        node = int(whole[np.argmin(fit[whole])])
        workers = [node] * n
    else:
        if fit.sum() < n:
            return None
        workers = pack_tasks(fit, n, np.argsort(-fit, kind="stable"))
        if workers is None:
            return None
    ps_demand = view.ps_demand_vector(job)
    if ps_demand is None or job.spec.num_ps == 0:
        return tuple(workers)
    # account for the workers just placed before placing parameter servers
    free = view.free.copy()
    w = view.demand_vector(job)
    for node in workers:
        free[node] -= w
    need = ps_demand > 0
    ps_fit = np.floor((free[:, need] + 1e-9) / ps_demand[need]).min(axis=1) if need.any() else np.full(len(free), n)
    ps = pack_tasks(ps_fit, job.spec.num_ps, np.argsort(-ps_fit, kind="stable"))
    return None if ps is None else tuple(workers + ps)
