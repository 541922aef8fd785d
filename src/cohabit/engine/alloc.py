"""What the ledger hands out: task slots and allocations, and the per-node fit arithmetic
shared by the ledger and policies' scratch plans (``policies.placement.Draft``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

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


def refit(fit: np.ndarray, free: np.ndarray, device_free: np.ndarray, demand: np.ndarray, gpu_col: int | None,
          nodes: Iterable[int]) -> np.ndarray:
    """:func:`fit_counts` of ``demand`` on ``free`` / ``device_free``, given ``fit``, the counts on arrays that
    differ from these only in the rows ``nodes``: a new array with just those rows recomputed.

    The same arithmetic per node in Python floats (IEEE doubles, as numpy's float64), so the result
    equals ``fit_counts(free, device_free, demand, gpu_col)`` exactly; an allocation or release touches
    a node or two, so this costs a few microseconds where the whole matrix costs ten or more."""
    need, lo, k = _plan(demand, gpu_col)
    out = fit.copy()
    if not need:
        return out
    floor = math.floor
    for node in nodes:
        row = free[node].tolist()
        per = min([floor((row[i] + EPS) / v) for i, v in need])
        if lo is not None:
            dev = sum([x >= lo for x in device_free[node].tolist()]) // k
            if dev < per:
                per = dev
        out[node] = per if per > 0 else 0
    return out


#: id(demand row) -> (row, plan): a read-only row's plan for :func:`refit` (the row is kept alive, so its id stays its own)
_PLANS: dict[int, tuple[np.ndarray, tuple[list[tuple[int, float]], float | None, int]]] = {}


def _plan(demand: np.ndarray, gpu_col: int | None) -> tuple[list[tuple[int, float]], float | None, int]:
    """``(needed columns and amounts, the free fraction a device must have (None: no GPU), devices per
    task)`` of a demand row, as :func:`fit_counts` reads it."""
    hit = _PLANS.get(id(demand))
    if hit is not None and hit[0] is demand and hit[1][3] == gpu_col:  # type: ignore[misc]
        return hit[1][:3]  # type: ignore[return-value]
    need = [(i, v) for i, v in enumerate(demand.tolist()) if v > EPS]
    g = float(demand[gpu_col]) if gpu_col is not None else 0.0
    lo = None if g <= EPS else (1.0 - EPS if g >= 1.0 - EPS else g - EPS)
    k = int(round(g)) if g >= 1.0 - EPS else 1
    plan = (need, lo, k)
    if not demand.flags.writeable:
        if len(_PLANS) > 4096:
            _PLANS.clear()
        _PLANS[id(demand)] = (demand, (*plan, gpu_col))  # type: ignore[assignment]
    return plan


def take_devices(row: np.ndarray, g: float) -> tuple[tuple[int, float], ...] | None:
    """Reserve GPU share ``g`` on one node's device row (mutated); None if it does not fit.

    Whole GPUs take fully free devices (lowest index first); a fraction takes
    the best-fitting device (least free space that still fits) (:func:`take_from`).
    """
    if g <= EPS:
        return ()
    vals = row.tolist()  # a node has few GPUs: plain Python beats numpy calls here
    got = take_from(vals, g)
    if got:
        for i, _ in got:
            row[i] = vals[i]
    return got


def take_from(vals: list[float], g: float) -> tuple[tuple[int, float], ...] | None:
    """:func:`take_devices` on a node's device row as a Python list (mutated; the same float arithmetic):
    a caller placing several tasks on one node reads the row once and writes it back once."""
    if g <= EPS:
        return ()
    if g < 1.0 - EPS:
        best, room = -1, 2.0
        for i, x in enumerate(vals):
            if g - EPS <= x < room:
                best, room = i, x
        if best < 0:
            return None
        vals[best] -= g
        return ((best, g),)
    k = int(round(g))
    whole = [i for i, x in enumerate(vals) if x >= 1.0 - EPS][:k]
    if len(whole) < k:
        return None
    for i in whole:
        vals[i] = 0.0
    return _WHOLE.get(tuple(whole)) or _whole(tuple(whole))


def take_many(vals: list[float], shares: list[float]) -> list[tuple[tuple[int, float], ...]] | None:
    """:func:`take_from` for each of ``shares`` in turn on one node's device row ``vals`` (a job's tasks on
    that node, in task order); None if one does not fit (``vals`` is then partly taken: the caller drops it).
    Whole-GPU tasks take the lowest-index free devices one after the other, so when every share is whole
    (or none) they are the consecutive runs of one list of the free devices: one scan for all."""
    lo, hi = EPS, 1.0 - EPS
    for g in shares:
        if lo < g < hi:  # a fraction: best fit depends on what the tasks before took, task by task
            out = []
            for g in shares:
                got = take_from(vals, g)
                if got is None:
                    return None
                out.append(got)
            return out
    free = [i for i, x in enumerate(vals) if x >= hi]
    ks = [int(round(g)) if g > lo else 0 for g in shares]
    if sum(ks) > len(free):
        return None
    taken: list[tuple[tuple[int, float], ...]] = []
    pos = 0
    for k in ks:
        if k == 0:
            taken.append(())
            continue
        idx = tuple(free[pos:pos + k])
        pos += k
        for i in idx:
            vals[i] = 0.0
        taken.append(_WHOLE.get(idx) or _whole(idx))
    return taken


#: device indices -> ``((i, 1.0), ...)``: the devices a whole-GPU task takes (one tuple per distinct set)
_WHOLE: dict[tuple[int, ...], tuple[tuple[int, float], ...]] = {}


def _whole(idx: tuple[int, ...]) -> tuple[tuple[int, float], ...]:
    got = _WHOLE[idx] = tuple([(i, 1.0) for i in idx])
    return got


def task_slot(node: int, devices: tuple[tuple[int, float], ...]) -> TaskSlot:
    """``TaskSlot(node, devices)``, one shared object per distinct slot (slots are immutable and compared by
    value; making a frozen dataclass costs more than looking one up)."""
    key = (node, devices)
    hit = _SLOTS.get(key)
    if hit is None:
        if len(_SLOTS) > 65536:
            _SLOTS.clear()
        hit = _SLOTS[key] = TaskSlot(node, devices)
    return hit


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
        """The ``(node, device)`` pairs its slots hold; kept per slot tuple of at most ``DEVICES_SLOTS`` tasks (the
        ledger shares one tuple per node and devices taken: a resumed job often gets the same; at most
        ``DEVICES_MAX`` kept, as larger or more tuples held memory for few hits)."""
        slots = self.slots
        hit = _DEVICES.get(id(slots))
        if hit is not None and hit[0] is slots:
            return hit[1]
        devs = frozenset([(s.node, d) for s in slots for d, _ in s.devices])
        if len(slots) <= DEVICES_SLOTS:
            if len(_DEVICES) >= DEVICES_MAX:
                _DEVICES.clear()
            _DEVICES[id(slots)] = (slots, devs)  # (keeps the tuple alive: its id stays its own)
        return devs


class AllocationError(ValueError):
    pass


#: Allocation.devices is kept for slot tuples of at most this many tasks, and for at most DEVICES_MAX tuples
DEVICES_SLOTS = 8
DEVICES_MAX = 1024

#: id(a tuple of task slots) -> (the tuple, Allocation.devices of it)
_DEVICES: dict[int, tuple[tuple[TaskSlot, ...], frozenset[tuple[int, int]]]] = {}

#: (node, devices) -> the one TaskSlot of that value (see :func:`task_slot`)
_SLOTS: dict[tuple[int, tuple[tuple[int, float], ...]], TaskSlot] = {}
