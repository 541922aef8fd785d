"""Earliest deadline first (Liu dissertation §3.2.2, a heuristic baseline of Rotary-AQP).

Each running epoch goes to the jobs whose deadline comes first: submission time plus the
completion criterion's WITHIN duration (``accuracy >= 0.9 within 600s``), else the job's
``deadline``; jobs without one come last, in arrival order. Epochs, preemption and checkpoints:
:class:`~cohabit.policies.arbiter.EpochArbiter`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.job import JobView
from ..engine.view import ClusterView
from .arbiter import EpochArbiter
from .params import build
from .progress_view import absolute_deadline


class EDF(EpochArbiter):
    def __init__(self, switch_cost_s: float = 0.0) -> None:
        super().__init__()
        self.name = "edf"
        self.switch_cost_s = switch_cost_s or None

    def rank(self, view: ClusterView, jobs: Sequence[JobView]) -> list[JobView]:
        return sorted(jobs, key=lambda j: (absolute_deadline(j), j.seq))


def make(oracle: bool = False, **params: object) -> EDF:
    return build(EDF, params, policy="edf")
