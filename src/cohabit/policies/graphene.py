"""``graphene``: Graphene (Grandl et al., OSDI'16), MLFS's DAG-aware baseline (§2, §4.1).

Graphene schedules the "troublesome" tasks of a DAG first: those with many dependants and those
whose demands are hard to pack. cohabit starts a job whole, so the score is per job: the
number of dependency edges below its tasks (each task's descendants in its replica, summed,
plus one per task) times its dominant share of the cluster's capacity (tough to pack), over
its remaining work (Graphene orders jobs by a blend of objectives, JCT first: a shorter job
goes earlier). The remaining work is iterations left times the measured iteration time, or
its declared iterations times a sample iteration time before the first report. Jobs go
consolidated-first where they fit; no preemption.
"""

from __future__ import annotations

import numpy as np

from ..engine.actions import Plan
from ..engine.job import JobView
from ..engine.view import ClusterView
from .base import BasePolicy, place_in_order, waiting_jobs
from .params import build
from .placement import Draft


def troublesome(job: JobView, capacity: np.ndarray, demand: np.ndarray) -> float:
    """Dependants (descendant tasks, + 1 each) times dominant share of the job's demand."""
    g = job.spec.graph
    if g is None:
        deps = float(job.spec.workers.count)
    else:
        below = [0] * g.num_partitions
        for p in reversed(g.layers):
            below[p] = sum(1 + below[c] for c in g.children[p])
        deps = float(sum(1 + b for b in below) * g.replicas)
    total = capacity.sum(axis=0)
    share = np.max(np.where(total > 0, demand * job.spec.workers.count / np.where(total > 0, total, 1), 0.0))
    return deps * float(share)


class Graphene(BasePolicy):
    def __init__(self) -> None:
        self.name = "graphene"

    def decide(self, view: ClusterView) -> Plan:
        waiting = waiting_jobs(view)
        if not waiting:
            return []
        cap = np.asarray(view.capacity)
        seen = [j.iter_time for j in view.running.values() if j.iter_time]
        sample = float(np.median(seen)) if seen else 1.0

        def key(job: JobView) -> tuple[float, int]:
            left = max((job.spec.iterations or 1) - job.iterations_done(view.now), 1.0)
            work = left * (job.iter_time or view.history.mean_iter_time(job.spec.model) or sample)
            return (-troublesome(job, cap, view.demand_vector(job)) / max(work, 1e-9), job.seq)

        return place_in_order(view, sorted(waiting, key=key), Draft(view).place)


def make(oracle: bool = False, **params: object) -> Graphene:
    return build(Graphene, params, policy="graphene")
