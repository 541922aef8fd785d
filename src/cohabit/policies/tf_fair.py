"""``tf-fair``: TensorFlow on Borg's fair share (Abadi et al., OSDI'16; Verma et al., EuroSys'15),
MLFS's "TensorFlow" baseline (§4.1).

Borg shares a cell between users by fair share of the resources they hold; TensorFlow jobs run
as Borg jobs, whole. Each decision the waiting jobs are taken tenant by tenant, the tenant now
holding the fewest GPUs (weighted by the job weights) first, first come first served within a
tenant; each job starts where it fits (consolidated first) and nothing is preempted.
"""

from __future__ import annotations

from ..engine.actions import Plan
from ..engine.view import ClusterView
from .base import BasePolicy, place_in_order, waiting_jobs
from .params import build
from .placement import Draft


class TFFair(BasePolicy):
    def __init__(self) -> None:
        self.name = "tf-fair"

    def decide(self, view: ClusterView) -> Plan:
        waiting = waiting_jobs(view)
        if not waiting:
            return []
        held: dict[str, float] = {}
        for job in view.running.values():
            held[job.spec.tenant] = held.get(job.spec.tenant, 0.0) + job.allocation["gpu"] / job.spec.weight
        queue = sorted(waiting, key=lambda j: (held.get(j.spec.tenant, 0.0), j.seq))  # least share held first
        return place_in_order(view, queue, Draft(view).place)


def make(oracle: bool = False, **params: object) -> TFFair:
    return build(TFFair, params, policy="tf-fair")
