"""Ground-truth speed of a simulated job on an allocation.

``job_rate`` gives iterations (work units) per second for a job on a set of
task slots, from the embedded measured profiles:

* GPU-trace jobs (Tiresias, Philly, Alibaba): the trace's duration at its
  reference size, scaled by worker count (``scaling_exponent``; 1 = linear)
  and by the per-model consolidation factor of ``profiles.placement``
  relative to the most consolidated placement possible for that size;
* Pollux applications: measured step and sync times per placement
  (``profiles.pollux``), work in iterations at the app's smallest batch size;
* parameter-server jobs whose model was measured in DL2's profile: the
  measured speed for (#PS, #workers), interpolated (``profiles.ps_speed``);
* any job sharing a GPU device: times the measured co-location speed of the
  models on that device (``profiles.colocation``, Lucid's pairs).

Harmony's parameter-server jobs (a ``JobTruth`` with ``ps``) take their speed from
``sim.harmony_physics`` instead: per group of jobs sharing machines, pipelined or not.

This module is simulator-only: policies never import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..engine.ledger import Allocation
from ..spec.graph import cross_node_mb
from ..spec.job import JobSpec
from .drl_physics import InterferenceWorld, base_speed
from .harmony_physics import HarmonyWorld
from .profiles.colocation import shared_gpu_speed
from .profiles.placement import SpreadModel
from .profiles.pollux import POLLUX_APPS, pollux_throughput
from .profiles.ps_speed import PS_MODELS, ps_throughput
from .traces.pollux import app_profile
from .truth import JobTruth


@dataclass(frozen=True)
class SimConfig:
    """Knobs of the simulated world (costs in seconds)."""

    checkpoint_s: float = 10.0
    restore_s: float = 20.0
    #: seconds before a job's first start makes progress (container start, data loading); resumes,
    #: migrations and resizes pay ``checkpoint_s + restore_s`` instead
    start_s: float = 0.0
    #: Pollux applications progress at their goodput (statistical efficiency of the batch size from
    #: the profiled gradient noise scale, per epoch; ``sim.pollux_goodput``) instead of their
    #: throughput; other jobs are unaffected
    pollux_goodput: bool = False
    #: with ``pollux_goodput``: jobs choose their batch size per allocation (Pollux's co-adaptation;
    #: set by the runner when the policy has ``adapts_batch``), else they keep ``JobSpec.batch_size``
    adaptive_batch: bool = False
    scaling_exponent: float = 1.0
    gpus_per_node: int = 8
    link_gbps: float = 10.0  # each node's network link, for task-graph jobs' traffic (MLFS)
    report_interval_s: float | None = None  # periodic progress + loss reports; None: first iteration only
    spread: SpreadModel = field(default_factory=SpreadModel)
    harmony: HarmonyWorld = field(default_factory=HarmonyWorld)  # parameter-server jobs with a PSTruth
    #: server-level interference of DL2-profiled PS/all-reduce jobs (``sim.drl_physics``); None: off.
    #: ``runner.config_for`` switches it on for clusters whose nodes are labelled ``interference: drl``.
    interference: InterferenceWorld | None = None

    def __post_init__(self) -> None:
        for name in ("checkpoint_s", "restore_s", "start_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not 0 < self.scaling_exponent <= 1.5:
            raise ValueError(f"scaling_exponent must be in (0, 1.5], got {self.scaling_exponent!r}")
        if self.report_interval_s is not None and not self.report_interval_s > 0:
            raise ValueError(f"report_interval_s must be > 0 seconds or None, got {self.report_interval_s!r}")
        if not self.link_gbps > 0:
            raise ValueError(f"link_gbps must be > 0, got {self.link_gbps!r}")
        if self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node must be >= 1, got {self.gpus_per_node!r}")


#: The physics of the Pollux artifact's simulator (petuum/adaptdl, osdi21-artifact, ``simulator/``):
#: goodput with statistical efficiency and 30 s before any (re)allocation makes progress (first starts
#: included; checkpoint + restore = 30 s for the others). Its 60 s scheduling interval is the
#: scheduler's ``decision_period`` (see ``sim.runner.simulate``). docs/pollux.md compares the two worlds.
POLLUX_ARTIFACT = SimConfig(pollux_goodput=True, start_s=30.0, checkpoint_s=10.0, restore_s=20.0)


def uses_goodput(truth: JobTruth, cfg: SimConfig) -> bool:
    """True when ``truth``'s job progresses at its Pollux goodput (``sim.pollux_goodput``)."""
    return cfg.pollux_goodput and truth.ps is None and truth.app is not None and truth.app in POLLUX_APPS


def replicas_per_node(alloc: Allocation, n_workers: int) -> tuple[int, ...]:
    counts: dict[int, int] = {}
    for s in alloc.slots[:n_workers]:
        counts[s.node] = counts.get(s.node, 0) + 1
    return tuple(sorted(counts.values(), reverse=True))


def solo_rate(spec: JobSpec, truth: JobTruth, alloc: Allocation, cfg: SimConfig) -> float:
    """Iterations per second of ``spec`` on ``alloc`` running alone on its devices."""
    if spec.graph is not None and truth.compute_s is not None:
        return 1.0 / (truth.compute_s + graph_comm_s(spec, alloc, cfg))
    n_workers = len(alloc.slots) - spec.num_ps
    per_node = replicas_per_node(alloc, n_workers)
    app = truth.app
    if app is not None and app in POLLUX_APPS:
        # Work is counted in iterations at the app's smallest profiled batch size (the
        # loader's convention), so samples/s divide by that batch size. Statistical
        # efficiency of large batches (Pollux's goodput) is not modelled: a sample is a sample.
        prof = app_profile(app)
        batch = spec.batch_size or prof.init_batch_size * n_workers
        return pollux_throughput(app, per_node, batch) / prof.init_batch_size
    if app is not None and app in PS_MODELS and spec.architecture == "ps":
        return ps_throughput(app, max(spec.num_ps, 1), n_workers)
    if app is not None and app in PS_MODELS and spec.architecture == "allreduce" and truth.duration is None:
        return base_speed(app, True, n_workers, 0)  # a worker + server-shard bundle per worker (drl_physics)
    if truth.duration is None:
        raise ValueError(f"job {spec.id!r}: truth has neither a duration nor a known profile app ({app!r})")
    base = truth.iterations / truth.duration
    scale = (n_workers / truth.ref_workers) ** cfg.scaling_exponent
    return base * scale * consolidation_factor(spec, truth, alloc, cfg)


def consolidation_factor(spec: JobSpec, truth: JobTruth, alloc: Allocation, cfg: SimConfig) -> float:
    """Speed of a trace-duration job on ``alloc`` relative to the most consolidated placement of
    its size (per-model factor of ``profiles.placement``; <= 1). 1 for profile-driven jobs
    (Pollux, DL2 parameter-server models), whose profiles already hold the placement's speed.
    The GPU's compute per iteration is the same on any placement, so this is also the share of
    time its GPUs compute rather than wait for communication (``sim.usage``)."""
    if spec.graph is not None and truth.compute_s is not None:  # computing share of an iteration
        return truth.compute_s / (truth.compute_s + graph_comm_s(spec, alloc, cfg))
    app = truth.app
    if truth.duration is None or app in POLLUX_APPS or (app in PS_MODELS and spec.architecture == "ps"):
        return 1.0
    gpu_per_worker = spec.workers.demand["gpu"]
    if gpu_per_worker < 1:
        return 1.0
    n_workers = len(alloc.slots) - spec.num_ps
    per_node = replicas_per_node(alloc, n_workers)
    per_node_cap = max(int(cfg.gpus_per_node // gpu_per_worker), 1)
    min_nodes = math.ceil(n_workers / per_node_cap)
    spread = cfg.spread.speed_factor(spec.model, len(per_node)) / cfg.spread.speed_factor(spec.model, min_nodes)
    return min(spread, 1.0)


def graph_traffic_mb(spec: JobSpec, alloc: Allocation) -> dict[int, float]:
    """MB each node sends to other nodes per iteration of a task-graph job on ``alloc``."""
    assert spec.graph is not None
    return cross_node_mb(spec.graph, spec.architecture, spec.num_ps, alloc.nodes)


def graph_comm_s(spec: JobSpec, alloc: Allocation, cfg: SimConfig) -> float:
    """Communication seconds per iteration of a task-graph job (MLFS §3.2): the busiest node's
    outgoing cross-node megabytes over its link (transfers within a node are free)."""
    out = graph_traffic_mb(spec, alloc)
    return max(out.values(), default=0.0) * 8e6 / (cfg.link_gbps * 1e9)


def colocation_factor(model: str, others: list[str]) -> float:
    """Speed factor of a job of ``model`` sharing a GPU with jobs of ``others``."""
    if not others:
        return 1.0
    return shared_gpu_speed([model, *others])[0]
