"""Run one policy over a trace in the simulator and compute its metrics."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..engine.loop import RunResult, Scheduler
from ..policies import Policy
from ..report.metrics import Metrics, compute_metrics
from ..spec.cluster import ClusterSpec
from . import drl_physics
from .backend import SimBackend
from .physics import SimConfig
from .truth import TraceJob


@dataclass
class SimOutcome:
    result: RunResult
    metrics: Metrics


def config_for(cluster: ClusterSpec, base: SimConfig | None = None) -> SimConfig:
    """``base`` with ``gpus_per_node`` set from the cluster's largest node, ``gpu_models`` from the
    nodes' ``gpu_model`` labels (lower case), ``link_gbps`` from the slowest node's ``net_gbps``
    when the nodes declare one, and Bao et al.'s server-level interference (``sim.drl_physics``)
    on when the cluster's nodes ask for it."""
    g = max((int(n.capacity["gpu"]) for n in cluster.nodes), default=1)
    models = tuple(str(n.labels.get("gpu_model", "")).lower() for n in cluster.nodes)
    links = [n.capacity["net_gbps"] for n in cluster.nodes if n.capacity["net_gbps"] > 0]
    cfg = replace(base or SimConfig(), gpus_per_node=max(g, 1), gpu_models=models)
    if links:
        cfg = replace(cfg, link_gbps=min(links))
    if cfg.interference is None and drl_physics.enabled_for(cluster):
        cfg = replace(cfg, interference=drl_physics.world_for(cluster))
    return cfg


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
    decision_period: float | None = None,
    first_round: float | None = None,
) -> SimOutcome:
    """Simulate ``policy`` on ``jobs``. The oracle is built only when ``oracle`` is set.

    ``decision_period``: the policy decides only every so many seconds (the Pollux artifact's
    60 s scheduling interval; ``Scheduler``); None: on every event and its own ticks, unless the
    policy sets ``decision_period`` itself; ``first_round``: the first round's time (default: one period;
    Gavel's rounds start at 0, ``sim.physics.PHYSICS_FIRST_ROUND``). A policy with ``adapts_batch`` (Pollux) makes the
    jobs choose their batch size per allocation (``SimConfig.adaptive_batch``)."""
    cfg = config_for(cluster, config)
    wanted = getattr(policy, "report_interval", None)
    if cfg.report_interval_s is None and wanted:
        cfg = replace(cfg, report_interval_s=float(wanted))  # the policy learns from periodic reports
    if getattr(policy, "adapts_batch", False) and not cfg.adaptive_batch:
        cfg = replace(cfg, adaptive_batch=True)
    backend = SimBackend(jobs, cfg)
    sched = Scheduler(
        cluster, policy, backend, oracle=backend.oracle() if oracle else None,
        strict=strict, horizon=horizon, on_progress=on_progress, decision_period=decision_period,
        first_round=first_round,
    )
    result = sched.run([tj.spec for tj in jobs])
    return SimOutcome(result, compute_metrics(result.record, cluster.capacity))
