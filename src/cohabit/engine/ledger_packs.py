"""Packs in the ledger (:class:`~cohabit.engine.ledger.Ledger` inherits these methods).

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

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from .alloc import EPS, Allocation, AllocationError, TaskSlot

if TYPE_CHECKING:
    from .ledger import Ledger


class PackLedger:
    """The ledger's pack methods; mixed into :class:`~cohabit.engine.ledger.Ledger`, whose state they use."""

    def device_memory(self: Ledger, device: tuple[int, int]) -> float:
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

    def pack_member_memory(self: Ledger, device: tuple[int, int], demand: np.ndarray) -> float:
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

    def _has_gpus(self: Ledger, node: int) -> bool:
        return self._gpu_col is not None and self.capacity[node, self._gpu_col] > EPS

    def _pack_vectors(self: Ledger, device: tuple[int, int], demands: Sequence[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
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

    def _pack_cpu(self: Ledger, device: tuple[int, int]) -> float:
        members = self.packs.get(device)
        if not members or self._cpu_col is None:
            return 0.0
        return float(sum(self._per_node[members[0]].values())[self._cpu_col])

    def pack_blocked(self: Ledger, device: tuple[int, int], joining: Sequence[tuple[str, np.ndarray]]) -> str | None:
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

    def allocate_pack(self: Ledger, job: str, device: tuple[int, int], demand: np.ndarray) -> Allocation:
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

    def _release_pack(self: Ledger, job: str, alloc: Allocation, per_node: dict[int, np.ndarray]) -> list[str]:
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
