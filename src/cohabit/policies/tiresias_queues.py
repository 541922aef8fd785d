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

    def _catch_up(self, view: ClusterView) -> None:
        """Undo what the scheduler refused from the last plan; apply demotions and promotions due."""
        now = view.now
        for started, job_id in self._last_plan:
            rec = self._recs.get(job_id)
            if rec is not None and rec.running != started:
                continue  # already reconciled (e.g. finished and gone)
            if rec is not None and (rec.job.state is JobState.RUNNING) != started:
                self._set_running(rec, now, not started)
        self._last_plan = []
        heap = self._heap
        while heap and heap[0][0] <= now + TIME_EPS:
            _, _, job_id, epoch = heapq.heappop(heap)
            rec = self._recs.get(job_id)
            if rec is None or rec.epoch != epoch:
                continue
            if rec.running:
                q = self.queue_of(self.service(rec.job, now) + TIME_EPS * rec.rate)
                if q > rec.q:
                    self._move(rec, q, now)  # demotion (paper §3.2.3)
            elif self._starved(rec, now):
                self._promote(rec, now)
            self._schedule(rec, now)

    def next_decision_time(self) -> float | None:
        """When the queues can next change without an event (the scheduler decides then): the earliest
        pending demotion or promotion (stale heap entries are dropped), and, while jobs wait, the earliest
        moment a running job reaches ``min_run_time`` (a new possible victim). None: nothing pending."""
        heap, recs = self._heap, self._recs
        while heap:
            _, _, job_id, epoch = heap[0]
            rec = recs.get(job_id)
            if rec is not None and rec.epoch == epoch:
                break
            heapq.heappop(heap)
        t = heap[0][0] if heap else math.inf
        # (a round with waiting jobs drops the eligibility times it has reached, see _still_quiet)
        if self._eligible and self._eligible[0][0] > self._decided_at + TIME_EPS and any(self._wait):
            t = min(t, self._eligible[0][0])
        return t if t < math.inf else None
