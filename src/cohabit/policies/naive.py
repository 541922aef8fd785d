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
import operator
from typing import NamedTuple

import numpy as np

from ..engine.actions import Colocate, Placement, Plan
from ..engine.job import JobView
from ..engine.ledger import take_devices
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft
from .spread import NoFitMemo, QuietRounds, most_room_chooser, place_with, start_or_resume, waiting_in_order
from .params import build

LEDGER_MAX_SHARE = 4  # Ledger(max_share=4): the scheduler's limit of jobs per GPU device
_EPS = 1e-9
_ABSENT = 1 << 30  # the job count (and key) of a device slot a node does not have: always full


class _Devices:
    """The GPU devices' holders (read from the ledger through the view) plus what the plan being
    built adds.

    Per task shape it caches how many time-sharing tasks each node can take, and after a
    placement refreshes only the nodes it touched. The nodes a placement touches are worked on as
    Python lists (:class:`_Row`) and written back to the arrays by :meth:`flush` before any
    whole-array use. The arrays (the draft's free room handed out for writing, copies of the ledger's
    device rows) are made only then, or at once when the plan started jobs already: most rounds
    co-locate a job or two on rows read straight from the ledger and the pristine draft, and end."""

    def __init__(self, view: ClusterView, draft: Draft, started: list[tuple[JobView, Placement]],
                 limit: int, memo: CapsMemo | None = None) -> None:
        self.view = view
        # the caps of a round that has changed nothing yet equal the ledger's: kept across rounds in ``memo``
        # (read before ``draft.free``, which hands the draft's array out for writing: no longer pristine after)
        self._memo = memo if memo is not None and not started and draft.pristine else None
        self._taken = False  # this round took room or devices here (colocate, refresh): the caps are not the ledger's
        self.limit = limit
        self.g = view.gpu_col
        self._draft = draft
        self._made = False  # free, dev, exists, count below (see _make_arrays)
        self._holders = view.device_holders  # running jobs per device, in the order they took it
        self._extra: dict[tuple[int, int], list[str]] = {}
        self._rows: dict[int, _Row] = {}  # node -> Python lists (see _row)
        self._caps: dict[bytes, _Shape] = {}
        self._caps_id: dict[int, tuple[np.ndarray, _Shape]] = {}
        if started:
            self._make_arrays()
        for job, placement in started:  # replay this plan's starts as the draft took them
            share = float(view.demand_vector(job)[self.g]) if self.g is not None else 0.0
            for node in placement[: len(placement) - job.spec.num_ps]:
                for i, _ in take_devices(self.dev[node], share) or ():
                    self._add((node, i), job.id)

    def _make_arrays(self) -> None:
        """The working arrays: the draft's scratch array (non-GPU room and owned GPU shares), the devices' free
        shares, which devices exist and the jobs per device (the running ones, then this plan's)."""
        view = self.view
        self.free = self._draft.free
        self.dev = view.device_free.copy()
        self.exists = self.dev >= 0
        self.count = view.device_jobs.copy()
        self._made = True

    def _row(self, node: int) -> _Row:
        """``node``'s working copy as Python lists (built on first use; see :class:`_Row`)."""
        row = self._rows.get(node)
        if row is None:
            if self._made:
                count, dev = self.count[node].tolist(), self.dev[node].tolist()
                exists = self.exists[node].tolist()
                free = self.free[node].tolist()
            else:  # (the ledger's rows and the draft's as they are: nothing of this round was written back yet)
                view = self.view
                count, dev = view.device_jobs[node].tolist(), view.device_free[node].tolist()
                exists = [x >= 0 for x in dev]
                free = self._draft.free_now[node].tolist()
            keys = list(zip(count, map(operator.neg, dev), range(len(dev))))
            if not all(exists):  # an absent device counts as full: never picked, never open
                keys = [k if e else (_ABSENT, 0.0, k[2]) for k, e in zip(keys, exists)]
                count = [c if e else _ABSENT for c, e in zip(count, exists)]
            row = self._rows[node] = _Row(count, dev, keys, free, [sum(map(self.limit.__gt__, count))])
        return row

    def _add(self, key: tuple[int, int], job: str) -> None:
        """Record that ``job`` (of this plan) holds device ``key``."""
        extra = self._extra.setdefault(key, [])
        if job not in extra:
            extra.append(job)
            row = self._rows.get(key[0])
            if row is not None:  # the row's list is the count now (written back by flush)
                i = key[1]
                row.count[i] += 1
                if row.count[i] == self.limit:
                    row.open[0] -= 1
                row.keys[i] = (row.count[i], -row.dev[i], i)
            else:
                self.count[key] += 1

    def flush(self) -> None:
        """Write the rows back into the arrays and drop them (before whole-array use, and before
        the draft places a job on ``free``: rows are rebuilt from the arrays when next used)."""
        if self._rows and not self._made:
            self._make_arrays()
        for node, row in self._rows.items():
            self.count[node] = row.count
            self.dev[node] = row.dev
            self.free[node] = row.free
        self._rows.clear()

    def _node_caps(self, rest: np.ndarray, per_task: int, rows: np.ndarray | slice) -> np.ndarray:
        self.flush()
        if not self._made:
            self._make_arrays()
        need = rest > _EPS
        free = self.free[rows]
        room = (np.floor((free[:, need] + _EPS) / rest[need]).min(axis=1) if need.any()
                else np.full(free.shape[0], 1 << 30))
        open_devs = ((self.count[rows] < self.limit) & self.exists[rows]).sum(axis=1)
        return np.minimum(room, open_devs // per_task).astype(np.int64)

    def _caps_for(self, w: np.ndarray) -> _Shape:
        by_id = self._caps_id.get(id(w))  # the view hands out one array per task group
        if by_id is not None and by_id[0] is w:
            return by_id[1]
        g = self.g
        assert g is not None
        fixed = _FIXED.get((id(w), g))
        if fixed is None or fixed[0] is not w:
            fixed = _fixed_terms(w, g)
        _, key, rest, per_task, cols, want = fixed
        hit = self._caps.get(key)
        if hit is None:
            memo = self._memo if not self._taken else None  # (nothing taken in this round: the ledger's caps)
            known = memo.get(self.view, key) if memo is not None else None
            caps, changed = known if known is not None else \
                (self._node_caps(rest, per_task, slice(None)).tolist(), set())
            hit = self._caps[key] = _Shape(w, rest, per_task, cols, caps, {}, want)
            for node in changed:  # (the other shapes' caps too: none is known yet in such a round)
                self._refresh_row(node, self._rows.get(node) or self._row(node))
            if memo is not None:
                memo.put(self.view, key, hit.cap)
        self._caps_id[id(w)] = (w, hit)
        return hit

    def colocate(self, job: JobView, n: int, w: np.ndarray) -> tuple[Placement, list[str]] | None:
        """Nodes for ``job``'s ``n`` workers (demand ``w`` each) sharing GPUs (lowest node index
        first), and the jobs already on the devices it will share; the room is taken. None if it
        does not fit."""
        g = self.g
        if g is None or job.spec.num_ps:
            return None
        shape = self._caps_for(w)
        self._taken = True
        cap = shape.cap
        # the lowest node that takes all n: capacities only shrink within a decision, so the
        # search for n resumes where it stopped last time
        first, end = shape.first.get(n, 0), len(cap)
        while first < end and cap[first] < n:
            first += 1
        shape.first[n] = first
        if first < end and n == 1 and shape.per_task == 1:
            return self._colocate_one(job.id, shape, first)
        if first < end:
            nodes = [first] * n
            touched = [first]
        else:
            if sum(cap) < n:
                return None
            nodes = _fill_index_order(cap, n)
            touched = sorted(set(nodes))
        hosts: list[str] = []
        want = shape.want
        limit, per_task, jid = self.limit, shape.per_task, job.id
        holders, extra, rows = self._holders, self._extra, self._rows
        for node in touched:
            k = n if len(touched) == 1 else nodes.count(node)
            row = rows.get(node) or self._row(node)
            count, dev, keys = row.count, row.dev, row.keys
            taken: dict[int, int] = {}
            owned = 0.0
            for _ in range(k):  # each task: the devices with fewest jobs, then most free room
                if per_task == 1:
                    best = min(keys)
                    chosen = (best[2],) if best[0] < limit else ()
                else:
                    chosen = tuple(c[2] for c in sorted(keys) if c[0] < limit)[:per_task]
                for i in chosen:
                    t = taken[i] = taken.get(i, 0) + 1
                    if not count[i] and dev[i] >= want - _EPS:
                        dev[i] -= want  # a device nobody holds: the guest owns it (the row is its record now)
                        owned += want
                    keys[i] = (count[i] + t, -dev[i], i)  # this job's own tasks count while it is placed
            for i in taken:
                for h in holders(node, i):
                    if h not in hosts:
                        hosts.append(h)
                mine = extra.get((node, i))
                if mine is None:
                    extra[(node, i)] = [jid]
                else:
                    for h in mine:
                        if h not in hosts:
                            hosts.append(h)
                    mine.append(jid)  # a job is placed once per decision: not in the list yet
                count[i] += 1
                if count[i] == limit:
                    row.open[0] -= 1
                keys[i] = (count[i], -dev[i], i)
            room = row.free
            for c, a in shape.cols:
                room[c] -= a * k
            if owned:
                room[g] -= owned
            self._refresh_row(node, row)
        return tuple(nodes), hosts

    def _colocate_one(self, jid: str, shape: _Shape, node: int) -> tuple[Placement, list[str]]:
        """:meth:`colocate` of a one-task job taking one device on ``node`` (most jobs): the same steps
        without the loops over nodes, tasks and devices."""
        row = self._rows.get(node) or self._row(node)
        count, dev, keys = row.count, row.dev, row.keys
        best = min(keys)  # the device with fewest jobs, then most free room
        hosts: list[str] = []
        owned = 0.0
        if best[0] < self.limit:
            i = best[2]
            want = shape.want
            if not count[i] and dev[i] >= want - _EPS:
                dev[i] -= want  # a device nobody holds: the guest owns it (the row is its record now)
                owned = want
            for h in self._holders(node, i):
                if h not in hosts:
                    hosts.append(h)
            mine = self._extra.get((node, i))
            if mine is None:
                self._extra[(node, i)] = [jid]
            else:
                for h in mine:
                    if h not in hosts:
                        hosts.append(h)
                mine.append(jid)
            count[i] += 1
            if count[i] == self.limit:
                row.open[0] -= 1
            keys[i] = (count[i], -dev[i], i)
        room = row.free
        for c, a in shape.cols:
            room[c] -= a * 1
        if owned:
            room[self.g] -= owned  # type: ignore[index]
        self._refresh_row(node, row)
        return (node,), hosts

    def refresh(self, nodes: list[int]) -> None:
        """Recompute the cached capacities of ``nodes`` after room there was taken (on the arrays:
        call :meth:`flush` before the draft takes it)."""
        self._taken = True
        for node in set(nodes):
            self._refresh_row(node, self._row(node))

    def _refresh_row(self, node: int, row: _Row) -> None:
        open_devs = row.open[0]  # devices below the limit (absent ones count as full)
        room_left = row.free
        floor = math.floor
        for shape in self._caps.values():
            room = min([floor((room_left[c] + _EPS) / a) for c, a in shape.cols] or [1 << 30])
            per = open_devs // shape.per_task
            shape.cap[node] = (room if room < per else per) if room > 0 and per > 0 else 0


class CapsMemo:
    """Per task shape, how many time-sharing tasks each node could take at the ledger's state of some earlier
    round (:meth:`_Devices._caps_for`), and that state's ``ClusterView.change_mark``: a later round copies them
    and recomputes only the nodes changed since (``ClusterView.nodes_changed_since``) instead of every node."""

    __slots__ = ("_view", "_known")

    #: more changed nodes than this: the caps are computed anew
    MAX_CHANGED = 32

    def __init__(self) -> None:
        self._view: ClusterView | None = None
        self._known: dict[bytes, tuple[object, list[int]]] = {}

    def get(self, view: ClusterView, key: bytes) -> tuple[list[int], set[int]] | None:
        """A copy of the caps of shape ``key`` and the nodes changed since they were made, or None."""
        hit = self._known.get(key) if view is self._view else None
        if hit is None:
            return None
        changed = view.nodes_changed_since(hit[0])
        if changed is None or len(changed) > self.MAX_CHANGED:
            return None
        return hit[1].copy(), changed

    def put(self, view: ClusterView, key: bytes, caps: list[int]) -> None:
        """Keep ``caps`` (of shape ``key`` at the ledger's state now; copied)."""
        if view is not self._view:
            self._view, self._known = view, {}
        self._known[key] = (view.change_mark, caps.copy())


class _Row(NamedTuple):
    """One node's working copy as Python lists: jobs per device (running and this plan's; an absent
    device counts as full), free share per device, per device the key ``(jobs, -free share,
    index)`` a task picks the smallest of (an absent device's key never qualifies), the node's
    free room per resource, and (one item) how many devices hold fewer jobs than the limit."""

    count: list[int]
    dev: list[float]
    keys: list[tuple[int, float, int]]
    free: list[float]
    open: list[int]


class _Shape(NamedTuple):
    """A worker demand, its non-GPU part, GPU devices per task, non-GPU columns, how many
    time-sharing tasks of it each node can take now, and where the search for n tasks resumes."""

    w: np.ndarray
    rest: np.ndarray
    per_task: int
    cols: list[tuple[int, float]]
    cap: list[int]
    first: dict[int, int]  # n -> no node below this index takes n tasks (capacities only shrink)
    want: float  # the GPU share one task takes of each device it uses


#: (id(worker demand row), GPU column) -> (row, its bytes, its non-GPU part, GPU devices per task, non-GPU
#: columns and amounts, GPU share per device): what a round's shape needs besides the capacities (the
#: view's rows are read-only and kept alive here, so their ids stay theirs)
_FIXED: dict[tuple[int, int], tuple[np.ndarray, bytes, np.ndarray, int, list[tuple[int, float]], float]] = {}


def _fixed_terms(w: np.ndarray, g: int) -> tuple[np.ndarray, bytes, np.ndarray, int, list[tuple[int, float]], float]:
    rest = w.copy()
    rest[g] = 0.0
    per_task = max(int(math.ceil(float(w[g]) - _EPS)), 1)
    cols = [(int(c), float(rest[c])) for c in np.flatnonzero(rest > _EPS)]
    out = (w, w.tobytes(), rest, per_task, cols, min(float(w[g]), 1.0))
    if not w.flags.writeable:
        if len(_FIXED) > 4096:
            _FIXED.clear()
        _FIXED[(id(w), g)] = out
    return out


def _fill_index_order(cap: list[int], n: int) -> list[int]:
    out: list[int] = []
    for node, c in enumerate(cap):
        if c > 0:
            out += [node] * min(c, n - len(out))
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
        self.name = "naive" + ("+backfill" if backfill else "")
        # without backfill a round only goes as far as the first job that can neither start nor be
        # co-located: skip it when it would plan nothing again (co-location room, like free room, only
        # shrinks until something is released)
        self._quiet = QuietRounds() if not backfill else None
        self._caps_memo = CapsMemo()

    def decide(self, view: ClusterView) -> Plan:
        if not view.pending and not view.paused:
            return []
        quiet = self._quiet
        return self._decide(view) if quiet is None else quiet.round(view, self._decide)

    def _decide(self, view: ClusterView) -> Plan:
        waiting = waiting_in_order(view)
        draft = Draft(view)
        memo = NoFitMemo()
        plan: Plan = []
        started: list[tuple[JobView, Placement]] = []
        devices: _Devices | None = None
        any_failed = False  # the memo is only consulted once something failed (backfill)
        g = view.gpu_col
        shares: dict[int, bool] = {}  # id(worker demand row) -> it demands some GPU
        for job in waiting:
            w, n = view.shape(job)  # per-worker demand and worker count, one cached lookup
            if devices is None:
                p = place_with(draft, job, most_room_chooser, n_workers=n)
                if p is not None:
                    plan.append(start_or_resume(job, p))
                    started.append((job, p))
                    continue
                # from here on every job goes through the device model (which also uses free GPUs)
                devices = _Devices(view, draft, started, self.max_jobs_per_gpu, self._caps_memo)
            gpu = shares.get(id(w))
            if gpu is None:
                gpu = shares[id(w)] = g is not None and float(w[g]) > _EPS
            if not gpu:  # nothing to share: an ordinary start on the room left
                devices.flush()  # the draft takes the room on the arrays
                p = place_with(draft, job, most_room_chooser, n_workers=n)
                if p is not None:
                    plan.append(start_or_resume(job, p))
                    devices.refresh(list(p))
                elif not self.backfill:
                    break
                continue
            got = None if any_failed and memo.known_to_fail(view, job, n) else devices.colocate(job, n, w)
            if got is None:
                if not self.backfill:
                    break
                memo.failed(view, job, n)
                any_failed = True
                continue
            nodes, hosts = got
            plan.append(Colocate((job.id, *hosts), nodes))
        return plan


def make(oracle: bool = False, **params: object) -> NaiveColocation:
    return build(NaiveColocation, params, policy="naive")
