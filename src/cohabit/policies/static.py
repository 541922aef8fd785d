"""Static partitions ("isolated"): every tenant, or every job, runs only inside a fixed slice.

The baseline that cluster managers without a shared scheduler give: carve the
machines up front (as one Docker Swarm per team, or a Swarm service pinned
to its own nodes by placement constraints) and let each slice run its own
FIFO queue. It is the "static partition" / "isolated" baseline of Dorm (Sun et
al., "Dorm: Dynamically Partitioning Cluster Resources for Distributed
Machine Learning", 2017) and of the Harmony papers. Two modes:

* ``by="tenant"`` (default): the nodes, in index order, are cut into
  contiguous slices, one per tenant, **sized in proportion to the tenant's
  weight** by the largest-remainder method, every tenant getting at least one
  node while there are enough nodes. With ``slices={"alice": 3, "bob": 1}``
  the partition is fixed from the first decision; the key ``"*"`` names a
  slice shared by every tenant not listed (without it, unlisted tenants never
  run). Without ``slices`` the tenants are learned as they arrive: the nodes
  are re-apportioned among the tenants seen so far (weight = the largest
  ``spec.weight`` of the tenant's jobs) when a new tenant appears, and at no
  other time. Running jobs are never moved; a node still holding another
  tenant's job is not used until that job ends, so tenants never share a
  node. With one tenant the slice is the whole cluster (FIFO).
* ``by="job"``: each job is isolated on whole machines: it gets the fewest
  empty nodes that hold it and no other job may use them until it ends.

Inside a slice jobs start in arrival order, consolidated first; the head of a
slice's queue blocks that slice (``backfill=True`` lets later jobs start).
A job larger than its slice waits for ever (and is reported unfinished).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from ..engine.actions import Plan
from ..engine.job import JobView
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft
from .spread import NoFitMemo, QuietRounds, most_room_chooser, place_with, start_or_resume, waiting_by_tenant, waiting_in_order
from .params import build

BY = ("tenant", "job")
OTHERS = "*"


def apportion(n_nodes: int, weights: list[float]) -> list[int]:
    """Split ``n_nodes`` in proportion to ``weights`` (largest remainder; >= 1 each when possible)."""
    k = len(weights)
    if k == 0:
        return []
    floor_one = n_nodes >= k
    rest = n_nodes - (k if floor_one else 0)
    total = sum(weights)
    quota = [rest * w / total for w in weights]
    out = [int(math.floor(q)) for q in quota]
    left = rest - sum(out)
    for i in sorted(range(k), key=lambda i: (-(quota[i] - out[i]), i))[:left]:
        out[i] += 1
    return [o + 1 for o in out] if floor_one else out


class StaticPartition(BasePolicy):
    """Fixed per-tenant node slices, or whole machines per job (see module doc)."""

    def __init__(self, by: str = "tenant", slices: Mapping[str, float] | None = None,
                 backfill: bool = False) -> None:
        if by not in BY:
            raise ValueError(f"by must be one of {', '.join(BY)}, got {by!r}")
        if not isinstance(backfill, bool):
            raise ValueError(f"backfill must be True or False, got {backfill!r}")
        if slices is not None:
            if by != "tenant":
                raise ValueError(f"slices only apply to by='tenant', got by={by!r}")
            if not isinstance(slices, Mapping) or not slices:
                raise ValueError(f"slices must be a non-empty mapping of tenant to weight, got {slices!r}")
            for t, w in slices.items():
                if not isinstance(t, str) or not t:
                    raise ValueError(f"slices: tenant names must be non-empty strings, got {t!r}")
                if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
                    raise ValueError(f"slices[{t!r}] must be a finite weight > 0, got {w!r}")
        self.by = by
        self.backfill = backfill
        self._fixed = dict(slices) if slices is not None else None
        self._weights: dict[str, float] = dict(self._fixed or {})
        self._owner: np.ndarray | None = None  # node -> slice index (-1: no slice)
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._dirty = False
        self._foreign: dict[str, tuple[int, ...]] = {}  # job -> nodes, for jobs left outside their slice
        self._quiet = QuietRounds()
        # per slice: (its usable nodes, the memo key naming them), kept until the slices or the foreign
        # jobs change (None: to be rebuilt)
        self._masks: dict[str, tuple[np.ndarray, tuple[str, bytes]]] | None = None
        self._usable = np.zeros(0, dtype=bool)
        # without backfill, across rounds: slice -> the job whose failure blocked it (it fails again while no
        # job left the slice's nodes), the slices each running job's nodes are in, and the running set's
        # journal mark they were read at (see _sync_blocked)
        self._still_blocked: dict[str, str] = {}
        self._job_slices: dict[str, tuple[str, ...]] = {}
        self._planned: dict[str, str] = {}  # job -> slice, of the starts the last round planned
        self._mark: int | None = None
        self.name = "static" + ("-job" if by == "job" else "") + ("+backfill" if backfill else "")

    # ----------------------------------------------------------------- slices
    def slices(self) -> dict[str, tuple[int, ...]]:
        """The current slices: name -> node indices (empty before the first decision)."""
        if self._owner is None:
            return {}
        return {name: tuple(int(i) for i in np.flatnonzero(self._owner == k)) for k, name in enumerate(self._names)}

    def slice_name(self, tenant: str) -> str | None:
        """The slice a tenant's jobs run in (None: the tenant has none)."""
        if tenant in self._weights:
            return tenant
        return OTHERS if self._fixed is not None and OTHERS in self._fixed else None

    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        self._see(job)

    def _see(self, job: JobView) -> None:
        """Learn a tenant (``slices`` not given): a new one re-cuts the slices at the next decision."""
        if self._fixed is not None:
            return
        t, w = job.spec.tenant, job.spec.weight
        if t not in self._weights:
            self._weights[t] = w
            self._dirty = True
        elif w > self._weights[t]:
            self._weights[t] = w  # a heavier job of a known tenant: counts at the next re-slice

    def _update_slices(self, view: ClusterView, waiting: list[JobView]) -> None:
        if self._owner is None:
            for job in waiting:  # (when the arrival hook was not called)
                self._see(job)
        elif not self._dirty:
            return
        self._dirty = False
        self._masks = None
        n_nodes = view.capacity.shape[0]
        self._names = list(self._weights)
        self._index = {name: k for k, name in enumerate(self._names)}
        sizes = apportion(n_nodes, [self._weights[n] for n in self._names])
        owner = np.repeat(np.arange(len(sizes)), sizes) if sizes else np.zeros(0, dtype=np.int64)
        self._owner = np.concatenate([owner, np.full(n_nodes - owner.size, -1)])
        # running jobs now outside their tenant's slice stay where they are; nobody else may
        # start on their nodes until they leave
        for job in view.running.values():
            name = self.slice_name(job.spec.tenant)
            k = self._index.get(name, -1) if name is not None else -1
            if (self._owner[list(job.placement)] != k).any():
                self._foreign[job.id] = tuple(set(job.placement))

    # ----------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Plan:
        if not view.pending and not view.paused:
            return []
        if self.by == "job":
            return self._decide_isolated(view, waiting_in_order(view))
        if self.backfill:
            return self._decide_slices(view)
        # without backfill a round only tries each tenant's head in its slice: skip it when it would plan
        # nothing again (a new tenant, re-cutting the slices, has a new head; foreign jobs leave by a release)
        if not self._dirty and self._quiet.still(view):
            return []
        plan = self._decide_slices(view)
        self._quiet.planned(view, plan)
        return plan

    def _decide_slices(self, view: ClusterView) -> Plan:
        if self._owner is None:
            self._update_slices(view, list(waiting_in_order(view)))
        else:
            self._update_slices(view, [])
        assert self._owner is not None
        gone = [jid for jid in self._foreign if jid not in view.running]
        if gone:
            for jid in gone:
                del self._foreign[jid]
            self._masks = None
        if self._masks is None:  # the slices or the foreign jobs changed: every slice's nodes afresh
            self._usable = np.ones(view.capacity.shape[0], dtype=bool)
            for nodes in self._foreign.values():
                self._usable[list(nodes)] = False
            self._masks = {}
            self._still_blocked.clear()
            self._mark = None  # (the slices' nodes may have changed: learn every running job's slices afresh)
        usable, masks = self._usable, self._masks
        memo_blocked = not self.backfill and self._sync_blocked(view)
        still = self._still_blocked
        draft = Draft(view)
        memo = NoFitMemo()
        blocked: set[str] = set()
        plan: Plan = []
        # the tenants' queues merged in waiting order; a tenant whose slice is blocked drops out
        queues = waiting_by_tenant(view)
        if memo_blocked and still:
            # a slice whose blocking job still waits is blocked from the start (that job is still its first):
            # its tenants' entries would only be skipped, so they are left out of the merge, unless some
            # waiting tenant has no slice (the loop learns it, in queue order)
            slice_of = {t: self.slice_name(t) for t in queues}
            if all(name is not None and name in self._index for name in slice_of.values()):
                pending = view.pending
                blocked.update(name for name, jid in still.items() if jid in pending)
                if len(blocked) == len(self._names):
                    return plan
                heap = [(*next(q), t) for t, q in queues.items() if slice_of[t] not in blocked]
            else:
                heap = [(*next(q), t) for t, q in queues.items()]
        else:
            heap = [(*next(q), t) for t, q in queues.items()]
        heapq.heapify(heap)
        while heap:
            _, job, tenant = heapq.heappop(heap)
            name = self.slice_name(tenant)
            if name is None or name not in self._index:
                self._see(job)  # a tenant the arrival hook did not show: sliced next time
                _push_next(heap, queues[tenant], tenant)
                continue
            if name in blocked:
                continue  # (and the tenant's later jobs: they are in the same slice)
            if memo_blocked and still.get(name) == job.id:  # failed here before, and no room came back since
                blocked.add(name)
                if len(blocked) == len(self._names):
                    break
                continue
            hit = masks.get(name)
            if hit is None:
                m = (self._owner == self._index[name]) & usable
                hit = masks[name] = (m, (name, m.tobytes()))  # (the nodes themselves key placement memos)
            mask, mask_key = hit
            n = view.target_workers(job)
            p = None
            # (without backfill a failure blocks the slice: the memo would never be asked again)
            if not (self.backfill and memo.known_to_fail(view, job, n, scope=name)):
                p = place_with(draft, job, most_room_chooser, n_workers=n, mask=mask, mask_key=mask_key)
            if p is None:
                if self.backfill:
                    memo.failed(view, job, n, scope=name)
                else:
                    if memo_blocked:
                        still[name] = job.id
                    blocked.add(name)
                    if len(blocked) == len(self._names):
                        break
                    continue
            else:
                plan.append(start_or_resume(job, p))
                still.pop(name, None)
                if memo_blocked:  # its slice, should it end before the next round learns its nodes
                    self._planned[job.id] = name
            _push_next(heap, queues[tenant], tenant)
        return plan

    def _sync_blocked(self, view: ClusterView) -> bool:
        """Keep :attr:`_still_blocked` true: drop the slices where room may have come back since the last
        round (a job that ran on their nodes stopped running: the running set's journal names it), and
        learn which slices newly running jobs hold. False (and nothing kept) while jobs are paused, or
        without a journal: then every slice's first job is tried by placement, as without this memo.

        Without backfill a slice's first waiting job that failed to fit fails again as long as its slice's
        usable nodes have not gained room: jobs only take room there, the slices' nodes (``_masks``) are
        kept, and tenants never share a node, so only a job leaving a node of the slice gives room back."""
        changed = view.running_changes(self._mark) if self._mark is not None else None
        self._mark = view.running_mark
        running = view.running
        owner, names = self._owner, self._names
        assert owner is not None
        if changed is None or view.paused:
            self._still_blocked.clear()
            self._job_slices = {}
            self._planned = {}
            changed = list(running)
        planned, self._planned = self._planned, {}
        for jid, name in planned.items():  # the last round's starts: one that is not running now was refused
            if jid not in running:        # or has already ended: its slice may have room again
                self._still_blocked.pop(name, None)
        for jid in dict.fromkeys(changed):
            job = running.get(jid)
            if jid not in planned:  # (a planned start enters the journal once: nothing of it to forget)
                held = self._job_slices.pop(jid, None)
                if held is None and job is None:  # it ran and left unseen (a start this policy did not plan)
                    self._still_blocked.clear()
                for name in held or ():  # it left those nodes (or moved: as if it left)
                    self._still_blocked.pop(name, None)
            if job is not None:
                self._job_slices[jid] = tuple({names[k] for n in job.placement if (k := int(owner[n])) >= 0})
        return self._mark is not None and not view.paused

    def _decide_isolated(self, view: ClusterView, waiting: Iterable[JobView]) -> Plan:
        # a node nothing runs on has all its capacity free (every job holds some of something)
        empty = (view.free >= view.capacity - 1e-9).all(axis=1)
        draft = Draft(view)
        memo = NoFitMemo()
        plan: Plan = []
        for job in waiting:
            n = view.target_workers(job)
            p = None
            if not memo.known_to_fail(view, job, n):
                p = place_with(draft, job, most_room_chooser, n_workers=n, mask=empty)
            if p is None:
                if not self.backfill:
                    break
                memo.failed(view, job, n)
                continue
            empty[list(p)] = False  # (the empty set only shrinks, so the memo stays valid)
            plan.append(start_or_resume(job, p))
        return plan


def _push_next(heap: list[tuple[int, JobView, str]], queue: Iterator[tuple[int, JobView]], tenant: str) -> None:
    entry = next(queue, None)
    if entry is not None:
        heapq.heappush(heap, (entry[0], entry[1], tenant))


def make(oracle: bool = False, **params: object) -> StaticPartition:
    return build(StaticPartition, params, policy="static")
