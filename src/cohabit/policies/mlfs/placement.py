"""MLF-H placement on the ideal virtual host and overload handling (MLFS §3.3.2-3.3.3, after RIAL [47]).

:class:`Scratch` is a working copy of the cluster a decision plans into: free capacity per
node and per GPU device (the ledger's own fit rules), per-node utilisation
``u_m = allocated_m / capacity_m`` of every resource, and the network utilisation of each
node measured from what the scheduler knows: each running task-graph job's cross-node
megabytes per iteration (its graph's volumes on its placement) over its *measured* seconds
per iteration, against the node's ``net_gbps``.

Overload (``u_m > h_r``) is judged on the shared resources (CPU, memory, network, ...). A GPU
held whole by one task is at capacity, not overloaded: in cohabit's ledger GPUs are handed out
whole (or in declared fractions) and can never be over-committed, so the GPU dimension enters
the distances but not the overload test (the paper's per-GPU overload, tasks time-sharing one
GPU past its capacity, cannot arise here; its ``p_s`` rule is kept for GPUs shared by fractional
tasks).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...engine.job import JobView
from ...engine.ledger import fit_counts, take_devices
from ...engine.view import ClusterView
from ...spec.graph import cross_node_mb
from ...spec.resources import Resources

EPS = 1e-9


_VEC_CACHE: dict[tuple[int, tuple[str, ...], int], tuple[object, list[np.ndarray]]] = {}


def task_vectors(view: ClusterView, job: JobView) -> list[np.ndarray]:
    """Per-task demand rows over ``view.resource_names``: workers (graph order) then servers
    (memoised per spec object; the rows are shared, do not modify them)."""
    key = (id(job.spec), view.resource_names, view.target_workers(job) if job.spec.graph is None else 0)
    hit = _VEC_CACHE.get(key)
    if hit is not None and hit[0] is job.spec:
        return hit[1]
    if len(_VEC_CACHE) > 100_000:
        _VEC_CACHE.clear()
    rows = _task_vectors(view, job)
    _VEC_CACHE[key] = (job.spec, rows)
    return rows


def _task_vectors(view: ClusterView, job: JobView) -> list[np.ndarray]:
    names = view.resource_names
    spec = job.spec

    def row(r: Resources) -> np.ndarray:
        return np.array([r[n] for n in names], dtype=float)

    if spec.graph is not None:
        rows = [row(d) for d in spec.graph.task_demands(spec.workers.demand)]
    else:
        w = row(spec.workers.demand)
        rows = [w] * view.target_workers(job)
    if spec.ps is not None:
        rows += [row(spec.ps.demand)] * spec.num_ps
    return rows


def task_peers(job: JobView, n_tasks: int) -> list[list[tuple[int, float]]]:
    """For each task, the tasks it exchanges data with and the MB per iteration (one way).

    A job without a graph declares no volumes; its workers (more than one) are taken to
    exchange gradients on a ring of unit volume, so that placement keeps them together."""
    g = job.spec.graph
    if g is None:
        n = n_tasks - job.spec.num_ps
        if n < 2:
            return [[] for _ in range(n_tasks)]
        return [[((t + 1) % n, 1.0)] if t < n else [] for t in range(n_tasks)]
    return [list(p) for p in g.peer_table(job.spec.architecture, job.spec.num_ps)[:n_tasks]]


class Scratch:
    """Free capacity and utilisation a decision plans into (see the module docstring)."""

    def __init__(self, view: ClusterView, h_r: float = 0.9,
                 traffic_memo: dict[str, tuple[tuple[int, ...], dict[int, float]]] | None = None) -> None:
        self._traffic_memo = traffic_memo if traffic_memo is not None else {}
        self.view = view
        self.h_r = h_r
        self.cap = np.asarray(view.capacity, dtype=float)
        self.free = np.array(view.free, dtype=float)
        self.dev = np.array(view.device_free, dtype=float)
        self.gpu = view.gpu_col
        names = view.resource_names
        self.net = names.index("net_gbps") if "net_gbps" in names else None
        self.safe_cap = np.where(self.cap > 0, self.cap, 1.0)
        self.shared = np.ones(len(names), dtype=bool)  # resources the overload test looks at
        if self.gpu is not None:
            self.shared[self.gpu] = False
        if self.net is not None:
            self.shared[self.net] = False  # judged by measured traffic instead (net_util)
        self.net_util = np.zeros(len(self.cap))  # measured link utilisation per node
        self.failed_at: int | None = None  # where the last failed place_tasks stopped
        self._measure_traffic()

    # Utilisation ------------------------------------------------------------
    def _measure_traffic(self) -> None:
        if self.net is None:
            return
        link = self.cap[:, self.net]
        for job in self.view.running.values():
            g = job.spec.graph
            if g is None or not job.iter_time:
                continue
            hit = self._traffic_memo.get(job.id)
            if hit is None or hit[0] != job.placement:
                hit = self._traffic_memo[job.id] = (job.placement, cross_node_mb(
                    g, job.spec.architecture, job.spec.num_ps, tuple(job.placement)))
            out = hit[1]
            for node, mb in out.items():
                if link[node] > 0:
                    self.net_util[node] += mb * 8e-3 / job.iter_time / link[node]

    def util(self) -> np.ndarray:
        """u_m per node (rows) and resource (columns); network from measured traffic."""
        u = (self.cap - self.free) / self.safe_cap
        if self.net is not None:
            u[:, self.net] = self.net_util
        return u

    def overloaded(self, u: np.ndarray | None = None) -> np.ndarray:
        """Nodes with at least one shared resource (or the link) above ``h_r``."""
        u = self.util() if u is None else u
        over = (u[:, self.shared] > self.h_r + EPS).any(axis=1)
        if self.net is not None:
            over |= self.net_util > self.h_r + EPS
        return over

    def max_tasks(self, d: np.ndarray) -> int:
        """An upper bound on how many tasks of demand at least ``d`` (per resource) the
        underloaded nodes can take without passing ``h_r`` on a shared resource or their
        capacity: a job with more tasks than this cannot be placed (nothing is searched)."""
        fit = fit_counts(self.free, self.dev, d, self.gpu).astype(float)
        sh = self.shared & (d > EPS)
        if sh.any():
            room = (self.h_r * self.cap[:, sh] - (self.cap[:, sh] - self.free[:, sh]) + EPS) / d[sh]
            fit = np.minimum(fit, np.floor(room).min(axis=1).clip(min=0.0))
        return int(fit[~self.overloaded()].sum())

    # Reservations -----------------------------------------------------------
    def take(self, node: int, d: np.ndarray) -> bool:
        g = float(d[self.gpu]) if self.gpu is not None else 0.0
        row = self.dev[node].copy()
        if take_devices(row, g) is None or (self.free[node] - d < -EPS).any():
            return False
        self.dev[node] = row
        self.free[node] -= d
        return True

    def give(self, node: int, d: np.ndarray, devices: Sequence[tuple[int, float]] = ()) -> None:
        self.free[node] += d
        for i, share in devices:
            self.dev[node, i] += share

    def give_back(self, job: JobView) -> None:
        """Return the room a running job holds (it is being moved or paused in this plan)."""
        alloc = self.view.allocation_of(job.id)
        if alloc is None:
            return
        for slot, d in zip(alloc.slots, task_vectors(self.view, job)):
            self.give(slot.node, d, slot.devices)

    # Ideal virtual host (§3.3.2) ----------------------------------------------
    def host_for(self, d: np.ndarray, comm_mb: np.ndarray, exclude: int | None = None,
                 traffic_mb: float = 0.0, iter_time: float | None = None) -> int | None:
        """The underloaded node closest (Euclidean) to the ideal virtual host that fits ``d``
        without becoming overloaded; ``comm_mb[node]`` is the task's traffic with tasks there.

        Ideal host U_V: the minimum utilisation of each resource among underloaded nodes, the
        maximum communication volume with the task's peers, zero movement degradation (every
        candidate is a move of the same cost, so that term is 0 for all). When the task's
        measured iteration time is known (a running task moved out), a node whose link would be
        overloaded by the task's traffic to peers elsewhere (``traffic_mb`` in all) is no candidate."""
        u = self.util()
        under = ~self.overloaded(u)
        if exclude is not None:
            under[exclude] = False
        fits = fit_counts(self.free, self.dev, d, self.gpu) >= 1
        after = u + d / self.safe_cap
        ok = under & fits & ~(after[:, self.shared] > self.h_r + EPS).any(axis=1)
        if self.net is not None and iter_time and traffic_mb > 0:  # its link use there, if known
            link = self.safe_cap[:, self.net]
            ok &= self.net_util + (traffic_mb - comm_mb) * 8e-3 / iter_time / link <= self.h_r + EPS
        cand = np.flatnonzero(ok)
        if cand.size == 0:
            return None
        top = float(comm_mb.max()) if comm_mb.size else 0.0
        bw = comm_mb / top if top > 0 else np.zeros(len(u))
        ideal_u = u[under].min(axis=0)
        dist = ((u[cand] - ideal_u) ** 2).sum(axis=1) + (bw[cand] - (1.0 if top > 0 else 0.0)) ** 2
        return int(cand[int(np.argmin(dist))])

    def place_tasks(self, job: JobView, order: Sequence[int], fixed: dict[int, int] | None = None,
                    exclude: dict[int, int] | None = None, bandwidth: bool = True) -> dict[int, int] | None:
        """Place the tasks ``order`` of ``job`` one by one (in that order, highest priority first)
        on ideal-virtual-host nodes; ``fixed`` tasks stay where they are. All or nothing: on
        failure every reservation made here is undone and None is returned. ``bandwidth=False``
        drops the communication term (the ablation of the paper's Fig. 7)."""
        vecs = task_vectors(self.view, job)
        peers = task_peers(job, len(vecs))
        where = dict(fixed or {})
        taken: list[tuple[int, np.ndarray, np.ndarray]] = []
        n_nodes = len(self.cap)
        for t in order:
            comm = np.zeros(n_nodes)
            for peer, mb in (peers[t] if bandwidth else ()):
                if peer in where:
                    comm[where[peer]] += mb
            for other, lst in enumerate(peers):  # traffic towards t from tasks already placed
                if other in where and bandwidth:
                    for peer, mb in lst:
                        if peer == t:
                            comm[where[other]] += mb
            total = sum(mb for _, mb in peers[t]) if bandwidth else 0.0
            node = self.host_for(vecs[t], comm, exclude=(exclude or {}).get(t), traffic_mb=total,
                                 iter_time=job.iter_time if fixed else None)
            row_before = self.dev[node].copy() if node is not None else None
            if node is None or not self.take(node, vecs[t]):
                self.failed_at = len(taken)  # the position in ``order`` that found no host
                for n, d, dev_before in reversed(taken):
                    self.free[n] += d
                    self.dev[n] = dev_before
                return None
            assert row_before is not None
            taken.append((node, vecs[t], row_before))
            where[t] = node
        return where
