"""Tiresias's discretized 2D-LAS queues and how they change with time (``policies.tiresias``).

Paper §3.2.3 (Algorithm 1): a job enters ``Q_1`` and is demoted to ``Q_{i+1}`` once its attained service
crosses the ``i``-th threshold; a waiting job outside ``Q_1`` that has waited ``starve_limit`` times what it
executed is promoted back to ``Q_1`` (PROMOTEKNOB). :class:`LasQueues` keeps each active job's queue, whether
it runs, and a heap of the next moment each job's queue may change, and tells the scheduler when that is
(:meth:`LasQueues.next_decision_time`). The round itself (placement, preemption, skipping quiet rounds)
is :class:`cohabit.policies.tiresias.Tiresias`, which holds the state declared below.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right

from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from .tiresias_order import WaitingOrder
from .tiresias_preempt import Rec

#: Seconds: a queue change or victim eligibility due within this of now counts as due now (a wake-up
#: computed as ``now + left / rate`` may land a rounding error short of the crossing).
TIME_EPS = 1e-6


class LasQueues:
    """The queue bookkeeping of :class:`~cohabit.policies.tiresias.Tiresias` (a mixin: the state is set
    up by its ``__init__``)."""

    thresholds: tuple[float, ...]
    starve_limit: float | None
    promote_basis: str
    gittins: bool
    min_run_time: float
    promotions: int
    _recs: dict[str, Rec]
    _wait: list[dict[str, Rec]]  # waiting jobs per queue
    _run: list[dict[str, Rec]]  # running jobs per queue, by entry
    _run_gpus: list[float]
    _heap: list[tuple[float, int, str, int]]  # (when, seq, job, epoch): re-check a job
    _seq: int
    _last_plan: list[tuple[bool, str]]  # (started?, job) of the previous plan
    _order: WaitingOrder
    _stale: dict[str, Rec]
    _changed: bool
    _eligible: list[tuple[float, str]]  # heap: (when a running job may first be preempted (min_run_time), job)
    _decided_at: float
    lazy_turns: bool
    _settled: bool  # the last round planned nothing new to do (see Tiresias.decide)
    _unverified: bool  # the last plan's starts are not yet checked to have taken effect (see _quiet_now)
    # heaps of the entries of _heap / _eligible that next_decision_time found no reason to decide on (see there),
    # the highest waiting queue they were deferred under (the lowest-priority one of those: they stay deferred
    # while no job waits higher), and a moment no later than the first later crossing of a deferred job that
    # may matter
    _deferred: list[tuple[float, int, str, int]]
    _deferred_el: list[tuple[float, str]]
    _deferred_top: int
    _later: float

    def queue_of(self, service: float) -> int:
        """Index (0-based) of the queue holding a job with ``service`` GPU-seconds."""
        return bisect_right(self.thresholds, service)

    def service(self, job: JobView, now: float) -> float:
        """Attained service since the job last entered ``Q_1`` (GPU-seconds)."""
        rec = self._recs.get(job.id)
        a = job.attained_service(now)
        return a - rec.base[0] if rec is not None and rec.base is not None else a

    def _since_top(self, rec: Rec, now: float) -> tuple[float, float]:
        """(executed, waited) seconds since the job last entered ``Q_1``; waiting before the first
        start does not count (as in the authors' simulator)."""
        job = rec.job
        executed, waited = job.executed_time(now), job.waiting_time(now)
        if rec.base is not None:
            return (executed if self.promote_basis == "total" else executed - rec.base[1]), waited - rec.base[2]
        first = job.first_start
        return executed, waited - ((first - job.spec.submit_time) if first is not None else waited)

    def _starved(self, rec: Rec, now: float) -> bool:
        """The paper's rule: waited >= starve_limit x executed, both since (re-)entering Q_1."""
        if self.starve_limit is None or rec.job.first_start is None:
            return False
        executed, waited = self._since_top(rec, now)
        return executed > 0 and waited >= self.starve_limit * executed - TIME_EPS

    def _push(self, when: float, rec: Rec) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, rec.job.id, rec.epoch))

    def _schedule(self, rec: Rec, now: float) -> None:
        """Queue the next moment this job's queue may change: demotion if running, promotion if waiting."""
        rec.epoch += 1
        rec.g_version = -1  # its service changed: recompute its Gittins index when it waits
        if self.gittins:
            self._stale[rec.job.id] = rec
        if rec.running:
            if rec.q < len(self.thresholds):
                a = rec.job.attained_service(now)  # (:meth:`service` of the job of this record)
                if rec.base is not None:
                    a -= rec.base[0]
                left = self.thresholds[rec.q] - a
                self._push(now + max(left, 0.0) / rec.rate, rec)
        elif rec.q > 0 and self.starve_limit is not None and rec.job.first_start is not None:
            executed, waited = self._since_top(rec, now)
            if executed > 0:
                self._push(now + max(self.starve_limit * executed - waited, 0.0), rec)

    def _move(self, rec: Rec, q: int, now: float) -> None:
        """Put the job in queue ``q`` (it enters at the back)."""
        table = self._run if rec.running else self._wait
        del table[rec.q][rec.job.id]
        table[q][rec.job.id] = rec
        if rec.running:
            self._run_gpus[rec.q] -= rec.gpus
            self._run_gpus[q] += rec.gpus
        else:
            self._order_remove(rec)
        rec.q = q
        rec.entered = now
        rec.key = (q, 0.0, now, rec.job.seq)
        self._changed = True
        if not rec.running:
            self._order_add(rec)

    def _order_add(self, rec: Rec) -> None:
        """Insert a waiting job into the priority order under its current key."""
        self._order.add(rec)

    def _order_remove(self, rec: Rec) -> None:
        """Take a job out of the priority order (its key must be the one it was inserted with)."""
        self._order.remove(rec)

    def _set_running(self, rec: Rec, now: float, running: bool) -> None:
        if rec.running == running:
            return
        src, dst = (self._wait, self._run) if running else (self._run, self._wait)
        job_id, q = rec.job.id, rec.q
        del src[q][job_id]
        dst[q][job_id] = rec
        if running:
            self._order.remove(rec)
        else:
            self._order.add(rec)
        self._run_gpus[q] += rec.gpus if running else -rec.gpus
        rec.running = running
        self._changed = True
        if running:
            rec.last_start = now
            heapq.heappush(self._eligible, (now + self.min_run_time, job_id))
        self._schedule(rec, now)

    def _promote(self, rec: Rec, now: float) -> None:
        job = rec.job
        rec.base = (job.attained_service(now), job.executed_time(now), job.waiting_time(now))
        self._move(rec, 0, now)
        self.promotions += 1

    def _catch_up(self, view: ClusterView, since: float) -> None:
        """Undo what the scheduler refused from the last plan; apply demotions and promotions due. ``since``: the
        time of the last round. A demotion due between it and now took no turn of its own (next_decision_time
        deferred it): it is applied at its own time, as that turn would have, before anything due later."""
        now = view.now
        heap = self._heap
        if self._later <= now + TIME_EPS:
            self._restore_deferred()  # (a deferred job's crossing that may matter is due: deferred afresh later)
        else:  # the deferred entries due now are applied now, in order with the others
            deferred, deferred_el = self._deferred, self._deferred_el
            while deferred and deferred[0][0] <= now + TIME_EPS:
                heapq.heappush(heap, heapq.heappop(deferred))
            while deferred_el and deferred_el[0][0] <= now + TIME_EPS:
                heapq.heappush(self._eligible, heapq.heappop(deferred_el))
        for started, job_id in self._last_plan:
            rec = self._recs.get(job_id)
            if rec is not None and rec.running != started:
                continue  # already reconciled (e.g. finished and gone)
            if rec is not None and (rec.job.state is JobState.RUNNING) != started:
                self._set_running(rec, now, not started)
        self._last_plan = []
        while heap and heap[0][0] <= now + TIME_EPS:
            when, _, job_id, epoch = heapq.heappop(heap)
            rec = self._recs.get(job_id)
            if rec is None or rec.epoch != epoch:
                continue
            at = when if since < when < now else now  # (a deferred demotion, or a later crossing of its job)
            if rec.running:
                q = self.queue_of(self.service(rec.job, at) + TIME_EPS * rec.rate)
                if q > rec.q:
                    self._move(rec, q, at)  # demotion (paper §3.2.3)
            elif self._starved(rec, at):
                self._promote(rec, at)
            self._schedule(rec, at)

    def _quiet_now(self) -> bool:
        """True if a round now would plan nothing while no job arrives or ends: the last round planned nothing,
        or only started jobs and every start took effect (the scheduler may refuse one: checked once, here)."""
        if not self._settled:
            return False
        if self._unverified:
            self._unverified = False
            recs = self._recs
            for started, job_id in self._last_plan:  # (as _catch_up reconciles them)
                rec = recs.get(job_id)
                if rec is not None and (rec.job.state is JobState.RUNNING) != started:
                    self._settled = False
                    return False
        return True

    def _top_waiting(self) -> int:
        """The highest-priority queue with a waiting job (the queue count if none waits)."""
        for q, table in enumerate(self._wait):
            if table:
                return q
        return len(self._wait)

    def _crossing(self, rec: Rec, when: float, top: int) -> float:
        """When running ``rec``, demoted at ``when``, is next demoted out of a queue no higher than ``top`` (a
        demotion that can make it a victim): its crossings after ``when`` computed as :meth:`_catch_up` and
        :meth:`_schedule` will (the same operations on the same numbers); inf if it never is."""
        job, rate, th, last = rec.job, rec.rate, self.thresholds, len(self.thresholds)
        base = rec.base[0] if rec.base is not None else 0.0
        at, q = when, rec.q
        while True:
            q = max(q, self.queue_of(job.attained_service(at) - base + TIME_EPS * rate))
            if q >= last:
                return math.inf
            nxt = at + max(th[q] - (job.attained_service(at) - base), 0.0) / rate
            if q >= top:
                return nxt
            at = nxt

    def _restore_deferred(self) -> None:
        """Put every deferred entry back where it came from (each one is a reason to decide again)."""
        for entry in self._deferred:
            heapq.heappush(self._heap, entry)
        for el in self._deferred_el:
            heapq.heappush(self._eligible, el)
        self._deferred, self._deferred_el = [], []
        self._deferred_top = 0
        self._later = math.inf

    def next_decision_time(self) -> float | None:
        """When the queues can next change without an event (the scheduler decides then): the earliest
        pending demotion or promotion (stale heap entries are dropped), and, while jobs wait, the earliest
        moment a running job reaches ``min_run_time`` (a new possible victim). None: nothing pending.

        After a round with nothing left to do (:meth:`_quiet_now`; ``lazy_turns``), a moment that cannot change
        the plan is no reason to decide: a demotion into a queue no waiting job is below (victims come from the
        queues below a waiting job's only, so the round would be the last one again), and a job reaching its
        minimum run time in such a queue. Those are taken out of the heaps until the next round, which applies
        the demotions at their own times (:meth:`_catch_up`); a deferred job's first later crossing that would
        matter is a reason to decide (:meth:`_crossing`). Every event, arrival or end still brings a round."""
        heap, recs = self._heap, self._recs
        lazy = self.lazy_turns and self._quiet_now()
        top = len(self._wait)  # (the highest queue with a waiting job, once needed; none: the queue count)
        if lazy:
            top = self._top_waiting()
            if top < self._deferred_top:  # a job waits higher than when some were deferred: they may matter now
                self._restore_deferred()  # (and _later, computed for that queue, may come too late)
            elif not self._deferred:
                self._later = math.inf  # (the deferred demotions were all applied)
        t = self._later if lazy else math.inf
        since = self._decided_at + TIME_EPS  # (an entry due by the last round was due then: never deferred)
        while heap:
            when, _, job_id, epoch = heap[0]
            rec = recs.get(job_id)
            if rec is None or rec.epoch != epoch:
                heapq.heappop(heap)
                continue
            if lazy and rec.running and top > rec.q and since < when < t:
                # a demotion into a queue no waiting job is below: no new victim, the last round again
                heapq.heappush(self._deferred, heapq.heappop(heap))
                self._deferred_top = max(self._deferred_top, top)
                if top < len(self.thresholds):
                    self._later = t = min(t, self._crossing(rec, when, top))
                continue
            t = min(t, when)
            break
        eligible = self._eligible
        if not lazy:  # not quiet: the deferred entries are reasons to decide as the others are (kept apart)
            deferred = self._deferred
            while deferred:
                when, _, job_id, epoch = deferred[0]
                rec = recs.get(job_id)
                if rec is not None and rec.epoch == epoch:
                    t = min(t, when)
                    break
                heapq.heappop(deferred)
            head = eligible[0][0] if eligible else math.inf
            if self._deferred_el:  # (the earliest of both, as one heap's head would be)
                head = min(head, self._deferred_el[0][0])
            if since < head < t and any(self._wait):
                t = head
            return t if t < math.inf else None
        # (a round with waiting jobs drops the eligibility times it has reached, see _still_quiet)
        while eligible and t > eligible[0][0] > since and any(self._wait):
            when, job_id = eligible[0]
            rec = recs.get(job_id)
            # (lazy) a victim only if its queue then is below the highest waiting job's (2 x TIME_EPS of slack
            # for a demotion due about then)
            if lazy and rec is not None and rec.running and rec.q <= top \
                    and self.queue_of(self.service(rec.job, when) + 2 * TIME_EPS * rec.rate) <= top:
                heapq.heappush(self._deferred_el, heapq.heappop(eligible))
                self._deferred_top = max(self._deferred_top, top)
                continue
            t = when
            break
        return t if t < math.inf else None
