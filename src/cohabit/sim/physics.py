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
  models on that device (``profiles.colocation``, Lucid's pairs);
* a job whose truth has ``gpu_speed`` (Gavel's traces): times its speed on the
  slowest GPU model among its nodes (``gpu_model`` labels; synchronous workers
  wait for the slowest), relative to the GPU its duration was measured on.

``SimConfig.slowdown`` stretches every iteration and ``restart_s`` gives
per-(GPUs, model) restart costs: :data:`PHYSICS` names the settings that
reproduce a public simulator's physics (``cohabit simulate --physics muri``),
see :func:`physics_config`.

Harmony's parameter-server jobs (a ``JobTruth`` with ``ps``) take their speed from
``sim.harmony_physics`` instead: per group of jobs sharing machines, pipelined or not.

This module is simulator-only: policies never import it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..data.gavel_table import pair_throughput, solo_throughputs
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

    slowdown: float = 1.0  # every iteration takes this many times its trace time (Muri: 1.015)
    #: (GPUs, model) -> seconds a (re)started job computes nothing, replacing checkpoint_s + restore_s
    #: on resumes and also paid on first starts (Muri's per-model overhead); None: not used
    restart_s: Mapping[tuple[int, str], float] | None = field(default=None, hash=False)  # a dict: not hashed
    restart_default_s: float = 10.0  # restart_s's value for a (GPUs, model) it does not list
    gpu_models: tuple[str, ...] = ()  # node index -> its gpu_model label, lower case ("" if none)
    #: LocalBackend's world (physics ``local``, ``sim.host_physics``): jobs with a ``HostTruth`` share
    #: their nodes' cores and bandwidth budgets, and pay their own measured start and restore
    #: latencies instead of ``start_s`` / ``checkpoint_s + restore_s``
    host_sharing: bool = False
    node_cores: tuple[float, ...] = ()  # node index -> its cores (the cluster's cpu capacity)
    #: host_sharing: other processes' runnable threads per core, competing with the jobs (``sim.calibrate``
    #: measures it from the CPU time a real run's jobs got; 0: the machine is the jobs' own)
    host_background: float = 0.0
    #: host_sharing: the background as it changed through a real run, ``((t0, b0), (t1, b1), ...)``: ``b_k``
    #: from ``t_k`` on (``b0`` before ``t0``); empty: ``host_background`` throughout (``sim.calibrate``)
    host_background_series: tuple[tuple[float, float], ...] = ()
    #: halts block the scheduler, as LocalBackend's do (physics ``local``): a job halted before it made
    #: progress first finishes starting (its process must be up to checkpoint and exit), and jobs
    #: launched at that moment or during the wait start only after it
    blocking_halts: bool = False
    #: speeds of jobs time-sharing GPUs: ``"lucid"`` (Lucid's measured pairs, ``profiles.colocation``) or
    #: ``"gavel"`` (physics ``gavel``: two jobs of Gavel's job types on GPUs of one type run at Gavel's
    #: measured pair throughputs, :func:`shared_speed`; anything else falls back to Lucid's)
    pair_speeds: str = "lucid"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.slowdown) and self.slowdown > 0):
            raise ValueError(f"slowdown must be a finite number > 0, got {self.slowdown!r}")
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
        times = [t for t, _ in self.host_background_series]
        if times != sorted(times) or any(not (math.isfinite(b) and b >= 0) for _, b in self.host_background_series):
            raise ValueError("host_background_series must be (time, load >= 0) pairs in increasing time, got "
                             f"{self.host_background_series!r}")
        if self.pair_speeds not in ("lucid", "gavel"):
            raise ValueError(f"pair_speeds must be 'lucid' or 'gavel', got {self.pair_speeds!r}")


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


def solo_rate(spec: JobSpec, truth: JobTruth, alloc: Allocation, cfg: SimConfig, *,
              consolidation: float | None = None) -> float:
    """Iterations per second of ``spec`` on ``alloc`` running alone on its devices (``consolidation``:
    :func:`consolidation_factor` on ``alloc`` if the caller has it already)."""
    if spec.graph is not None and truth.compute_s is not None:
        return 1.0 / (truth.compute_s + graph_comm_s(spec, alloc, cfg))
    n_workers = len(alloc.slots) - spec.num_ps
    app = truth.app
    if app is not None and app in POLLUX_APPS:
        # Work is counted in iterations at the app's smallest profiled batch size (the
        # loader's convention), so samples/s divide by that batch size. Statistical
        # efficiency of large batches (Pollux's goodput) is not modelled: a sample is a sample.
        per_node = replicas_per_node(alloc, n_workers)
        prof = app_profile(app)
        batch = spec.batch_size or prof.init_batch_size * n_workers
        return pollux_throughput(app, per_node, batch) / prof.init_batch_size
    if app is not None and app in PS_MODELS and spec.architecture == "ps":
        return ps_throughput(app, max(spec.num_ps, 1), n_workers)
    if app is not None and app in PS_MODELS and spec.architecture == "allreduce" and truth.duration is None:
        return base_speed(app, True, n_workers, 0)  # a worker + server-shard bundle per worker (drl_physics)
    if truth.duration is None:
        raise ValueError(f"job {spec.id!r}: truth has neither a duration nor a known profile app ({app!r})")
    base = truth.iterations / truth.duration / cfg.slowdown
    scale = (n_workers / truth.ref_workers) ** cfg.scaling_exponent
    if consolidation is None:
        consolidation = consolidation_factor(spec, truth, alloc, cfg)
    return base * scale * consolidation * gpu_model_factor(spec, truth, alloc, cfg) * cores_factor(spec, truth, alloc)


def amdahl(parallel_fraction: float, ratio: float) -> float:
    """Speed-up on ``ratio`` times the cores, by Amdahl's law: ``1 / ((1 - p) + p / ratio)``."""
    return 1.0 / ((1.0 - parallel_fraction) + parallel_fraction / ratio)


def cores_factor(spec: JobSpec, truth: JobTruth, alloc: Allocation) -> float:
    """Speed on the CPU cores of ``alloc`` relative to those of the job's demand (``truth.parallel_fraction``,
    Amdahl's law); 1 without a parallel fraction or a CPU demand."""
    p = truth.parallel_fraction
    want = float(spec.workers.demand.get("cpu", 0.0)) * (len(alloc.slots) - spec.num_ps)
    if p is None or want <= 0:
        return 1.0
    return amdahl(p, float(alloc.total.get("cpu", 0.0)) / want)


def gpu_model_factor(spec: JobSpec, truth: JobTruth, alloc: Allocation, cfg: SimConfig) -> float:
    """Speed on the slowest GPU model among the job's nodes relative to its trace's GPU (1 without
    ``truth.gpu_speed`` or node labels). A model the job has speed 0 on is an error: loaders keep such
    jobs off it (Gavel: a GPU-memory demand the model cannot meet)."""
    speeds = truth.gpu_speed
    if not speeds or not cfg.gpu_models:
        return 1.0
    worst = math.inf
    for node in set(alloc.nodes[: len(alloc.slots) - spec.num_ps]):
        model = cfg.gpu_models[node] if node < len(cfg.gpu_models) else ""
        v = speeds.get(model, 1.0)
        if v <= 0:
            raise ValueError(f"job {spec.id!r} cannot run on GPU model {model!r} (no measured speed there)")
        worst = min(worst, v)
    return worst if worst < math.inf else 1.0


def restart_delay(spec: JobSpec, cfg: SimConfig, *, from_checkpoint: bool, truth: JobTruth | None = None) -> float:
    """Seconds a launched job computes nothing: ``checkpoint_s + restore_s`` when it resumes from a
    checkpoint, ``start_s`` on its first start; with ``restart_s`` (Muri), that table's cost on every launch;
    with ``host_sharing`` (physics ``local``), a job with a ``HostTruth`` pays its own measured latencies."""
    if cfg.host_sharing and truth is not None and truth.host is not None:
        return truth.host.restore_s if from_checkpoint else truth.host.start_s
    if cfg.restart_s is not None:
        key = (spec.workers.count, spec.model)
        return cfg.restart_s.get(key, cfg.restart_default_s)
    return cfg.checkpoint_s + cfg.restore_s if from_checkpoint else cfg.start_s


#: Muri artifact (Zhao et al., SIGCOMM'22), ``simulator/run_sim.py`` ``overhead_dict``: seconds of
#: lost progress per (GPUs, model) when a job is (re)scheduled; 10 s for models it does not list.
MURI_OVERHEAD_S: dict[int, dict[str, float]] = {
    1: {"vgg16": 7, "vgg19": 7, "resnet18": 4, "shufflenet_v2_x1_0": 4, "bert": 10, "gpt2": 10, "a2c": 38, "dqn": 5},
    2: {"vgg16": 7, "vgg19": 7, "resnet18": 5, "shufflenet_v2_x1_0": 4, "bert": 10, "gpt2": 10, "a2c": 39, "dqn": 5},
    4: {"vgg16": 8, "vgg19": 8, "resnet18": 5, "shufflenet_v2_x1_0": 5, "bert": 10, "gpt2": 10, "a2c": 39, "dqn": 6},
    8: {"vgg16": 9, "vgg19": 9, "resnet18": 7, "shufflenet_v2_x1_0": 5, "bert": 10, "gpt2": 10, "a2c": 46, "dqn": 6},
    16: {"vgg16": 9, "vgg19": 10, "resnet18": 7, "shufflenet_v2_x1_0": 7, "bert": 10, "gpt2": 10, "a2c": 46, "dqn": 8},
    32: {"vgg16": 10, "vgg19": 10, "resnet18": 7, "shufflenet_v2_x1_0": 8, "bert": 10, "gpt2": 10, "a2c": 46, "dqn": 8},
}

#: Named physics for ``cohabit simulate --physics``: each reproduces one public simulator's world.
PHYSICS: dict[str, str] = {
    "cohabit": "cohabit's own: measured spread penalties, checkpoint 10 s + restore 20 s per resume",
    "muri": "the Muri artifact's Tiresias-format simulator: GPUs counted (no placement penalty), "
            "iterations 1.5% slower than traced, a per-(GPUs, model) overhead of 4-46 s at every (re)start",
    "gavel": "Gavel's simulator: every placement at the measured consolidated throughput, "
             "per-GPU-type speeds, no restart cost, 360 s rounds from t=0 (docs/fidelity.md)",
    "pollux-artifact": "the Pollux artifact's simulator: Pollux jobs progress at their goodput, 30 s start "
                       "delay, 60 s decision rounds (docs/pollux.md)",
}

#: Physics only for traces that ``sim.calibrate`` builds from a real run (their jobs carry a ``HostTruth``),
#: so not a ``cohabit simulate --physics`` choice: :func:`physics_config` knows them too.
CALIBRATION_PHYSICS: dict[str, str] = {
    "local": "cohabit's LocalBackend on one machine: tasks share their nodes' cores (and the machine's other "
             "load) and PS bandwidth budgets, measured start/restore latencies, halts block the scheduler",
}

#: Seconds between scheduling rounds a named physics imposes (others decide at every event).
PHYSICS_DECISION_PERIOD: dict[str, float] = {"pollux-artifact": 60.0, "gavel": 360.0}

#: Time of the first round where it is not one period (Gavel's simulator starts its first round at 0).
PHYSICS_FIRST_ROUND: dict[str, float] = {"gavel": 0.0}


def physics_config(name: str, base: SimConfig | None = None) -> SimConfig:
    """``base`` (default :class:`SimConfig`) with the physics :data:`PHYSICS` names.

    * ``muri``: ``jobs.py`` multiplies every iteration time by 1.015 (``itertime_overhead_list[0]``);
      SRTF and Tiresias place by GPU count only (``CLUSTER.free_gpu``), so no spread penalty;
      each scheduling of a running job costs ``overhead_dict``'s seconds (:data:`MURI_OVERHEAD_S`).
    * ``pollux-artifact``: :data:`POLLUX_ARTIFACT` (with 60 s rounds, :data:`PHYSICS_DECISION_PERIOD`).
    * ``local``: :attr:`SimConfig.host_sharing` (``sim.host_physics``; docs/fidelity.md, "Sim vs real").
    * ``gavel``: ``scheduler.py`` uses the ``'null'`` (consolidated, alone) throughput for every
      placement, and for two jobs sharing GPUs (its packing policies) each one's measured pair throughput
      (``pair_speeds="gavel"``, :func:`shared_speed`), and charges nothing to preempt or resume a job
      between rounds; its 360 s rounds
      (``--time_per_iteration``) starting at 0 are :data:`PHYSICS_DECISION_PERIOD` and
      :data:`PHYSICS_FIRST_ROUND`: jobs launch and stop only at round boundaries, and a job that
      ends mid-round leaves its GPUs idle until the next one.
    """
    cfg = base or SimConfig()
    flat = SpreadModel(factors={}, default=1.0)
    if name == "cohabit":
        return cfg
    if name == "muri":
        table = {(g, m): float(v) for g, row in MURI_OVERHEAD_S.items() for m, v in row.items()}
        return replace(cfg, slowdown=1.015, spread=flat, restart_s=table, restart_default_s=10.0)
    if name == "gavel":
        return replace(cfg, spread=flat, checkpoint_s=0.0, restore_s=0.0, pair_speeds="gavel")
    if name == "local":
        return replace(cfg, host_sharing=True, blocking_halts=True, spread=flat)
    if name == "pollux-artifact":
        return replace(cfg, pollux_goodput=POLLUX_ARTIFACT.pollux_goodput, start_s=POLLUX_ARTIFACT.start_s,
                       checkpoint_s=POLLUX_ARTIFACT.checkpoint_s, restore_s=POLLUX_ARTIFACT.restore_s)
    raise ValueError(f"unknown physics {name!r}; known: {', '.join([*PHYSICS, *CALIBRATION_PHYSICS])}")


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
    n_nodes = len({s.node for s in alloc.slots[:n_workers]})  # (len of replicas_per_node: the nodes it spans)
    per_node_cap = max(int(cfg.gpus_per_node // gpu_per_worker), 1)
    min_nodes = math.ceil(n_workers / per_node_cap)
    return _spread_ratio(cfg.spread, spec.model, n_nodes, min_nodes)


#: (id(spread model), model, nodes, fewest nodes) -> (the spread model, :func:`_spread_ratio`): a launch asks for
#: the same few (model, nodes) pairs again and again (the spread model is read-only: its factors never change)
_SPREAD: dict[tuple[int, str | None, int, int], tuple[object, float]] = {}


def _spread_ratio(spread: SpreadModel, model: str | None, n_nodes: int, min_nodes: int) -> float:
    """``min(speed_factor(model, n_nodes) / speed_factor(model, min_nodes), 1)``, kept per arguments."""
    key = (id(spread), model, n_nodes, min_nodes)
    hit = _SPREAD.get(key)
    if hit is not None and hit[0] is spread:
        return hit[1]
    ratio = min(spread.speed_factor(model, n_nodes) / spread.speed_factor(model, min_nodes), 1.0)
    if len(_SPREAD) > 4096:
        _SPREAD.clear()
    _SPREAD[key] = (spread, ratio)  # (keeps the model alive: its id stays its own)
    return ratio


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


def gavel_pair_factor(spec: JobSpec, other: JobSpec, gpu: str) -> float | None:
    """Speed of ``spec`` sharing its GPUs of type ``gpu`` with ``other``, relative to alone there, from
    Gavel's measured pair throughputs (``data.gavel_table``: the job types are the specs' ``model``, the
    scale factor their worker count); None where the table has no positive entry for the pair."""
    a, b = (spec.model, spec.workers.count), (other.model, other.workers.count)
    both = pair_throughput(gpu, a, b)
    alone = solo_throughputs().get(gpu, {}).get(a, 0.0)
    if both is None or both[0] <= 0 or both[1] <= 0 or alone <= 0:
        return None
    return both[0] / alone


def shared_speed(spec: JobSpec, others: list[JobSpec], nodes: Iterable[int], cfg: SimConfig) -> float:
    """Speed factor of ``spec`` time-sharing GPUs on ``nodes`` with ``others`` (1 with none).

    ``cfg.pair_speeds == "gavel"`` and one other job: Gavel's measured pair throughput on the slowest
    factor among the GPU models of ``nodes`` (:func:`gavel_pair_factor`; Gavel packs pairs only, on one
    type); otherwise, or where Gavel measured no such pair, Lucid's (:func:`colocation_factor`)."""
    if not others:
        return 1.0
    if cfg.pair_speeds == "gavel" and len(others) == 1 and cfg.gpu_models:
        factors = [gavel_pair_factor(spec, others[0], cfg.gpu_models[n] if n < len(cfg.gpu_models) else "")
                   for n in set(nodes)]
        if factors and all(f is not None for f in factors):
            return min(f for f in factors if f is not None)
    return colocation_factor(spec.model, [o.model for o in others])
