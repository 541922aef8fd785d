"""LAF, Lowest Accuracy First (Rotary-DLT's baseline (c), Liu dissertation §3.3.2).

"It always runs the jobs with the lowest accuracy completion criteria first and handles the
other jobs following a round-robin strategy": jobs with a metric target first, the lowest
target first (for a lower-is-better metric such as loss, the highest target is the easiest
and goes first), then the others round-robin, one epoch at a time
(:class:`~cohabit.policies.arbiter.EpochArbiter`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.job import JobView
from ..engine.view import ClusterView
from ..spec.criteria import MetricTarget, lower_is_better
from .arbiter import EpochArbiter
from .params import build


class LAF(EpochArbiter):
    def __init__(self) -> None:
        super().__init__()
        self.name = "laf"

    def rank(self, view: ClusterView, jobs: Sequence[JobView]) -> list[JobView]:
        def key(j: JobView) -> tuple:
            c = j.spec.criteria
            if isinstance(c, MetricTarget):
                return (0, -c.value if lower_is_better(c.metric) else c.value, j.seq)
            return (1, *self.rr_key(j))
        return sorted(jobs, key=key)


def make(oracle: bool = False, **params: object) -> LAF:
    return build(LAF, params, policy="laf")
