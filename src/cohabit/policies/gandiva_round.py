"""Gandiva's per-round scheduling (Xiao et al., OSDI'18; see :mod:`.gandiva`): one decision round
(:class:`GandivaRound`, over the job records of :mod:`.gandiva_records`):
start on free GPUs with node affinity, defragment by migration, pack a guest onto a host's GPUs,
unpack, and time-slice a size class when nothing fits."""

from __future__ import annotations

import math
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING

import numpy as np

from ..engine.actions import Migrate, Pause, Placement, Plan, Resume, Start
from ..engine.state import JobState
from ..engine.view import ClusterView
from .gandiva_pack import HostPacking
from .gandiva_queue import Group, WaitGroups
from .gandiva_records import EPS, JobRec, full_slices
from .placement import Draft, PristineMark, consolidated_first, fill

if TYPE_CHECKING:
    from .gandiva import Gandiva

MAX_DEFRAG_ATTEMPTS = 3  # per decision, so that a long queue keeps decisions fast
DEFRAG_CANDIDATES = 16  # target nodes considered per defragmentation attempt (most free GPUs first)


class GandivaRound(HostPacking):
    """One decision: the draft, the plan, and what its steps share."""

    def __init__(self, policy: Gandiva, view: ClusterView, plan: Plan) -> None:
        self.p = policy
        self.view = view
        # (no column sums: a round reads none (no could_fit, exhausted or Draft.place), so its reserves and
        # give-backs skip the numpy reduction they would keep them with)
        self.draft = Draft(view, sums=False)
        self.plan = plan
        self.log: list[tuple[str, str]] = []
        self.now = view.now
        self.g = view.gpu_col
        self.slice = policy.slice_now
        self.failed: set[tuple[bytes, int]] = set()  # shapes that found no free room this round
        self.failed_pack: set[tuple[int, float, str]] = set()
        self.failed_turn: set[tuple[tuple[bytes, int], bool]] = set()
        self.dirty: set[int] = set()  # nodes whose GPUs this plan already changed
        self.moved: set[str] = set()  # running jobs this plan already paused, migrated or packed onto
        self.migrations = 0
        self.defrag_attempts = 0
        self.lim = math.inf  # free GPUs + EPS when schedule started
        self._hosts_seen = False  # the kept host answers checked against the ledger (_see_hosts, on first use)
        tm = policy._turn_memo
        if tm is None or tm[0] is not view or tm[1] != view.room_version:
            tm = policy._turn_memo = (view, view.room_version, {})
        # failed turns of earlier rounds while the ledger's room only shrank (read and written only while the
        # plan is empty: the draft is then the ledger's free room; see _take_turns)
        self._turns_failed = tm[2]
        cap = policy._gpu_cap
        if cap is None or cap[0] is not view:  # (the capacity never changes: its largest GPU count kept per view,
            # and per node the GPUs an empty node has free, less EPS, for place's affinity ranking)
            col = view.capacity[:, self.g] if self.g is not None else np.zeros(0)
            cap = policy._gpu_cap = (view, float(col.max()) if col.size else 0.0, (col - EPS).tolist())
        self._gpu_cap = cap[1]
        self._full_gpu: list[float] = cap[2]

    # -------------------------------------------------------------- the round
    def schedule(self, queue: WaitGroups) -> None:
        """Every waiting job in round-robin order (longest waiting first): start it on free room
        (:meth:`place_free`), else pack it onto a host (:meth:`pack`); then time-slice for the rest.

        The jobs are visited group by group in key order (a heap of group heads, :mod:`.gandiva_queue`).
        A group whose shape found no free room (or whose GPUs exceed the free ones, which only fall in this
        loop) and whose packing key found no host (hosts only leave ``_idle`` in a round) is done: its
        later jobs would each do nothing, so they are not visited."""
        g = self.g
        lim = (float(self.draft.free_now[:, g].sum()) if g is not None else math.inf) + EPS  # free GPUs + EPS
        self.lim = lim
        # only the pack evaluation (before this loop) suspends waiting jobs in a round: those are skipped
        # (their turn comes later); the loop adds running jobs to ``moved`` (hosts, migrated jobs)
        moved, failed, failed_pack, idle, packing = self.moved, self.failed, self.failed_pack, self.p._idle, \
            self.p.packing
        # (a group whose GPUs exceed the free ones and that has no host to pack onto does nothing: not seeded)
        heap = [(r.key, grp.order, grp, r) for grp in queue.groups.values()
                if (lim >= grp.cls or (packing and grp.whole and idle.get(grp.ikey)))
                and (r := grp.after(None, moved))]
        heapify(heap)
        while heap:
            key, order, grp, rec = heappop(heap)
            can_place = lim >= grp.cls and grp.shape not in failed
            if not (can_place or (packing and grp.whole and grp.pack_key not in failed_pack and idle.get(grp.ikey))):
                continue  # nothing left to try for this group in this loop
            if can_place and self.place_free(rec):
                lim = (float(self.draft.free_now[:, g].sum()) if g is not None else math.inf) + EPS
            elif packing and grp.whole and grp.pack_key not in failed_pack and idle.get(grp.ikey):
                self.pack(rec)  # (a migration may have taken a host away: checked again)
            # (its next job is pushed only if the group may still try something: the test at its pop, made
            # now, holds then too, as the free GPUs only fall and the failures and hosts only go in this loop)
            if (lim >= grp.cls and grp.shape not in failed) \
                    or (packing and grp.whole and grp.pack_key not in failed_pack and idle.get(grp.ikey)):
                nxt = grp.after(key, moved)
                if nxt is not None:
                    heappush(heap, (nxt.key, order, grp, nxt))
        self.time_slice(queue)

    def failures(self) -> tuple[set[tuple[bytes, int]], set[tuple[int, float, str]],
                                set[tuple[tuple[bytes, int], bool]], float]:
        """After :meth:`schedule` planned nothing: the shapes that found no free room, the packing keys that
        found no host, the turns (shape, cross-class) that failed, and the free GPUs (+ EPS) it started from
        (what a job coming last in a repeat of this round would see; ``Gandiva._quiet_after_arrivals``)."""
        return self.failed, self.failed_pack, self.failed_turn, self.lim

    def _start(self, rec: JobRec, placement: Placement) -> None:
        job = rec.job
        self.plan.append(Resume(job.id, placement) if job.state is JobState.PAUSED else Start(job.id, placement))
        self.log.append(("run", job.id))
        self.p._to_running(rec, tuple(placement[: rec.n]), self.now)
        self.dirty.update(placement)

    def _suspend(self, rec: JobRec, reason: str) -> None:
        self.plan.append(Pause(rec.id, reason=reason))
        self.log.append(("wait", rec.id))
        self.dirty.update(rec.nodes)
        self.moved.add(rec.id)
        self.p._to_waiting(rec, self.now)

    def _migrate(self, rec: JobRec, placement: Placement) -> None:
        self.plan.append(Migrate(rec.id, placement))
        self.log.append(("move", rec.id))
        self.dirty.update(rec.nodes)
        self.dirty.update(placement)
        self.moved.add(rec.id)
        self.p._relocated(rec, tuple(placement[: rec.n]), self.now)

    # ------------------------------------------------------- free capacity
    def place(self, rec: JobRec) -> Placement | None:
        """Affinity placement on the draft's free room (reserved); None if it does not fit."""
        view, draft, job = self.view, self.draft, rec.job
        n = rec.n
        fit = draft.tasks_fit(view.demand_vector(job)).tolist()
        # (in Python lists: a round places one job at a time on a few dozen nodes, where numpy's per-call cost
        # was most of this step's own time)
        whole = [i for i, f in enumerate(fit) if f >= n]
        if len(whole) == 1 and job.spec.num_ps == 0:  # (one node takes them all: the ranking picks it)
            p: Placement | None = (whole[0],) * n
        elif whole and job.spec.num_ps == 0:
            # rank 0: a node with the job's class (affinity), 1: an empty node, 2: any other; then the least
            # room (fit) and the lowest index: the first minimum in index order (what a stable lexsort gives)
            assert self.p._aff is not None
            same = self.p._aff[:, rec.ci].tolist()
            if self.g is not None:
                free, full = draft.free_now[:, self.g].tolist(), self._full_gpu
                node = min(whole, key=lambda i: (0 if same[i] > 0 else 1 if free[i] >= full[i] else 2, fit[i]))
            else:
                node = min(whole, key=lambda i: (0 if same[i] > 0 else 2, fit[i]))
            p = (node,) * n
        else:
            p = consolidated_first(draft, job, n)
        if p is None or not draft.reserve(job, p):
            return None
        return p

    def min_nodes(self, rec: JobRec) -> int:
        if rec.cls <= EPS or self._gpu_cap <= 0:
            return 1
        return max(1, math.ceil(rec.cls / self._gpu_cap - EPS))

    def place_free(self, rec: JobRec) -> bool:
        if rec.shape in self.failed:
            return False
        may_defrag = self.p.migration and rec.whole and rec.n > 1 \
            and self.migrations < self.p.max_migrations and self.defrag_attempts < MAX_DEFRAG_ATTEMPTS
        saved = self.draft.save() if may_defrag else None  # (only a defragmentation puts the draft back)
        p = self.place(rec)
        spread = p is not None and len(set(p[: rec.n])) > self.min_nodes(rec)
        if (p is None or spread) and may_defrag:
            assert saved is not None
            self.defrag_attempts += 1
            if p is not None:
                self.draft.restore(saved)
            q = self.defragment(rec)
            if q is not None:
                self._start(rec, q)
                return True
            if p is not None and not self.draft.reserve(rec.job, p):
                p = None
        if p is None:
            self.failed.add(rec.shape)
            return False
        self._start(rec, p)
        return True

    def defragment(self, rec: JobRec) -> Placement | None:
        """Migrate jobs off the nodes with the most reclaimable GPUs so ``rec`` starts consolidated
        (paper §4.1 "Migration")."""
        view, draft, g, p = self.view, self.draft, self.g, self.p
        assert g is not None
        n = rec.n
        free = draft.free_now[:, g]  # read before any give-back/reserve below
        if float(free.sum()) + EPS < rec.cls:
            return None  # not fragmentation: the GPUs are simply busy
        k = min(DEFRAG_CANDIDATES, free.size)
        cand = np.argpartition(-free, k - 1)[:k] if k < free.size else np.arange(free.size)

        def movable(node: int) -> list[JobRec]:
            return [r for r in p._node_jobs[node].values()
                    if r.id not in self.moved and r.id not in p._partner and not r.job.spec.num_ps
                    and len(set(r.nodes)) == 1 and self.now - r.turn_start >= self.slice - EPS]

        movers_by = {int(i): movable(int(i)) for i in cand}
        gain = {i: float(free[i]) + sum(r.cls for r in movers_by[i]) for i in movers_by}
        targets = sorted(gain, key=lambda i: (-gain[i], i))[: self.min_nodes(rec)]
        if sum(gain[i] for i in targets) + EPS < rec.cls:
            return None
        movers: list[JobRec] = []
        short = rec.cls - float(free[targets].sum())
        for node in targets:
            for r in sorted(movers_by[node], key=lambda r: (r.cls, r.job.seq)):
                if short <= EPS:
                    break
                movers.append(r)
                short -= r.cls
        if not movers or len(movers) + self.migrations > p.max_migrations:
            return None
        saved = draft.save()
        for r in movers:
            draft.give_back(r.job)
        fit = np.zeros(free.size, dtype=np.int64)
        fit[targets] = draft.tasks_fit(view.demand_vector(rec.job))[targets]
        nodes = fill(fit, n, np.array(targets))
        if nodes is None or not draft.reserve(rec.job, tuple(nodes)):
            draft.restore(saved)
            return None
        moves: list[tuple[JobRec, Placement]] = []
        for r in movers:
            q = consolidated_first(draft, r.job, r.n)
            if q is None or set(q) & set(targets) or not draft.reserve(r.job, q):
                draft.restore(saved)
                return None
            moves.append((r, q))
        for r, q in moves:
            self._migrate(r, q)
        self.migrations += len(moves)
        return tuple(nodes)

    def unpack(self, guest: JobRec, reason: str) -> None:
        """Move the guest to free GPUs if any, else suspend it (it is time-sliced from then on)."""
        if guest.id in self.moved:
            return
        p = self.place(guest)
        if p is not None:
            self._migrate(guest, p)
        else:
            self._suspend(guest, reason)

    # ------------------------------------------------------------ time-slicing
    def time_slice(self, queue: WaitGroups) -> None:
        """Round-robin (paper §4.1 "Suspend-Resume"): jobs that had a full slice make way for
        waiting ones (longest waiting first), the same size class first.

        The victims are the running jobs with a full slice, in the order their turns started (oldest
        first), not moved in this round nor packed: a prefix of the turn order (``full_slices``) minus
        those. Only what the waiting jobs reach is read: the pools are walked from a head per class
        (and one across classes) that only moves forward as victims are taken. The waiting jobs are
        visited group by group in key order (:mod:`.gandiva_queue`): a group whose turn failed is
        parked while its class still has victims (its later jobs would fail the same way) and comes
        back, after the job that took them, once its class has none left (its jobs then try other
        classes' turns); a group that may not take other classes' turns (it failed, or its next job
        has not waited the cross-class bar, nor will its later ones) is done."""
        now, p = self.now, self.p
        moved = self.moved
        runs = list(p._victims.recs)  # (a C-level copy: victims leave the order while the loop runs)
        nd = full_slices(runs, now, self.slice)
        ci = 0  # first victim across classes not yet taken (none left: no turn to give)
        while ci < nd and runs[ci].id in moved:
            ci += 1
        if ci == nd:
            return
        heads: dict[float, list] = {}  # per class: [its victims' prefix, its length, first not yet taken]

        def exhausted(cls: float) -> bool:
            h = heads.get(cls)
            if h is None:
                order = p._victims_cls.get(cls)
                same = list(order.recs) if order is not None else []
                h = heads[cls] = [same, full_slices(same, now, self.slice), 0]
            same, n_same, i = h
            while i < n_same and same[i].id in moved:
                i += 1
            h[2] = i
            return i == n_same

        parked: dict[float, list[Group]] = {}  # per class: groups whose same-class turn failed
        bar = p.cross_class_after * self.slice - EPS
        failed_turn = self.failed_turn
        heap = [(r.key, grp.order, grp, r) for grp in queue.groups.values() if (r := grp.after(None, moved))]
        heapify(heap)
        while heap:
            key, order, grp, rec = heappop(heap)
            while ci < nd and runs[ci].id in moved:
                ci += 1  # (victims taken join ``moved``)
            if ci == nd:
                return
            cls = grp.cls
            cross = exhausted(cls)
            if cross and now - rec.wait_since < bar:
                continue  # its own class has no turn to give; other classes only after a full slice
            tkey = (grp.shape, cross)
            if tkey in failed_turn:
                if not cross:
                    parked.setdefault(cls, []).append(grp)
                continue
            h = heads[cls]
            pool = runs[ci:nd] if cross else h[0][h[2]:h[1]]
            got = self._take_turns(rec, (r for r in pool if r.id not in moved), tkey)
            if got is not None:
                victims, placement = got
                for v in victims:
                    self._suspend(v, f"gandiva: time slice over, {rec.id} resumes")
                self._start(rec, placement)
                self.failed.clear()
                for c in [c for c in parked if exhausted(c)]:
                    for pg in parked.pop(c):  # their later jobs now try other classes' turns
                        r = pg.after(key, moved)
                        if r is not None:
                            heappush(heap, (r.key, pg.order, pg, r))
            else:
                failed_turn.add(tkey)
                if cross:  # (its next job would find the same turn failed: a class once without victims stays so)
                    continue
            nxt = grp.after(key, moved)
            if nxt is not None:
                heappush(heap, (nxt.key, order, grp, nxt))

    def _take_turns(self, rec: JobRec, pool, key: tuple[tuple[bytes, int], bool]) -> tuple[  # type: ignore[no-untyped-def]
            list[JobRec], Placement] | None:
        """Suspend the jobs of ``pool`` in order until ``rec`` fits (on the last victim's nodes if the
        shapes match, else by :meth:`place`); None, and the draft as it was, if all of them do not make
        room. While the free GPUs plus those of the victims so far are fewer than ``rec``'s, no attempt
        can succeed: those victims' room is given back only once there are enough (the same additions
        in the same order), and a pool whose GPUs cannot cover ``rec`` fails without any. The same for a
        job with whole-GPU workers and the devices: each worker needs a whole free device (the ledger's
        fit and reserve count devices with a free share of 1), so while the draft with the victims so far
        given back would have fewer whole free devices than its workers (counted exactly, without giving
        them back: :meth:`_devices_freed`), no try can succeed either, and none is made.

        Failed turns are carried across rounds: on an empty plan (the draft is the ledger's free room) an
        attempt for ``key`` (shape, cross-class) that failed in an earlier round, with victims ``v_1..v_k`` that
        are a prefix of this pool, fails on every one of them again, so it resumes after them and reaches the same
        outcome: their room is given back, in the same order, before the next try, as the full attempt would
        have by then (a failed reserve or placement leaves the draft as it was; a give-back changes nothing the
        walk reads before a try), and a pool that is that prefix fails at once, with no room given back and no
        copy of the draft made (the draft is as it was either way). Why it
        fails again: the memo lives while the ledger's room version stays (``ClusterView.room_version``: no
        release since, only allocations), so the free room ``F'`` now is at most the room ``F`` then on every
        node and device, and no victim lost or changed its allocation (that would be a release). The draft at
        each prefix ``j <= k`` is then ``F' + v_1 + ... + v_j <= F + v_1 + ... + v_j``, on which both tries
        failed then (or were not made: fewer free GPUs, the same victims' GPUs): the reserve on ``v_j``'s own
        placement (node rows; whole devices counted, or identical fractional shares by best fit) and
        :meth:`place` (a node that takes all workers, else workers spread while the nodes' fits add up to
        them: both only fail more on less room) fail on less room too. This needs ``rec`` without parameter
        servers (their nodes follow where the workers went, which is not monotone in room): an attempt of a
        job with them is carried only on the very ledger version it failed on (as before this change)."""
        draft = self.draft
        victims = list(pool)
        g = self.g
        free_gpu = float(draft.free_now[:, g].sum()) if g is not None else math.inf
        if free_gpu + sum(v.cls for v in victims) < rec.cls - 1e-6:
            return None  # (the draft untouched: no copy to restore)
        memo = self._turns_failed if not self.plan else None
        version = self.view.allocation_version
        prior = memo.get(key) if memo is not None else None
        carried = prior is not None and (prior[1] == version or not rec.job.spec.num_ps) \
            and len(prior[0]) <= len(victims) and all(v.id == i for v, i in zip(victims, prior[0]))
        if carried and len(prior[0]) == len(victims):  # type: ignore[index]
            # (the failed attempt covered the whole pool: it fails on every victim again, see below, and the
            # walk would end where it began, the draft restored: no room is given back and no copy made)
            memo[key] = (prior[0], version)  # type: ignore[index]
            return None
        # whole-GPU workers (one whole free device each): the whole free devices the draft would have with the
        # victims so far given back (counted without giving them back); while fewer than the workers, no try
        # can succeed
        need_dev = rec.n if rec.whole else 0
        spare = -1  # (counted once the GPUs suffice: most walks stop short of that)
        shares: dict[tuple[int, int], float] = {}  # device -> its free share with the victims so far given back
        # the draft before this walk (taken before a try: no copy while the draft is pristine), and its device table
        saved: tuple[np.ndarray, np.ndarray] | PristineMark | None = None
        dev0 = self.view.device_free
        chosen: list[JobRec] = []
        given = 0  # victims of ``chosen`` whose room is given back (each is, in order, before the next try)
        counted = 0  # victims of ``chosen`` whose devices ``spare`` counts
        start = 0
        if carried:  # (the victims tried then are a prefix of this pool: the walk resumes after them)
            assert prior is not None
            chosen = victims[:len(prior[0])]
            for v in chosen:  # (the same additions in the same order as the loop below)
                free_gpu += v.cls
            start = len(chosen)
        width = rec.n + rec.job.spec.num_ps
        for v in victims[start:]:
            chosen.append(v)
            free_gpu += v.cls
            if free_gpu < rec.cls - 1e-6:
                continue
            if not given and len(chosen) == 1 and rec.shape == v.shape and len(v.job.placement) == width \
                    and draft.swap_leaves(v.job, rec.job):
                # a same-shape swap on the victim's own placement: the first try below would pass the device
                # count (the victim's devices become whole), give the victim's room back and reserve it again,
                # succeed, and leave the draft as it was (Draft.swap_leaves): the same turn without either write
                return chosen, v.job.placement
            if saved is None:
                saved = draft.checkpoint()
                if not isinstance(saved, PristineMark):
                    dev0 = saved[1]
            if need_dev:  # (devices counted only once the GPUs suffice: most walks stop short of that)
                if spare < 0:
                    spare = int((dev0 >= 1.0 - EPS).sum())  # whole free devices in the draft as saved
                for u in chosen[counted:]:
                    spare += self._devices_freed(u, dev0, shares)
                counted = len(chosen)
                if spare < need_dev:
                    continue
            for u in chosen[given:]:
                draft.give_back(u.job)
            given = len(chosen)
            placement = v.job.placement
            if len(placement) == width and draft.reserve(rec.job, placement):
                return chosen, placement  # the same nodes the suspended job had
            q = self.place(rec)
            if q is not None:
                return chosen, q
        if memo is not None:
            memo[key] = (tuple(v.id for v in victims), version)
        if saved is not None:
            draft.restore(saved)
        return None

    def _devices_freed(self, rec: JobRec, dev: np.ndarray, shares: dict[tuple[int, int], float]) -> int:
        """How many more whole free devices the draft has once running ``rec``'s room is given back too: its
        devices' shares added, in slot order, to their free shares (``shares``, updated; a device not in it has
        its share in ``dev``, the draft's device table before any give-back), as ``Draft.give_back`` adds them
        (the same Python float additions in the same order), counting the devices that become whole (a free
        share of 1: what a whole-GPU worker takes, ``fit_counts`` and ``take_many``)."""
        alloc = self.view.allocation_of(rec.id)
        if alloc is None:
            return 0
        gained = 0
        lo = 1.0 - EPS
        for slot in alloc.slots:
            node = slot.node
            for i, share in slot.devices:
                key = (node, i)
                before = shares.get(key)
                if before is None:
                    before = float(dev[node, i])
                after = shares[key] = before + share
                gained += (after >= lo) - (before >= lo)
        return gained
