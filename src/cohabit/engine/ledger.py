"""The allocation ledger: free capacity per node and per GPU device, checked on every action.

Capacities are a numpy matrix ``free[node, resource]``. GPUs are also tracked
per device (``device_free[node, gpu]`` = free fraction of that GPU, -1 for
devices a node does not have) so that fractional requests (Alibaba's
``gpu_milli``) land on one physical GPU and the simulator knows which jobs
share a device. Whole-GPU requests take fully free devices; fractional ones
take the best-fitting device (smallest free fraction that still fits).

Pipelined groups (``Colocate(mode="pipelined")`` and ``"naive"``: a group holds whole machines) are
in :mod:`.ledger_groups`, packs (Liu's Pack: jobs trained jointly on one device) in
:mod:`.ledger_packs`; the allocation types and the fit arithmetic in :mod:`.alloc`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Sequence

import numpy as np

from ..spec.cluster import ClusterSpec
from ..spec.resources import Resources
from .alloc import EPS, Allocation, AllocationError, TaskSlot, fit_counts, refit, take_devices
from .ledger_groups import GroupLedger
from .ledger_packs import PackLedger
from .ledger_tasks import TaskLedger

__all__ = ["EPS", "Allocation", "AllocationError", "Ledger", "TaskSlot", "fit_counts", "take_devices"]

#: the most nodes changed since a memoised fit was made that it is updated on (``alloc.refit``, ~1 us per
#: node) when next read, before it is simply computed afresh
REFIT_NODES = 16
#: the longest log of changed nodes kept (past it the fit memo is dropped and the log started afresh)
NODE_LOG_MAX = 1 << 16


class Ledger(TaskLedger, GroupLedger, PackLedger):
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
        # per GPU device: how many jobs hold it (len of its dev_shares entry, kept in step)
        self.dev_jobs = np.zeros(self.device_free.shape, dtype=np.int64)
        self.allocations: dict[str, Allocation] = {}
        self._per_node: dict[str, dict[int, np.ndarray]] = {}
        self._vectors: dict[int, tuple[Resources, np.ndarray | None]] = {}
        self._rows: dict[bytes, np.ndarray] = {}  # one row object per distinct demand (see vector)
        self._totals: dict[tuple[int, ...], Resources] = {}
        self._node_sums: dict[tuple[int, ...], tuple[list[np.ndarray], np.ndarray]] = {}  # see _per_node_sums
        self._resources: dict[bytes, Resources] = {}  # see _as_resources
        self._fits_cache: dict[bytes, str | None] = {}
        self._sigs: dict[tuple[tuple[int, ...], int], object] = {}  # (placement, id(row)) -> ledger_tasks._Sig
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
        # id(demand row) -> (row, fit, version, touches, len(_node_log)) when the fit was made (see fit_of)
        self._fit_memo: dict[int, tuple[np.ndarray, np.ndarray, int, int, int]] = {}
        self._memo_version = 0  # the version _free_total and _no_room were checked at
        # the nodes each tracked mutation changed, in order, and how many tracked mutations there were: a fit
        # made at version v is updated on the nodes logged since when every bump since v was a tracked one
        self._node_log: list[int] = []
        self._touches = 0
        self._log_clears = 0  # how many times _node_log was emptied (positions in it from before are void)
        self._free_total: np.ndarray | None = None  # see free_total
        # bumped only when room may have grown (release, or a scratch copy's owner giving room back):
        # a placement that failed keeps failing while room only shrinks, so no_room outlives allocations
        self.grown = 0
        self._no_room_grown = 0
        self._no_room: set[Hashable] = set()  # see no_room

    @property
    def gpu_col(self) -> int | None:
        return self._gpu_col

    @property
    def n_nodes(self) -> int:
        return self.capacity.shape[0]

    def vector(self, r: Resources) -> np.ndarray | None:
        """``r`` as a row over the cluster's resource names; None if it names a resource no node has.

        Rows are cached per distinct demand and must not be modified; equal demands get the same row
        object (so memos keyed by a row's id, e.g. :meth:`fit_of`, serve every job of that demand)."""
        hit = self._vectors.get(id(r))
        if hit is not None and hit[0] is r:
            return hit[1]
        v = self._make_vector(r)
        if v is not None:
            v.flags.writeable = False
            v = self._rows.setdefault(v.tobytes(), v)
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

    def _touch(self, nodes: object) -> None:
        """A mutation (one version bump) changes the free capacity of ``nodes`` (an iterable of node
        indices) only; a bump without this call makes every fit memoised before it stale."""
        self._touches += 1
        log = self._node_log
        if len(log) > NODE_LOG_MAX:  # (positions in it are forgotten with the fits that name them)
            log.clear()
            self._fit_memo.clear()
            self._log_clears += 1
        log.extend(nodes)  # type: ignore[arg-type]

    def _memo_valid(self) -> None:
        """Drop the free total and, if room may have grown, the no-room memo, once the free capacity changed."""
        if self._memo_version != self.version:
            self._free_total = None
            self._memo_version = self.version
            if self._no_room_grown != self.grown:
                self._no_room.clear()
                self._no_room_grown = self.grown

    @property
    def change_mark(self) -> tuple[int, int, int, int]:
        """Where the free capacity stands now, for :meth:`changed_since`."""
        return self.version, self._touches, self._log_clears, len(self._node_log)

    def changed_since(self, mark: tuple[int, int, int, int]) -> set[int] | None:
        """The nodes whose free capacity or device holders changed since ``mark`` (a :attr:`change_mark`);
        None when that is not known (a change that was not tracked, or the log was emptied since)."""
        version, touches, clears, at = mark
        if clears != self._log_clears or self.version - version != self._touches - touches:
            return None
        return set(self._node_log[at:])

    def room_changed(self) -> None:
        """Someone wrote :attr:`free` / :attr:`device_free` directly (a planning draft sharing them): drop
        every memo, as after a release."""
        self.version += 1
        self.grown += 1

    def fit_of(self, demand: np.ndarray) -> np.ndarray:
        """:meth:`tasks_fit` of a cached demand row (:meth:`vector`), kept until the free capacity
        changes; read-only (a policy's scratch draft asks for the same shapes round after round)."""
        memo, version, log = self._fit_memo, self.version, self._node_log
        hit = memo.get(id(demand))
        fit = None
        if hit is not None and hit[0] is demand:
            if hit[2] == version:
                return hit[1]
            if version - hit[2] == self._touches - hit[3]:  # every change since was tracked: refit on its nodes
                nodes = set(log[hit[4]:])  # (lazily, per row: a round that finds its shape in no_room asks none)
                if len(nodes) <= REFIT_NODES:
                    fit = refit(hit[1], self.free, self.device_free, demand, self._gpu_col, nodes)
        if fit is None:
            fit = fit_counts(self.free, self.device_free, demand, self._gpu_col)
        fit.flags.writeable = False
        memo[id(demand)] = (demand, fit, version, self._touches, len(log))  # keeps the row alive: its id stays unique
        return fit

    def free_total(self) -> np.ndarray:
        """``free.sum(axis=0)``, read-only, kept until the free capacity changes."""
        self._memo_valid()
        total = self._free_total
        if total is None:
            total = self._free_total = np.add.reduce(self.free, axis=0)  # (free.sum(axis=0))
            total.flags.writeable = False
        return total

    def no_room(self) -> set[Hashable]:
        """Shapes (``(id(worker demand row), workers)``, or a policy's own key) that were found not to fit the free capacity
        (``policies.placement.Draft`` adds them while it plans on the unchanged ledger); kept while room only
        shrinks (allocations: a placement that failed keeps failing on less room on every node and device),
        emptied when room may have grown (a release). A key added here must name a placement whose failure is
        monotone in that sense."""
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
        if not share_gpus and demands:
            fast = self._allocate_plain(job, placement, demands)
            if fast is not None:
                return fast
        self.version += 1
        if job in self.allocations:
            raise AllocationError(f"job {job!r} already holds an allocation")
        if len(placement) != len(demands):
            raise AllocationError(f"job {job!r}: placement has {len(placement)} nodes for {len(demands)} tasks")
        per_node = self._per_node_sums(job, placement, demands)
        if self.group_of_node:
            for node in per_node:
                if node in self.group_of_node:
                    raise AllocationError(f"job {job!r}: node {node} is held by the {self.group_of_node[node][0]} "
                                          f"group on nodes {list(self.group_of_node[node][1])}")
        if share_gpus and self._gpu_col is not None:
            return self._allocate_shared(job, placement, demands, per_node, only_devices)
        for node, d in per_node.items():
            for i, (need, have) in enumerate(zip(d.tolist(), self.free[node].tolist())):
                if need > have + EPS:  # (the first short resource, as argmax of the comparison finds it)
                    raise AllocationError(
                        f"job {job!r}: node {node} has {self.names[i]}={self.free[node, i]:g} free, needs {d[i]:g}"
                    )
        self._touch(per_node)
        slots = self._take_all(job, placement, demands)
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
        key = row.tobytes()  # (Resources is immutable: one object per distinct row)
        hit = self._resources.get(key)
        if hit is None:
            if len(self._resources) > 4096:
                self._resources.clear()
            hit = self._resources[key] = Resources({n: float(v) for n, v in zip(self.names, row) if v > EPS})
        return hit

    def owned(self, job: str) -> Resources:
        """What ``job`` owns now (differs from its demand for a GPU time-sharing guest)."""
        return self._as_resources(sum(self._per_node[job].values()))

    def _commit(self, job: str, slots: list[TaskSlot], demands: Sequence[np.ndarray],
                per_node: dict[int, np.ndarray], owned_total: Resources | None = None,
                group: tuple[str, tuple[int, ...]] | None = None) -> Allocation:
        node_jobs, dev_shares = self._node_jobs, self.dev_shares
        counts: dict[int, list[int]] = {}  # node -> its row of dev_jobs as a list (written back once)
        few = len(slots) <= 2  # (a job of one or two tasks updates the counts in place)
        last = -1
        for s in slots:
            node = s.node
            if node != last:  # (a job's tasks on one node are mostly next to each other: one add for them)
                held = node_jobs.get(node)
                if held is None:
                    held = node_jobs[node] = set()
                held.add(job)
                last = node
            for dev, share in s.devices:
                shares = dev_shares.get((node, dev))
                if shares is None:
                    shares = dev_shares[(node, dev)] = {}
                if job not in shares:
                    if few:
                        self.dev_jobs[node, dev] += 1
                    else:
                        row = counts.get(node)
                        if row is None:
                            row = counts[node] = self.dev_jobs[node].tolist()
                        row[dev] += 1
                shares[job] = shares.get(job, 0.0) + share  # two fractional tasks may share a device
        for node, row in counts.items():
            self.dev_jobs[node] = row
        total = owned_total if owned_total is not None else self._total_of(demands)
        alloc = Allocation(job, tuple(slots), total, group)
        self.allocations[job] = alloc
        self._per_node[job] = per_node
        return alloc

    def _allocate_shared(self, job: str, placement: Sequence[int], demands: Sequence[np.ndarray],
                         per_node: dict[int, np.ndarray],
                         only_devices: frozenset[tuple[int, int]] | None = None) -> Allocation:
        """Colocate: GPUs may be time-shared; every other resource must be free."""
        g_col = self._gpu_col
        assert g_col is not None
        for node, d in per_node.items():
            for i, (need, have) in enumerate(zip(d.tolist(), self.free[node].tolist())):
                if i != g_col and need > have + EPS:  # (the GPU is time-shared: every other resource must be free)
                    raise AllocationError(
                        f"job {job!r}: node {node} has {self.names[i]}={self.free[node, i]:g} free, needs {need:g}"
                    )
        self._touch(set(placement))
        taken: dict[tuple[int, int], int] = {}
        slots: list[TaskSlot] = []
        # each node's device row and job counts as Python lists (the same floats), changed as its tasks take
        # devices and written back once every task fit (all-or-nothing: nothing is written before)
        rows: dict[int, list[float]] = {}
        counts: dict[int, list[int]] = {}
        owned_g: dict[int, float] = {}  # node -> the GPU share the job owns there (devices nobody held)
        dev_shares, packs, max_share = self.dev_shares, self.packs, self.max_share
        for node, d in zip(placement, demands):
            g = d.item(g_col)
            k = max(math.ceil(g - EPS), 0)
            dev_row = rows.get(node)
            if dev_row is None:
                dev_row = rows[node] = self.device_free[node].tolist()
                jobs_on = counts[node] = self.dev_jobs[node].tolist()  # len(dev_shares[(node, i)]), kept in step
            else:
                jobs_on = counts[node]
            n_dev = sum([x >= 0 for x in dev_row])
            # one task per device per job (a job never time-shares a GPU with itself): the devices it does not
            # hold yet, below the limit, in no pack (and among its hosts'), as (jobs on it, -free room, index)
            cand = [(c, -dev_row[i], i) for i, c in enumerate(jobs_on[:n_dev]) if c < max_share
                    and (not taken or (node, i) not in taken) and (not packs or (node, i) not in packs)
                    and (only_devices is None or (node, i) in only_devices)]
            if len(cand) < k:
                raise AllocationError(
                    f"job {job!r}: node {node} has {len(cand)} GPUs with fewer than {max_share} jobs"
                    f"{' among those its hosts hold' if only_devices is not None else ''}, needs {k}"
                )
            devs = []
            want = min(g, 1.0)
            # fewest jobs on the device first, then most free room
            for _, _, i in ((min(cand),) if k == 1 else sorted(cand)[:k]):
                taken[(node, i)] = taken.get((node, i), 0) + 1
                if not dev_shares.get((node, i)) and dev_row[i] >= want - EPS:
                    dev_row[i] -= want  # a free device: the job owns its share
                    devs.append((i, want))
                    owned_g[node] = owned_g.get(node, 0.0) + want
                else:
                    devs.append((i, 0.0))  # time-sharing guest
            slots.append(TaskSlot(node, tuple(devs)))
        for node, dev_row in rows.items():
            self.device_free[node] = dev_row
        for node, d in per_node.items():
            rest = d.copy()
            rest[g_col] = owned_g.get(node, 0.0)
            per_node[node] = rest
            self.free[node] -= rest
        return self._commit(job, slots, demands, per_node, owned_total=self._as_resources(sum(per_node.values())))

    def release(self, job: str) -> list[str]:
        """Free ``job``'s allocation. Returns the time-sharing guests that inherited one of its
        GPUs (their owned allocation grew)."""
        alloc = self.allocations.get(job)
        if alloc is not None and alloc.group is None and alloc.pack is None and self._release_plain(job, alloc):
            return []
        self.version += 1
        self.grown += 1  # room grows: placements that failed may fit now
        inheritors: list[str] = []
        alloc = self.allocations.pop(job)
        per_node = self._per_node.pop(job)
        last = -1
        for s in alloc.slots:
            node = s.node
            if node == last:
                continue
            last = node
            held = self._node_jobs.get(node)
            if held is not None:
                held.discard(job)
                if not held:
                    del self._node_jobs[node]
        if alloc.group is not None:
            return self._release_group(job, alloc, per_node)
        if alloc.pack is not None:
            return self._release_pack(job, alloc, per_node)
        devices = alloc.devices
        self._touch(set(per_node).union(k[0] for k in devices))
        # each node's device rows as Python lists, read once and written back once (the same float sums);
        # a job holding one or two devices updates them in place
        few = len(devices) <= 2
        dev_rows: dict[int, tuple[list[float], list[int]]] = {}
        for key in devices:
            shares = self.dev_shares.get(key)
            if shares is None or job not in shares:
                continue
            node, i = key
            share = shares.pop(job)
            if few:
                self.dev_jobs[key] -= 1
                rows = None
            else:
                rows = dev_rows.get(node)
                if rows is None:
                    rows = dev_rows[node] = (self.device_free[node].tolist(), self.dev_jobs[node].tolist())
                rows[1][i] -= 1
            guests = sorted(j for j, s in shares.items() if s == 0.0) if share > 0 and shares else None
            if guests:
                # a time-sharing guest stays on the device: it inherits the share
                shares[guests[0]] = share
                self._per_node[guests[0]].setdefault(node, np.zeros(len(self.names)))
                self._per_node[guests[0]][node] = self._per_node[guests[0]][node] + self._gpu_row(share)
                per_node[node] = per_node[node] - self._gpu_row(share)
                inheritors.append(guests[0])
            elif rows is None:
                self.device_free[key] += share
            else:
                rows[0][i] += share
            if not shares:
                del self.dev_shares[key]
        for node, (dev_row, jobs_row) in dev_rows.items():
            self.device_free[node] = dev_row
            self.dev_jobs[node] = jobs_row
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
        d.dev_jobs = self.dev_jobs.copy()
        d.allocations = dict(self.allocations)
        d._per_node = {j: dict(v) for j, v in self._per_node.items()}
        d.groups = {k: list(v) for k, v in self.groups.items()}
        d.group_of_node = dict(self.group_of_node)
        d._node_jobs = {n: set(v) for n, v in self._node_jobs.items()}
        d.packs = {k: list(v) for k, v in self.packs.items()}
        d.pack_mem, d._pack_job_mem = dict(self.pack_mem), dict(self._pack_job_mem)
        d._fit_memo, d._no_room, d._free_total = {}, set(), None
        d._node_log = []
        return d

    def check(self) -> None:
        """Assert the ledger's invariant: 0 <= free <= capacity everywhere (used by tests)."""
        if (self.free < -EPS).any() or (self.free > self.capacity + EPS).any():
            raise AssertionError("ledger over-allocated")
        if ((self.device_free < -EPS) & (self.device_free != -1.0)).any():
            raise AssertionError("a GPU device is over-allocated")
        held = np.zeros_like(self.dev_jobs)
        for key, shares in self.dev_shares.items():
            held[key] = len(shares)
        if (held != self.dev_jobs).any():
            raise AssertionError("dev_jobs differs from the number of jobs in dev_shares")
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
