"""Round-robin arbitration (Liu dissertation §3.2.2, Rotary-AQP's naive baseline).

"roundrobin allocates one core to each job in turn until there are no more cores and run them
for an epoch per time until they reach their completion criteria": each running epoch, the jobs
granted least recently (never granted first, then in arrival order) get the next one.
"""

from __future__ import annotations

from ..engine.job import JobView
from ..engine.view import ClusterView
from .arbiter import EpochArbiter
from .params import build


class RoundRobin(EpochArbiter):
    name = "rr"

    def priority(self, job: JobView, view: ClusterView) -> tuple[float, ...]:
        return (self._last_granted.get(job.id, float("-inf")),)


def make(oracle: bool = False, **params: object) -> RoundRobin:
    return build(RoundRobin, params, policy="rr")
