"""Earliest deadline first (Liu dissertation §3.2.2, a heuristic baseline of Rotary-AQP).

Each running epoch goes to the jobs whose deadline comes first: submission time plus the
completion criterion's WITHIN duration (``accuracy >= 0.9 within 600s``), else the job's
``deadline``; jobs without one come last, in arrival order.
"""

from __future__ import annotations

from ..engine.job import JobView
from ..engine.view import ClusterView
from .arbiter import EpochArbiter, absolute_deadline
from .params import build


class EDF(EpochArbiter):
    name = "edf"

    def priority(self, job: JobView, view: ClusterView) -> tuple[float, ...]:
        return (absolute_deadline(job),)


def make(oracle: bool = False, **params: object) -> EDF:
    return build(EDF, params, policy="edf")
