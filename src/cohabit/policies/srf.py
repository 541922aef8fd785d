"""SRF, Shortest Runtime First (Rotary-DLT's baseline (a), Liu dissertation §3.3.2).

"It always runs the jobs with the shortest runtime completion criteria first and handles the
other jobs following a round-robin strategy": jobs with a ``run <budget>`` criterion first,
shortest budget first (budgets in seconds, epochs or iterations are compared within their
unit, seconds before epochs before iterations), then the others round-robin, one epoch at a
time (:class:`~cohabit.policies.arbiter.EpochArbiter`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.job import JobView
from ..engine.view import ClusterView
from ..spec.criteria import RunFor
from .arbiter import EpochArbiter
from .params import build

_UNITS = {"seconds": 0, "epochs": 1, "iterations": 2}


class SRF(EpochArbiter):
    def __init__(self) -> None:
        super().__init__()
        self.name = "srf"

    def rank(self, view: ClusterView, jobs: Sequence[JobView]) -> list[JobView]:
        def key(j: JobView) -> tuple:
            c = j.spec.criteria
            if isinstance(c, RunFor):
                return (0, _UNITS[c.budget.unit], float(c.budget.amount), j.seq)
            return (1, 0, *self.rr_key(j))
        return sorted(jobs, key=key)


def make(oracle: bool = False, **params: object) -> SRF:
    return build(SRF, params, policy="srf")
