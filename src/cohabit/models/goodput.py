"""Pollux's goodput model (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
Goodput-Optimized Deep Learning", OSDI'21, §3), fitted from what a job reports.

**Goodput** (§3, Eq. 1) of a data-parallel job on ``K`` replicas over ``N`` nodes with per-GPU
(atomic) batch ``m`` and ``s`` gradient-accumulation steps, total batch ``M = K m (s + 1)``::

    GOODPUT(N, K, m, s) = THROUGHPUT(N, K, m, s) x EFFICIENCY(M)

**Statistical efficiency** (§3.1, Eq. 2), from the gradient noise scale ``phi = M0 var / sqr``
(McCandlish et al.) measured by the job at its current batch::

    EFFICIENCY(M) = (phi + M0) / (phi + M)

so that one step of ``M`` samples makes ``M/M0 x EFFICIENCY(M)`` (:func:`gain`) steps' worth of
progress at the initial batch ``M0``; the learning rate is scaled by the same gain (AdaScale,
which Pollux's agent uses), which is why progress is counted at ``M0``.

**Throughput** (§3.2): an iteration of ``s`` accumulation steps and one synchronising step::

    T_iter = s T_grad + (T_grad^gamma + T_sync^gamma)^(1/gamma),   T_grad = alpha_c + beta_c m
    T_sync = 0 (K = 1); alpha_r + beta_r (K - 2) (one node); alpha_n + beta_n (K - 2) (N > 1)

``gamma`` in [1, 10] models the overlap of computation and all-reduce (1: none; large: full).

:class:`GoodputModel` fits ``alpha``, ``beta`` and ``gamma`` from the (placement, atomic batch,
step time, sync time) points a job reported (:func:`fit_throughput`: compute time by least
squares in ``m``; sync times per kind of placement with ``beta >= 0``; ``gamma`` by a bounded
1-D search on the log error of the step time) and picks the best batch for an allocation
(:meth:`GoodputModel.best`, Pollux's per-job batch-size choice, §3.3). Unobserved terms take an
optimistic prior, as the paper recommends so that a scheduler tries a larger allocation: no
single-node sync observed -> zero; no multi-node sync observed -> 1.1x the single-node term.

:func:`split_batch` is the job's rule for running a total batch on ``K`` replicas
(accumulating when the local batch exceeds what fits on a GPU), shared by the simulator's
ground truth and this model. Nothing here reads simulator ground truth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_EPS = 1e-8


def gain(batch: float | np.ndarray, init_batch: float, grad_sqr: float, grad_var: float) -> float | np.ndarray:
    """Progress of one step of ``batch`` samples, in steps at ``init_batch`` (Eq. 2 times
    ``M / M0``): ``(var + sqr) / (var / scale + sqr)`` with ``scale = batch / init_batch``.
    1 at ``init_batch``; tends to ``scale`` when the gradient noise dominates (``var >> sqr``)."""
    if isinstance(batch, (int, float)):  # scalar fast path (the simulator calls this per configuration)
        sc = batch / init_batch
        d = grad_var / sc + grad_sqr
        return (grad_var + grad_sqr) / d if d > 0 else 1.0
    scale = np.asarray(batch, dtype=float) / float(init_batch)
    denom = grad_var / scale + grad_sqr
    out = np.where(denom > 0, (grad_var + grad_sqr) / np.where(denom > 0, denom, 1.0), 1.0)
    return float(out) if out.ndim == 0 else out


def split_batch(batch: int, replicas: int, max_local: int, init_batch: int, max_batch: int) -> tuple[int, int]:
    """``(atomic, accum_steps)`` a job uses to run a total ``batch`` on ``replicas`` GPUs.

    Local batch ``ceil(batch / K)``; ``accum = ceil(local / max_local) - 1`` accumulation steps of
    ``atomic = ceil(local / (accum + 1))`` samples. One replica with a batch above ``init_batch``
    accumulates at least once (Pollux's agent needs two micro-batches to estimate the gradient
    variance on one GPU). ``atomic`` is capped so that ``K atomic (accum + 1) <= max_batch``.
    """
    k = max(int(replicas), 1)
    local = math.ceil(batch / k - _EPS)
    accum = max(math.ceil(local / max_local - _EPS) - 1, 0)
    if k == 1 and batch > init_batch:
        accum = max(accum, 1)
    atomic = math.ceil(local / (accum + 1) - _EPS)
    atomic = max(min(atomic, max_batch // (k * (accum + 1))), 1)
    return atomic, accum


def candidate_grid(replicas: np.ndarray, init_batch: int, max_batch: int, min_local: int, max_local: int,
                   n: int = 50) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each replica count ``K`` in ``replicas``, ``n`` total batches spaced geometrically from
    ``max(init_batch, min_local K)`` to ``max_batch``, each split as :func:`split_batch` would
    (without its cap). Returns ``(batch, atomic, accum, ok)`` of shape ``(len(replicas), n)``:
    ``batch = K atomic (s + 1)`` is the size actually run; ``ok`` is False where the split is not
    valid (atomic outside ``[min_local, max_local]``, or no batch fits ``K`` replicas)."""
    k = np.maximum(np.asarray(replicas, dtype=float), 1.0)[:, None]
    lo = np.maximum(float(init_batch), min_local * k)
    sizes = lo * (max_batch / lo) ** np.linspace(0.0, 1.0, n)[None, :]
    local = sizes / k
    accum = np.maximum(np.ceil(local / max_local - _EPS) - 1, 0)
    accum = np.where((k == 1) & (local > init_batch + _EPS), np.maximum(accum, 1), accum)
    atomic = np.ceil(local / (accum + 1) - _EPS)
    ok = (atomic >= min_local) & (atomic <= max_local) & (lo <= max_batch)
    return k * atomic * (accum + 1), atomic.astype(int), accum.astype(int), ok


def candidate_batches(replicas: int, init_batch: int, max_batch: int, min_local: int, max_local: int,
                      n: int = 50) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(batch, atomic, accum)`` of the valid candidates of :func:`candidate_grid` for one ``K``."""
    batch, atomic, accum, ok = candidate_grid(np.array([replicas]), init_batch, max_batch, min_local, max_local, n)
    return batch[ok], atomic[ok], accum[ok]


@dataclass(frozen=True, slots=True)
class ThroughputParams:
    """Fitted parameters of the throughput model (module docstring)."""

    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float

    def grad_time(self, atomic: np.ndarray | float) -> np.ndarray | float:
        return self.alpha_c + self.beta_c * np.asarray(atomic, dtype=float)

    def sync_time(self, nodes: np.ndarray | int, replicas: np.ndarray | int) -> np.ndarray | float:
        n, r = np.asarray(nodes), np.asarray(replicas)
        retro = np.maximum(r - 2, 0)
        out = np.where(r <= 1, 0.0, np.where(n <= 1, self.alpha_r + self.beta_r * retro,
                                              self.alpha_n + self.beta_n * retro))
        return float(out) if out.ndim == 0 else out

    def iteration_time(self, nodes: np.ndarray | int, replicas: np.ndarray | int, atomic: np.ndarray | float,
                       accum: np.ndarray | float) -> np.ndarray | float:
        """Seconds per iteration; arrays broadcast (nodes and replicas as columns of a grid)."""
        t_grad = self.grad_time(atomic)
        t_sync = self.sync_time(nodes, replicas)
        g = self.gamma
        return np.asarray(accum) * t_grad + (t_grad ** g + t_sync ** g) ** (1.0 / g)


@dataclass(frozen=True, slots=True)
class Observation:
    """One configuration a job ran with and what it measured there (seconds per step)."""

    nodes: int
    replicas: int
    atomic: int
    step_time: float
    sync_time: float


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares ``alpha + beta x`` with ``alpha, beta >= 0`` (beta = 0 when x is constant)."""
    if x.size == 0:
        return 0.0, 0.0
    if np.ptp(x) == 0:
        return float(max(y.mean(), 0.0)), 0.0
    a = np.column_stack([np.ones_like(x), x])
    alpha, beta = (float(v) for v in np.linalg.lstsq(a, y, rcond=None)[0])
    if beta < 0:
        return float(max(y.mean(), 0.0)), 0.0
    if alpha < 0:  # through the origin
        return 0.0, float(max((x @ y) / (x @ x), 0.0))
    return alpha, beta


def fit_throughput(obs: Sequence[Observation]) -> ThroughputParams:
    """Fit :class:`ThroughputParams` to ``obs`` (at least one observation)."""
    if not obs:
        raise ValueError("fit_throughput needs at least one observation")
    m = np.array([o.atomic for o in obs], dtype=float)
    comp = np.array([max(o.step_time - o.sync_time, 1e-6) for o in obs])
    if np.ptp(m) == 0:  # one batch size seen: split its time half fixed, half per sample (optimistic)
        alpha_c = float(comp.mean()) / 2.0
        beta_c = alpha_c / max(m[0], 1.0)
    else:
        alpha_c, beta_c = _line(m, comp)
        if alpha_c + beta_c * m.min() <= 0:
            alpha_c = float(comp.min()) / 2.0
    fits = {}
    for multi in (False, True):
        pts = [o for o in obs if o.replicas > 1 and (o.nodes > 1) == multi]
        fits[multi] = _line(np.array([max(o.replicas - 2, 0) for o in pts], dtype=float),
                            np.array([o.sync_time for o in pts]))
        fits[multi] = fits[multi] if pts else None
    alpha_r, beta_r = fits[False] if fits[False] is not None else (0.0, 0.0)
    if fits[True] is not None:
        alpha_n, beta_n = fits[True]
    else:
        alpha_n, beta_n = 1.1 * alpha_r, 1.1 * beta_r
    params = ThroughputParams(alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, 1.0)
    synced = [o for o in obs if o.replicas > 1 and o.sync_time > 0]
    if not synced:
        return params
    step = np.array([o.step_time for o in synced])
    grad = np.array([params.grad_time(o.atomic) for o in synced], dtype=float)
    sync = np.array([params.sync_time(o.nodes, o.replicas) for o in synced])
    grid = np.linspace(1.0, 10.0, 91)  # gamma by grid search on the log error (cheap, robust)
    pred = (grad[None, :] ** grid[:, None] + sync[None, :] ** grid[:, None]) ** (1.0 / grid[:, None])
    err = np.square(np.log(np.maximum(pred, 1e-12)) - np.log(step)).mean(axis=1) + 1e-3 * (grid - 1.0) ** 2
    return ThroughputParams(alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, float(grid[int(np.argmin(err))]))


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What a job declares about its batch size: initial (``M0``), largest total, atomic range."""

    init_batch: int
    max_batch: int
    min_local: int
    max_local: int


class GoodputModel:
    """One job's goodput model: fitted throughput plus its last gradient statistics."""

    __slots__ = ("params", "limits", "grad_sqr", "grad_var")

    def __init__(self, params: ThroughputParams, limits: BatchLimits, grad_sqr: float, grad_var: float) -> None:
        self.params = params
        self.limits = limits
        self.grad_sqr = grad_sqr
        self.grad_var = grad_var

    def best(self, nodes: np.ndarray, replicas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(goodput, total batch)`` of the best batch on ``replicas[i]`` GPUs over ``nodes[i]``
        nodes, for every ``i`` (goodput in steps at ``M0`` per second, times ``M0``: samples/s of
        ``M0``-equivalent progress); goodput 0 and batch 0 where no batch is valid."""
        nodes = np.asarray(nodes)
        replicas = np.asarray(replicas)
        lim = self.limits
        batch, atomic, accum, ok = candidate_grid(replicas, lim.init_batch, lim.max_batch, lim.min_local,
                                                  lim.max_local)
        t = self.params.iteration_time(nodes[:, None], replicas[:, None], atomic, accum)
        # THROUGHPUT x EFFICIENCY = (M / T) x (gain / (M / M0)) = gain x M0 / T
        good = np.where(ok, gain(batch, lim.init_batch, self.grad_sqr, self.grad_var) * lim.init_batch
                        / np.maximum(t, 1e-12), 0.0)
        i = np.argmax(good, axis=1)
        rows = np.arange(len(replicas))
        return good[rows, i], np.where(ok[rows, i], batch[rows, i], 0.0)
