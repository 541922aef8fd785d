"""Ground-truth training speed of parameter-server jobs, from DL2's profile.

Source: ``data/profiles/ps_speed_dl2.txt``, the MXNet measurements released
with DL2 (Peng et al., "DL2: A Deep Learning-driven Scheduler for Deep
Learning Clusters", arXiv:1909.06040, 2019; file ``config_speed.txt`` of
the DL2 repository).
Each line is a Python tuple::

    (model, sync_mode, batch, n_ps, n_workers, [speed per worker],
     [cpu per PS], [cpu per worker])

with 8 models, all ``dist_sync``, one list entry per worker / per PS.

**Unit.** ``ps_throughput`` is the job's training speed in **samples per
second**: the sum of the per-worker speeds (DL2's own simulator also sums
them). The per-worker values are MXNet ``Speedometer`` readings, which are
samples/s; the magnitudes agree (ResNet-50, batch 32, one worker and one PS:
15.8/s; read as batches/s it would be 505 images/s through a single PS, out of
reach of the 2018 testbed), and with one PS the per-worker speed halves when
the worker count doubles (ResNet-50: 15.8 -> 2 x 7.7), i.e. the PS is the
bottleneck and the sum is the job's rate.

**Cleaning.** 10 of the 804 measurements are failed runs in which a worker
reported speed 0 (e.g. VGG-16 at (4 PS, 8 workers) sums to 0.0, and at
(1, 11) to 0.48 against 3.1 and 2.7 for its neighbours); they are dropped and
their lattice points interpolated like any unmeasured one.

**Interpolation.** The measured (#PS, #workers) points are a triangle
``n_ps + n_workers <= 24`` on the full integer lattice (ResNet-50, VGG-16) or
on the odd lattice (the other six models). At load, for every model, a
piecewise-linear interpolant over the Delaunay triangulation of the measured
points (:class:`scipy.interpolate.LinearNDInterpolator`) is evaluated on the
whole integer lattice ``1..max_ps x 1..max_workers`` and stored as nested
lists; a query is then two clamps and two list indexings. Linear interpolation
returns measured values exactly at measured points and stays within the range
of the enclosing triangle's corners elsewhere.

**Clamping (extrapolation).** Outside the measured region:

* ``n_ps`` above the largest measured for that worker count takes the speed at
  that largest count: extra parameter servers stop helping once the model is
  sharded finely enough (the measured rows are flat there, e.g. ResNet-50 with
  one worker: 48-62 samples/s for 8..23 PS);
* ``n_workers`` above the largest measured (12 for ResNet-50/VGG-16, 23 for
  DSSM and CNN-text, 11 for the rest) takes the speed at that largest count:
  no further gain or loss is assumed;
* ``n_ps`` or ``n_workers`` below 1 is an error (a PS job needs both).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache

import numpy as np
from ._common import as_count, canonical, profile_text

#: Models measured in DL2's profile, spelled as in the data file.
PS_MODELS: tuple[str, ...] = (
    "cnn-text-classification",
    "dssm",
    "inception-bn",
    "resnet-50",
    "resnext-110",
    "seq2seq",
    "vgg-16",
    "wlm",
)

_DATA_FILE = "ps_speed_dl2.txt"


@dataclass(frozen=True, slots=True)
class _Surface:
    """One model's speed and CPU on the integer lattice, as nested lists."""

    max_ps: int
    max_workers: int
    speed: list[list[float]]  # [n_ps][n_workers] samples/s, index 0 unused
    ps_cpu: list[list[float]]  # mean CPU per PS
    worker_cpu: list[list[float]]  # mean CPU per worker


@cache
def _records() -> dict[str, list[tuple[int, int, float, float, float]]]:
    """Valid measurements per model: (n_ps, n_workers, speed, ps cpu, worker cpu)."""
    out: dict[str, list[tuple[int, int, float, float, float]]] = {}
    for lineno, line in enumerate(profile_text(_DATA_FILE).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            model, _mode, _batch, n_ps, n_workers, speeds, ps_cpu, w_cpu = ast.literal_eval(line)
        except (ValueError, SyntaxError) as exc:  # pragma: no cover - data is fixed
            raise ValueError(f"{_DATA_FILE}:{lineno}: not a profile tuple: {exc}") from exc
        if len(speeds) != n_workers or len(ps_cpu) != n_ps or not speeds:
            raise ValueError(f"{_DATA_FILE}:{lineno}: list lengths do not match ({n_ps}, {n_workers})")
        if min(speeds) <= 0.0:  # a worker made no progress: failed run (see module doc)
            continue
        out.setdefault(model, []).append(
            (n_ps, n_workers, float(sum(speeds)), float(np.mean(ps_cpu)), float(np.mean(w_cpu)))
        )
    return out


def _fill_lattice(points: np.ndarray, values: np.ndarray, max_ps: int, max_workers: int) -> list[list[float]]:
    """Interpolate ``values`` at ``points`` onto the lattice and clamp outside the hull."""
    from scipy.interpolate import LinearNDInterpolator  # deferred: scipy is slow to import

    grid_p, grid_w = np.meshgrid(np.arange(1, max_ps + 1), np.arange(1, max_workers + 1), indexing="ij")
    table = LinearNDInterpolator(points, values)(grid_p, grid_w)  # shape (max_ps, max_workers)
    for w in range(max_workers):
        col = table[:, w]
        valid = np.flatnonzero(~np.isnan(col))
        if valid.size == 0:  # no measured point at this worker count: copy the previous one
            table[:, w] = table[:, w - 1]
            continue
        col[: valid[0]] = col[valid[0]]
        col[valid[-1] + 1 :] = col[valid[-1]]
        inner = np.isnan(col)
        if inner.any():  # pragma: no cover - the hull is convex, so no inner holes
            col[inner] = np.interp(np.flatnonzero(inner), valid, col[valid])
    padded = np.full((max_ps + 1, max_workers + 1), np.nan)
    padded[1:, 1:] = table
    return padded.tolist()


@cache
def _surface(model: str) -> _Surface:
    rows = np.array(_records()[model], dtype=float)
    points = rows[:, :2]
    max_ps, max_workers = int(points[:, 0].max()), int(points[:, 1].max())
    return _Surface(
        max_ps=max_ps,
        max_workers=max_workers,
        speed=_fill_lattice(points, rows[:, 2], max_ps, max_workers),
        ps_cpu=_fill_lattice(points, rows[:, 3], max_ps, max_workers),
        worker_cpu=_fill_lattice(points, rows[:, 4], max_ps, max_workers),
    )


@cache
def resolve_ps_model(model: str) -> str:
    """The :data:`PS_MODELS` entry that ``model`` names, ignoring case and punctuation.

    ``"ResNet50"``, ``"resnet_50"`` and ``"resnet-50"`` all give ``"resnet-50"``.
    Raises ``ValueError`` listing the known models otherwise.
    """
    key = canonical(model)
    for known in PS_MODELS:
        if canonical(known) == key:
            return known
    raise ValueError(f"unknown parameter-server model {model!r}; known models: {', '.join(PS_MODELS)}")


def _lookup(model: str, n_ps: int, n_workers: int) -> tuple[_Surface, int, int]:
    surface = _surface(resolve_ps_model(model))
    p = as_count(n_ps, "n_ps")
    w = as_count(n_workers, "n_workers")
    return surface, min(p, surface.max_ps), min(w, surface.max_workers)


def ps_throughput(model: str, n_ps: int, n_workers: int) -> float:
    """Training speed, in samples per second, of a PS job of ``model``.

    The sum of the per-worker speeds measured by DL2 for (``n_ps``,
    ``n_workers``), linearly interpolated between measured points and clamped
    beyond them (see the module docstring). ``model`` is matched ignoring case
    and punctuation; an unknown model, or a count below 1, is a ``ValueError``.
    """
    surface, p, w = _lookup(model, n_ps, n_workers)
    return surface.speed[p][w]


def ps_cpu(model: str, n_ps: int, n_workers: int) -> tuple[float, float]:
    """Measured CPU use ``(per parameter server, per worker)`` of a PS job.

    Means over the job's PS and workers of DL2's recorded CPU usage, in the
    profile's unit (CPU cores; the recorded values lie between 0 and 2.02),
    interpolated and clamped like :func:`ps_throughput`.
    """
    surface, p, w = _lookup(model, n_ps, n_workers)
    return surface.ps_cpu[p][w], surface.worker_cpu[p][w]


def ps_measured_points(model: str) -> dict[tuple[int, int], float]:
    """The valid measurements of ``model``: ``{(n_ps, n_workers): samples/s}``."""
    return {(int(r[0]), int(r[1])): r[2] for r in _records()[resolve_ps_model(model)]}
