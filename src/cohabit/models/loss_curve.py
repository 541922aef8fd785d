"""Online fit of a job's training-loss curve (Optimus: Peng et al., EuroSys'18, §3.1).

Optimus models the training loss after ``k`` iterations (steps) of an SGD job as

    l(k) = 1 / (beta0 * k + beta1) + beta2,        beta0, beta1, beta2 >= 0      (Optimus Eq. 1)

and fits the three coefficients online, each time the job reports a new loss,
with a non-negative least-squares (NNLS) solver. The model is non-linear only
in ``beta2``: for a fixed asymptote ``c = beta2``, ``1 / (l - c) = beta0 * k + beta1``
is linear with non-negative coefficients. :func:`fit_loss_curve` therefore

1. normalises losses by their maximum (Optimus's pre-processing, so one grid fits all scales)
   and iteration counts by theirs;
2. scans ``c`` over ``[0, min(l))`` and, for each ``c``, solves the two-variable NNLS for
   ``(beta0, beta1)`` in closed form (the active-set solution of ``scipy.optimize.nnls``
   on two columns; ``tests/test_models_loss_curve.py`` checks the two agree), with rows
   weighted by ``w (l - c)^2`` so the linear residual approximates the residual in loss space
   (``w``: the points' weights, 1 without);
3. keeps the ``c`` whose NNLS objective (that weighted residual, i.e. the loss-space squared
   error to first order) is least, and refines the grid around it: two rounds of 64 points pin
   ``c`` to about 5e-4 of the lowest loss. Every weighted sum of the NNLS step is a polynomial
   in ``c``: from 15 moments of the points (one pass over them), the sums for a whole grid cost
   ``O(grid)``, not ``O(grid x points)`` (:func:`_grid_step`; ~50 us per fit of up to 64 points,
   ~3x cheaper than the three rounds of 24 points, each summed over the points, and the
   loss-space error of every candidate, before issue 18's eighth session);
4. with ``polish=True`` (the default of :func:`fit_loss_curve`), polishes all three
   coefficients with ``scipy.optimize.least_squares`` under the bounds
   ``beta >= 0, beta2 <= min(l)`` (exact on exact points, ~1-5 ms). The per-job cache
   :class:`~.loss_fits.LossFits` used by the schedulers skips the polish by default: 1e-4 is far
   below what scheduling decisions can resolve, and fits happen on every report.

Convergence (what "remaining iterations" means). Optimus estimates how many more
steps a job needs until it converges, judging convergence on the fitted curve.
The paper leaves the threshold to the job owner; we use a scale-free rule: the job
has converged at the first ``k`` where the reducible loss left, ``l(k) - beta2``, is
at most ``tolerance`` times what it was at the first report ``k0``::

    1 / (beta0 k + beta1) <= tolerance / (beta0 k0 + beta1)
    =>  k_conv = ((beta0 k0 + beta1) / tolerance - beta1) / beta0

:class:`~.loss_fits.LossFits` caches one fit per job and refits only when the job has
reported new points (every new report while a job has few, then whenever the
number of points has grown by 10%), so schedulers never refit in a decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Points = Sequence[tuple[float, float]]  # (or an (n, 2) float array: MetricSeries.head)
GRID = 64  # asymptotes per round of the grid search
ROUNDS = 2  # rounds of the grid search (each around the best of the last, two steps wide)


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


# (power of k, power of r) in the six weighted sums of the NNLS step, with q = w r^4 and z = 1/r:
# sum q k^2, sum q k, sum q, sum q k z, sum q z, sum q z^2
_SUMS = ((2, 4), (1, 4), (0, 4), (1, 3), (0, 3), (0, 2))


def _sum_table() -> tuple[np.ndarray, np.ndarray]:
    """``(index, coefficient)`` of shape (6, 5): sum ``s`` at ``r = d + e`` is
    ``sum_m coefficient[s, m] * e**m * M.flat[index[s, m]]`` (binomial expansion of ``(d + e)**p``)."""
    idx = np.zeros((6, 5), dtype=np.int64)
    coef = np.zeros((6, 5))
    for s, (a, p) in enumerate(_SUMS):
        for m in range(p + 1):
            idx[s, m] = a * 5 + p - m
            coef[s, m] = math.comb(p, m)
    return idx, coef


_IDX, _COEF = _sum_table()
# products of two sums, as columns of the sums (G, 6): skk s1, sk sk, s1 skz, sk sz, skk sz, sk skz, skz skz, sz sz
_PA = np.array([0, 1, 2, 1, 0, 1, 3, 4])
_PB = np.array([2, 1, 3, 4, 4, 3, 3, 4])
_DIV = np.array([0, 2])
_P3 = np.arange(3.0)
_P5 = np.arange(5.0)


def _moments(k: np.ndarray, d: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``M[a, j] = sum_i w_i k_i^a d_i^j`` for ``a`` in 0..2, ``j`` in 0..4, shape (3, 5): every
    weighted sum of the NNLS step, for every asymptote, is a combination of these 15 numbers."""
    dp = d[:, None] ** _P5
    dp *= w[:, None]
    return (k[:, None] ** _P3).T @ dp


def _grid_step(q: np.ndarray, e: np.ndarray, k_zero: bool) -> tuple[np.ndarray, np.ndarray]:
    """For each ``e`` (the distance ``min(y) - c`` of an asymptote ``c`` below the lowest loss, > 0):
    the six sums ``(G, 6)`` and the NNLS objective of the three candidate solutions ``(G, 3)``.

    For a fixed ``c`` the fit is ``min sum q (b0 k + b1 - z)^2, b0, b1 >= 0`` with ``z = 1/r``,
    ``r = y - c`` and ``q = w r^4``, so a row's residual ``r^2 (b0 k + b1 - 1/r)`` is, to first order,
    its residual in loss space (``1/u - r ~ r^2 (1/r - u)`` near the curve). Writing ``r = d + e``
    with ``d = y - min(y) >= 0`` expands every sum into non-negative terms of the moments
    (``q = _COEF * M.flat[_IDX]``), so the sums for any number of asymptotes cost ``O(G)``, and their
    rounding is a few ulps (no cancellation). Candidates (the active-set answer of two-column NNLS,
    ``tests/test_models_loss_curve.py`` checks it against ``scipy.optimize.nnls``): 0 the unconstrained
    optimum (where both coefficients come out > 0), 1 ``b1 = 0`` (not with a point at ``k = 0``:
    ``k_zero``, where its curve would be infinite), 2 ``b0 = 0``; the objective of each is
    ``sum q z^2`` less its gain, ``inf`` where the candidate is infeasible. (Where the unconstrained
    optimum has a zero coefficient it is candidate 1 or 2.)"""
    s = (e[:, None] ** _P5) @ q.T  # (G, 6): skk, sk, s1, skz, sz, szz
    return s, _gains(s, k_zero)


def _gains(s: np.ndarray, k_zero: bool | np.ndarray) -> np.ndarray:
    """:func:`_grid_step`'s objectives ``(G, 3)`` from its sums ``(G, 6)``; ``k_zero`` per row or for all."""
    pr = s[:, _PA] * s[:, _PB]
    dn = pr[:, 0:6:2] - pr[:, 1:6:2]  # det, n0 = det * b0, n1 = det * b1
    gain = np.empty((s.shape[0], 3))
    ok = (dn > 0).all(axis=1)
    g0 = gain[:, 0]
    g0.fill(-np.inf)
    np.divide(dn[:, 1] * s[:, 3] + dn[:, 2] * s[:, 4], dn[:, 0], out=g0, where=ok)
    np.divide(pr[:, 6:8], s[:, _DIV], out=gain[:, 1:])  # (skk, s1 > 0: r, w > 0 and some k > 0)
    if k_zero is True:
        gain[:, 1] = -np.inf
    elif k_zero is not False:
        gain[k_zero, 1] = -np.inf
    np.subtract(s[:, 5:6], gain, out=gain)
    return gain


def _coefficients(s: np.ndarray, cand: int) -> tuple[float, float]:
    """``(b0, b1)`` of candidate ``cand`` of :func:`_grid_step` from one grid point's six sums."""
    skk, sk, s1, skz, sz, _ = s.tolist()
    if cand == 0:
        det = skk * s1 - sk * sk
        return (s1 * skz - sk * sz) / det, (skk * sz - sk * skz) / det
    if cand == 1:
        return skz / skk, 0.0
    return 0.0, sz / s1


def _linspace(lo: float, hi: float, num: int) -> np.ndarray:
    """``np.linspace(lo, hi, num)`` (``num >= 2``) for finite floats, with numpy's own arithmetic
    (``arange(num) * step + lo``, the last point set to ``hi``; ``step == 0``: every point ``lo``)
    without its generic checks: it runs at every round of every fit."""
    step = (hi - lo) / (num - 1)
    y = np.arange(num, dtype=np.float64)
    if step == 0:
        y *= 0.0
    else:
        y *= step
    y += lo
    y[-1] = hi
    return y


def fit_loss_curve(
    points: Points,
    weights: Sequence[float] | np.ndarray | None = None,
    *,
    grid: int = GRID,
    rounds: int = ROUNDS,
    polish: bool = True,
) -> LossCurve | None:
    """Fit Optimus's loss curve to ``points`` = [(iterations done, loss), ...].

    Returns None when the points cannot determine a decreasing curve: fewer than three
    distinct iteration counts, non-finite or non-positive losses, or no decrease at all.
    ``weights`` (optional, > 0) weigh the points' squared residuals (SLAQ weighs recent ones more).
    """
    _check_grid(grid, rounds)
    prep = _prepare(points, weights)
    if prep is None:
        return None
    q, k_zero, top, ymin, kmax, scale, kmin, k, y, w = prep
    lo, hi = 0.0, top
    best_c, best = 0.0, (0.0, 0.0)
    for _ in range(rounds):
        cs = _linspace(lo, hi, grid)
        s, obj = _grid_step(q, ymin - cs, k_zero)
        i, cand = divmod(int(obj.argmin()), 3)
        c = float(cs[i])
        best_c, best = c, _coefficients(s[i], cand)
        step = (hi - lo) / (grid - 1)
        lo, hi = max(c - step, 0.0), min(c + step, top)
    beta = np.array([best[0] / kmax, best[1], best_c])
    if polish:
        beta = _polish(k, y, w / w.mean(), beta, ymin)
    return _curve(beta, scale, kmin)


def fit_loss_curves(fits: Sequence[tuple[Points, np.ndarray | None]], *, grid: int = GRID,
                    rounds: int = ROUNDS) -> list[LossCurve | None]:
    """:func:`fit_loss_curve` without polish of each ``(points, weights)``, the grid searches of all of them
    stacked in one numpy pass per round (issue 18, tenth session): every step of the grid search is
    elementwise or per row, and the one product, of each fit's powers of the asymptotes' distances with its
    moments, is a stacked ``matmul`` (one BLAS product per fit, of the same shape: the same numbers), so
    each curve is the one :func:`fit_loss_curve` gives, bit for bit
    (``tests/test_models_loss_curve.py::test_fits_in_one_pass_are_the_fits_one_by_one``)."""
    _check_grid(grid, rounds)
    out: list[LossCurve | None] = [None] * len(fits)
    preps = [(i, p) for i, p in enumerate(_prepare(pts, w) for pts, w in fits) if p is not None]
    if not preps:
        return out
    n = len(preps)
    q = np.stack([p[0] for _, p in preps])  # (n, 6, 5)
    qt = np.swapaxes(q, 1, 2)
    k_zero = np.array([p[1] for _, p in preps])
    tops = [p[2] for _, p in preps]
    ymin = np.array([p[3] for _, p in preps])
    lo, hi = [0.0] * n, list(tops)
    best_c, best = [0.0] * n, [(0.0, 0.0)] * n
    ramp = np.arange(grid, dtype=np.float64)
    for _ in range(rounds):
        lo_a, hi_a = np.array(lo), np.array(hi)
        step = (hi_a - lo_a) / (grid - 1)  # (_linspace per fit: the same operations)
        cs = ramp[None, :] * step[:, None]
        cs += lo_a[:, None]
        cs[:, -1] = hi_a
        e = ymin[:, None] - cs
        s = ((e[:, :, None] ** _P5) @ qt).reshape(n * grid, 6)
        gain = _gains(s, np.repeat(k_zero, grid))
        best_i = gain.reshape(n, grid * 3).argmin(axis=1).tolist()
        steps = step.tolist()
        for j, flat in enumerate(best_i):
            i, cand = divmod(flat, 3)
            c = float(cs[j, i])
            best_c[j], best[j] = c, _coefficients(s[j * grid + i], cand)
            lo[j], hi[j] = max(c - steps[j], 0.0), min(c + steps[j], tops[j])
    for j, (at, p) in enumerate(preps):
        out[at] = _curve(np.array([best[j][0] / p[4], best[j][1], best_c[j]]), p[5], p[6])
    return out


def _check_grid(grid: int, rounds: int) -> None:
    if grid < 4 or rounds < 1:
        raise ValueError(f"grid must be >= 4 and rounds >= 1, got grid={grid!r}, rounds={rounds!r}")


def _curve(beta: np.ndarray, scale: float, kmin: float) -> LossCurve:
    """The fitted curve in the points' own units (the coefficients were fitted on normalised ones)."""
    b0, b1, b2 = (float(x) for x in beta)
    # undo the normalisation: l = s * (1/(b0 k + b1) + b2) = 1/((b0/s) k + b1/s) + s*b2
    return LossCurve(b0 / scale, b1 / scale, b2 * scale, float(kmin))


def _prepare(points: Points, weights: Sequence[float] | np.ndarray | None):  # type: ignore[no-untyped-def]
    """The checks and the one pass over the points of :func:`fit_loss_curve`: None when the points determine
    no decreasing curve, else ``(q, k_zero, top, ymin, kmax, scale, kmin, k, y, w)``: the moments' terms of
    the grid search, whether a point is at 0 iterations, the highest asymptote tried, the lowest normalised
    loss, the largest count and the loss scale the points were normalised by, the smallest count, and the
    usable points (iterations, normalised losses, weights)."""
    if len(points) < 3:
        return None
    arr = np.asarray(points, dtype=np.float64)
    k, loss = arr[:, 0], arr[:, 1]
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    if w is not None and w.shape != k.shape:
        raise ValueError(f"weights has {w.shape[0]} entries for {k.shape[0]} points")
    # every point usable (iterations in [0, inf), losses and weights in (0, inf); a NaN fails every test: the
    # reductions propagate it): the extremes read first, the mask below only when one is not
    kmin, kmax, lmin = k.min(), k.max(), loss.min()
    clean = kmin >= 0 and kmax < np.inf and lmin > 0 and loss.max() < np.inf and (
        w is None or (w.min() > 0 and w.max() < np.inf))
    if not clean:
        ok = (k >= 0) & (k < np.inf) & (loss > 0) & (loss < np.inf)
        if w is not None:
            ok &= (w > 0) & (w < np.inf)
        if not ok.all():
            k, loss = k[ok], loss[ok]
            if w is not None:
                w = w[ok]
    if k.shape[0] < 3:
        return None
    if w is None:
        w = np.ones_like(k)
    if not clean:
        kmin, kmax = k.min(), k.max()  # three distinct counts: min, max and one between
    if not (kmin != kmax and ((k != kmin) & (k != kmax)).any()):
        return None
    first, last = loss[k.argmin()], loss[k.argmax()]
    if not first > last * (1 + 1e-9):
        return None  # no decrease: nothing to extrapolate
    scale = float(loss.max())
    y = loss / scale
    ymin = float(y.min())
    kmax = float(kmax)
    q = _COEF * _moments(k / kmax, y - ymin, w).ravel()[_IDX]  # (k scaled to [0, 1]: better conditioned)
    k_zero = bool(kmin == 0)
    return q, k_zero, ymin * (1.0 - 1e-9), ymin, kmax, scale, kmin, k, y, w


def _polish(k: np.ndarray, y: np.ndarray, w: np.ndarray, beta: np.ndarray, ymin: float) -> np.ndarray:
    from scipy.optimize import least_squares  # here, not at the top: scipy.optimize costs ~0.3 CPU s to import

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
