"""Placement on a draft of free capacity, shared by all policies.

A policy that starts several jobs in one decision must see the room its
earlier choices took. :class:`Draft` is a scratch copy of the view's free
capacity (made on first use) that placements reserve into, and that
preemption plans can give room back to. It uses the ledger's own fit and
device rules (``engine.ledger.fit_counts`` / ``take_devices``), so a
placement the draft accepts is one the scheduler will accept.

While a draft is still *pristine* (nothing reserved, given back, or written into
:attr:`Draft.free`), it equals the ledger's free capacity, so it answers from the
ledger's free-capacity index instead (``ClusterView.fit_now``: per-node fits per
demand row, and ``ClusterView.no_room_now``: shapes that did not fit), which the
ledger keeps until its free capacity changes. Rounds triggered by events that
change no allocation (arrivals, progress reports) then cost no fit computation
for the shapes already tried.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from typing import TYPE_CHECKING

import numpy as np

from ..engine.actions import Placement
from ..engine.job import JobView
from ..engine.alloc import EPS, refit, take_many
from ..engine.ledger import fit_counts
from ..engine.view import ClusterView
from .placement_choose import SMALL_CLUSTER, _workers_small, consolidated_first, fill
from .placement_rows import less_times, multiple_sum, plus_times, row_of, swap_leaves, task_sum

#: what other modules import from here (the choosers live in :mod:`.placement_choose`, re-exported)
__all__ = ["Draft", "PristineMark", "REFIT_NODES", "SMALL_CLUSTER", "consolidated_first", "fill", "take_whole",
           "_workers_small"]

if TYPE_CHECKING:
    from ..engine.alloc import Allocation
    from ..engine.ledger import Ledger


#: the most nodes a kept fit is refitted on (``alloc.refit``, ~1 us per node) before it is computed afresh
REFIT_NODES = 16


def take_whole(vals: list[float], share: float, k: int) -> bool:
    """:func:`~cohabit.engine.alloc.take_many` of ``k`` tasks with the same GPU ``share`` on one node's device row
    ``vals`` (mutated), answering only whether they fit (a draft keeps no device tuples). Whole-GPU tasks take the
    lowest-index free devices in turn, so ``k`` of them take the first ``k * round(share)`` free ones, as
    ``take_many`` does; a fractional share (best fit, task by task) is left to ``take_many``."""
    if share >= 1.0 - EPS:
        need = k * int(round(share))
        free = [i for i, x in enumerate(vals) if x >= 1.0 - EPS]
        if need > len(free):
            return False
        for i in free[:need]:
            vals[i] = 0.0
        return True
    if share <= EPS:
        return True
    return take_many(vals, [share] * k) is not None


class PristineMark:
    """:meth:`Draft.checkpoint` of a pristine draft: the ledger's free capacity at an allocation version."""

    __slots__ = ("version",)

    def __init__(self, version: int) -> None:
        self.version = version


class Draft:
    """A policy's scratch plan over the free capacity (see the module docstring): the one planning
    scratch for every policy. :meth:`ledger` hands out the same draft as a scratch
    :class:`~cohabit.engine.ledger.Ledger` for plans that need the ledger's bookkeeping (packs and
    their device memory, groups); both share this draft's free-capacity arrays."""

    __slots__ = ("view", "_free", "_dev", "_total", "_no_room", "_dirty", "_ledger", "_fits", "_touched", "_log",
                 "_saves", "_sums")

    def __init__(self, view: ClusterView, *, sums: bool = True) -> None:
        self.view = view
        # keep the column sums of the free capacity (:meth:`could_fit`, :meth:`exhausted`, :meth:`place` read
        # them); a caller that reads none of those passes False and the draft neither copies nor updates them
        # (a column sum costs a numpy reduction after every give-back: tiresias' preemption plans)
        self._sums = sums
        self._free: np.ndarray | None = None
        self._dev: np.ndarray | None = None
        self._total: np.ndarray | None = None  # column sums of _free, kept in step with it (None: to sum afresh)
        self._no_room: set[Hashable] = set()  # shapes, e.g. (demand row id, workers), that failed since room last grew
        self._dirty = False  # True once the draft may differ from the ledger (see the module docstring)
        self._ledger: Ledger | None = None  # the scratch ledger handed out by ledger(), if any
        # id(demand row) -> (row, fit, len(_log) when the fit was made): a fit read again is refitted on the
        # nodes logged since (alloc.refit); emptied when the draft changes other than by its own logged writes,
        # and None (no memo) once the arrays were handed out writable (free, ledger())
        self._fits: dict[int, tuple[np.ndarray, np.ndarray, int]] | None = {}
        # the nodes each of the draft's own writes changed (reserve, give back, restore of a known save), in order
        self._log: list[int] = []
        # (ledger version at the copy, nodes the draft's own writes changed since): a row's fit is the
        # ledger's (ClusterView.fit_now) refitted on these nodes only (alloc.refit); None once the draft
        # changed in other ways (arrays handed out, an unknown save restored)
        self._touched: tuple[int, set[int]] | None = None
        # id(saved arrays) -> (them, len(_log) at the save): see restore
        self._saves: dict[int, tuple[tuple[np.ndarray, np.ndarray], int]] = {}

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._free is None:
            self._free = self.view.free.copy()
            self._dev = self.view.device_free.copy()
            if self._sums:  # (the ledger's column sums of the same values, kept per version)
                self._total = self.view.free_total.copy()
            self._touched = (self.view.allocation_version, set())
        elif self._ledger is not None:  # the scratch ledger may have taken room: total afresh
            if self._sums:
                self._total = self._free.sum(axis=0)
            self._ledger.room_changed()  # and this draft may have (given back too): its memos go stale
        assert self._dev is not None
        return self._free, self._dev

    def ledger(self) -> Ledger:
        """This draft as a scratch ledger: the scheduler's bookkeeping (allocations, device shares,
        packs and their memory, groups) copied once, on its free capacity, which it shares with this
        draft. Actions it accepts, planned in the same order, are actions the scheduler accepts."""
        if self._ledger is None:
            self._hand_out()
            free, dev = self._arrays()
            led = self.view.ledger_draft()
            led.free, led.device_free = free, dev  # one free capacity: the draft's
            self._ledger = led
        self._dirty = True
        self._fits = None  # the scratch ledger writes the shared arrays: fits are computed afresh from now on
        self._touched = None
        return self._ledger

    def _hand_out(self) -> None:
        """The arrays are about to be handed out writable: a column sum left to be made (:meth:`_total_stale`)
        is made now, before any write of the caller's (which the total never follows)."""
        if self._free is not None and self._total is None and self._sums:
            self._total = self._free.sum(axis=0)

    def _forget_fits(self) -> None:
        """The draft's arrays are about to change other than by :meth:`reserve`: no fit is kept or derived."""
        if self._free is None:
            self._arrays()  # (the copy first: it would start a fresh record of touched nodes)
        self._touched = None
        self._saves.clear()  # (the log misses this change: a restore cannot name what it undoes)
        if self._fits is not None:
            self._fits.clear()

    @property
    def free(self) -> np.ndarray:
        """The draft's free capacity per node, writable (a caller may plan into it directly)."""
        self._dirty = True
        self._hand_out()
        self._fits = None  # the caller may write into it at any time: fits are computed afresh from now on
        self._touched = None
        return self._arrays()[0]

    @property
    def free_now(self) -> np.ndarray:
        """The draft's free capacity per node, to read only (the draft stays pristine if it was)."""
        return self._free if self._free is not None else self.view.free

    @property
    def pristine(self) -> bool:
        """True while the draft equals the ledger's free capacity (nothing reserved or given back)."""
        return not self._dirty

    def undo_failed_reserve(self, pristine: bool) -> None:
        """After a :meth:`reserve` that returned False (it put back every row it touched): the draft is
        pristine again if it was before."""
        if pristine:
            self._dirty = False

    def tasks_fit(self, demand: np.ndarray) -> np.ndarray:
        """Tasks of ``demand`` each node of the draft can take (read-only while the draft is pristine)."""
        if not self._dirty:
            return self.view.fit_now(demand)
        free, dev = self._arrays()
        fits = self._fits
        if fits is None or demand.flags.writeable:  # (a row that is not cached may change: no memo)
            return fit_counts(free, dev, demand, self.view.gpu_col)
        log = self._log
        hit = fits.get(id(demand))
        if hit is not None and hit[0] is demand:
            if hit[2] == len(log):
                return hit[1]
            nodes = set(log[hit[2]:])  # (what the draft's own writes changed since this fit was made)
            fit = (refit(hit[1], free, dev, demand, self.view.gpu_col, nodes) if len(nodes) <= REFIT_NODES
                   else fit_counts(free, dev, demand, self.view.gpu_col))
        else:
            touched = self._touched
            if touched is not None and touched[0] == self.view.allocation_version and \
                    len(touched[1]) <= REFIT_NODES:
                fit = refit(self.view.fit_now(demand), free, dev, demand, self.view.gpu_col, touched[1])
            else:
                fit = fit_counts(free, dev, demand, self.view.gpu_col)
        fit.flags.writeable = False
        fits[id(demand)] = (demand, fit, len(log))  # (keeps the row alive: its id stays unique)
        return fit

    def task_vectors(self, job: JobView, n_workers: int) -> list[np.ndarray]:
        w = self.view.demand_vector(job)
        p = self.view.ps_demand_vector(job)
        return [w] * n_workers + ([p] * job.spec.num_ps if p is not None else [])

    def save(self) -> tuple[np.ndarray, np.ndarray]:
        """The draft's free capacity and devices as they are now (read-only copies) for :meth:`restore`."""
        free, dev = self._arrays()
        saved = (free.copy(), dev.copy())
        saved[0].flags.writeable = saved[1].flags.writeable = False
        if self._fits is not None:  # (while every change is logged: restore then knows what it undoes)
            if len(self._saves) > 64:
                self._saves.clear()
            self._saves[id(saved)] = (saved, len(self._log))
        return saved

    def checkpoint(self) -> tuple[np.ndarray, np.ndarray] | PristineMark:
        """What :meth:`restore` takes to put the draft back as it is now, without copying anything while the draft
        is pristine (it then equals the ledger's free capacity, which stays as it is while a round plans: restore
        copies that back). A preemption plan that keeps its victims never restores (on the Muri artifact's trace1
        ~1,400 of tiresias' ~10,200 saves were restored). Not to be kept past the round (:meth:`save` is)."""
        if self._dirty:
            return self.save()
        mark = PristineMark(self.view.allocation_version)
        if self._fits is not None:  # (as save: a restore then knows what it undoes)
            if len(self._saves) > 64:
                self._saves.clear()
            self._saves[id(mark)] = (mark, len(self._log))  # type: ignore[assignment]
        return mark

    def restore(self, saved: tuple[np.ndarray, np.ndarray] | PristineMark) -> None:
        """Put back what :meth:`save` (or :meth:`checkpoint`) returned. Restoring a save of this draft made while
        every change was logged changes only the nodes logged since the save: they are logged again, and the fits
        known stay (refitted on those nodes when next read); otherwise they are dropped."""
        self._dirty = True
        known = self._saves.get(id(saved))
        if known is not None and known[0] is saved and self._fits is not None:
            undone = set(self._log[known[1]:])
        else:
            self._forget_fits()
            undone = None
        free, dev = self._arrays()
        if isinstance(saved, PristineMark):
            if saved.version != self.view.allocation_version:
                raise RuntimeError("a checkpoint of a pristine draft restored after the ledger changed")
            free[:] = self.view.free
            dev[:] = self.view.device_free
        else:
            free[:] = saved[0]
            dev[:] = saved[1]
        if undone:
            self._logged(undone)
        self._total_stale()
        self._no_room.clear()

    def reserve(self, job: JobView, placement: Placement) -> bool:
        """Take room for ``job`` on ``placement``; all-or-nothing. False if it does not fit (the draft is then
        as it was: its memo of fits stays).

        Each node's rows are read once as Python lists, its tasks taken from them in task order (the same
        float subtractions and device choices, :func:`~cohabit.engine.alloc.take_many`, as one numpy
        update per task), and written back only when every task fits. A node taking ``k`` tasks of one row
        subtracts ``k`` times the row at once where that is exact (:func:`~.placement_rows.exact_multiple`)."""
        self._dirty = True
        free, dev = self._arrays()
        g = self.view.gpu_col
        same = job.spec.num_ps == 0 and placement  # (every task has the worker row: see _take_grouped)
        if same:
            w = self.view.demand_vector(job)
            rows = self._take_grouped(free, placement, w, g)
        else:
            vecs = self.task_vectors(job, len(placement) - job.spec.num_ps)
            rows = self._take_each(free, placement, vecs, g)
        if rows is None:
            return False
        devs: list[tuple[int, list[float]]] = []
        for node, (_, shares) in rows.items():
            if shares:
                drow = dev[node].tolist()
                if not (take_whole(drow, shares[0], len(shares)) if same else take_many(drow, shares) is not None):
                    return False
                devs.append((node, drow))
        if self._sums:
            total = self._total_now()  # (the sum of the room before this reservation, less its tasks)
            total -= multiple_sum(w, len(placement)) if same else task_sum(vecs)
        for node, (row, _) in rows.items():
            free[node] = row
        for node, drow in devs:
            dev[node] = drow
        self._logged(rows)
        return True

    @staticmethod
    def _take_each(free: np.ndarray, placement: Placement, vecs: list[np.ndarray],
                   g: int | None) -> dict[int, tuple[list[float], list[float]]] | None:
        """:meth:`reserve`'s rows, task by task: node -> (its free row less its tasks, its tasks' GPU shares in
        task order); None as soon as a task does not fit."""
        rows: dict[int, tuple[list[float], list[float]]] = {}
        last, as_list, share = None, [], 0.0  # (a job's task rows repeat: each made a list once)
        for node, d in zip(placement, vecs):
            hit = rows.get(node)
            if hit is None:
                hit = rows[node] = (free[node].tolist(), [])
            row, shares = hit
            if d is not last:
                last, as_list = d, d.tolist()
                share = as_list[g] if g is not None else 0.0
            row[:] = [a - b for a, b in zip(row, as_list)]
            if min(row) < -1e-9:
                return None
            if g is not None:
                shares.append(share)
        return rows

    @staticmethod
    def _take_grouped(free: np.ndarray, placement: Placement, d: np.ndarray,
                      g: int | None) -> dict[int, tuple[list[float], list[float]]] | None:
        """:meth:`_take_each` for tasks that all have the row ``d``: a node's ``k`` tasks are subtracted as
        ``k * d`` where that gives the same floats as ``k`` subtractions (:func:`~.placement_rows.exact_multiple`; the demand
        is >= 0, so the row after the last task is the smallest: one check at the end says the same)."""
        counts: dict[int, int] = {}
        for node in placement:
            counts[node] = counts.get(node, 0) + 1
        as_list, exact = row_of(d)
        share = as_list[g] if g is not None else 0.0
        rows: dict[int, tuple[list[float], list[float]]] = {}
        for node, k in counts.items():
            row = less_times(free[node].tolist(), as_list, k, exact)
            if row is None:
                return None
            rows[node] = (row, [share] * k if g is not None else [])
        return rows

    def _logged(self, nodes: Collection[int]) -> None:
        """The draft's own write changed the rows ``nodes`` only: logged, so that the fits known are refitted
        on them when next read (``alloc.refit``), and recorded for fits derived from the ledger's."""
        self._log.extend(nodes)
        touched = self._touched
        if touched is not None:
            touched[1].update(nodes)

    def extra_held(self, job: JobView) -> np.ndarray | None:
        """What a running single-task ``job`` holds beyond its demand (a share raised by ``SetShare``),
        as a row over the view's resources (read-only); None for other jobs."""
        alloc = self.view.allocation_of(job.id)
        if alloc is None or len(alloc.slots) != 1:
            return None
        return self._extra(job, alloc)[0]

    def _extra(self, job: JobView, alloc: Allocation) -> tuple[np.ndarray, bool]:
        """(:meth:`extra_held` of a single-task ``job`` holding ``alloc``, whether any of it is > 0), kept per
        (held total, demand row) pair."""
        total, w = alloc.total, self.view.demand_vector(job)
        key = (id(total), id(w))
        hit = _EXTRA.get(key)
        if hit is None or hit[0] is not total or hit[1] is not w:
            held = np.array([float(total.get(n, 0.0)) for n in self.view.resource_names])
            extra = np.maximum(held - w, 0.0)
            if w.flags.writeable:
                return extra, bool(extra.any())
            extra.flags.writeable = False
            if len(_EXTRA) > 4096:
                _EXTRA.clear()
            hit = _EXTRA[key] = (total, w, extra, bool(extra.any()))  # (keeps both alive: their ids stay theirs)
        return hit[2], hit[3]

    def give_back_extra(self, job: JobView) -> None:
        """Return what a running ``job`` holds beyond its demand; it keeps its demand (Alg. 4 re-deals
        the extra cores every round)."""
        alloc = self.view.allocation_of(job.id)
        if alloc is not None and len(alloc.slots) == 1:
            self._give_back_extra(job, alloc)

    def _give_back_extra(self, job: JobView, alloc: Allocation) -> None:
        """:meth:`give_back_extra` of a single-task ``job`` holding ``alloc``."""
        extra, some = self._extra(job, alloc)
        if not some:
            return
        self._dirty = True
        free, _ = self._arrays()
        node = alloc.slots[0].node
        free[node] += extra
        self._logged((node,))
        self._total_stale()
        self._no_room.clear()

    def give_back(self, job: JobView) -> None:
        """Return the room a running ``job`` holds (it is to be paused or moved in this plan),
        including any share it holds beyond its demand. Fits the draft knows are updated on the
        job's nodes only (the rest of the draft did not change)."""
        alloc = self.view.allocation_of(job.id)
        if alloc is None:
            return
        self._dirty = True
        free, dev = self._arrays()
        slots = alloc.slots
        if len(slots) == 1:  # (only a single-task job can hold more than its demand: extra_held)
            self._give_back_extra(job, alloc)
        rows: dict[int, tuple[list[float], list[float]]] = {}
        if job.spec.num_ps == 0:  # every task has the worker row: k tasks on a node add k * row where exact (reserve)
            as_list, exact = row_of(self.view.demand_vector(job))
            counts: dict[int, int] = {}
            for slot in slots:
                node = slot.node
                hit = rows.get(node)
                if hit is None:
                    hit = rows[node] = (free[node].tolist(), dev[node].tolist())
                    counts[node] = 1
                else:
                    counts[node] += 1
                drow = hit[1]
                for i, share in slot.devices:
                    drow[i] += share
            for node, k in counts.items():
                row = rows[node][0]
                row[:] = plus_times(row, as_list, k, exact)
        else:
            last, as_list = None, []  # (a job's task rows repeat: each made a list once)
            for slot, d in zip(slots, self.task_vectors(job, len(slots) - job.spec.num_ps)):
                node = slot.node
                hit = rows.get(node)
                if hit is None:
                    hit = rows[node] = (free[node].tolist(), dev[node].tolist())
                row, drow = hit
                if d is not last:
                    last, as_list = d, d.tolist()
                row[:] = [a + b for a, b in zip(row, as_list)]
                for i, share in slot.devices:
                    drow[i] += share
        for node, (row, drow) in rows.items():
            free[node] = row
            dev[node] = drow
        self._total_stale()
        self._no_room.clear()
        self._logged(rows)

    def swap_leaves(self, out: JobView, job: JobView) -> bool:
        """True when :meth:`give_back` of the running ``out`` followed by :meth:`reserve` of ``job`` (no parameter
        servers, the same demand row) on ``out``'s own placement would succeed and leave the draft exactly as it
        is (:func:`~.placement_rows.swap_leaves`): a same-shape time-slicing turn, which then writes nothing (the
        draft stays pristine if it was). False when that is not shown: the caller gives back and reserves."""
        view = self.view
        if job.spec.num_ps or out.spec.num_ps:
            return False
        g = view.gpu_col
        alloc = view.allocation_of(out.id)
        if g is None or alloc is None or alloc.pack is not None or alloc.group is not None:
            return False
        w = view.demand_vector(job)
        if view.demand_vector(out) is not w:
            return False
        slots = alloc.slots
        if len(slots) == 1 and self._extra(out, alloc)[1]:
            return False  # (it holds more than its demand: giving back returns that too)
        d, exact = row_of(w)
        free = self._free if self._free is not None else view.free
        dev = self._dev if self._dev is not None else view.device_free
        return swap_leaves(free, dev, slots, out.placement, d, exact, g)

    def _total_stale(self) -> None:
        """The draft's own write changed its free capacity: the column sums are made afresh, when next read
        (a plan often gives several jobs back before it places one), or now if the arrays were handed out
        writable (:attr:`free`, :meth:`ledger`: a caller's own later writes do not reach the total)."""
        assert self._free is not None
        self._total = None if self._fits is not None or not self._sums else self._free.sum(axis=0)

    def _total_now(self) -> np.ndarray:
        """Column sums of the draft's free capacity (the ledger's own, kept per version, until the draft
        copies the free capacity on its first write). Not on a draft made without ``sums``."""
        if not self._sums:
            raise RuntimeError("the free capacity's column sums were asked of a Draft made with sums=False")
        if self._free is None:
            return self.view.free_total
        free, _ = self._arrays()
        if self._total is None:
            self._total = free.sum(axis=0)
        return self._total

    def could_fit(self, job: JobView, n_workers: int) -> bool:
        """Cheap necessary condition: the total free room covers the job's workers, and no job
        of the same shape failed to fit since room last grew in this draft."""
        return self._could_fit(self.view.demand_vector(job), n_workers)

    def _could_fit(self, w: np.ndarray, n: int) -> bool:
        key = (id(w), n)
        if key in self._no_room or (not self._dirty and key in self.view.no_room_now()):  # (failed_before)
            return False
        hit = _NEED.get(key)
        if hit is None or hit[0] is not w:
            hit = _need(w, n)
        for have, need in zip(self._total_now().tolist(), hit[1]):  # total >= w * n - 1e-9, in Python floats
            if not have >= need:
                self.note_failure(key)
                return False
        return True

    def could_fit_after(self, w: np.ndarray, k: int, job: JobView, n_workers: int) -> bool:
        """On a pristine draft: whether ``job``'s ``n_workers`` workers pass :meth:`could_fit`'s total test once
        ``k`` tasks of the row ``w`` (a job without parameter servers) are reserved, without reserving them: the
        free total less ``multiple_sum(w, k)``, the floats :meth:`reserve` leaves. False means that after such a
        reservation ``job`` cannot be placed (a caller whose round would end there need not reserve)."""
        if self._dirty:
            raise RuntimeError("could_fit_after asks about a pristine draft")
        v = self.view.demand_vector(job)
        hit = _NEED.get((id(v), n_workers))
        if hit is None or hit[0] is not v:
            hit = _need(v, n_workers)
        after = self.view.free_total - multiple_sum(w, k)
        return all(have >= need for have, need in zip(after.tolist(), hit[1]))

    def failed_before(self, key: Hashable) -> bool:
        """True if a placement ``key`` (a shape: what the placement depends on, besides the free
        capacity) was noted as failing in this draft since room last grew, or, on a pristine draft,
        on the ledger's free capacity as it is now."""
        return key in self._no_room or (not self._dirty and key in self.view.no_room_now())

    def note_failure(self, key: Hashable) -> None:
        """Remember that placement ``key`` does not fit (a placement that fails keeps failing while room
        only shrinks): in this draft until give_back/restore, and while the draft is pristine in the
        ledger's index too, until the free capacity changes. The draft must be as it was before the
        failed attempt."""
        self._no_room.add(key)
        if not self._dirty:
            self.view.no_room_now().add(key)

    def exhausted(self) -> bool:
        """True when the free total is below :attr:`ClusterView.task_floor` in some resource: then no
        admitted job's first worker fits and every :meth:`place` fails until room is given back."""
        for have, low in zip(self._total_now().tolist(), self.view.task_floor_margin):  # (total < floor - 1e-9)
            if have < low:
                return True
        return False

    def place(self, job: JobView, n_workers: int | None = None) -> Placement | None:
        """Find and reserve a placement (see :func:`consolidated_first`); None if none fits."""
        w, n = self.view.shape(job)
        if n_workers is not None:
            n = n_workers
        if not self._could_fit(w, n):
            return None
        pristine = not self._dirty
        p = consolidated_first(self, job, n)
        if p is not None and self.reserve(job, p):
            return p
        if job.spec.num_ps == 0:  # same-shape jobs cannot fit either until room grows
            self.undo_failed_reserve(pristine)
            self.note_failure((id(w), n))
        return None


#: (id(held total), id(demand row)) -> (them, what the total holds beyond the row, whether any of it is > 0):
#: :meth:`Draft.extra_held` of a single-task job, kept per pair (a held total is one immutable ``Resources`` per
#: distinct row)
_EXTRA: dict[tuple[int, int], tuple[object, np.ndarray, np.ndarray, bool]] = {}

#: (id(demand row), workers) -> (row, ``row * workers - 1e-9`` as Python floats): what :meth:`Draft.could_fit`
#: compares the free total with (the row is kept alive, so its id stays its own)
_NEED: dict[tuple[int, int], tuple[np.ndarray, list[float]]] = {}


def _need(w: np.ndarray, n: int) -> tuple[np.ndarray, list[float]]:
    hit = (w, (w * n - 1e-9).tolist())
    if not w.flags.writeable:  # a cached row: its contents never change
        if len(_NEED) > 4096:
            _NEED.clear()
        _NEED[(id(w), n)] = hit
    return hit
