"""Ground truth of a simulated job: what the simulator knows and policies must not.

A trace gives each job a real length (``duration``) or an amount of work; the
simulator turns that into progress. None of this is reachable from a
``ClusterView``: trace loaders return :class:`TraceJob` pairs, the scheduler
receives only ``TraceJob.spec`` and the ``SimBackend`` keeps the truth.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from ..spec.job import JobSpec
from ..spec.limits import MAX_ITERATIONS, MAX_TIME_S


@dataclass(frozen=True, slots=True)
class PSTruth:
    """Ground truth of a parameter-server job in Harmony's world (``sim.harmony_physics``).

    One iteration is PULL (network) -> COMP (CPU) -> PUSH (network) on every machine of the
    job's group, with a worker and a server shard co-located on each machine (Lee et al.).

    * ``t_cpu1``: seconds of one COMP subtask on a single machine, input in memory and no
      memory pressure; on ``m`` machines it takes ``t_cpu1 / m`` (Harmony Eq. 2).
    * ``t_pull`` / ``t_push``: seconds of the PULL and PUSH subtasks alone on the link
      (independent of the DoP, as the paper observes); ``t_net = t_pull + t_push``.
    * ``input_gb`` / ``model_gb``: input data and model sizes (Table I of the paper).
    * ``iters_per_epoch``: iterations in one pass over the input (the share of the input one
      COMP subtask reads: what must be reloaded from disk per iteration for spilled blocks).
    * ``deser``: extra CPU for deserialising reloaded blocks, as a fraction of COMP time when
      every block is on disk (alpha = 1).
    """

    t_cpu1: float
    t_pull: float
    t_push: float
    input_gb: float
    model_gb: float
    iters_per_epoch: int = 20
    deser: float = 0.15

    @property
    def t_net(self) -> float:
        return self.t_pull + self.t_push

    def __post_init__(self) -> None:
        for name in ("t_cpu1", "t_pull", "t_push", "input_gb", "model_gb", "deser"):
            v = getattr(self, name)
            if not v >= 0:
                raise ValueError(f"PSTruth.{name} must be >= 0, got {v!r}")
        if not self.t_cpu1 > 0 or not self.t_net > 0:
            raise ValueError("PSTruth needs t_cpu1 > 0 and t_pull + t_push > 0")
        if self.iters_per_epoch < 1:
            raise ValueError(f"PSTruth.iters_per_epoch must be >= 1, got {self.iters_per_epoch!r}")


@dataclass(frozen=True, slots=True)
class HostTruth:
    """Ground truth of a real job in ``LocalBackend``'s world (``sim.host_physics``, physics ``local``),
    measured from what a scheduler observed of it in a real run (``sim.calibrate``).

    * ``cpu_s``: seconds of one iteration spent computing when each of its worker tasks has a
      core to itself (its threads never wait for another job's);
    * ``link_s``: seconds of one iteration spent moving parameter-server traffic through the node
      links when the job has its nodes' bandwidth budgets to itself (0: no cross-node traffic);
      ``wire_s`` of it its bytes hold a node's budget (bytes per iteration / the budget's rate),
      the rest (sending, waiting for replies, framing) does not compete with other jobs' bytes
      (None: all of ``link_s``);
    * ``start_s``: seconds from its first launch to progress (process start, imports, data, the
      first iteration's extra cost); ``restore_s``: the same for a relaunch from a checkpoint
      (checkpoint of the job it replaced included: the scheduler waits for that halt).
    """

    cpu_s: float
    link_s: float = 0.0
    start_s: float = 0.0
    restore_s: float = 0.0
    wire_s: float | None = None

    @property
    def iter_s(self) -> float:
        return self.cpu_s + self.link_s

    @property
    def wire(self) -> float:
        """Seconds per iteration its bytes hold a node's bandwidth budget (``wire_s``, else ``link_s``)."""
        return self.link_s if self.wire_s is None else self.wire_s

    def __post_init__(self) -> None:
        for name in ("cpu_s", "link_s", "start_s", "restore_s", "wire_s"):
            v = getattr(self, name)
            if v is None and name == "wire_s":
                continue
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"HostTruth.{name} must be a finite number of seconds >= 0, got {v!r}")
        if self.wire_s is not None and self.wire_s > self.link_s + 1e-12:
            raise ValueError(f"HostTruth.wire_s ({self.wire_s!r}) must be at most link_s ({self.link_s!r})")
        if not self.cpu_s + self.link_s > 0:
            raise ValueError("HostTruth needs cpu_s + link_s > 0")


@dataclass(frozen=True, slots=True)
class JobTruth:
    """Ground truth of one job.

    * ``iterations``: total work in iterations. When the trace gives none, the
      simulator uses nominal iterations of one second each at the reference
      placement (``iterations = ceil(duration)``).
    * ``duration``: seconds the job ran in the trace at its reference size
      (``ref_workers`` workers, consolidated, alone). ``None`` when the
      length comes from a profile (Pollux applications, PS jobs).
    * ``app``: profile key for profile-driven jobs (Pollux application name,
      PS model name); ``None`` for duration-driven GPU-trace jobs. Work units
      follow the profile: iterations at the smallest profiled batch for Pollux
      applications, samples for DL2 parameter-server models.
    * ``loss_curve``: (a, b, c) of the job's loss curve (see :meth:`loss_at`).
    * ``ps``: a Harmony parameter-server job's subtask times and data sizes (:class:`PSTruth`);
      when set, ``sim.harmony_physics`` gives its speed (``iterations`` to convergence).
    * ``accuracy``: the job's validation accuracy after each epoch (Rotary's per-epoch
      convergence series acc_{i,1..T}, §3.1.4); the simulator reports it, with ``epoch``, at
      every epoch boundary (one epoch = ``iterations / len(accuracy)`` iterations), so that
      completion criteria can be evaluated. ``heldout_accuracy``: the same model's accuracy on
      held-out data after each epoch, reported beside it for false-attainment accounting only.
    * ``compute_s``: a task-graph job's (``JobSpec.graph``) computation seconds per iteration;
      communication is added from the graph's volumes and the placement (``physics``).
    * ``used``: resource name -> the fraction of its allocation of that resource the job
      really uses while it trains (e.g. ``{"cpu": 0.3, "mem_gb": 0.5}``: a job that asked for
      more than it needs); may exceed 1 (it uses more than it asked for). ``sim.usage``
      reports it as the job's *used* share; resources not named here have no ground truth
      (except the GPU and a parameter-server job's CPU, memory and network, which the
      simulator's physics gives).
    * ``host``: a real job's measured costs in ``LocalBackend``'s world (:class:`HostTruth`); under
      the ``local`` physics (``SimConfig.host_sharing``) its speed comes from ``sim.host_physics``.
    * ``gpu_speed``: GPU model (a node's ``gpu_model`` label, lower case) -> speed there relative to
      the GPU ``duration`` was measured on (Gavel's traces: throughput relative to a V100); 0 where
      the job cannot run on that model (it does not fit its memory). ``None``: the same on every GPU.
    * ``parallel_fraction``: a CPU job's speed depends on the cores it is given (a progressive
      query's DuckDB threads, changed by ``SetShare``): Amdahl's law with this parallel fraction,
      relative to the cores of its demand, which ``duration`` was measured with. ``None``: the
      cores given do not change its speed.
    """

    iterations: int
    duration: float | None = None
    ref_workers: int = 1
    app: str | None = None
    loss_curve: tuple[float, float, float] | None = None
    ps: PSTruth | None = None
    used: Mapping[str, float] | None = None
    accuracy: tuple[float, ...] | None = None
    heldout_accuracy: tuple[float, ...] | None = None
    compute_s: float | None = None
    gpu_speed: Mapping[str, float] | None = None
    parallel_fraction: float | None = None
    host: HostTruth | None = None

    @property
    def iters_per_epoch(self) -> float | None:
        """Iterations in one epoch of the accuracy curve (None without one)."""
        return self.iterations / len(self.accuracy) if self.accuracy else None

    def accuracy_at(self, fraction: float) -> float | None:
        """Validation accuracy after ``fraction`` of the work: the last completed epoch's (what the job
        has reported by then); 0 before its first epoch, None without an accuracy curve."""
        if not self.accuracy:
            return None
        epochs = math.floor(min(max(fraction, 0.0), 1.0) * len(self.accuracy) + 1e-9)
        return self.accuracy[epochs - 1] if epochs else 0.0

    def loss_at(self, fraction: float, job_id: str = "") -> float:
        """Training loss after ``fraction`` of the work, in Optimus's form (Peng et al., EuroSys'18,
        Eq. 1): loss = 1 / (a * p + b) + c with p the fraction of iterations done.

        Without a ``loss_curve`` the parameters are drawn deterministically from the job id
        (a in [5, 30], b = 1, c in [0.05, 0.4]): synthetic but stable, so policies that learn
        from losses (Optimus, SLAQ) have a curve to fit."""
        a, b, c = self.loss_parameters(job_id)
        return 1.0 / (a * min(max(fraction, 0.0), 1.0) + b) + c

    def loss_parameters(self, job_id: str = "") -> tuple[float, float, float]:
        """``(a, b, c)`` of :meth:`loss_at` for the job ``job_id``."""
        return self.loss_curve if self.loss_curve is not None else default_loss_curve(job_id)

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {self.iterations}")
        if self.duration is not None and not 0 < self.duration <= MAX_TIME_S:
            raise ValueError(f"duration must be > 0 and <= {MAX_TIME_S:g} s, got {self.duration}")
        if self.iterations > MAX_ITERATIONS:
            raise ValueError(f"iterations must be <= {MAX_ITERATIONS}, got {self.iterations}")
        if self.ref_workers < 1:
            raise ValueError(f"ref_workers must be >= 1, got {self.ref_workers}")
        if self.parallel_fraction is not None and not 0 <= self.parallel_fraction <= 1:
            raise ValueError(f"parallel_fraction must be in [0, 1], got {self.parallel_fraction}")
        for name, frac in (self.used or {}).items():
            if not isinstance(name, str) or not name or not (isinstance(frac, int | float) and math.isfinite(frac)
                                                             and frac >= 0):
                raise ValueError(f"used[{name!r}] must be a fraction >= 0 of the allocation, got {frac!r}")
        for name in ("accuracy", "heldout_accuracy"):
            curve = getattr(self, name)
            if curve is None:
                continue
            if not curve or not all(isinstance(x, int | float) and math.isfinite(x) for x in curve):
                raise ValueError(f"{name} must be a non-empty list of finite numbers (one per epoch), got {curve!r}")
            object.__setattr__(self, name, tuple(float(x) for x in curve))
        if self.heldout_accuracy is not None and (self.accuracy is None
                                                  or len(self.heldout_accuracy) != len(self.accuracy)):
            raise ValueError("heldout_accuracy needs an accuracy curve of the same length (one value per epoch)")
        if self.compute_s is not None and not (math.isfinite(self.compute_s) and self.compute_s > 0):
            raise ValueError(f"compute_s must be a number of seconds > 0, got {self.compute_s!r}")
        for name, v in (self.gpu_speed or {}).items():
            if not isinstance(name, str) or not name or not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"gpu_speed[{name!r}] must be a relative speed >= 0, got {v!r}")
        if self.loss_curve is not None:
            a, b, c = self.loss_curve
            if not (a >= 0 and b > 0 and c >= 0):
                raise ValueError(f"loss_curve (a, b, c) needs a >= 0, b > 0, c >= 0, got {self.loss_curve}")


def default_loss_curve(job_id: str) -> tuple[float, float, float]:
    """Deterministic per-job loss-curve parameters (see :meth:`JobTruth.loss_at`)."""
    h = zlib.crc32(job_id.encode())
    u1, u2 = (h & 0xFFFF) / 0xFFFF, (h >> 16) / 0xFFFF
    return 5.0 + 25.0 * u1, 1.0, 0.05 + 0.35 * u2


@dataclass(frozen=True, slots=True)
class TraceJob:
    """A job as read from a trace: the public spec and the hidden truth."""

    spec: JobSpec
    truth: JobTruth
