"""Synthetic GPU workloads: arrivals, model mix, job sizes and lengths, deterministic per seed.

>>> jobs = generate(100, seed=1)
>>> len(jobs), jobs[0].spec.submit_time
(100, 0.0)

Defaults are fitted to the Philly trace (``philly_82k.csv``, Sep–Dec 2017):

* arrivals: Poisson, mean inter-arrival :data:`PHILLY_MEAN_INTERARRIVAL`
  (114.4 s: 82,247 jobs over 108.9 days);
* sizes: :data:`PHILLY_GPU_SIZES`, the measured share of jobs per GPU count
  (93% use one GPU);
* lengths: :data:`PHILLY_DURATION`, a lognormal fitted to ln(duration)
  (mu 6.79, sigma 2.16: median 19 min, mean 3.6 h, heavy right tail);
* models: uniform over the ten CNNs of ``tiresias_480.csv``.

Sizes, models and lengths are drawn independently of each other (in Philly,
multi-GPU jobs also tend to run longer; this generator does not model that).

Each job is what the Tiresias loader would produce for the same row:
``simple_job(id, gpus, submit_time=t, model=m, iterations=k)`` with truth
``JobTruth(iterations=k, duration=d, ref_workers=gpus)``. ``k`` is the
duration divided by the model's seconds per iteration at that size, taken as
the median of ``duration / iterations`` in ``tiresias_480.csv`` (nominal one
second for a model that trace does not have). :func:`write_tiresias_csv`
saves a workload that ``load_trace(path, "tiresias")`` reads back to equal jobs.

Arrival processes (``arrival=``):

* ``"poisson"``: exponential inter-arrival times (coefficient of variation 1);
* ``"uniform"``: inter-arrival times uniform on [0, 2m] (mean m, CV 0.577):
  steadier than Poisson;
* ``"bursty"``: a two-state Markov-modulated Poisson process. A calm state
  and a burst state whose rate is ``burst_rate_ratio`` times higher; the
  process spends ``burst_time_fraction`` of the time in bursts, each lasting
  ``mean_burst_seconds`` on average (exponential); rates are set so that the
  long-run mean inter-arrival time is still ``mean_interarrival``.

The three random streams (arrivals; models; sizes; lengths) come from one
``numpy.random.SeedSequence(seed)`` split four ways, so changing the arrival
process changes only the submit times.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..truth import JobTruth, TraceJob
from ._common import gpu_job

ARRIVALS: tuple[str, ...] = ("poisson", "uniform", "bursty")
DURATION_DISTS: tuple[str, ...] = ("lognormal", "exponential", "uniform", "constant")

PHILLY_MEAN_INTERARRIVAL = 114.4
"""Seconds between submissions in the Philly trace, on average."""

PHILLY_GPU_SIZES: dict[int, float] = {
    1: 0.9317, 2: 0.0221, 4: 0.0227, 8: 0.0200, 12: 0.0001, 16: 0.0024, 24: 0.0001, 32: 0.0008, 64: 0.0001,
    128: 0.00004,
}
"""Share of Philly jobs per GPU count (rounded; weights are normalised when drawing)."""

PHILLY_DURATION: tuple[str, float, float] = ("lognormal", 6.79, 2.16)
"""Lognormal fit of Philly job durations: mean and std of ln(seconds)."""

MIN_DURATION = 1.0
"""Shortest generated job (seconds); shorter draws are raised to it."""


@cache
def seconds_per_iteration() -> dict[tuple[str, int], float]:
    """Median ``duration / iterations`` per (model, GPUs) in the embedded ``tiresias_480`` trace."""
    from ._load import load_trace

    samples: dict[tuple[str, int], list[float]] = defaultdict(list)
    for job in load_trace("tiresias_480", "tiresias").jobs:
        assert job.truth.duration is not None
        samples[job.spec.model, job.spec.workers.count].append(job.truth.duration / job.truth.iterations)
    return {key: statistics.median(v) for key, v in samples.items()}


def default_models() -> dict[str, float]:
    """The ten models of ``tiresias_480.csv``, equally likely."""
    models = sorted({m for m, _ in seconds_per_iteration()})
    return {m: 1.0 for m in models}


def iteration_time(model: str, gpus: int) -> float:
    """Seconds per iteration of ``model`` on ``gpus`` GPUs (see :func:`seconds_per_iteration`).

    Sizes the trace lacks use the largest measured size below them (or the
    smallest above); an unknown model runs nominal one-second iterations.
    """
    table = seconds_per_iteration()
    sizes = sorted(g for m, g in table if m == model)
    if not sizes:
        return 1.0
    below = [g for g in sizes if g <= gpus]
    return table[model, below[-1] if below else sizes[0]]


# ---------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------
def _mix(name: str, mix: Mapping[Any, float], key_ok: Any, key_what: str) -> tuple[list[Any], np.ndarray]:
    if not isinstance(mix, Mapping) or not mix:
        raise ValueError(f"{name} must be a non-empty mapping of {key_what} to weight, got {mix!r}")
    keys, weights = [], []
    for k, w in mix.items():
        if not key_ok(k):
            raise ValueError(f"{name}: expected {key_what} as keys, got {k!r}")
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
            raise ValueError(f"{name}[{k!r}]: expected a weight >= 0, got {w!r}")
        keys.append(k)
        weights.append(float(w))
    total = sum(weights)
    if total <= 0:
        raise ValueError(f"{name}: the weights must not all be 0, got {dict(mix)!r}")
    return keys, np.asarray(weights) / total


def _positive(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    return float(v)


def _check_duration_dist(dist: Sequence[Any]) -> tuple[str, tuple[float, ...]]:
    shapes = {"lognormal": ("mu", "sigma"), "exponential": ("mean",), "uniform": ("low", "high"),
              "constant": ("seconds",)}
    if isinstance(dist, str) or not isinstance(dist, Sequence) or not dist or dist[0] not in shapes:
        raise ValueError(f"duration_dist must be a tuple (kind, *params) with kind one of "
                         f"{', '.join(DURATION_DISTS)}, got {dist!r}")
    kind, params = dist[0], tuple(dist[1:])
    names = shapes[kind]
    if len(params) != len(names):
        raise ValueError(f"duration_dist {kind!r} takes ({', '.join(names)}), got {params!r}")
    for n, p in zip(names, params, strict=True):
        if isinstance(p, bool) or not isinstance(p, int | float) or not math.isfinite(p):
            raise ValueError(f"duration_dist {kind!r}: {n} must be a finite number, got {p!r}")
    if kind == "lognormal" and params[1] < 0:
        raise ValueError(f"duration_dist 'lognormal': sigma must be >= 0, got {params[1]!r}")
    if kind in ("exponential", "constant") and params[0] <= 0:
        raise ValueError(f"duration_dist {kind!r}: {names[0]} must be > 0, got {params[0]!r}")
    if kind == "uniform" and not 0 <= params[0] <= params[1]:
        raise ValueError(f"duration_dist 'uniform': need 0 <= low <= high, got {params!r}")
    return kind, tuple(float(p) for p in params)


# ---------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------
def _mmpp(n: int, rng: np.random.Generator, mean_gap: float, ratio: float, fraction: float,
          burst_seconds: float) -> np.ndarray:
    """The first ``n`` arrival times of a two-state Markov-modulated Poisson process."""
    calm_rate = 1.0 / (mean_gap * ((1.0 - fraction) + ratio * fraction))
    rates = (calm_rate, calm_rate * ratio)
    calm_seconds = burst_seconds * (1.0 - fraction) / fraction
    stays = (calm_seconds, burst_seconds)
    chunks: list[np.ndarray] = []
    have, t = 0, 0.0
    state = int(rng.random() < fraction)  # start in the stationary distribution
    while have < n:
        stay = rng.exponential(stays[state])
        k = rng.poisson(rates[state] * stay)
        if k:
            chunks.append(t + np.sort(rng.uniform(0.0, stay, size=k)))
            have += k
        t += stay
        state = 1 - state
    return np.concatenate(chunks)[:n]


def _arrivals(n: int, rng: np.random.Generator, kind: str, mean_gap: float, bursty: tuple[float, float, float]
              ) -> np.ndarray:
    if kind == "poisson":
        times = np.cumsum(rng.exponential(mean_gap, size=n))
    elif kind == "uniform":
        times = np.cumsum(rng.uniform(0.0, 2.0 * mean_gap, size=n))
    else:
        times = _mmpp(n, rng, mean_gap, *bursty)
    return times - times[0]


def _durations(n: int, rng: np.random.Generator, kind: str, params: tuple[float, ...]) -> np.ndarray:
    if kind == "lognormal":
        d = rng.lognormal(params[0], params[1], size=n)
    elif kind == "exponential":
        d = rng.exponential(params[0], size=n)
    elif kind == "uniform":
        d = rng.uniform(params[0], params[1], size=n)
    else:
        d = np.full(n, params[0])
    return d


def generate(
    n_jobs: int,
    *,
    seed: int,
    arrival: str = "poisson",
    mean_interarrival: float = PHILLY_MEAN_INTERARRIVAL,
    model_mix: Mapping[str, float] | None = None,
    gpu_sizes: Mapping[int, float] | None = None,
    duration_dist: Sequence[Any] = PHILLY_DURATION,
    max_duration: float | None = None,
    burst_rate_ratio: float = 10.0,
    burst_time_fraction: float = 0.1,
    mean_burst_seconds: float | None = None,
    start_time: float = 0.0,
    id_prefix: str = "syn",
) -> list[TraceJob]:
    """``n_jobs`` GPU jobs sorted by submit time; the same arguments always give the same jobs.

    * ``arrival``: ``"poisson"``, ``"uniform"`` or ``"bursty"`` (see the module
      docstring); ``mean_interarrival`` seconds between submissions on average;
      the first job arrives at ``start_time``.
    * ``model_mix``: model name -> weight (default: :func:`default_models`).
    * ``gpu_sizes``: GPU count -> weight (default: :data:`PHILLY_GPU_SIZES`).
    * ``duration_dist``: ``("lognormal", mu, sigma)`` of ln(seconds),
      ``("exponential", mean)``, ``("uniform", low, high)`` or
      ``("constant", seconds)``; draws are clipped to
      [:data:`MIN_DURATION`, ``max_duration``] and rounded to milliseconds.
    * bursty only: ``burst_rate_ratio`` (> 1), ``burst_time_fraction`` (in
      (0, 1)) and ``mean_burst_seconds`` (default 10 x ``mean_interarrival``).
    * ids are ``<id_prefix>-<i>``, zero-padded, in submission order.
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 0:
        raise ValueError(f"n_jobs must be an integer >= 0, got {n_jobs!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if arrival not in ARRIVALS:
        raise ValueError(f"unknown arrival process {arrival!r}; known: {', '.join(ARRIVALS)}")
    mean_gap = _positive("mean_interarrival", mean_interarrival)
    models, model_p = _mix("model_mix", default_models() if model_mix is None else model_mix,
                           lambda k: isinstance(k, str) and bool(k), "model names")
    sizes, size_p = _mix("gpu_sizes", PHILLY_GPU_SIZES if gpu_sizes is None else gpu_sizes,
                         lambda k: isinstance(k, int | np.integer) and not isinstance(k, bool) and k >= 1,
                         "GPU counts (integers >= 1)")
    kind, params = _check_duration_dist(duration_dist)
    hi = math.inf if max_duration is None else _positive("max_duration", max_duration)
    if hi < MIN_DURATION:
        raise ValueError(f"max_duration must be >= {MIN_DURATION}, got {max_duration!r}")
    ratio = _positive("burst_rate_ratio", burst_rate_ratio)
    if ratio <= 1.0:
        raise ValueError(f"burst_rate_ratio must be > 1, got {burst_rate_ratio!r}")
    fraction = _positive("burst_time_fraction", burst_time_fraction)
    if fraction >= 1.0:
        raise ValueError(f"burst_time_fraction must lie in (0, 1), got {burst_time_fraction!r}")
    burst_seconds = 10.0 * mean_gap if mean_burst_seconds is None else _positive("mean_burst_seconds",
                                                                                 mean_burst_seconds)
    if isinstance(start_time, bool) or not isinstance(start_time, int | float) or not (
            math.isfinite(start_time) and start_time >= 0):
        raise ValueError(f"start_time must be a finite number >= 0, got {start_time!r}")
    if not isinstance(id_prefix, str) or not id_prefix:
        raise ValueError(f"id_prefix must be a non-empty string, got {id_prefix!r}")
    if n_jobs == 0:
        return []

    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(4)]
    times = float(start_time) + _arrivals(n_jobs, streams[0], arrival, mean_gap, (ratio, fraction, burst_seconds))
    model_idx = streams[1].choice(len(models), size=n_jobs, p=model_p)
    size_idx = streams[2].choice(len(sizes), size=n_jobs, p=size_p)
    durations = np.round(np.clip(_durations(n_jobs, streams[3], kind, params), MIN_DURATION, hi), 3)

    width = len(str(n_jobs - 1))
    jobs = []
    for i in range(n_jobs):
        model, gpus, duration = models[model_idx[i]], int(sizes[size_idx[i]]), float(durations[i])
        iterations = max(1, round(duration / iteration_time(model, gpus)))
        spec = gpu_job(f"{id_prefix}-{i:0{width}d}", gpus, submit_time=round(float(times[i]), 3), model=model,
                       iterations=iterations)
        jobs.append(TraceJob(spec, JobTruth(iterations=iterations, duration=duration, ref_workers=gpus)))
    return jobs


# ---------------------------------------------------------------------------
# saving
# ---------------------------------------------------------------------------
def _num(x: float) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def write_tiresias_csv(jobs: Iterable[TraceJob], path: str | Path) -> Path:
    """Save jobs as a Tiresias CSV that ``load_trace(path, "tiresias")`` reads back to equal jobs.

    Rows are written in submission order; ``interval`` is the gap to the next
    submission (0 for the last). Only what the format holds is kept: id, GPU
    count, submit time, model, iterations and duration (not tenant, deadline,
    ...). Every job must use whole GPUs, one per worker, without parameter
    servers, and have a truth duration; a job that declares no iterations is
    written with ``truth.iterations`` (which the format then declares).
    """
    rows = sorted(jobs, key=lambda j: j.spec.submit_time)
    for job in rows:
        spec, truth = job.spec, job.truth
        if spec.ps is not None and spec.ps.count > 0 or spec.workers.demand["gpu"] != 1.0:
            raise ValueError(f"job {spec.id!r} cannot be written as Tiresias CSV: it must use whole GPUs, "
                             f"one per worker, and no parameter servers")
        if truth.duration is None:
            raise ValueError(f"job {spec.id!r} cannot be written as Tiresias CSV: its truth has no duration")
        if spec.iterations is not None and spec.iterations != truth.iterations:
            raise ValueError(f"job {spec.id!r} cannot be written as Tiresias CSV: declared iterations "
                             f"{spec.iterations} differ from the truth's {truth.iterations}")
    path = Path(path)
    with path.open("w", encoding="utf-8", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval"))
        for i, job in enumerate(rows):
            spec, truth = job.spec, job.truth
            nxt = rows[i + 1].spec.submit_time if i + 1 < len(rows) else spec.submit_time
            assert truth.duration is not None
            out.writerow((spec.id, spec.workers.count, _num(spec.submit_time), truth.iterations, spec.model,
                          _num(truth.duration), _num(nxt - spec.submit_time)))
    return path
