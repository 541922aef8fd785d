"""How a plain allocation takes its tasks' room, node by node (:class:`~cohabit.engine.ledger.Ledger` inherits
these methods): a job's tasks on one node are summed once per sequence of rows and take their devices from the
node's device row read once and written back once (``alloc.take_many``: whole GPUs in one scan), with the same
arithmetic, the same devices and the same refusal messages as one update per task."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NoReturn

import numpy as np

from .alloc import _WHOLE, EPS, Allocation, AllocationError, TaskSlot, _whole, take_from, take_many, task_slot

if TYPE_CHECKING:
    from .ledger import Ledger

#: a device this free or more is whole (``alloc.take_from``)
_WHOLE_FREE = 1.0 - EPS
#: the most placement signatures kept (``TaskLedger._plain_sig``) before the memo is started afresh
SIGS_MAX = 1 << 12


#: (node, GPUs per task, devices taken there in order...) -> the node's task slots, in task order (see _node_slots)
_NODE_SLOTS: dict[tuple[int, ...], tuple[TaskSlot, ...]] = {}


def _node_slots(key: tuple[int, ...], node: int, k: int, took: list[int]) -> tuple[TaskSlot, ...]:
    """The slots of a node's whole-GPU tasks of ``k`` GPUs each that took devices ``took`` in order (task ``j``
    the ``j``-th run of ``k``), as :func:`~.alloc.take_many` hands them out; kept per key."""
    out = []
    for j in range(0, len(took), k):
        idx = tuple(took[j:j + k])
        out.append(task_slot(node, _WHOLE.get(idx) or _whole(idx)))
    if len(_NODE_SLOTS) > SIGS_MAX:
        _NODE_SLOTS.clear()
    hit = _NODE_SLOTS[key] = tuple(out)
    return hit


class _Sig:
    """What a plain allocation of one demand row on one placement needs, made once per (placement, row):
    per node (first-appearance order) its index, task count, summed row (the ledger's ``_per_node_sums``
    object) and that row as floats; the GPUs per task; the total; each task's node and rank among the
    node's tasks."""

    __slots__ = ("row", "nodes", "counts", "sums", "needs", "k", "total", "per_node", "tasks", "grouped")

    def __init__(self, row: np.ndarray, per_node: dict[int, np.ndarray], counts: list[int], k: int,
                 total: object, tasks: list[tuple[int, int]]) -> None:
        self.row = row  # (kept alive: the memo's key holds its id)
        self.nodes = list(per_node)
        self.counts = counts
        self.sums = list(per_node.values())
        self.needs = [v.tolist() for v in self.sums]
        self.k = k
        self.total = total
        self.per_node = per_node
        self.tasks = tasks
        #: every node's tasks are consecutive in the placement (then the nodes come in ``nodes`` order)
        self.grouped = [node for i, (node, _) in enumerate(tasks) if i == 0 or tasks[i - 1][0] != node] == self.nodes


class TaskLedger:
    """The ledger's per-node task methods; mixed into :class:`~cohabit.engine.ledger.Ledger`, whose state
    (``capacity``, ``device_free``, ``_gpu_col``, ``_node_sums``) they use."""

    def _per_node_sums(self: Ledger, job: str, placement: Sequence[int], demands: Sequence[np.ndarray]) -> dict[int, np.ndarray]:
        """node -> the sum of the demands of the job's tasks there, added in task order (a node's first task:
        its row itself, as 0.0 + row equals it). A node's sum of the ledger's own rows (read-only, see
        :meth:`vector`) is kept per sequence of rows: the same numpy additions, made once."""
        n_nodes = self.capacity.shape[0]
        if len(placement) == 1:  # (most jobs: one task)
            node = placement[0]
            if not 0 <= node < n_nodes:
                raise AllocationError(f"job {job!r}: node index {node} out of range 0..{n_nodes - 1}")
            return {node: demands[0]}
        rows: dict[int, list[np.ndarray]] = {}
        for node, d in zip(placement, demands):
            if not 0 <= node < n_nodes:
                raise AllocationError(f"job {job!r}: node index {node} out of range 0..{n_nodes - 1}")
            got = rows.get(node)
            if got is None:
                rows[node] = [d]
            else:
                got.append(d)
        per_node: dict[int, np.ndarray] = {}
        sums = self._node_sums
        for node, ds in rows.items():
            if len(ds) == 1:
                per_node[node] = ds[0]
                continue
            key = tuple(map(id, ds))
            hit = sums.get(key)
            if hit is None:
                acc = ds[0]
                for d in ds[1:]:
                    acc = acc + d
                if any(d.flags.writeable for d in ds):
                    per_node[node] = acc
                    continue
                acc.flags.writeable = False  # (shared: release adds it to free, never writes it)
                if len(sums) > 4096:
                    sums.clear()
                hit = sums[key] = (ds, acc)  # (the rows kept alive: their ids stay theirs)
            per_node[node] = hit[1]
        return per_node

    def _plain_sig(self: Ledger, job: str, placement: Sequence[int], row: np.ndarray, n: int) -> _Sig | None:
        """The signature of ``n`` tasks of the read-only ``row`` on ``placement``, or None when the fast path
        does not apply (a fractional GPU, a writable row, a node out of range: the general path decides)."""
        if row.flags.writeable:
            return None
        n_nodes = self.capacity.shape[0]
        if any(not 0 <= node < n_nodes for node in placement):
            return None
        col = self._gpu_col
        g = row.item(col) if col is not None else 0.0
        if EPS < g < _WHOLE_FREE:
            return None  # a fraction: the best-fit device depends on the tasks before it
        k = int(round(g)) if g > EPS else 0
        demands = [row] * n
        per_node = self._per_node_sums(job, placement, demands)
        seen: dict[int, int] = {}
        tasks = []
        for node in placement:
            j = seen.get(node, 0)
            seen[node] = j + 1
            tasks.append((node, j))
        sig = _Sig(row, per_node, [seen[node] for node in per_node], k, self._total_of(demands), tasks)
        if len(self._sigs) > SIGS_MAX:
            self._sigs.clear()
        return sig

    def _allocate_plain(self: Ledger, job: str, placement: Sequence[int],
                        demands: Sequence[np.ndarray]) -> Allocation | None:
        """:meth:`~.ledger.Ledger.allocate` of tasks that all demand one read-only row of whole GPUs (or none), on
        a ledger without groups: the same free rows, devices, counts and allocation, from the placement's
        signature (:class:`_Sig`, kept per placement and row) instead of grouping the tasks again. None (nothing
        changed, the version not bumped) when it does not apply or something does not fit: the general path
        then decides, and refuses with its own message."""
        row = demands[0]
        n = len(demands)
        if n != len(placement) or self.group_of_node or job in self.allocations:
            return None
        for d in demands:
            if d is not row:
                return None
        key = (tuple(placement), id(row))
        sig = self._sigs.get(key)
        if sig is None:
            sig = self._plain_sig(job, placement, row, n)
            if sig is None:
                return None
            self._sigs[key] = sig
        free, dev = self.free, self.device_free
        k = sig.k
        takes: list[list[int]] = []
        rows: list[list[float]] = []
        for node, cnt, need in zip(sig.nodes, sig.counts, sig.needs):
            for a, b in zip(need, free[node].tolist()):
                if a > b + EPS:
                    return None
            if k:
                vals = dev[node].tolist()
                idle = [i for i, x in enumerate(vals) if x >= _WHOLE_FREE]
                m = cnt * k
                if len(idle) < m:
                    return None
                del idle[m:]
                for i in idle:
                    vals[i] = 0.0
                takes.append(idle)
                rows.append(vals)
        self.version += 1
        self._touch(sig.nodes)
        node_jobs, dev_shares, dev_jobs = self._node_jobs, self.dev_shares, self.dev_jobs
        for pos, (node, d) in enumerate(zip(sig.nodes, sig.sums)):
            free[node] -= d
            held = node_jobs.get(node)
            if held is None:
                held = node_jobs[node] = set()
            held.add(job)
            if k:
                took = takes[pos]
                if len(took) == 1:
                    dev[node, took[0]] = 0.0  # (the one device taken: rows[pos] differs from the row only there)
                else:
                    dev[node] = rows[pos]
                for i in took:
                    shares = dev_shares.get((node, i))
                    if shares is None:
                        dev_shares[(node, i)] = {job: 1.0}
                    else:
                        shares[job] = shares.get(job, 0.0) + 1.0
                if len(took) == 1:
                    dev_jobs[node, took[0]] += 1
                else:  # (the row read once and written back once)
                    c = dev_jobs[node].tolist()
                    for i in took:
                        c[i] += 1
                    dev_jobs[node] = c
        if not k:
            slots: tuple[TaskSlot, ...] | list[TaskSlot] = [task_slot(node, ()) for node, _ in sig.tasks]
        elif sig.grouped:  # each node's tasks one after the other: the node's slots in one look-up
            slots = ()
            for node, took in zip(sig.nodes, takes):
                key = (node, k, *took)
                hit = _NODE_SLOTS.get(key)
                if hit is None:
                    hit = _node_slots(key, node, k, took)
                slots += hit
        else:
            at = dict(zip(sig.nodes, takes))
            slots = []
            for node, j in sig.tasks:
                idx = tuple(at[node][j * k:(j + 1) * k])
                slots.append(task_slot(node, _WHOLE.get(idx) or _whole(idx)))
        alloc = Allocation(job, tuple(slots), sig.total)  # type: ignore[arg-type]
        self.allocations[job] = alloc
        self._per_node[job] = dict(sig.per_node)
        return alloc

    def _release_plain(self: Ledger, job: str, alloc: Allocation) -> bool:
        """:meth:`~.ledger.Ledger.release` of a plain allocation (no group, no pack) whose every device is a whole
        GPU held by this job alone: nobody inherits, so each device is simply given back. False (nothing
        changed) when that does not hold: the general path then runs."""
        dev_shares = self.dev_shares
        on: dict[int, list[int]] = {}  # node -> the devices the job holds there
        for s in alloc.slots:
            node = s.node
            for i, share in s.devices:
                shares = dev_shares.get((node, i))
                if share != 1.0 or shares is None or len(shares) != 1 or job not in shares:
                    return False
                idx = on.get(node)
                if idx is None:
                    on[node] = [i]
                else:
                    idx.append(i)
        self.version += 1
        self.grown += 1  # room grows: placements that failed may fit now
        del self.allocations[job]
        per_node = self._per_node.pop(job)
        node_jobs = self._node_jobs
        for node in per_node:
            held = node_jobs.get(node)
            if held is not None:
                held.discard(job)
                if not held:
                    del node_jobs[node]
        self._touch(set(per_node))  # (a slot's node is a key of per_node: the nodes its devices are on too)
        dev, counts = self.device_free, self.dev_jobs
        for node, idx in on.items():
            for i in idx:
                del dev_shares[(node, i)]
            if len(idx) == 1:
                dev[node, idx[0]] += 1.0
                counts[node, idx[0]] -= 1
            else:  # (each row read once and written back once: the same float additions)
                vals, c = dev[node].tolist(), counts[node].tolist()
                for i in idx:
                    vals[i] += 1.0
                    c[i] -= 1
                dev[node] = vals
                counts[node] = c
        free = self.free
        for node, d in per_node.items():
            free[node] += d
        np.minimum(free, self.capacity, out=free)
        return True

    def _take_all(self: Ledger, job: str, placement: Sequence[int], demands: Sequence[np.ndarray]) -> list[TaskSlot]:
        """Each task's devices, in task order: :func:`~.alloc.take_many` on each node's device row, read once
        and written back once all fit (the same devices as :func:`~.alloc.take_devices` task by task);
        all-or-nothing (``AllocationError`` leaves every device row as it was)."""
        col = self._gpu_col
        if col is None:
            return [task_slot(node, ()) for node in placement]
        if len(placement) == 1:  # (most jobs: one task)
            node, g = placement[0], demands[0].item(col)
            if g <= EPS:
                return [task_slot(node, ())]
            vals = self.device_free[node].tolist()
            got = take_from(vals, g)
            if got is None:
                self._refuse_devices(job, placement, demands)
            self.device_free[node] = vals
            return [task_slot(node, got)]  # type: ignore[arg-type]
        shares: dict[int, list[float]] = {}
        for node, d in zip(placement, demands):
            got = shares.get(node)
            if got is None:
                shares[node] = [d.item(col)]
            else:
                got.append(d.item(col))
        rows: dict[int, list[float]] = {}
        taken: dict[int, Iterator[tuple[tuple[int, float], ...]]] = {}
        for node, gs in shares.items():
            vals = self.device_free[node].tolist()
            got = take_many(vals, gs)
            if got is None:
                self._refuse_devices(job, placement, demands)
            rows[node] = vals
            taken[node] = iter(got)  # type: ignore[arg-type]
        for node, vals in rows.items():
            self.device_free[node] = vals
        return [task_slot(node, next(taken[node])) for node in placement]

    def _refuse_devices(self: Ledger, job: str, placement: Sequence[int], demands: Sequence[np.ndarray]) -> NoReturn:
        """Raise the ``AllocationError`` of the first task, in task order, whose GPU share does not fit (on the
        devices the tasks before it on its node left)."""
        col = self._gpu_col
        assert col is not None
        rows: dict[int, list[float]] = {}
        for node, d in zip(placement, demands):
            vals = rows.get(node)
            if vals is None:
                vals = rows[node] = self.device_free[node].tolist()
            g = d.item(col)
            if take_from(vals, g) is None:
                raise AllocationError(
                    f"job {job!r}: node {node} cannot hold a GPU share of {g:g} "
                    f"(device free fractions: {[round(float(x), 3) for x in vals if x >= 0]})"
                )
        raise AssertionError("take_many refused devices that take_from gives task by task")
