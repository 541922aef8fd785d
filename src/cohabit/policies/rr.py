"""Round-robin arbitration (the naive baseline of Rotary, Liu dissertation §3.2.2 and §3.3.2).

Every active job gets a resource in turn for one epoch at a time, until it reaches its
completion criterion: jobs that never ran first (in arrival order), then the least recently
run. Epoch-granular preemption with checkpoint: :class:`~cohabit.policies.arbiter.EpochArbiter`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.job import JobView
from ..engine.view import ClusterView
from .arbiter import EpochArbiter
from .params import build


class RoundRobin(EpochArbiter):
    def __init__(self) -> None:
        super().__init__()
        self.name = "rr"

    def rank(self, view: ClusterView, jobs: Sequence[JobView]) -> list[JobView]:
        return sorted(jobs, key=self.rr_key)


def make(oracle: bool = False, **params: object) -> RoundRobin:
    return build(RoundRobin, params, policy="rr")
