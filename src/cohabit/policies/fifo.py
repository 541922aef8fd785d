"""FIFO: start jobs in arrival order; the head of the queue blocks those behind it.

With ``backfill=True`` a job that does not fit is skipped and later ones may
start (EASY-style backfilling without reservations). Placement is
consolidated-first (``placement.consolidated_first``). FIFO never pauses a
job itself; a job the backend evicted (its node went away) is paused and goes
back to the head of the queue: it resumes from its checkpoint first.

Without backfill a round goes only as far as the first job that does not fit; a round after one that
planned nothing returns at once while nothing it reads changed (``spread.QuietRounds``: no room given
back, nothing paused, the same head): on a contended cluster most rounds are arrivals and progress
reports behind a blocked head.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from itertools import chain

from ..engine.actions import Plan, Resume, Start
from ..engine.job import JobView
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft
from .spread import QuietRounds
from .params import build


class FIFO(BasePolicy):
    def __init__(self, backfill: bool = False) -> None:
        self.backfill = backfill
        self.name = "fifo-backfill" if backfill else "fifo"  # the registry name: one name in tables and on the CLI
        # without backfill a round stops at the first job that does not fit: skip it when it would plan
        # nothing again (room only shrinks until something is released; new jobs queue behind the head)
        self._quiet = QuietRounds() if not backfill else None

    def decide(self, view: ClusterView) -> Plan:
        if not view.pending and not view.paused:
            return []
        quiet = self._quiet
        return self._decide(view) if quiet is None else quiet.round(view, self._decide)

    def _decide(self, view: ClusterView) -> Plan:
        """One full round (see the module doc)."""
        draft = Draft(view)
        plan: Plan = []
        jobs = view.paused.values() if self.backfill else chain(view.paused.values(), view.pending.values())
        for job in jobs:
            p = draft.place(job)
            if p is None:
                if self.backfill and not draft.exhausted():  # exhausted: no later job fits either
                    continue
                return plan
            plan.append(Resume(job.id, p) if job.id in view.paused else Start(job.id, p))
        if self.backfill and view.pending_by_shape:
            self._backfill_pending(view, draft, plan)
        elif self.backfill:  # a view whose pending jobs are not grouped by shape: the plain scan
            for job in view.pending.values():
                p = draft.place(job)
                if p is not None:
                    plan.append(Start(job.id, p))
                elif draft.exhausted():
                    break
        return plan

    @staticmethod
    def _backfill_pending(view: ClusterView, draft: Draft, plan: Plan) -> None:
        """The pending jobs in queue order, each placed if it fits, as a scan of the whole queue would,
        but per shape (``ClusterView.pending_by_shape``) merged by queue position: once a job without
        parameter servers fails, every later job of its shape would fail too (room only shrinks within
        the plan and ``Draft.place`` depends on nothing else), so its shape drops out at once instead
        of being visited job by job (thousands wait on a contended cluster; Philly has 10 shapes)."""
        pos = view.pending_position
        heap: list[tuple[int, int, JobView, Iterator[tuple[str, JobView]]]] = []
        for k, jobs in enumerate(view.pending_by_shape.values()):
            it = iter(jobs.items())
            jid, job = next(it)
            heap.append((pos(jid), k, job, it))  # (position, k) is unique: jobs are never compared
        heapq.heapify(heap)
        while heap:
            _, k, job, it = heap[0]
            p = draft.place(job)
            if p is None and job.spec.num_ps == 0:
                heapq.heappop(heap)  # the rest of this shape fails too
            else:
                if p is not None:
                    plan.append(Start(job.id, p))
                nxt = next(it, None)
                if nxt is None:
                    heapq.heappop(heap)
                else:
                    heapq.heapreplace(heap, (pos(nxt[0]), k, nxt[1], it))
            if p is None and draft.exhausted():  # no later job fits either
                return


def make(oracle: bool = False, **params: object) -> FIFO:
    return build(FIFO, params, policy="fifo")


def make_backfill(oracle: bool = False, **params: object) -> FIFO:
    return build(FIFO, params, policy="fifo-backfill", fixed={"backfill": True})
