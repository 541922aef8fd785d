"""Ground-truth goodput of the Pollux applications (``SimConfig.pollux_goodput``).

Without this option a Pollux job's work (iterations at the application's smallest profiled
batch ``M0``, see ``traces.pollux``) advances at ``samples/s / M0``: a sample at any batch size
counts as much as one at ``M0``. Large batches are in truth less sample-efficient; Pollux
(Qiao et al., OSDI'21, §3.1) measures how much with the gradient noise scale, and its
application profiles carry the measurements: every ``validation-<M>.csv`` holds, per epoch,
the progress at its end and the gradient statistics ``grad_sqr`` and ``grad_var`` measured
while training at total batch ``M``. With this option a job's progress rate on a placement is

    rate = gain(M_eff, epoch) / T_iter          (steps at M0 per second)

* ``gain = (var + sqr) / (var / scale + sqr)``, ``scale = M_eff / M0``
  (:func:`cohabit.models.goodput.gain`, Eq. 2 x ``M/M0``) with ``sqr``, ``var`` of the epoch the
  job is in, interpolated linearly in ``M`` between the two profiled batch sizes around it
  (held at the ends);
* ``T_iter = step(atomic) + s (step(atomic) - sync(atomic))`` from the measured step and sync
  times (``profiles.pollux.pollux_step_time``), the batch run as the job's agent splits it
  (:func:`cohabit.models.goodput.split_batch`: ``s`` accumulation steps of ``atomic`` samples,
  at least one accumulation step on one GPU above ``M0``), ``M_eff = K atomic (s + 1)``;
* the epoch: the number of epoch ends (progress at the end of each epoch, the smallest over
  the application's profiles, as the trace loader's target) the job has passed. The rate is
  constant within an epoch; the backend re-evaluates it at each epoch end.

The batch size is the job's ``batch_size`` (fixed: how Tiresias and Optimus run these
workloads), or, with ``adaptive=True`` (``SimConfig.adaptive_batch``, set when the policy
co-adapts batch sizes, Pollux §3.3), the batch of the largest true goodput on the allocation
among 50 sizes from ``max(M0, min_local K)`` to the largest profiled batch
(:func:`cohabit.models.goodput.candidate_batches`), chosen again at every epoch end and every
re-allocation. The job's own agent would choose from its fitted model; choosing from the truth
makes the simulated job a slightly better tuner than a real one (documented in docs/pollux.md).

Per-GPU batch limits: the smallest and largest local batch measured in ``placements.csv``,
except YOLOv3, whose largest is 8 as the Pollux artifact configures it (its profile measured 16).
"""

from __future__ import annotations

import csv
import io
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from ..models.goodput import BatchLimits, candidate_batches, gain, split_batch
from .profiles._common import lerp, profile_text
from .profiles.pollux import pollux_measured_rows, pollux_step_time
from .traces.pollux import app_profile

#: Largest per-GPU batch where the artifact's configuration differs from the largest measured.
MAX_LOCAL_OVERRIDE: dict[str, int] = {"yolov3": 8}


@dataclass(frozen=True)
class GoodputApp:
    """Statistical-efficiency profile of one application (module docstring)."""

    name: str
    limits: BatchLimits
    batches: tuple[float, ...]  # profiled total batch sizes, ascending
    epoch_ends: tuple[float, ...]  # progress at the end of each epoch (steps at M0)
    sqr: tuple[tuple[float, ...], ...]  # [epoch][batch index]
    var: tuple[tuple[float, ...], ...]

    @property
    def target(self) -> float:
        return self.epoch_ends[-1]

    def epoch(self, progress: float) -> int:
        """The epoch (0-based) a job that made ``progress`` is in (the last one past the end)."""
        return min(bisect_right(self.epoch_ends, progress + 1e-9), len(self.epoch_ends) - 1)

    def grad_stats(self, batch: float, epoch: int) -> tuple[float, float]:
        """(grad_sqr, grad_var) at total ``batch`` in ``epoch``."""
        return lerp(self.batches, self.sqr[epoch], batch), lerp(self.batches, self.var[epoch], batch)


@cache
def goodput_app(app: str) -> GoodputApp:
    """Read the ``validation-*.csv`` profiles of ``app`` (an application of ``traces.pollux``)."""
    prof = app_profile(app)
    sqr, var, ends = [], [], []
    for b in prof.batch_sizes:
        rows = list(csv.DictReader(io.StringIO(profile_text("pollux_apps", app, f"validation-{b}.csv"))))
        rows = rows[: prof.epochs]
        sqr.append([float(r["grad_sqr"]) for r in rows])
        var.append([float(r["grad_var"]) for r in rows])
        ends.append([float(r["progress"]) for r in rows])
    locals_ = [row[1] for row in pollux_measured_rows(app)]
    limits = BatchLimits(init_batch=prof.batch_sizes[0], max_batch=prof.batch_sizes[-1],
                         min_local=min(locals_), max_local=MAX_LOCAL_OVERRIDE.get(app, max(locals_)))
    return GoodputApp(
        name=app, limits=limits, batches=tuple(float(b) for b in prof.batch_sizes),
        epoch_ends=tuple(float(x) for x in np.min(np.array(ends), axis=0)),
        sqr=tuple(map(tuple, np.array(sqr).T.tolist())), var=tuple(map(tuple, np.array(var).T.tolist())),
    )


@dataclass(frozen=True, slots=True)
class RunConfig:
    """How a job runs on its placement in one epoch, and the truth of its speed there."""

    batch: int  # total batch actually run, K atomic (s + 1)
    atomic: int
    accum: int
    step_time: float  # one synchronising step at ``atomic``, seconds
    sync_time: float
    iter_time: float  # the whole iteration (s accumulation steps + the synchronising one)
    grad_sqr: float
    grad_var: float
    rate: float  # progress (steps at M0) per second

    def metrics(self, limits: BatchLimits) -> dict[str, float]:
        """What the job reports about its run (Pollux's agent reports these to the scheduler)."""
        return {"batch_size": float(self.batch), "atomic_bsz": float(self.atomic), "accum_steps": float(self.accum),
                "step_time": self.step_time, "sync_time": self.sync_time, "grad_sqr": self.grad_sqr,
                "grad_var": self.grad_var, "init_batch_size": float(limits.init_batch),
                "max_batch_size": float(limits.max_batch), "min_local_bsz": float(limits.min_local),
                "max_local_bsz": float(limits.max_local)}


def _config(app: GoodputApp, per_node: tuple[int, ...], atomic: int, accum: int, epoch: int) -> RunConfig:
    k = sum(per_node)
    step, sync = pollux_step_time(app.name, per_node, atomic)
    it = step + accum * (step - sync)
    batch = k * atomic * (accum + 1)
    sqr, var = app.grad_stats(batch, epoch)
    g = float(gain(float(batch), app.limits.init_batch, sqr, var))
    return RunConfig(batch, atomic, accum, step, sync, it, sqr, var, g / it)


@lru_cache(maxsize=1 << 15)
def fixed_config(app: str, per_node: tuple[int, ...], batch: int, epoch: int) -> RunConfig:
    """The run of a fixed total ``batch`` on ``per_node`` replicas in ``epoch``."""
    a = goodput_app(app)
    lim = a.limits
    atomic, accum = split_batch(batch, sum(per_node), lim.max_local, lim.init_batch, lim.max_batch)
    return _config(a, per_node, atomic, accum, epoch)


@lru_cache(maxsize=1 << 15)
def adaptive_config(app: str, per_node: tuple[int, ...], epoch: int) -> RunConfig:
    """The run of the batch with the largest true goodput on ``per_node`` in ``epoch``."""
    a = goodput_app(app)
    lim = a.limits
    k = sum(per_node)
    _, atomics, accums = candidate_batches(k, lim.init_batch, lim.max_batch, lim.min_local, lim.max_local)
    best: RunConfig | None = None
    for atomic, accum in sorted(set(zip(atomics.tolist(), accums.tolist()))):
        atomic = max(min(atomic, lim.max_batch // (k * (accum + 1))), 1)
        cfg = _config(a, per_node, atomic, accum, epoch)
        if best is None or cfg.rate > best.rate:
            best = cfg
    if best is None:  # no valid batch (more replicas than the largest batch allows): the smallest split
        return fixed_config(app, per_node, max(lim.init_batch, lim.min_local * k), epoch)
    return best


def run_config(app: str, per_node: Sequence[int], batch: int | None, progress: float, *,
               adaptive: bool) -> tuple[RunConfig, float]:
    """The job's run at ``progress`` and the progress at which its epoch ends (the rate changes)."""
    a = goodput_app(app)
    epoch = a.epoch(progress)
    key = tuple(sorted((int(x) for x in per_node if x), reverse=True))
    if adaptive or batch is None:
        cfg = adaptive_config(app, key, epoch) if adaptive else fixed_config(app, key, a.limits.init_batch, epoch)
    else:
        cfg = fixed_config(app, key, int(batch), epoch)
    return cfg, a.epoch_ends[epoch]


@cache
def _iteration_table(app: str) -> tuple[tuple[float, ...], tuple[tuple[float, ...], ...]]:
    """``(batches, iterations[epoch][batch index])``: the profiles' ``iteration`` column, the iterations
    at each profiled batch from the start to the end of each epoch."""
    prof = app_profile(app)
    cols = []
    for b in prof.batch_sizes:
        rows = list(csv.DictReader(io.StringIO(profile_text("pollux_apps", app, f"validation-{b}.csv"))))
        cols.append([float(r["iteration"]) for r in rows[: prof.epochs]])
    return tuple(float(b) for b in prof.batch_sizes), tuple(map(tuple, np.array(cols).T.tolist()))


class PolluxWork:
    """The true work and speed of a Pollux job: the oracle's :class:`~cohabit.engine.oracle.WorkModel`.

    Built by ``SimBackend.oracle()`` for jobs of the Pollux applications; only oracle policies get it.
    With goodput physics (``goodput=True``) the iterations per epoch are the profiles' ``iteration``
    column interpolated linearly in the batch size (what the Pollux artifact's Optimus+Oracle reads,
    ``Application.get_iteration``); without, a job's work is samples counted at ``M0`` (``solo_rate``),
    so the iterations at batch ``M`` to an epoch's end are its progress there x ``M0 / M``.
    """

    __slots__ = ("app", "batch_size", "goodput", "_app")

    def __init__(self, app: str, batch_size: int, *, goodput: bool) -> None:
        self.app = app
        self.batch_size = int(batch_size)
        self.goodput = goodput
        self._app = goodput_app(app)

    @property
    def epochs(self) -> int:
        return len(self._app.epoch_ends)

    @property
    def batch_limits(self) -> tuple[int, int, int, int]:
        lim = self._app.limits
        return lim.init_batch, lim.max_batch, lim.min_local, lim.max_local

    def epoch(self, done: float) -> int:
        return self._app.epoch(done)

    def iterations_after_epoch(self, epoch: int) -> float:
        e = min(max(int(epoch), 0), self.epochs - 1)
        if not self.goodput:
            return self._app.epoch_ends[e] * self._app.limits.init_batch / self.batch_size
        batches, table = _iteration_table(self.app)
        return lerp(batches, table[e], float(self.batch_size))

    def step_time(self, per_node: tuple[int, ...], local_bsz: int) -> tuple[float, float]:
        return pollux_step_time(self.app, per_node, local_bsz)
