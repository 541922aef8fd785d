"""Offered load: how much work a trace asks of a cluster while its jobs arrive.

    offered load = sum over jobs of (resource demanded x seconds the job runs alone)
                   / (cluster capacity of that resource x span of arrivals)

The resource is the GPU on a cluster with GPUs, else the CPU (Harmony's CPU
machines). A job's "seconds alone" are at the size it requests, consolidated on
the fewest nodes, with no other job on its devices: the trace's duration for
duration-driven jobs (Tiresias, Philly, Alibaba), the measured profile for
Pollux applications and DL2 parameter-server models, and Harmony's subtask
model (``sim.harmony_physics``, one job alone on its machines) for Harmony jobs.
The span of arrivals is last submit time minus first.

A load near or above 1 means queues form while jobs arrive (the regime in which
the scheduling papers evaluate); at 0.2 a cluster runs mostly idle and every
policy starts every job at once. This reads the ground truth, so it belongs to
the simulator side and is computed for reports, never shown to a policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..engine.ledger import Allocation, TaskSlot
from ..spec.cluster import ClusterSpec
from .harmony_physics import group_speeds
from .physics import SimConfig, solo_rate
from .runner import config_for
from .truth import TraceJob


@dataclass(frozen=True)
class OfferedLoad:
    """Offered load of a set of jobs on a cluster (see the module docstring for the formula)."""

    resource: str
    demand_s: float  # resource-seconds demanded (e.g. GPU-seconds)
    capacity: float  # units of ``resource`` in the cluster
    span_s: float  # seconds from the first arrival to the last
    n_jobs: int

    @property
    def value(self) -> float | None:
        """The load, or None when it is undefined (no capacity, or all jobs arrive at once)."""
        if self.capacity <= 0 or self.span_s <= 0:
            return None
        return self.demand_s / (self.capacity * self.span_s)

    def describe(self) -> str:
        """One line for the console, e.g. ``offered GPU load 0.93 (1.2e6 GPU-s demanded / ...)``."""
        r = self.resource.upper()
        v = self.value
        if v is None:
            why = "no such capacity" if self.capacity <= 0 else "all jobs arrive at once"
            return f"offered {r} load undefined ({why}; {self.demand_s:.3g} {r}-s demanded)"
        return (f"offered {r} load {v:.3g} ({self.demand_s:.3g} {r}-seconds demanded / "
                f"({self.capacity:g} {r}s x {_duration(self.span_s)} of arrivals))")

    def to_json(self) -> dict[str, object]:
        v = self.value
        return {
            "value": None if v is None else round(v, 6),
            "resource": self.resource,
            "demand_s": self.demand_s,
            "capacity": self.capacity,
            "arrival_span_s": self.span_s,
            "jobs": self.n_jobs,
            "formula": f"sum({self.resource} x solo seconds) / ({self.resource} capacity x arrival span)",
        }


def _duration(seconds: float) -> str:
    """``4.03 h`` or ``109 d``."""
    return f"{seconds / 86400:.3g} d" if seconds >= 2 * 86400 else f"{seconds / 3600:.3g} h"


def _consolidated(tj: TraceJob, gpus_per_node: int) -> Allocation:
    """The requested workers packed onto the fewest nodes, one device index per worker."""
    spec = tj.spec
    n = spec.workers.count + spec.num_ps
    per_node = max(gpus_per_node, 1)
    slots = tuple(TaskSlot(node=i // per_node, devices=((i % per_node, 1.0),)) for i in range(n))
    return Allocation(job=spec.id, slots=slots, total=spec.total_demand())


def solo_seconds(tj: TraceJob, cfg: SimConfig) -> float:
    """Seconds ``tj`` runs alone at its requested size (see the module docstring)."""
    truth = tj.truth
    if truth.ps is not None:
        m = max(tj.spec.workers.count, 1)
        return truth.iterations * group_speeds(None, (truth.ps,), m, cfg.harmony)[0].iter_time
    if truth.duration is not None and truth.ref_workers == tj.spec.workers.count:
        return truth.duration
    rate = solo_rate(tj.spec, truth, _consolidated(tj, cfg.gpus_per_node), cfg)
    return truth.iterations / rate if rate > 0 else math.inf


def offered_load(jobs: Sequence[TraceJob], cluster: ClusterSpec, cfg: SimConfig | None = None) -> OfferedLoad:
    """The offered load of ``jobs`` on ``cluster`` (GPU if it has GPUs, else CPU)."""
    cfg = config_for(cluster, cfg)
    cap = cluster.capacity
    resource = "gpu" if cap.get("gpu", 0.0) > 0 else "cpu"
    demand = 0.0
    for tj in jobs:
        amount = float(tj.spec.total_demand().get(resource, 0.0))
        if amount > 0:
            demand += amount * solo_seconds(tj, cfg)
    submits = [tj.spec.submit_time for tj in jobs]
    span = (max(submits) - min(submits)) if submits else 0.0
    return OfferedLoad(resource, demand, float(cap.get(resource, 0.0)), float(span), len(jobs))
