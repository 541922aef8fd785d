"""FIFO: start jobs in arrival order; the head of the queue blocks those behind it.

With ``backfill=True`` a job that does not fit is skipped and later ones may
start (EASY-style backfilling without reservations). Placement is
consolidated-first (``placement.consolidated_first``).
"""

from __future__ import annotations

from ..engine.actions import Plan, Start
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft
from .params import build


class FIFO(BasePolicy):
    def __init__(self, backfill: bool = False) -> None:
        self.backfill = backfill
        self.name = "fifo+backfill" if backfill else "fifo"

    def decide(self, view: ClusterView) -> Plan:
        if not view.pending:
            return []
        draft = Draft(view)
        plan: Plan = []
        for job in view.pending.values():
            p = draft.place(job)
            if p is None:
                if self.backfill:
                    continue
                break
            plan.append(Start(job.id, p))
        return plan


def make(oracle: bool = False, **params: object) -> FIFO:
    return build(FIFO, params, policy="fifo")


def make_backfill(oracle: bool = False, **params: object) -> FIFO:
    return build(FIFO, params, policy="fifo-backfill", fixed={"backfill": True})
