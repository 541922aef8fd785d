"""Run one policy over a trace in the simulator and compute its metrics."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..engine.loop import RunResult, Scheduler
from ..policies import Policy
from ..report.metrics import Metrics, compute_metrics
from ..spec.cluster import ClusterSpec
from .backend import SimBackend
from .physics import SimConfig
from .truth import TraceJob


@dataclass
class SimOutcome:
    result: RunResult
    metrics: Metrics


def config_for(cluster: ClusterSpec, base: SimConfig | None = None) -> SimConfig:
    """``base`` with ``gpus_per_node`` set from the cluster's largest node and ``gpu_models`` from
    the nodes' ``gpu_model`` labels (lower case)."""
    g = max((int(n.capacity["gpu"]) for n in cluster.nodes), default=1)
    models = tuple(str(n.labels.get("gpu_model", "")).lower() for n in cluster.nodes)
    return replace(base or SimConfig(), gpus_per_node=max(g, 1), gpu_models=models)


def simulate(
    jobs: Sequence[TraceJob],
    cluster: ClusterSpec,
    policy: Policy,
    *,
    config: SimConfig | None = None,
    oracle: bool = False,
    horizon: float = math.inf,
    strict: bool = False,
    on_progress: Callable[[int, int, float], None] | None = None,
) -> SimOutcome:
    """Simulate ``policy`` on ``jobs``. The oracle is built only when ``oracle`` is set."""
    cfg = config_for(cluster, config)
    wanted = getattr(policy, "report_interval", None)
    if cfg.report_interval_s is None and wanted:
        cfg = replace(cfg, report_interval_s=float(wanted))  # the policy learns from periodic reports
    backend = SimBackend(jobs, cfg)
    sched = Scheduler(
        cluster, policy, backend, oracle=backend.oracle() if oracle else None,
        strict=strict, horizon=horizon, on_progress=on_progress,
    )
    result = sched.run([tj.spec for tj in jobs])
    return SimOutcome(result, compute_metrics(result.record, cluster.capacity))
