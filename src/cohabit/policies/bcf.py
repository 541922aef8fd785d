"""BCF, Biggest Convergence First (Rotary-DLT's baseline (b), Liu dissertation §3.3.2).

"It always runs the jobs with the biggest convergence completion criteria first and handles
the other jobs following a round-robin strategy": jobs with a ``converge delta d`` criterion
first, largest ``d`` first (the loosest, soonest met), then the others round-robin, one epoch
at a time (:class:`~cohabit.policies.arbiter.EpochArbiter`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.job import JobView
from ..engine.view import ClusterView
from ..spec.criteria import Convergence
from .arbiter import EpochArbiter
from .params import build


class BCF(EpochArbiter):
    def __init__(self) -> None:
        super().__init__()
        self.name = "bcf"

    def rank(self, view: ClusterView, jobs: Sequence[JobView]) -> list[JobView]:
        def key(j: JobView) -> tuple:
            c = j.spec.criteria
            if isinstance(c, Convergence):
                return (0, -c.delta, j.seq)
            return (1, *self.rr_key(j))
        return sorted(jobs, key=key)


def make(oracle: bool = False, **params: object) -> BCF:
    return build(BCF, params, policy="bcf")
