"""The allocation ledger: free capacity per node and per GPU device, checked on every action.

Capacities are a numpy matrix ``free[node, resource]``. GPUs are also tracked
per device (``device_free[node, gpu]`` = free fraction of that GPU, -1 for
devices a node does not have) so that fractional requests (Alibaba's
``gpu_milli``) land on one physical GPU and the simulator knows which jobs
share a device. Whole-GPU requests take fully free devices; fractional ones
take the best-fitting device (smallest free fraction that still fits).

Pipelined groups (Harmony, ``Colocate(mode="pipelined")``; the uncoordinated
``"naive"`` mode uses the same mechanism): a group *holds whole machines*. Its
key is ``(mode, sorted node indices)``; node sets of groups are disjoint. The
first member to arrive takes every node of the group out of ``free`` (it owns
them); later members join owning nothing (their tasks time-share the group's
machines, which is the point of co-location). When the owner leaves, the next
member inherits the machines (like a GPU guest inheriting a device); when the
last member leaves, the machines are free again. Nothing outside the group
can be placed on a held node, so the group never over-allocates.

Packs (Liu, Pack, ``Pack`` action): several single-task jobs trained jointly as one
packed model on one device ``(node, gpu)``. The pack holds the whole device
(``device_free = 0``; on a node without GPUs the device is the node's CPU and
nothing is held besides resources). It runs in one process, so its CPU demand is
the largest member's, not the sum: the first member (the owner) holds the device
and that CPU; every member holds its other resources (``mem_gb``, ``gpu_mem_gb``,
...). The members' device memory — declared ``gpu_mem_gb``, or ``gpu`` share x
device memory when undeclared — must fit the device's memory
(``gpu_mem_gb`` capacity / GPUs of the node). When the owner leaves, the next
member inherits the device; when the last leaves, the device is free again.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..spec.cluster import ClusterSpec
from ..spec.resources import Resources

EPS = 1e-9


def fit_counts(free: np.ndarray, device_free: np.ndarray, demand: np.ndarray, gpu_col: int | None) -> np.ndarray:
    """How many tasks of ``demand`` each node can take, given ``free`` and per-device ``device_free``."""
    need = demand > EPS
    if not need.any():
        return np.full(free.shape[0], np.iinfo(np.int64).max // 4)
    per = np.floor((free[:, need] + EPS) / demand[need]).min(axis=1)
    fit = per.astype(np.int64)
    g = demand[gpu_col] if gpu_col is not None else 0.0
    if g > EPS:
        if g < 1.0 - EPS:
            dev = (device_free >= g - EPS).sum(axis=1)
        else:
            dev = (device_free >= 1.0 - EPS).sum(axis=1) // int(round(g))
        fit = np.minimum(fit, dev)
    return np.maximum(fit, 0)


def take_devices(row: np.ndarray, g: float) -> tuple[tuple[int, float], ...] | None:
    """Reserve GPU share ``g`` on one node's device row (mutated); None if it does not fit.

    Whole GPUs take fully free devices (lowest index first); a fraction takes
    the best-fitting device (least free space that still fits).
    """
    if g <= EPS:
        return ()
    vals = row.tolist()  # a node has few GPUs: plain Python beats numpy calls here
    if g < 1.0 - EPS:
        best, room = -1, 2.0
        for i, x in enumerate(vals):
            if g - EPS <= x < room:
                best, room = i, x
        if best < 0:
            return None
        row[best] -= g
        return ((best, g),)
    k = int(round(g))
    whole = [i for i, x in enumerate(vals) if x >= 1.0 - EPS][:k]
    if len(whole) < k:
        return None
    row[whole] = 0.0
    return tuple((i, 1.0) for i in whole)


@dataclass(frozen=True, slots=True)
class TaskSlot:
    """Where one task runs: its node and the GPU devices (index, share) it holds."""

    node: int
    devices: tuple[tuple[int, float], ...]


@dataclass(frozen=True, slots=True)
class Allocation:
    """All of one job's task slots, in task order."""

    job: str
    slots: tuple[TaskSlot, ...]
    total: Resources
    group: tuple[str, tuple[int, ...]] | None = None  # (mode, nodes) of a pipelined/naive group
    pack: tuple[int, int] | None = None  # (node, gpu) of the pack the job trains in

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(s.node for s in self.slots)

    @property
    def devices(self) -> frozenset[tuple[int, int]]:
        return frozenset((s.node, d) for s in self.slots for d, _ in s.devices)


class AllocationError(ValueError):
    pass


class Ledger:
    """Free capacity of every node; ``allocate`` refuses anything that would over-allocate."""

    def __init__(self, cluster: ClusterSpec, max_share: int = 4) -> None:
        if max_share < 1:
            raise ValueError(f"max_share must be >= 1 job per GPU, got {max_share!r}")
        self.names: tuple[str, ...] = cluster.resource_names
        self.index = {n: i for i, n in enumerate(self.names)}
        self.capacity = np.array(
            [[node.capacity[r] for r in self.names] for node in cluster.nodes], dtype=np.float64
        )
        self.free = self.capacity.copy()
        n_gpus = [int(round(node.capacity["gpu"])) for node in cluster.nodes]
        width = max(n_gpus, default=0)
        self.device_free = np.full((len(cluster.nodes), max(width, 1)), -1.0)
        for i, g in enumerate(n_gpus):
            self.device_free[i, :g] = 1.0
        self._gpu_col = self.index.get("gpu")
        self.max_share = max_share
        # per GPU device: job -> the share of it the job owns (0.0 for a time-sharing guest)
        self.dev_shares: dict[tuple[int, int], dict[str, float]] = {}
        self.allocations: dict[str, Allocation] = {}
        self._per_node: dict[str, dict[int, np.ndarray]] = {}
        self._vectors: dict[int, tuple[Resources, np.ndarray | None]] = {}
        self._totals: dict[tuple[int, ...], Resources] = {}
        self._fits_cache: dict[bytes, str | None] = {}
        # pipelined groups: key (mode, nodes) -> members, first = owner of the machines
        self.groups: dict[tuple[str, tuple[int, ...]], list[str]] = {}
        self.group_of_node: dict[int, tuple[str, tuple[int, ...]]] = {}
        self._node_jobs: dict[int, set[str]] = {}  # node -> jobs with a task on it
        # packs: device (node, gpu) -> members, first = owner of the device; device memory in use
        self.packs: dict[tuple[int, int], list[str]] = {}
        self.pack_mem: dict[tuple[int, int], float] = {}
        self._pack_job_mem: dict[str, float] = {}
        self._gpu_mem_col = self.index.get("gpu_mem_gb")
        self._cpu_col = self.index.get("cpu")
        # free-capacity index: bumped by every change of free/device_free (allocate*, release), so
        # answers computed from the free capacity can be kept until it changes
        self.version = 0
        self._fit_memo: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(demand row) -> (row, fit)
        self._fit_version = 0
        self._no_room: set[Hashable] = set()  # see no_room

    @property
    def gpu_col(self) -> int | None:
        return self._gpu_col

    @property
    def n_nodes(self) -> int:
        return self.capacity.shape[0]

    def vector(self, r: Resources) -> np.ndarray | None:
        """``r`` as a row over the cluster's resource names; None if it names a resource no node has.

        Rows are cached per distinct demand and must not be modified."""
        hit = self._vectors.get(id(r))
        if hit is not None and hit[0] is r:
            return hit[1]
        v = self._make_vector(r)
        if v is not None:
            v.flags.writeable = False
        self._vectors[id(r)] = (r, v)  # keeps r alive, so its id stays unique
        return v

    def _make_vector(self, r: Resources) -> np.ndarray | None:
        v = np.zeros(len(self.names))
        for name, q in r.items():
            i = self.index.get(name)
            if i is None:
                if q > EPS:
                    return None
                continue
            v[i] = q
        return v

    # Queries ------------------------------------------------------------
    def tasks_fit(self, demand: np.ndarray) -> np.ndarray:
        """How many tasks of ``demand`` each node can take now (vector over nodes)."""
        return fit_counts(self.free, self.device_free, demand, self._gpu_col)

    def _memo_valid(self) -> None:
        if self._fit_version != self.version:
            self._fit_memo.clear()
            self._no_room.clear()
            self._fit_version = self.version

    def fit_of(self, demand: np.ndarray) -> np.ndarray:
        """:meth:`tasks_fit` of a cached demand row (:meth:`vector`), kept until the free capacity
        changes; read-only (a policy's scratch draft asks for the same shapes round after round)."""
        self._memo_valid()
        hit = self._fit_memo.get(id(demand))
        if hit is None or hit[0] is not demand:
            fit = fit_counts(self.free, self.device_free, demand, self._gpu_col)
            fit.flags.writeable = False
            hit = self._fit_memo[id(demand)] = (demand, fit)  # keeps the row alive: its id stays unique
        return hit[1]

    def no_room(self) -> set[Hashable]:
        """Shapes (``(id(worker demand row), workers)``, or a policy's own key) that were found not to fit the free capacity as
        it is now (``policies.placement.Draft`` adds them while it plans on the unchanged ledger);
        emptied when the free capacity changes."""
        self._memo_valid()
        return self._no_room

    def ever_fits(self, demands: Sequence[np.ndarray]) -> str | None:
        """None if the tasks could run on the empty cluster, else the reason they never can."""
        key = b"".join(d.tobytes() for d in demands)
        if key not in self._fits_cache:
            self._fits_cache[key] = self._ever_fits(demands)
        return self._fits_cache[key]

    def _ever_fits(self, demands: Sequence[np.ndarray]) -> str | None:
        total = np.sum(demands, axis=0)
        cap = self.capacity.sum(axis=0)
        for i, name in enumerate(self.names):
            if total[i] > cap[i] + EPS:
                return f"needs {name}={total[i]:g} but the whole cluster has {cap[i]:g}"
        for d in demands:
            if not np.all(self.capacity >= d - EPS, axis=1).any():
                want = {n: float(d[i]) for i, n in enumerate(self.names) if d[i] > EPS}
                return f"a task needs {want} and no node is that large"
        return None

    # Mutations -----------------------------------------------------------
    def allocate(
        self, job: str, placement: Sequence[int], demands: Sequence[np.ndarray], *, share_gpus: bool = False,
        only_devices: frozenset[tuple[int, int]] | None = None,
    ) -> Allocation:
        """Reserve ``demands[i]`` on node ``placement[i]``; all-or-nothing.

        With ``share_gpus`` (the ``Colocate`` action), GPU demand may time-share
        devices already in use, up to ``max_share`` jobs per device: such a
        task takes no GPU capacity, only its other resources; ``only_devices`` (``Colocate(on_hosts=True)``)
        restricts the devices it may take to those (node, GPU index) pairs.
        """
        self.version += 1
        if job in self.allocations:
            raise AllocationError(f"job {job!r} already holds an allocation")
        if len(placement) != len(demands):
            raise AllocationError(f"job {job!r}: placement has {len(placement)} nodes for {len(demands)} tasks")
        per_node: dict[int, np.ndarray] = {}
        for node, d in zip(placement, demands):
            if not 0 <= node < self.n_nodes:
                raise AllocationError(f"job {job!r}: node index {node} out of range 0..{self.n_nodes - 1}")
            per_node[node] = per_node.get(node, 0.0) + d
        for node in per_node:
            if node in self.group_of_node:
                raise AllocationError(f"job {job!r}: node {node} is held by the {self.group_of_node[node][0]} "
                                      f"group on nodes {list(self.group_of_node[node][1])}")
        if share_gpus and self._gpu_col is not None:
            return self._allocate_shared(job, placement, demands, per_node, only_devices)
        for node, d in per_node.items():
            short = d > self.free[node] + EPS
            if short.any():
                i = int(np.argmax(short))
                raise AllocationError(
                    f"job {job!r}: node {node} has {self.names[i]}={self.free[node, i]:g} free, needs {d[i]:g}"
                )
        dev_backup = {node: self.device_free[node].copy() for node in per_node}
        slots: list[TaskSlot] = []
        try:
            for node, d in zip(placement, demands):
                slots.append(TaskSlot(node, self._take_devices(job, node, d)))
        except AllocationError:
            for node, row in dev_backup.items():
                self.device_free[node] = row
            raise
        for node, d in per_node.items():
            self.free[node] -= d
        return self._commit(job, slots, demands, per_node)

    def _total_of(self, demands: Sequence[np.ndarray]) -> Resources:
        """Sum of task demands; cached when the rows are the ledger's own (read-only, stable ids)."""
        cacheable = all(not d.flags.writeable for d in demands)
        key = tuple(id(d) for d in demands)
        total = self._totals.get(key) if cacheable else None
        if total is None:
            total = self._as_resources(np.sum(demands, axis=0))
            if cacheable:
                self._totals[key] = total
        return total

    def _as_resources(self, row: np.ndarray) -> Resources:
        return Resources({n: float(v) for n, v in zip(self.names, row) if v > EPS})

    def owned(self, job: str) -> Resources:
        """What ``job`` owns now (differs from its demand for a GPU time-sharing guest)."""
        return self._as_resources(sum(self._per_node[job].values()))

    def _commit(self, job: str, slots: list[TaskSlot], demands: Sequence[np.ndarray],
                per_node: dict[int, np.ndarray], owned_total: Resources | None = None,
                group: tuple[str, tuple[int, ...]] | None = None) -> Allocation:
        for s in slots:
            self._node_jobs.setdefault(s.node, set()).add(job)
            for dev, share in s.devices:
                shares = self.dev_shares.setdefault((s.node, dev), {})
                shares[job] = shares.get(job, 0.0) + share  # two fractional tasks may share a device
        total = owned_total if owned_total is not None else self._total_of(demands)
        alloc = Allocation(job, tuple(slots), total, group)
        self.allocations[job] = alloc
        self._per_node[job] = per_node
        return alloc

    # Pipelined groups ------------------------------------------------------
    @staticmethod
    def group_key(mode: str, nodes: Sequence[int]) -> tuple[str, tuple[int, ...]]:
        return (mode, tuple(sorted(int(n) for n in nodes)))

    def group_blocked(self, nodes: Sequence[int], key: tuple[str, tuple[int, ...]],
                      leaving: set[str] | frozenset[str] = frozenset()) -> str | None:
        """Why a group ``key`` cannot hold ``nodes`` once the jobs in ``leaving`` have been released
        (None if it can): each node must be held by group ``key`` already, or be left with no job."""
        for n in nodes:
            if not 0 <= n < self.n_nodes:
                return f"node index {n} out of range 0..{self.n_nodes - 1}"
            g = self.group_of_node.get(n)
            if g == key:
                continue
            others = sorted(j for j in self._node_jobs.get(n, ()) if j not in leaving)
            if others:
                where = f"the {g[0]} group on nodes {list(g[1])}" if g is not None else "jobs"
                return f"node {n} is held by {where} {others}; pause or move them first"
        return None

    def group_task_fits(self, job: str, placement: Sequence[int], demands: Sequence[np.ndarray]) -> str | None:
        """Each task of a group member must fit its machine alone, and use no GPU (None if so)."""
        for node, d in zip(placement, demands):
            if self._gpu_col is not None and d[self._gpu_col] > EPS:
                return f"job {job!r}: pipelined groups hold CPU machines; GPU tasks cannot join one"
            short = d > self.capacity[node] + EPS
            if short.any():
                i = int(np.argmax(short))
                return (f"job {job!r}: a task needs {self.names[i]}={d[i]:g} but node {node} "
                        f"has {self.capacity[node, i]:g}")
        return None

    def allocate_group(self, job: str, placement: Sequence[int], demands: Sequence[np.ndarray], *,
                       mode: str, nodes: Sequence[int]) -> Allocation:
        """Place ``job`` in the group ``(mode, nodes)``: the first member takes the (wholly free)
        machines, later members join it owning nothing. All-or-nothing."""
        self.version += 1
        if job in self.allocations:
            raise AllocationError(f"job {job!r} already holds an allocation")
        if len(placement) != len(demands):
            raise AllocationError(f"job {job!r}: placement has {len(placement)} nodes for {len(demands)} tasks")
        key = self.group_key(mode, nodes)
        if not set(placement) <= set(key[1]):
            raise AllocationError(f"job {job!r}: placement {list(placement)} leaves the group's nodes {list(key[1])}")
        reason = self.group_blocked(key[1], key) or self.group_task_fits(job, placement, demands)
        if reason is not None:
            raise AllocationError(reason)
        slots = [TaskSlot(int(n), ()) for n in placement]
        members = self.groups.get(key)
        if members is None:  # a new group: it takes the machines whole
            per_node = {n: self.capacity[n].copy() for n in key[1]}
            for n in key[1]:
                self.free[n] = 0.0
                self.device_free[n][self.device_free[n] >= 0] = 0.0
                self.group_of_node[n] = key
            self.groups[key] = members = []
            owned = self._as_resources(sum(per_node.values()))
        else:
            per_node = {}
            owned = Resources()
        members.append(job)
        return self._commit(job, slots, demands, per_node, owned_total=owned, group=key)

    def group_members(self, key: tuple[str, tuple[int, ...]]) -> tuple[str, ...]:
        return tuple(self.groups.get(key, ()))

    def _release_group(self, job: str, alloc: Allocation, per_node: dict[int, np.ndarray]) -> list[str]:
        key = alloc.group
        assert key is not None
        members = self.groups[key]
        members.remove(job)
        if not members:  # the last member: the machines are free again
            for n, d in per_node.items():
                self.free[n] += d
                self.device_free[n][self.device_free[n] >= 0] = 1.0
            for n in key[1]:
                del self.group_of_node[n]
            del self.groups[key]
            np.minimum(self.free, self.capacity, out=self.free)
            return []
        if not per_node:
            return []
        heir = members[0]  # the owner left: the next member inherits the machines
        self._per_node[heir] = per_node
        old = self.allocations[heir]
        self.allocations[heir] = Allocation(heir, old.slots, self._as_resources(sum(per_node.values())), key)
        return [heir]

    def _allocate_shared(self, job: str, placement: Sequence[int], demands: Sequence[np.ndarray],
                         per_node: dict[int, np.ndarray],
                         only_devices: frozenset[tuple[int, int]] | None = None) -> Allocation:
        """Colocate: GPUs may be time-shared; every other resource must be free."""
        g_col = self._gpu_col
        assert g_col is not None
        for node, d in per_node.items():
            rest = d.copy()
            rest[g_col] = 0.0
            short = rest > self.free[node] + EPS
            if short.any():
                i = int(np.argmax(short))
                raise AllocationError(
                    f"job {job!r}: node {node} has {self.names[i]}={self.free[node, i]:g} free, needs {rest[i]:g}"
                )
        taken: dict[tuple[int, int], int] = {}
        slots: list[TaskSlot] = []
        owned = np.zeros(len(self.names))
        owned_per_node: dict[int, np.ndarray] = {}
        dev_backup = {n: self.device_free[n].copy() for n in set(placement)}
        try:
            for node, d in zip(placement, demands):
                k = max(int(np.ceil(d[g_col] - EPS)), 0)
                n_dev = int((self.device_free[node] >= 0).sum())
                # fewest jobs on the device first, then most free room
                cand = sorted(
                    (len(self.dev_shares.get((node, i), ())) + taken.get((node, i), 0), -self.device_free[node, i], i)
                    for i in range(n_dev)
                )
                # one task per device per job: a job never time-shares a GPU with itself
                cand = [c for c in cand if c[0] < self.max_share and (node, c[2]) not in taken
                        and (node, c[2]) not in self.packs and (only_devices is None or (node, c[2]) in only_devices)]
                if len(cand) < k:
                    raise AllocationError(
                        f"job {job!r}: node {node} has {len(cand)} GPUs with fewer than {self.max_share} jobs"
                        f"{' among those its hosts hold' if only_devices is not None else ''}, needs {k}"
                    )
                devs = []
                for _, _, i in cand[:k]:
                    want = min(float(d[g_col]), 1.0)
                    taken[(node, i)] = taken.get((node, i), 0) + 1
                    if not self.dev_shares.get((node, i)) and self.device_free[node, i] >= want - EPS:
                        self.device_free[node, i] -= want  # a free device: the job owns its share
                        devs.append((i, want))
                        owned_per_node.setdefault(node, np.zeros(len(self.names)))[g_col] += want
                    else:
                        devs.append((i, 0.0))  # time-sharing guest
                slots.append(TaskSlot(node, tuple(devs)))
        except AllocationError:
            for n, row in dev_backup.items():
                self.device_free[n] = row  # all-or-nothing
            raise
        for node, d in per_node.items():
            rest = d.copy()
            rest[g_col] = owned_per_node.get(node, owned)[g_col]
            per_node[node] = rest
            self.free[node] -= rest
        return self._commit(job, slots, demands, per_node, owned_total=self._as_resources(sum(per_node.values())))

    def _take_devices(self, job: str, node: int, d: np.ndarray) -> tuple[tuple[int, float], ...]:
        g = float(d[self._gpu_col]) if self._gpu_col is not None else 0.0
        got = take_devices(self.device_free[node], g)
        if got is None:
            row = self.device_free[node]
            raise AllocationError(
                f"job {job!r}: node {node} cannot hold a GPU share of {g:g} "
                f"(device free fractions: {[round(float(x), 3) for x in row if x >= 0]})"
            )
        return got

    def release(self, job: str) -> list[str]:
        """Free ``job``'s allocation. Returns the time-sharing guests that inherited one of its
        GPUs (their owned allocation grew)."""
        self.version += 1
        inheritors: list[str] = []
        alloc = self.allocations.pop(job)
        per_node = self._per_node.pop(job)
        for node in alloc.nodes:
            held = self._node_jobs.get(node)
            if held is not None:
                held.discard(job)
                if not held:
                    del self._node_jobs[node]
        if alloc.group is not None:
            return self._release_group(job, alloc, per_node)
        if alloc.pack is not None:
            return self._release_pack(job, alloc, per_node)
        for key in alloc.devices:
            shares = self.dev_shares.get(key)
            if shares is None or job not in shares:
                continue
            share = shares.pop(job)
            guests = sorted(j for j, s in shares.items() if s == 0.0)
            if share > 0 and guests:
                # a time-sharing guest stays on the device: it inherits the share
                shares[guests[0]] = share
                self._per_node[guests[0]].setdefault(key[0], np.zeros(len(self.names)))
                self._per_node[guests[0]][key[0]] = self._per_node[guests[0]][key[0]] + self._gpu_row(share)
                per_node[key[0]] = per_node[key[0]] - self._gpu_row(share)
                inheritors.append(guests[0])
            else:
                self.device_free[key] += share
            if not shares:
                del self.dev_shares[key]
        for node, d in per_node.items():
            self.free[node] += d
        np.minimum(self.free, self.capacity, out=self.free)
        return inheritors

    def _gpu_row(self, share: float) -> np.ndarray:
        row = np.zeros(len(self.names))
        if self._gpu_col is not None:
            row[self._gpu_col] = share
        return row

    def sharers(self, job: str) -> set[str]:
        """Other jobs holding a GPU device that ``job`` holds (or packed with it)."""
        alloc = self.allocations.get(job)
        if alloc is None:
            return set()
        out: set[str] = set(self.packs.get(alloc.pack, ())) if alloc.pack is not None else set()
        for key in alloc.devices:
            out.update(self.dev_shares.get(key, ()))
        out.discard(job)
        return out

    def draft(self) -> Ledger:
        """A scratch copy to plan against: the same checks, none of its changes reach this ledger."""
        d = copy.copy(self)
        d.free, d.device_free = self.free.copy(), self.device_free.copy()
        d.dev_shares = {k: dict(v) for k, v in self.dev_shares.items()}
        d.allocations = dict(self.allocations)
        d._per_node = {j: dict(v) for j, v in self._per_node.items()}
        d.groups = {k: list(v) for k, v in self.groups.items()}
        d.group_of_node = dict(self.group_of_node)
        d._node_jobs = {n: set(v) for n, v in self._node_jobs.items()}
        d.packs = {k: list(v) for k, v in self.packs.items()}
        d.pack_mem, d._pack_job_mem = dict(self.pack_mem), dict(self._pack_job_mem)
        d._fit_memo, d._no_room = {}, set()
        return d

    # Packs -----------------------------------------------------------------
    def device_memory(self, device: tuple[int, int]) -> float:
        """Memory (GB) of ``device``: its GPU's share of the node's ``gpu_mem_gb``, or on a node
        without GPUs the node's ``mem_gb`` (the CPU device trains in host memory); inf if unknown."""
        node, gpu = device
        n_gpus = int((self.device_free[node] >= 0).sum()) if self._gpu_col is not None and \
            self.capacity[node, self._gpu_col] > EPS else 0
        if n_gpus:
            if self._gpu_mem_col is None or self.capacity[node, self._gpu_mem_col] <= EPS:
                return float("inf")
            return float(self.capacity[node, self._gpu_mem_col]) / n_gpus
        col = self.index.get("mem_gb")
        return float(self.capacity[node, col]) if col is not None else float("inf")

    def pack_member_memory(self, device: tuple[int, int], demand: np.ndarray) -> float:
        """Device memory one member needs: its declared ``gpu_mem_gb``; undeclared, its ``gpu``
        share of the whole device (a 1-GPU job is assumed to fill it). On a CPU device: ``mem_gb``."""
        node = device[0]
        if self._has_gpus(node):
            if self._gpu_mem_col is not None and demand[self._gpu_mem_col] > EPS:
                return float(demand[self._gpu_mem_col])
            g = float(demand[self._gpu_col]) if self._gpu_col is not None else 0.0
            return min(g, 1.0) * self.device_memory(device)
        col = self.index.get("mem_gb")
        return float(demand[col]) if col is not None else 0.0

    def _has_gpus(self, node: int) -> bool:
        return self._gpu_col is not None and self.capacity[node, self._gpu_col] > EPS

    def _pack_vectors(self, device: tuple[int, int], demands: Sequence[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        """(extra the owner takes, one owned row per member) for ``demands`` joining ``device``'s pack:
        members own their non-CPU, non-GPU resources; the owner takes the device and raises the pack's
        CPU to the largest member's demand."""
        node = device[0]
        extra = np.zeros(len(self.names))
        rows = []
        for d in demands:
            row = np.array(d, dtype=np.float64)
            for col in (self._gpu_col, self._cpu_col):
                if col is not None:
                    row[col] = 0.0
            rows.append(row)
        if self._cpu_col is not None:
            held = self._pack_cpu(device)
            want = max((float(d[self._cpu_col]) for d in demands), default=0.0)
            extra[self._cpu_col] = max(want - held, 0.0)
        if device not in self.packs and self._has_gpus(node):
            extra[self._gpu_col] = 1.0  # type: ignore[index]
        return extra, rows

    def _pack_cpu(self, device: tuple[int, int]) -> float:
        members = self.packs.get(device)
        if not members or self._cpu_col is None:
            return 0.0
        return float(sum(self._per_node[members[0]].values())[self._cpu_col])

    def pack_blocked(self, device: tuple[int, int], joining: Sequence[tuple[str, np.ndarray]]) -> str | None:
        """Why ``joining`` (job, task demand) cannot join the pack on ``device`` (None if they can):
        the device must exist and be wholly free or hold a pack; the node must have the resources;
        the pack's memory must fit the device's."""
        node, gpu = device
        if not 0 <= node < self.n_nodes:
            return f"node index {node} out of range 0..{self.n_nodes - 1}"
        if node in self.group_of_node:
            return f"node {node} is held by the {self.group_of_node[node][0]} group"
        if self._has_gpus(node):
            n_dev = int((self.device_free[node] >= 0).sum())
            if not 0 <= gpu < n_dev:
                return f"node {node} has GPUs 0..{n_dev - 1}, not {gpu}"
            if device not in self.packs and self.device_free[node, gpu] < 1.0 - EPS:
                return f"GPU {device} is in use by {sorted(self.dev_shares.get(device, {}))}; a pack needs a whole free GPU"
        elif gpu != 0:
            return f"node {node} has no GPU: its only device is the CPU, index 0, not {gpu}"
        for job, _ in joining:
            if job in self.allocations:
                return f"job {job!r} already holds an allocation"
        extra, rows = self._pack_vectors(device, [d for _, d in joining])
        need = extra + np.sum(rows, axis=0) if rows else extra
        short = need > self.free[node] + EPS
        if short.any():
            i = int(np.argmax(short))
            return f"pack on {device}: node {node} has {self.names[i]}={self.free[node, i]:g} free, needs {need[i]:g}"
        mems = {job: self.pack_member_memory(device, d) for job, d in joining}
        used = self.pack_mem.get(device, 0.0)
        cap = self.device_memory(device)
        if used + sum(mems.values()) > cap + EPS:
            members = {j: round(self._pack_job_mem[j], 3) for j in self.packs.get(device, ())}
            members.update({j: round(m, 3) for j, m in mems.items()})
            return (f"pack on {device} needs {used + sum(mems.values()):g} GB of device memory "
                    f"(members: {members}) but the device has {cap:g} GB")
        return None

    def allocate_pack(self, job: str, device: tuple[int, int], demand: np.ndarray) -> Allocation:
        """Add ``job`` (one task of ``demand``) to the pack on ``device``, forming it if new."""
        self.version += 1
        reason = self.pack_blocked(device, [(job, demand)])
        if reason is not None:
            raise AllocationError(f"job {job!r}: {reason}")
        node, gpu = device
        extra, (row,) = self._pack_vectors(device, [demand])
        members = self.packs.get(device)
        new = members is None
        if new:
            members = self.packs[device] = []
            if self._has_gpus(node):
                self.device_free[node, gpu] = 0.0
            owner_row = row + extra
        else:
            owner = members[0]
            if extra.any():  # a hungrier member raises the pack's CPU: the owner holds it
                self.free[node] -= extra
                self._per_node[owner][node] = self._per_node[owner][node] + extra
                self.allocations[owner] = replace(self.allocations[owner], total=self.owned(owner))
            owner_row = row
        self.free[node] -= owner_row
        mem = self.pack_member_memory(device, demand)
        self.pack_mem[device] = self.pack_mem.get(device, 0.0) + mem
        self._pack_job_mem[job] = mem
        members.append(job)
        share = 1.0 if new and self._has_gpus(node) else 0.0
        slot = TaskSlot(node, ((gpu, share),) if self._has_gpus(node) else ())
        self._node_jobs.setdefault(node, set()).add(job)
        alloc = Allocation(job, (slot,), self._as_resources(owner_row), pack=device)
        self.allocations[job] = alloc
        self._per_node[job] = {node: owner_row}
        return alloc

    def _release_pack(self, job: str, alloc: Allocation, per_node: dict[int, np.ndarray]) -> list[str]:
        device = alloc.pack
        assert device is not None
        node = device[0]
        members = self.packs[device]
        owner = members[0] == job
        members.remove(job)
        self.pack_mem[device] -= self._pack_job_mem.pop(job)
        if not members:
            del self.packs[device]
            del self.pack_mem[device]
            if self._has_gpus(node):
                self.device_free[device] = 1.0
            self.free[node] += per_node[node]
            np.minimum(self.free, self.capacity, out=self.free)
            return []
        if not owner:
            self.free[node] += per_node[node]
            return []
        heir = members[0]  # the owner left: the next member inherits the device and the pack's CPU
        own_row = per_node[node].copy()
        keep = np.zeros(len(self.names))
        for col in (self._gpu_col, self._cpu_col):
            if col is not None:
                keep[col] = own_row[col]
        self.free[node] += own_row - keep
        self._per_node[heir][node] = self._per_node[heir][node] + keep
        slot = TaskSlot(node, ((device[1], 1.0),) if self._has_gpus(node) else ())
        self.allocations[heir] = Allocation(heir, (slot,), self.owned(heir), pack=device)
        return [heir]

    def check(self) -> None:
        """Assert the ledger's invariant: 0 <= free <= capacity everywhere (used by tests)."""
        if (self.free < -EPS).any() or (self.free > self.capacity + EPS).any():
            raise AssertionError("ledger over-allocated")
        if ((self.device_free < -EPS) & (self.device_free != -1.0)).any():
            raise AssertionError("a GPU device is over-allocated")
        for key, shares in self.dev_shares.items():
            guests = sum(1 for v in shares.values() if v == 0.0)
            if guests >= self.max_share:  # a guest may only join a device holding < max_share jobs
                raise AssertionError(f"GPU {key} has {guests} time-sharing guests; max_share={self.max_share}")
            if sum(shares.values()) > 1.0 + EPS:
                raise AssertionError(f"GPU {key} owned beyond its capacity: {shares}")
        for key, members in self.groups.items():
            if not members or any(self.allocations[j].group != key for j in members):
                raise AssertionError(f"group {key} has inconsistent members {members}")
            if (self.free[list(key[1])] > EPS).any():
                raise AssertionError(f"group {key} does not hold its machines whole")
            owned = sum(self._per_node[j].get(n, 0.0) for j in members for n in key[1])
            if not np.allclose(owned, self.capacity[list(key[1])].sum(axis=0)):
                raise AssertionError(f"group {key}: owned machines {owned} differ from the group's capacity")
        for dev, members in self.packs.items():
            if not members or any(self.allocations[j].pack != dev for j in members):
                raise AssertionError(f"pack {dev} has inconsistent members {members}")
            if self.pack_mem[dev] > self.device_memory(dev) + EPS:
                raise AssertionError(f"pack {dev} uses {self.pack_mem[dev]:g} GB > device memory")
            if self._has_gpus(dev[0]) and self.device_free[dev] > EPS:
                raise AssertionError(f"pack {dev} does not hold its GPU")
            if dev in self.dev_shares:
                raise AssertionError(f"pack {dev} is also time-shared by {self.dev_shares[dev]}")
