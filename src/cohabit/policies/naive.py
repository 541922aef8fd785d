"""Naive co-location: share GPUs without any coordination or interference awareness.

The "just put it somewhere" baseline that interference-aware packers (Gandiva,
Xiao et al., OSDI'18; Lucid, Hu et al., ASPLOS'23; the Harmony papers)
measure themselves against: jobs start in arrival order on free GPUs
(consolidated first); when a job's GPUs are not free, it is started anyway by
time-sharing GPUs that are already in use (the ``Colocate`` action) on the
lowest-numbered nodes whose CPU, memory and other non-GPU resources can still
hold it. Which jobs end up sharing a GPU is never considered; the only limit
is ``max_jobs_per_gpu`` jobs on one device (the scheduler refuses more than 4).

On each node the devices are taken the way the ledger assigns them to a
time-sharing guest (fewest jobs first, then most free room), and a guest that
lands on a device nobody holds owns that share. The head of the queue blocks
the rest only when it cannot even be co-located (``backfill=True`` lets later
jobs go).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..engine.actions import Colocate, Placement, Plan
from ..engine.job import JobView
from ..engine.ledger import take_devices
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft
from .spread import NoFitMemo, most_room_chooser, place_with, start_or_resume, waiting_in_order
from .params import build

LEDGER_MAX_SHARE = 4  # Ledger(max_share=4): the scheduler's limit of jobs per GPU device
_EPS = 1e-9


class _Holders:
    """Which running jobs hold each GPU device, kept across decisions by the difference of the
    running set (a running job keeps its devices: naive co-location never moves a job)."""

    def __init__(self) -> None:
        self._view: ClusterView | None = None
        self.jobs: dict[tuple[int, int], list[str]] = {}
        self.count = np.zeros((0, 0), dtype=np.int64)
        self._keys: dict[str, tuple[tuple[int, int], ...]] = {}

    def sync(self, view: ClusterView) -> None:
        if view is not self._view:
            self._view, self.jobs, self._keys = view, {}, {}
            self.count = np.zeros(view.device_free.shape, dtype=np.int64)
        running = view.running
        for jid in self._keys.keys() - running.keys():
            for key in self._keys.pop(jid):
                holders = self.jobs[key]
                holders.remove(jid)
                self.count[key] -= 1
                if not holders:
                    del self.jobs[key]
        for jid in running.keys() - self._keys.keys():
            alloc = view.allocation_of(jid)
            keys = tuple(sorted(alloc.devices)) if alloc is not None else ()
            self._keys[jid] = keys
            for key in keys:
                self.jobs.setdefault(key, []).append(jid)
                self.count[key] += 1


class _Devices:
    """The device holders of :class:`_Holders` plus what the plan being built adds.

    Per task shape it caches how many time-sharing tasks each node can take,
    and after a placement refreshes only the nodes it touched."""

    def __init__(self, view: ClusterView, draft: Draft, started: list[tuple[JobView, Placement]],
                 limit: int, holders: _Holders) -> None:
        self.view = view
        self.limit = limit
        self.g = view.gpu_col
        self.free = draft.free  # the draft's scratch array: non-GPU room and owned GPU shares
        self.dev = view.device_free.copy()
        self.exists = self.dev >= 0
        holders.sync(view)
        self._base = holders.jobs
        self._extra: dict[tuple[int, int], list[str]] = {}
        self.count = holders.count.copy()
        self._caps: dict[bytes, _Shape] = {}
        for job, placement in started:  # replay this plan's starts as the draft took them
            share = float(view.demand_vector(job)[self.g]) if self.g is not None else 0.0
            for node in placement[: len(placement) - job.spec.num_ps]:
                for i, _ in take_devices(self.dev[node], share) or ():
                    self._add((node, i), job.id)

    def holders(self, key: tuple[int, int]) -> list[str]:
        return self._base.get(key, []) + self._extra.get(key, [])

    def _add(self, key: tuple[int, int], job: str) -> None:
        extra = self._extra.setdefault(key, [])
        if job not in extra:
            extra.append(job)
            self.count[key] += 1

    def _node_caps(self, rest: np.ndarray, per_task: int, rows: np.ndarray | slice) -> np.ndarray:
        need = rest > _EPS
        free = self.free[rows]
        room = (np.floor((free[:, need] + _EPS) / rest[need]).min(axis=1) if need.any()
                else np.full(free.shape[0], 1 << 30))
        open_devs = ((self.count[rows] < self.limit) & self.exists[rows]).sum(axis=1)
        return np.minimum(room, open_devs // per_task).astype(np.int64)

    def _caps_for(self, w: np.ndarray) -> _Shape:
        key = w.tobytes()
        hit = self._caps.get(key)
        if hit is None:
            g = self.g
            assert g is not None
            rest = w.copy()
            rest[g] = 0.0
            per_task = max(int(math.ceil(float(w[g]) - _EPS)), 1)
            cols = [(int(c), float(rest[c])) for c in np.flatnonzero(rest > _EPS)]
            hit = self._caps[key] = _Shape(w, rest, per_task, cols, self._node_caps(rest, per_task, slice(None)))
        return hit

    def colocate(self, job: JobView, n: int) -> tuple[Placement, list[str]] | None:
        """Nodes for ``job``'s ``n`` workers sharing GPUs (lowest node index first), and the
        jobs already on the devices it will share; the room is taken. None if it does not fit."""
        view = self.view
        g = self.g
        if g is None or job.spec.num_ps:
            return None
        shape = self._caps_for(view.demand_vector(job))
        cap = shape.cap
        first = int(np.argmax(cap >= n))
        if cap[first] >= n:
            nodes = [first] * n
        else:
            if cap.sum() < n:
                return None
            nodes = _fill_index_order(cap, n)
        hosts: list[str] = []
        want = min(float(shape.w[g]), 1.0)
        touched = sorted(set(nodes))
        for node in touched:
            k = nodes.count(node)
            count = self.count[node].tolist()
            dev = self.dev[node].tolist()
            devices = [i for i, e in enumerate(self.exists[node].tolist()) if e]
            taken: dict[int, int] = {}
            for _ in range(k):  # each task: the devices with fewest jobs, then most free room
                cand = sorted((count[i] + taken.get(i, 0), -dev[i], i) for i in devices)
                for _, _, i in [c for c in cand if c[0] < self.limit][: shape.per_task]:
                    taken[i] = taken.get(i, 0) + 1
                    if not count[i] and dev[i] >= want - _EPS:
                        dev[i] -= want  # a device nobody holds: the guest owns it
                        self.dev[node, i] = dev[i]
                        self.free[node, g] -= want
            for i in taken:
                hosts += [h for h in self.holders((node, i)) if h not in hosts]
                self._add((node, i), job.id)
            self.free[node] -= shape.rest * k
        self.refresh(touched)
        return tuple(nodes), hosts

    def refresh(self, nodes: list[int]) -> None:
        """Recompute the cached capacities of ``nodes`` after room there was taken."""
        for node in set(nodes):
            free = self.free[node].tolist()
            open_devs = sum(1 for c, e in zip(self.count[node].tolist(), self.exists[node].tolist())
                            if e and c < self.limit)
            for shape in self._caps.values():
                room = min((math.floor((free[c] + _EPS) / a) for c, a in shape.cols), default=1 << 30)
                shape.cap[node] = max(min(room, open_devs // shape.per_task), 0)


class _Shape(NamedTuple):
    """A worker demand, its non-GPU part, GPU devices per task, non-GPU columns, and how many
    time-sharing tasks of it each node can take now."""

    w: np.ndarray
    rest: np.ndarray
    per_task: int
    cols: list[tuple[int, float]]
    cap: np.ndarray


def _uses_gpu(view: ClusterView, job: JobView) -> bool:
    g = view.gpu_col
    return g is not None and float(view.demand_vector(job)[g]) > _EPS


def _fill_index_order(cap: np.ndarray, n: int) -> list[int]:
    out: list[int] = []
    for node in np.flatnonzero(cap > 0):
        out += [int(node)] * int(min(cap[node], n - len(out)))
        if len(out) == n:
            break
    return out


class NaiveColocation(BasePolicy):
    """Start on free GPUs; otherwise time-share busy GPUs, blind to interference (see module doc)."""

    def __init__(self, max_jobs_per_gpu: int = 2, backfill: bool = False) -> None:
        if isinstance(max_jobs_per_gpu, bool) or not isinstance(max_jobs_per_gpu, int) \
                or not 1 <= max_jobs_per_gpu <= LEDGER_MAX_SHARE:
            raise ValueError(f"max_jobs_per_gpu must be an integer in [1, {LEDGER_MAX_SHARE}], "
                             f"got {max_jobs_per_gpu!r}")
        if not isinstance(backfill, bool):
            raise ValueError(f"backfill must be True or False, got {backfill!r}")
        self.max_jobs_per_gpu = max_jobs_per_gpu
        self.backfill = backfill
        self._holders = _Holders()
        self.name = "naive" + ("+backfill" if backfill else "")

    def decide(self, view: ClusterView) -> Plan:
        waiting = waiting_in_order(view)
        if not waiting:
            return []
        draft = Draft(view)
        memo = NoFitMemo()
        plan: Plan = []
        started: list[tuple[JobView, Placement]] = []
        devices: _Devices | None = None
        for job in waiting:
            n = view.target_workers(job)
            if devices is None:
                p = place_with(draft, job, most_room_chooser, n_workers=n)
                if p is not None:
                    plan.append(start_or_resume(job, p))
                    started.append((job, p))
                    continue
                # from here on every job goes through the device model (which also uses free GPUs)
                devices = _Devices(view, draft, started, self.max_jobs_per_gpu, self._holders)
            if not _uses_gpu(view, job):  # nothing to share: an ordinary start on the room left
                p = place_with(draft, job, most_room_chooser, n_workers=n)
                if p is not None:
                    plan.append(start_or_resume(job, p))
                    devices.refresh(list(p))
                elif not self.backfill:
                    break
                continue
            got = None if memo.known_to_fail(view, job, n) else devices.colocate(job, n)
            if got is None:
                if not self.backfill:
                    break
                memo.failed(view, job, n)
                continue
            nodes, hosts = got
            plan.append(Colocate((job.id, *hosts), nodes))
        return plan


def make(oracle: bool = False, **params: object) -> NaiveColocation:
    return build(NaiveColocation, params, policy="naive")
