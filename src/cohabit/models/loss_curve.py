"""Online fit of a job's training-loss curve (Optimus: Peng et al., EuroSys'18, §3.1).

Optimus models the training loss after ``k`` iterations (steps) of an SGD job as

    l(k) = 1 / (beta0 * k + beta1) + beta2,        beta0, beta1, beta2 >= 0      (Optimus Eq. 1)

and fits the three coefficients online, each time the job reports a new loss,
with a non-negative least-squares (NNLS) solver. The model is non-linear only
in ``beta2``: for a fixed asymptote ``c = beta2``, ``1 / (l - c) = beta0 * k + beta1``
is linear with non-negative coefficients. :func:`fit_loss_curve` therefore

1. normalises losses by their maximum (Optimus's pre-processing, so one grid fits all scales);
2. scans ``c`` over ``[0, min(l))`` and, for each ``c``, solves the two-variable NNLS for
   ``(beta0, beta1)`` in closed form (the active-set solution of ``scipy.optimize.nnls``
   on two columns, vectorised over the grid; ``tests/test_models_loss_curve.py`` checks the
   two agree), with rows weighted by ``(l - c)^2`` so the linear residual approximates the
   residual in loss space;
3. keeps the ``c`` with the least squared error in loss space and refines the grid around
   it (three rounds of 24 points pin ``c`` to about 1e-4 of the loss scale in ~0.3 ms);
4. with ``polish=True`` (the default of :func:`fit_loss_curve`), polishes all three
   coefficients with ``scipy.optimize.least_squares`` under the bounds
   ``beta >= 0, beta2 <= min(l)`` (exact on exact points, ~1-5 ms). The per-job cache
   :class:`LossFits` used by the schedulers skips the polish by default: 1e-4 is far
   below what scheduling decisions can resolve, and fits happen on every report.

Convergence (what "remaining iterations" means). Optimus estimates how many more
steps a job needs until it converges, judging convergence on the fitted curve.
The paper leaves the threshold to the job owner; we use a scale-free rule: the job
has converged at the first ``k`` where the reducible loss left, ``l(k) - beta2``, is
at most ``tolerance`` times what it was at the first report ``k0``::

    1 / (beta0 k + beta1) <= tolerance / (beta0 k0 + beta1)
    =>  k_conv = ((beta0 k0 + beta1) / tolerance - beta1) / beta0

:class:`LossFits` caches one fit per job and refits only when the job has
reported new points (every new report while a job has few, then whenever the
number of points has grown by 10%), so schedulers never refit in a decision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from scipy.optimize import least_squares

Points = Sequence[tuple[float, float]]  # (or an (n, 2) float array: MetricSeries.head)


@dataclass(frozen=True, slots=True)
class LossCurve:
    """``l(k) = 1 / (beta0 k + beta1) + beta2``; ``k0`` is the first observed iteration count."""

    beta0: float
    beta1: float
    beta2: float
    k0: float = 0.0

    def loss(self, k: float) -> float:
        u = self.beta0 * k + self.beta1
        return math.inf if u <= 0 else 1.0 / u + self.beta2

    def reduction(self, k: float, dk: float) -> float:
        """Predicted loss decrease from ``k`` to ``k + dk`` iterations (>= 0)."""
        if dk <= 0:
            return 0.0
        return max(self.loss(k) - self.loss(k + dk), 0.0)

    def iterations_to_loss(self, target: float) -> float:
        """Iterations ``k`` at which the curve reaches ``target``; inf if it never does."""
        if target <= self.beta2 or self.beta0 <= 0:
            return 0.0 if self.loss(0.0) <= target else math.inf
        return max((1.0 / (target - self.beta2) - self.beta1) / self.beta0, 0.0)

    def iterations_to_converge(self, tolerance: float) -> float:
        """First ``k`` where ``l(k) - beta2 <= tolerance * (l(k0) - beta2)`` (see module doc)."""
        if not 0 < tolerance < 1:
            raise ValueError(f"tolerance must be in (0, 1), got {tolerance!r}")
        if self.beta0 <= 0:
            return math.inf
        u0 = self.beta0 * self.k0 + self.beta1
        return max((u0 / tolerance - self.beta1) / self.beta0, self.k0)

    def remaining_iterations(self, done: float, tolerance: float) -> float:
        """Iterations left from ``done`` until convergence (0 if the curve says it has converged)."""
        return max(self.iterations_to_converge(tolerance) - done, 0.0)


def _nnls2(skk: np.ndarray, sk: np.ndarray, s1: np.ndarray, skz: np.ndarray, sz: np.ndarray,
           szz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form NNLS for ``min sum q (b0 k + b1 - z)^2, b0, b1 >= 0`` from the weighted sums.

    Vectorised over a grid: every argument is an array of sums, one entry per grid point.
    The optimum is the unconstrained one when it is feasible, else the better of the two
    one-variable solutions (the active-set answer for two columns). (Divisions only where the
    divisor is positive, through ``where=``: no floating-point warnings to silence.)"""
    det = skk * s1 - sk * sk
    pos = det > 0
    b0 = np.divide(s1 * skz - sk * sz, det, out=np.full_like(det, -1.0), where=pos)
    b1 = np.divide(skk * sz - sk * skz, det, out=np.full_like(det, -1.0), where=pos)
    only0 = np.divide(skz, skk, out=np.zeros_like(skk), where=skk > 0)
    np.maximum(only0, 0.0, out=only0)
    only1 = np.divide(sz, s1, out=np.zeros_like(s1), where=s1 > 0)
    np.maximum(only1, 0.0, out=only1)
    # objective value sum q z^2 - 2 b.(Sz) + b' S b for each candidate
    obj0 = szz - 2 * only0 * skz + only0 * only0 * skk
    obj1 = szz - 2 * only1 * sz + only1 * only1 * s1
    feasible = (b0 >= 0) & (b1 >= 0)
    use0 = obj0 <= obj1
    out0 = np.where(feasible, b0, np.where(use0, only0, 0.0))
    out1 = np.where(feasible, b1, np.where(use0, 0.0, only1))
    return out0, out1


def _linspace(lo: float, hi: float, num: int) -> np.ndarray:
    """``np.linspace(lo, hi, num)`` (``num >= 2``) for finite floats, with numpy's own arithmetic
    (``arange(num) * step + lo``, the last point set to ``hi``; ``step == 0``: every point ``lo``)
    without its generic checks: it runs three times per fit."""
    step = (hi - lo) / (num - 1)
    y = np.arange(num, dtype=np.float64)
    if step == 0:
        y *= 0.0
    else:
        y *= step
    y += lo
    y[-1] = hi
    return y


def _grid_fit(k: np.ndarray, y: np.ndarray, w: np.ndarray, cs: np.ndarray) -> tuple[np.ndarray, ...]:
    """For each asymptote ``c`` in ``cs``: NNLS (beta0, beta1) and the loss-space SSE.

    The six weighted sums are reduced in one call over a ``(6, G, n)`` stack (each row is summed
    along its own contiguous axis, as six separate sums would be)."""
    g, n = cs.shape[0], k.shape[0]
    r = y[None, :] - cs[:, None]  # (G, n) > 0
    z = 1.0 / r
    m = np.empty((6, g, n))
    q = m[2]
    np.multiply(r, r, out=q)
    q *= w
    q *= q  # (r * r * w) ** 2
    kk = k[None, :]
    qk, qz = m[1], m[4]
    np.multiply(q, kk, out=qk)
    np.multiply(q, z, out=qz)
    np.multiply(qk, kk, out=m[0])
    np.multiply(qk, z, out=m[3])
    np.multiply(qz, z, out=m[5])
    sums = m.sum(axis=2)
    b0, b1 = _nnls2(sums[0], sums[1], sums[2], sums[3], sums[4], sums[5])
    u = b0[:, None] * kk + b1[:, None]
    pos = u > 0
    pred = np.divide(1.0, u, out=np.full_like(u, np.inf), where=pos)
    np.add(pred, cs[:, None], out=pred, where=pos)
    pred -= y[None, :]
    pred *= pred
    pred *= w[None, :]
    return b0, b1, pred.sum(1)


def fit_loss_curve(
    points: Points,
    weights: Sequence[float] | None = None,
    *,
    grid: int = 24,
    rounds: int = 3,
    polish: bool = True,
) -> LossCurve | None:
    """Fit Optimus's loss curve to ``points`` = [(iterations done, loss), ...].

    Returns None when the points cannot determine a decreasing curve: fewer than three
    distinct iteration counts, non-finite or non-positive losses, or no decrease at all.
    ``weights`` (optional, >= 0) weigh the points (SLAQ weighs recent ones more).
    """
    if grid < 4 or rounds < 1:
        raise ValueError(f"grid must be >= 4 and rounds >= 1, got grid={grid!r}, rounds={rounds!r}")
    if len(points) < 3:
        return None
    arr = np.asarray(points, dtype=np.float64)
    k, loss = arr[:, 0], arr[:, 1]
    w = np.ones_like(k) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != k.shape:
        raise ValueError(f"weights has {w.shape[0]} entries for {k.shape[0]} points")
    ok = np.isfinite(k) & np.isfinite(loss) & (k >= 0) & (loss > 0) & np.isfinite(w) & (w > 0)
    k, loss, w = k[ok], loss[ok], w[ok]
    kmin, kmax = k.min(), k.max()  # (k is finite here) three distinct counts: min, max and one between
    if not (kmin != kmax and ((k != kmin) & (k != kmax)).any()):
        return None
    first, last = loss[np.argmin(k)], loss[np.argmax(k)]
    if not first > last * (1 + 1e-9):
        return None  # no decrease: nothing to extrapolate
    scale = float(loss.max())
    y = loss / scale
    w = w / w.mean()
    ymin = float(y.min())
    lo, hi = 0.0, ymin * (1.0 - 1e-9)
    best_c = 0.0
    for _ in range(rounds):
        cs = _linspace(lo, hi, grid)
        b0, b1, sse = _grid_fit(k, y, w, cs)
        i = int(np.argmin(sse))
        best_c, best = float(cs[i]), (float(b0[i]), float(b1[i]))
        step = (hi - lo) / (grid - 1)
        lo, hi = max(float(cs[i]) - step, 0.0), min(float(cs[i]) + step, ymin * (1.0 - 1e-9))
    beta = np.array([best[0], best[1], best_c])
    if polish:
        beta = _polish(k, y, w, beta, ymin)
    b0, b1, b2 = (float(x) for x in beta)
    # undo the normalisation: l = s * (1/(b0 k + b1) + b2) = 1/((b0/s) k + b1/s) + s*b2
    return LossCurve(b0 / scale, b1 / scale, b2 * scale, float(k.min()))


def _polish(k: np.ndarray, y: np.ndarray, w: np.ndarray, beta: np.ndarray, ymin: float) -> np.ndarray:
    sw = np.sqrt(w)

    def resid(b: np.ndarray) -> np.ndarray:
        u = np.maximum(b[0] * k + b[1], 1e-12)
        return sw * (1.0 / u + b[2] - y)

    upper = np.array([np.inf, np.inf, ymin])
    start = np.clip(beta, 0.0, upper - 1e-12)
    start[1] = max(start[1], 1e-9)
    try:
        res = least_squares(resid, start, bounds=(np.zeros(3), upper), method="trf", x_scale="jac",
                            xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=60)
    except ValueError:
        return beta
    if res.success and float(res.cost) <= 0.5 * float((resid(beta) ** 2).sum()) + 1e-18:
        return np.asarray(res.x)
    return beta


class _Track:
    __slots__ = ("n_fit", "curve", "n_seen", "max_rate", "last_rate", "due", "points")

    def __init__(self) -> None:
        self.n_fit = 0
        self.curve: LossCurve | None = None
        self.n_seen = 0
        self.max_rate = 0.0  # largest loss drop per iteration between consecutive reports
        self.last_rate = 0.0
        # a fit that fell due and is not done yet: (the append-only points list, how many of them)
        self.due: tuple[Points, int] | None = None
        self.points: Points | None = None  # the job's append-only points, when followed (LossFits.follow)

    def take_rates(self, run: Points) -> None:
        """Fold in the loss drop per iteration between each pair of consecutive points of ``run``
        (the last point already seen, then the new ones): ``last_rate`` and ``max_rate``."""
        for (k1, l1), (k2, l2) in zip(run, run[1:]):
            if k2 > k1:
                rate = (l1 - l2) / (k2 - k1)
                self.last_rate = 0.0 if rate < 0.0 else rate  # max(rate, 0.0), nan kept
                if self.last_rate > self.max_rate:
                    self.max_rate = self.last_rate


class LossFits:
    """Per-job cache of loss-curve fits, refitted only when new loss reports arrived.

    ``min_points``: reports needed before a first fit. ``max_points``: longer histories
    are thinned evenly (keeping the first and the latest points) before fitting.
    Refits happen on every new report while a job has fewer than ``dense`` points,
    then when its number of points has grown by ``growth`` (10%) since the last fit.
    ``recency`` (optional, in (0, 1]) weighs the i-th newest point ``recency ** i``
    (SLAQ's weighting of recent history).
    """

    def __init__(self, min_points: int = 4, max_points: int = 64, dense: int = 16, growth: float = 0.1,
                 recency: float | None = None, polish: bool = False) -> None:
        if min_points < 3:
            raise ValueError(f"min_points must be >= 3, got {min_points!r}")
        if max_points < min_points:
            raise ValueError(f"max_points must be >= min_points ({min_points}), got {max_points!r}")
        if dense < 0:
            raise ValueError(f"dense must be >= 0, got {dense!r}")
        if not growth >= 0:
            raise ValueError(f"growth must be >= 0, got {growth!r}")
        if recency is not None and not 0 < recency <= 1:
            raise ValueError(f"recency must be in (0, 1] or None, got {recency!r}")
        self.min_points = min_points
        self.max_points = max_points
        self.dense = dense
        self.growth = growth
        self.recency = recency
        self.polish = polish
        self._tracks: dict[str, _Track] = {}
        self._tracks_ro = MappingProxyType(self._tracks)
        self.fits = 0  # number of fits done (for cost accounting)

    def update(self, job_id: str, points: Points) -> LossCurve | None:
        """Fold the job's loss reports in; refit if due. Returns the current fit."""
        self.fold(job_id, points)
        return self.track(job_id).curve

    def fold(self, job_id: str, points: Points) -> None:
        """:meth:`update` without fitting yet: a fit that falls due is done when the job's curve is
        next read (:meth:`get`, :meth:`track`), on the same first ``n`` points, so a scheduler that
        reads the curve once per round does not fit at every report in between (a later due fit
        replaces an earlier one not read). ``points`` must only grow by appending until then (the
        engine's metric histories do)."""
        t = self._tracks.get(job_id)
        n = len(points)
        if t is None:
            t = self._tracks[job_id] = _Track()
        elif n == t.n_seen:
            return  # nothing new: no rate moves, and what was not due at n is not due now
        if n > t.n_seen:
            t.take_rates(points[max(t.n_seen, 1) - 1:n])
            t.n_seen = n
        if n >= self.min_points and (n < self.dense and n > t.n_fit or n >= t.n_fit * (1 + self.growth) + 1):
            t.due = (points, n)
            t.n_fit = n

    def follow(self, job_id: str, points: Points) -> None:
        """Follow the job's append-only ``points`` (the engine's metric history, which only grows by
        appending): every point appended later is folded in when the job's fit or rates are next read,
        exactly as :meth:`fold` called after each append would have (the rates between consecutive
        points, and each fit that fell due on the first ``n`` points it fell due at), so a report costs
        nothing until a round reads the job."""
        t = self._tracks.get(job_id)
        if t is None:
            t = self._tracks[job_id] = _Track()
        t.points = points

    def _catch_up(self, t: _Track) -> None:
        """Fold in the followed points appended since ``t`` last saw them, as :meth:`fold` at each count."""
        points = t.points
        assert points is not None
        n = len(points)
        start = t.n_seen
        if n <= start:
            return
        t.take_rates(points[max(start, 1) - 1:n])  # (one slice: the followed history may be a MetricSeries)
        t.n_seen = n
        # the last count in (start, n] at which fold's due rule fires, given the fits before it
        m = max(start + 1, self.min_points)
        due = 0
        while m <= n:
            if not (m < self.dense and m > t.n_fit):
                m = max(m, math.ceil(t.n_fit * (1 + self.growth) + 1))
                if m > n:
                    break
            due = t.n_fit = m
            m += 1
        if due:
            t.due = (points, due)

    def _fit_due(self, t: _Track) -> None:
        points, n = t.due  # type: ignore[misc]
        t.due = None
        head = getattr(points, "head", None)  # a MetricSeries: its first n points as one array
        if head is not None:
            pts = head(n)
            if n > self.max_points:
                pts = pts[np.linspace(0, n - 1, self.max_points).round().astype(np.int64)]
        else:
            pts = points[:n] if n <= self.max_points else [points[int(i)] for i in
                                                           np.linspace(0, n - 1, self.max_points).round()]
        weights = None
        if self.recency is not None:
            weights = [self.recency ** (len(pts) - 1 - i) for i in range(len(pts))]
        t.curve = fit_loss_curve(pts, weights, polish=self.polish)
        self.fits += 1

    @property
    def tracks(self) -> Mapping[str, _Track]:
        """The jobs whose losses were folded in (read-only)."""
        return self._tracks_ro

    def track(self, job_id: str) -> _Track:
        """The job's fit (done now if one fell due) and drop rates (``KeyError`` if none of its
        losses were folded in)."""
        t = self._tracks[job_id]
        if t.points is not None:
            self._catch_up(t)
        if t.due is not None:
            self._fit_due(t)
        return t

    def get(self, job_id: str) -> LossCurve | None:
        return self.track(job_id).curve if job_id in self._tracks else None

    def max_rate(self, job_id: str) -> float:
        """Largest observed loss decrease per iteration (SLAQ's normaliser); 0 if unknown."""
        t = self._tracks.get(job_id)
        if t is None:
            return 0.0
        if t.points is not None:
            self._catch_up(t)
        return t.max_rate

    def last_rate(self, job_id: str) -> float:
        """Loss decrease per iteration between the last two reports; 0 if unknown."""
        t = self._tracks.get(job_id)
        if t is None:
            return 0.0
        if t.points is not None:
            self._catch_up(t)
        return t.last_rate

    def drop(self, job_id: str) -> None:
        self._tracks.pop(job_id, None)
