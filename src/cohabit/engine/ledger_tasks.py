"""How a plain allocation takes its tasks' room, node by node (:class:`~cohabit.engine.ledger.Ledger` inherits
these methods): a job's tasks on one node are summed once per sequence of rows and take their devices from the
node's device row read once and written back once (``alloc.take_many``: whole GPUs in one scan), with the same
arithmetic, the same devices and the same refusal messages as one update per task."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NoReturn

import numpy as np

from .alloc import EPS, AllocationError, TaskSlot, take_from, take_many, task_slot

if TYPE_CHECKING:
    from .ledger import Ledger


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
