"""Least accuracy first (Liu dissertation §3.2.2 and §3.3.2, a heuristic baseline of Rotary).

Each running epoch goes to the jobs whose latest reported ``accuracy`` is lowest (a job not yet
run counts as 0): for queries the envelope estimate they report per batch, for training jobs
their evaluation accuracy; ties in arrival order.
"""

from __future__ import annotations

from ..engine.job import JobView
from ..engine.view import ClusterView
from .arbiter import EpochArbiter, latest_accuracy
from .params import build


class LAF(EpochArbiter):
    name = "laf"

    def priority(self, job: JobView, view: ClusterView) -> tuple[float, ...]:
        return (latest_accuracy(job),)


def make(oracle: bool = False, **params: object) -> LAF:
    return build(LAF, params, policy="laf")
