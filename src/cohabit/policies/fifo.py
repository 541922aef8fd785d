"""FIFO: start jobs in arrival order; the head of the queue blocks those behind it.

With ``backfill=True`` a job that does not fit is skipped and later ones may
start (EASY-style backfilling without reservations). Placement is
consolidated-first (``placement.consolidated_first``). FIFO never pauses a
job itself; a job the backend evicted (its node went away) is paused and goes
back to the head of the queue: it resumes from its checkpoint first.
"""

from __future__ import annotations

from itertools import chain

from ..engine.actions import Plan, Resume, Start
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft
from .params import build


class FIFO(BasePolicy):
    def __init__(self, backfill: bool = False) -> None:
        self.backfill = backfill
        self.name = "fifo-backfill" if backfill else "fifo"  # the registry name: one name in tables and on the CLI

    def decide(self, view: ClusterView) -> Plan:
        if not view.pending and not view.paused:
            return []
        draft = Draft(view)
        plan: Plan = []
        for job in chain(view.paused.values(), view.pending.values()):
            p = draft.place(job)
            if p is None:
                if self.backfill and not draft.exhausted():  # exhausted: no later job fits either
                    continue
                break
            plan.append(Resume(job.id, p) if job.id in view.paused else Start(job.id, p))
        return plan


def make(oracle: bool = False, **params: object) -> FIFO:
    return build(FIFO, params, policy="fifo")


def make_backfill(oracle: bool = False, **params: object) -> FIFO:
    return build(FIFO, params, policy="fifo-backfill", fixed={"backfill": True})
