"""Tiresias's rounds that plan nothing, answered without their walk (``policies.tiresias``).

A round after an empty plan is repeated without work while nothing it reads changed (:meth:`RoundShortcuts._still_quiet`);
a round in which provably nothing starts ends before its walk (:meth:`RoundShortcuts._nothing_starts`); the shapes that
failed are carried to the next round while room only shrinks (:meth:`RoundShortcuts._carried_failures`, known from the
ledger's room version where the room was the ledger's, or its room less the round's starts); and an empty round ends
with :meth:`RoundShortcuts._planned_nothing`. The round itself is :class:`cohabit.policies.tiresias.Tiresias`, which holds
the state declared below.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np

from ..engine.actions import Plan
from ..engine.view import ClusterView
from .tiresias_preempt import Rec, most_first
from .tiresias_queues import TIME_EPS

Shape = tuple[bytes, int, bool]


class RoundShortcuts:
    """The round shortcuts of :class:`~cohabit.policies.tiresias.Tiresias` (a mixin: the state is set up by its
    ``__init__``)."""

    _recs: dict[str, Rec]
    _wait: list[dict[str, Rec]]
    _eligible: list[tuple[float, str]]
    _changed: bool
    _settled: bool
    _nofit: set[Shape]
    _nofit_room: tuple[np.ndarray, np.ndarray] | None
    _nofit_version: int | None
    _nofit_grown: int | None
    _quiet: tuple[int, int, int] | None
    _room_version: int
    _room_gpus: float

    _spreads: Callable[[Rec, ClusterView, list[float] | None], bool]  # (Tiresias's: a consolidated job would spread)

    def _nothing_starts(self, view: ClusterView, lists: list[tuple[bool, list[Rec]]],
                        failed: set[tuple[bytes, int, bool]], free_gpus: float, min_need: float,
                        lower: list[float]) -> bool:
        """True if the round's walk would start and pause nobody, decided without it (the walk and its
        draft cost ~20-35 us on a contended cluster; this a few): nobody runs in a queue below the highest
        waiting job's (``lower`` of its queue, and so of every waiting job's, is 0: no preemption), and either
        fewer GPUs are free than the smallest waiting job needs (the walk stops at its first job) or every
        (queue, shape) list's first job fails without a placement attempt (the walk parks each list after
        it): its shape failed already, fewer GPUs are free than it needs, or it is a consolidated job that
        would spread (:meth:`_spreads`). Those that would spread join ``failed`` and the ledger's no-room index,
        as in the walk (on a draft still equal to the ledger). Nothing is changed when the answer is False. (A
        first job of another shape that the ledger's no-room index fails is left to the walk: not seen on the
        contended Philly run nor on the Muri trace.)"""
        waiting = self._wait
        q = 0
        while not waiting[q]:
            q += 1
        if lower[q] > 1e-9:
            return False
        if free_gpus + 1e-9 < min_need:
            return True
        g = view.gpu_col
        no_room = view.no_room_now()
        node_gpus: list[float] | None = None
        spread: list[tuple[bytes, int, bool]] = []  # would spread (noted as failing, as the walk does)
        for _, recs in lists:
            rec = recs[0]
            shape = rec.shape
            if shape in failed or free_gpus + 1e-9 < rec.gpus or shape in spread:
                continue
            if shape[2] and shape[1] > 1 and g is not None:
                if node_gpus is None:
                    node_gpus = most_first(view.free[:, g])
                if self._spreads(rec, view, node_gpus):
                    spread.append(shape)
                    continue
            return False  # the walk would try to place it
        failed.update(spread)
        for shape in spread:
            no_room.add(("tiresias", shape))
        return True

    def _planned_nothing(self, view: ClusterView, failed: set[tuple[bytes, int, bool]]) -> Plan:
        """End a round with an empty plan: the failures it leaves were found on the ledger's room (nothing
        reserved is kept, victims given back are restored), so they are carried while the ledger's room only
        shrinks (:meth:`_carried_failures`, by its room version: no copy of the room); while no allocation
        changes, the next round is quiet while nothing else changes (:meth:`_still_quiet`)."""
        self._nofit = failed
        self._changed = False
        self._settled = True
        version = view.allocation_version
        self._nofit_room = None
        self._nofit_grown = view.room_version
        self._nofit_version = version
        self._quiet = (len(view.jobs), len(view.history), version)
        return []

    def _free_gpus(self, view: ClusterView) -> float:
        """The ledger's free GPUs (``view.free[:, g].sum()``), summed once per allocation version (no allocation
        changed: the same free capacity)."""
        version = view.allocation_version
        if version != self._room_version:
            g = view.gpu_col
            self._room_version = version
            self._room_gpus = float(view.free[:, g].sum()) if g is not None else math.inf
        return self._room_gpus

    def _still_quiet(self, view: ClusterView) -> bool:
        """True if the last round planned nothing and nothing a round depends on changed since: no job
        arrived, ended, started, stopped or changed queue (demotions and promotions are applied by then),
        no running job reached its minimum run time (a new victim), no allocation changed (the same free room),
        and the job count and the history (the Gittins distribution) are the same. The round would plan nothing again.
        (A job still running in a queue no lower than every waiting job's, ``Q_1`` for one, that reached its
        minimum run time is no new victim: victims are taken from queues lower than the waiting job's only; it
        becomes one when it is demoted or a job waits in a higher queue, a change of queue or a new job.)"""
        now = view.now
        heap, recs = self._eligible, self._recs
        reached = False
        top = -1  # the highest queue with a waiting job (there is one: see decide), once needed
        while heap and heap[0][0] <= now + TIME_EPS:  # eligible now: the round below (not quiet) sees them
            rec = recs.get(heapq.heappop(heap)[1])
            if reached:
                continue
            if rec is None or not rec.running:
                reached = True
            elif rec.q > 0:
                if top < 0:
                    top = next(q for q, table in enumerate(self._wait) if table)
                reached = rec.q > top
        quiet = self._quiet
        # (an allocation changed since: the round is taken, and plans nothing if the room is the same)
        return quiet is not None and not (self._changed or reached) and quiet[0] == len(view.jobs) \
            and quiet[1] == len(view.history) and quiet[2] == view.allocation_version

    def _carried_failures(self, view: ClusterView) -> set[tuple[bytes, int, bool]]:
        """The shapes that failed at the end of the last round if no node (and no GPU device) has more room
        now than after that round's plan: a placement that fails keeps failing while room only shrinks
        (fits, consolidation on the fewest nodes and device shares are all monotone in the free room).
        Rounds triggered by arrivals, reports, ticks and starts then try no shape again; a finish, a pause
        or a refused start gives room back and clears them.

        Known without reading the room when the last round's room was the ledger's (an empty plan) or the
        ledger's less the jobs it started (a plan of starts only, each taken: :meth:`_catch_up` checks; the
        draft takes room as the ledger does): the ledger's room version (``ClusterView.room_version``) changes
        whenever room may have grown, so while it is the same the room only shrank. Otherwise (a plan that
        paused jobs: their releases move the version) the room is compared with the copy kept."""
        if not self._nofit:
            return set()
        if self._nofit_version == view.allocation_version:  # an empty plan and no allocation since: the same room
            return set(self._nofit)
        saved = self._nofit_room
        if saved is None:
            return set(self._nofit) if self._nofit_grown == view.room_version else set()
        free, dev = view.free, view.device_free
        if free.shape != saved[0].shape or dev.shape != saved[1].shape or (free > saved[0]).any() \
                or (dev > saved[1]).any():
            return set()
        return set(self._nofit)
