"""Least current accuracy first: Rotary-AQP's LAF baseline (Liu dissertation §3.2.2).

Rotary-AQP's LAF "always prioritizes the jobs [that] have the ... least accuracy": the jobs whose
latest *reported* accuracy is lowest (for a query, the envelope estimate it reports every batch;
a job not yet run counts as 0) get the next running epoch; ties in arrival order. It differs from
Rotary-DLT's LAF (``laf``: lowest accuracy *criterion* first), hence its own name.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.job import JobView
from ..engine.view import ClusterView
from .arbiter import EpochArbiter
from .params import build
from .progress_view import latest_accuracy


class LeastCurrentAccuracyFirst(EpochArbiter):
    def __init__(self, switch_cost_s: float = 0.0) -> None:
        super().__init__()
        self.name = "lcaf"
        self.switch_cost_s = switch_cost_s or None

    def rank(self, view: ClusterView, jobs: Sequence[JobView]) -> list[JobView]:
        return sorted(jobs, key=lambda j: (latest_accuracy(j), j.seq))


def make(oracle: bool = False, **params: object) -> LeastCurrentAccuracyFirst:
    return build(LeastCurrentAccuracyFirst, params, policy="lcaf")
