"""Pipelined groups in the ledger (:class:`~cohabit.engine.ledger.Ledger` inherits these methods).

Pipelined groups (Harmony, ``Colocate(mode="pipelined")``; the uncoordinated
``"naive"`` mode uses the same mechanism): a group *holds whole machines*. Its
key is ``(mode, sorted node indices)``; node sets of groups are disjoint. The
first member to arrive takes every node of the group out of ``free`` (it owns
them); later members join owning nothing (their tasks time-share the group's
machines, which is the point of co-location). When the owner leaves, the next
member inherits the machines (like a GPU guest inheriting a device); when the
last member leaves, the machines are free again. Nothing outside the group
can be placed on a held node, so the group never over-allocates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..spec.resources import Resources
from .alloc import EPS, Allocation, AllocationError, TaskSlot

if TYPE_CHECKING:
    from .ledger import Ledger


class GroupLedger:
    """The ledger's group methods; mixed into :class:`~cohabit.engine.ledger.Ledger`, whose state they use."""

    @staticmethod
    def group_key(mode: str, nodes: Sequence[int]) -> tuple[str, tuple[int, ...]]:
        return (mode, tuple(sorted(int(n) for n in nodes)))

    def group_blocked(self: Ledger, nodes: Sequence[int], key: tuple[str, tuple[int, ...]],
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

    def group_task_fits(self: Ledger, job: str, placement: Sequence[int], demands: Sequence[np.ndarray]) -> str | None:
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

    def allocate_group(self: Ledger, job: str, placement: Sequence[int], demands: Sequence[np.ndarray], *,
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

    def group_members(self: Ledger, key: tuple[str, tuple[int, ...]]) -> tuple[str, ...]:
        return tuple(self.groups.get(key, ()))

    def _release_group(self: Ledger, job: str, alloc: Allocation, per_node: dict[int, np.ndarray]) -> list[str]:
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
