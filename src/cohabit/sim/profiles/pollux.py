"""Ground-truth throughput of the six Pollux applications on a placement.

Source: ``data/profiles/pollux_apps/<app>/``, the measurements released with
Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
Goodput-Optimized Deep Learning", OSDI'21; ``simulator/traces`` of the
AdaptDL repository), taken on 16 nodes x 4 GPUs:

* ``placements.csv`` -- ``placement, local_bsz, step_time, sync_time`` for all
  108 placements of up to 4 nodes x 4 replicas. A placement string gives the
  replicas on each node ("1111" = one replica on each of four nodes), up to
  rotation: every string is its own lexicographically smallest rotation, and
  a ring all-reduce does not care where the ring starts.
* ``scalability.csv`` -- ``num_nodes, num_replicas, local_bsz, step_time,
  sync_time`` for 6..16 nodes and 1..4 replicas per node.

``step_time`` is the whole iteration in seconds and ``sync_time`` the part of
it spent in gradient all-reduce: ``step_time - sync_time`` is the compute
time (e.g. CIFAR-10 on "1111" at local batch 32: 0.127 s = 0.042 s compute,
as on one GPU, + 0.085 s sync).

**Throughput** (:func:`pollux_throughput`) is ``global_batch /
iteration_time`` in **samples per second**, with the per-replica batch
``local = ceil(global_batch / replicas)``.

**Gradient accumulation.** The largest local batch measured on one GPU
(:func:`pollux_max_local_bsz`, e.g. 1024 for CIFAR-10) is taken as what fits
in GPU memory. A larger ``local`` is run as Pollux does, with ``s =
ceil(local / max) - 1`` accumulation steps of ``atomic = ceil(local / (s +
1))`` samples: iteration time ``step(atomic) + s * (step(atomic) -
sync(atomic))`` (only the last micro-step synchronises).

**Step time for a placement and local batch -- fallback chain:**

1. *Measured placement* (after dropping empty nodes and rotating to the
   smallest rotation): linear interpolation in ``local_bsz`` between that
   placement's rows.
2. *Unmeasured placement* (more than 4 nodes or 4 replicas on a node):
   Pollux's own rule, linear interpolation in (num_nodes, num_replicas,
   log2 local_bsz) over the placement rows averaged per (nodes, replicas,
   local_bsz) together with ``scalability.csv``
   (:class:`scipy.interpolate.LinearNDInterpolator`). It is evaluated at load
   on the integer grid nodes 1..16 x replicas 1..64 at every measured local
   batch size, so a query is a table lookup plus a 1-D interpolation. Nodes
   above 16 and replicas above 64 are clamped to 16 and 64 (Pollux's
   simulator clamps nodes to 16 too): a ring all-reduce's bandwidth term,
   ``2 (N-1)/N`` times the gradient size, barely grows past 64 replicas.
3. *Outside the measured hull* (e.g. 8 replicas on one node): a fitted model
   in the form of Pollux's throughput model (OSDI'21 §3.2) without overlap:
   ``step = compute(local) + sync``, with ``compute`` the one-GPU measurement
   and ``sync = 0`` for one replica, ``alpha_l + beta_l (r - 2)`` on one node
   and ``alpha_n + beta_n (r - 2)`` across nodes, ``alpha, beta >= 0`` fitted by
   least squares to every measured sync time of the application.

In steps 1-2, a local batch below the smallest measured one keeps the
smallest one's times (fixed per-step overheads dominate there); one above
the largest measured for that placement (the profiles stop where the global
batch reaches the application's limit) adds the one-GPU compute-time growth
to the last measured step time and keeps its sync time.

Statistical efficiency (``validation-*.csv``) is not used here: this module
gives system throughput only.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from ._common import as_count, lerp, profile_text

#: Applications with embedded Pollux profiles.
POLLUX_APPS: tuple[str, ...] = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")

#: Largest (nodes, replicas) of the precomputed interpolation grid (the
#: extent of ``scalability.csv``).
MAX_GRID_NODES = 16
MAX_GRID_REPLICAS = 64

_Times = tuple[list[float], list[float]]  # (step, sync) over the app's local batch sizes


@dataclass(frozen=True, slots=True)
class _App:
    name: str
    lbsz: list[float]  # every measured local batch size, sorted
    max_local: int  # largest local batch measured on one GPU
    compute: list[float]  # one-GPU compute time (step - sync) over ``lbsz``
    placements: dict[tuple[int, ...], _Times]
    grid: list[list[_Times | None]]  # [nodes][replicas], None outside the hull
    sync_fit: tuple[float, float, float, float]  # alpha_l, beta_l, alpha_n, beta_n


def smallest_rotation(replicas_per_node: Sequence[int]) -> tuple[int, ...]:
    """Drop empty nodes and return the lexicographically smallest rotation."""
    p = tuple(x for x in replicas_per_node if x)
    return min(p[i:] + p[:i] for i in range(len(p))) if p else p


def _read_csv(app: str, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(profile_text("pollux_apps", app, name))))


def _fill(xs: list[float], known: dict[float, tuple[float, float]], compute: list[float]) -> _Times:
    """(step, sync) at every x in ``xs`` from the ``known`` points (module doc, steps 1-2)."""
    kx = sorted(known)
    ks, kc = [known[x][0] for x in kx], [known[x][1] for x in kx]
    last = kx[-1]
    c_last = lerp(xs, compute, last)
    step, sync = [], []
    for i, x in enumerate(xs):
        if x <= last:
            step.append(lerp(kx, ks, x))
            sync.append(lerp(kx, kc, x))
        else:
            step.append(ks[-1] + compute[i] - c_last)
            sync.append(kc[-1])
    return step, sync


def _fit_sync(rows: list[tuple[int, int, float]]) -> tuple[float, float, float, float]:
    """Least-squares ``alpha + beta (r - 2)`` on one node and across nodes, both >= 0."""
    out: list[float] = []
    for multi in (False, True):
        pts = [(r, s) for n, r, s in rows if r >= 2 and (n > 1) == multi]
        if not pts:  # pragma: no cover - every app has both kinds
            out += [0.0, 0.0]
            continue
        r = np.array([p[0] for p in pts], dtype=float)
        y = np.array([p[1] for p in pts])
        if np.ptp(r) == 0:
            alpha, beta = float(y.mean()), 0.0
        else:
            a = np.column_stack([np.ones_like(r), r - 2.0])
            alpha, beta = (float(v) for v in np.linalg.lstsq(a, y, rcond=None)[0])
            if beta < 0:
                alpha, beta = float(y.mean()), 0.0
        out += [max(alpha, 0.0), beta]
    return out[0], out[1], out[2], out[3]


def _grid(
    xs: list[float],
    compute: list[float],
    measured: dict[tuple[int, int, float], tuple[float, float]],
) -> list[list[_Times | None]]:
    from scipy.interpolate import LinearNDInterpolator  # deferred: scipy is slow to import

    keys = sorted(measured)
    pts = np.array([(n, r, math.log2(b)) for n, r, b in keys])
    vals = np.array([measured[k] for k in keys])
    interp = LinearNDInterpolator(pts, vals, rescale=True)
    nn, rr, bb = np.meshgrid(
        np.arange(1, MAX_GRID_NODES + 1), np.arange(1, MAX_GRID_REPLICAS + 1), np.log2(xs), indexing="ij"
    )
    table = interp(nn, rr, bb)  # (nodes, replicas, lbsz, 2)
    grid: list[list[_Times | None]] = [[None] * (MAX_GRID_REPLICAS + 1) for _ in range(MAX_GRID_NODES + 1)]
    for n in range(1, MAX_GRID_NODES + 1):
        for r in range(n, MAX_GRID_REPLICAS + 1):
            cell = table[n - 1, r - 1]
            ok = ~np.isnan(cell).any(axis=1)
            if ok.any():
                known = {xs[i]: (float(cell[i, 0]), float(cell[i, 1])) for i in np.flatnonzero(ok)}
                grid[n][r] = _fill(xs, known, compute)
    return grid


def _check_app(app: str) -> str:
    if app not in POLLUX_APPS:
        raise ValueError(f"unknown Pollux application {app!r}; known applications: {', '.join(POLLUX_APPS)}")
    return app


@cache
def _app(app: str) -> _App:
    _check_app(app)
    rows = _read_csv(app, "placements.csv")
    scal = _read_csv(app, "scalability.csv")
    by_placement: dict[tuple[int, ...], dict[float, tuple[float, float]]] = {}
    aggregated: dict[tuple[int, int, float], list[tuple[float, float]]] = {}
    sync_rows: list[tuple[int, int, float]] = []
    for row in rows:
        placement = tuple(int(c) for c in row["placement"])
        b, step, sync = float(row["local_bsz"]), float(row["step_time"]), float(row["sync_time"])
        by_placement.setdefault(smallest_rotation(placement), {})[b] = (step, sync)
        n, r = len(placement), sum(placement)
        aggregated.setdefault((n, r, b), []).append((step, sync))
        sync_rows.append((n, r, sync))
    for row in scal:
        n, r, b = int(row["num_nodes"]), int(row["num_replicas"]), float(row["local_bsz"])
        step, sync = float(row["step_time"]), float(row["sync_time"])
        aggregated.setdefault((n, r, b), []).append((step, sync))
        sync_rows.append((n, r, sync))
    xs = sorted({b for pts in by_placement.values() for b in pts})
    single = by_placement[(1,)]
    compute = [lerp(sorted(single), [single[b][0] - single[b][1] for b in sorted(single)], x) for x in xs]
    measured = {k: (float(np.mean([v[0] for v in vs])), float(np.mean([v[1] for v in vs])))
                for k, vs in aggregated.items()}
    return _App(
        name=app,
        lbsz=xs,
        max_local=int(max(single)),
        compute=compute,
        placements={p: _fill(xs, known, compute) for p, known in by_placement.items()},
        grid=_grid(xs, compute, measured),
        sync_fit=_fit_sync(sync_rows),
    )


def _placement_arg(replicas_per_node: Sequence[int]) -> tuple[int, ...]:
    try:
        counts = tuple(as_count(x, "replicas on a node", minimum=0) for x in replicas_per_node)
    except TypeError:
        raise ValueError(f"replicas_per_node must be a sequence of integers, got {replicas_per_node!r}") from None
    except ValueError as exc:
        raise ValueError(f"bad replicas_per_node {replicas_per_node!r}: {exc}") from None
    if not any(counts):
        raise ValueError(f"replicas_per_node must place at least one replica, got {replicas_per_node!r}")
    return counts


def _times(app: _App, placement: tuple[int, ...], local_bsz: float) -> tuple[float, float]:
    """(step, sync) seconds for a rotation-normalised placement (fallback chain)."""
    xs = app.lbsz
    times = app.placements.get(placement)
    n, r = len(placement), sum(placement)
    if times is None:
        times = app.grid[min(n, MAX_GRID_NODES)][min(r, MAX_GRID_REPLICAS)]
    if times is not None:
        return lerp(xs, times[0], local_bsz), lerp(xs, times[1], local_bsz)
    alpha_l, beta_l, alpha_n, beta_n = app.sync_fit
    if r == 1:
        sync = 0.0
    elif n == 1:
        sync = alpha_l + beta_l * (r - 2)
    else:
        sync = alpha_n + beta_n * (r - 2)
    return lerp(xs, app.compute, local_bsz) + sync, sync


def pollux_step_time(app: str, replicas_per_node: Sequence[int], local_bsz: int) -> tuple[float, float]:
    """``(step_time, sync_time)`` in seconds of one step at ``local_bsz`` per replica.

    No gradient accumulation: this is the measured (or interpolated /
    extrapolated, see the module docstring) time of a single step.
    """
    profile = _app(app)
    b = as_count(local_bsz, "local_bsz")
    return _times(profile, smallest_rotation(_placement_arg(replicas_per_node)), b)


def _iteration(app: str, placement: tuple[int, ...], global_batch: int) -> float:
    profile = _app(app)
    local = -(-global_batch // sum(placement))
    accum = -(-local // profile.max_local) - 1
    atomic = -(-local // (accum + 1))
    step, sync = _times(profile, placement, atomic)
    return step + accum * (step - sync)


@lru_cache(maxsize=1 << 16, typed=True)
def _cached_throughput(app: str, replicas_per_node: tuple[object, ...], global_batch: int) -> tuple[float, float]:
    """(iteration seconds, samples/s), validated; memoised on the raw arguments."""
    _check_app(app)
    placement = smallest_rotation(_placement_arg(replicas_per_node))
    batch = as_count(global_batch, "global_batch")
    seconds = _iteration(app, placement, batch)
    return seconds, batch / seconds


def _key(replicas_per_node: Sequence[int]) -> tuple[object, ...]:
    try:
        return tuple(replicas_per_node)
    except TypeError:
        raise ValueError(f"replicas_per_node must be a sequence of integers, got {replicas_per_node!r}") from None


def pollux_iteration_time(app: str, replicas_per_node: Sequence[int], global_batch: int) -> float:
    """Seconds per iteration of ``global_batch`` samples, with gradient accumulation if needed."""
    return _cached_throughput(app, _key(replicas_per_node), global_batch)[0]


def pollux_throughput(app: str, replicas_per_node: Sequence[int], global_batch: int) -> float:
    """Training throughput in samples per second: ``global_batch / iteration time``.

    ``replicas_per_node`` lists the replicas on each node in any order (zeros
    are ignored); ``global_batch`` is split as ``ceil(global_batch /
    replicas)`` per replica. Unknown ``app`` or a bad argument: ``ValueError``.
    Results are memoised (64k entries), so a repeated query costs ~0.3 us.
    """
    return _cached_throughput(app, _key(replicas_per_node), global_batch)[1]


def pollux_max_local_bsz(app: str) -> int:
    """Largest local batch measured on one GPU; beyond it gradients are accumulated."""
    return _app(app).max_local


def pollux_measured_rows(app: str) -> list[tuple[tuple[int, ...], int, float, float]]:
    """``placements.csv`` of ``app`` as ``(placement, local_bsz, step_time, sync_time)``."""
    _check_app(app)
    return [
        (
            tuple(int(c) for c in row["placement"]),
            int(row["local_bsz"]),
            float(row["step_time"]),
            float(row["sync_time"]),
        )
        for row in _read_csv(app, "placements.csv")
    ]
