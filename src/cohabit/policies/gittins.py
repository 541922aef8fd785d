"""The discretized 2D-Gittins index (Gu et al., NSDI'19, §3.2.2 eq. 1) over an empirical job-size
distribution, used by ``tiresias-gittins`` (``policies.tiresias``)."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

#: :meth:`SizeDistribution.index` computes up to this many services one by one (each over the sample points
#: above it: ~5 us instead of ~25 us for a batch of one), more as one matrix
SMALL_BATCH = 8

#: a service's index is scanned in Python floats over at most this many sample points above it (the same
#: operations: ~0.4 us for 4 points, ~3 us for 13, where numpy's calls cost ~9 us whatever the count), most scans
#: ending early (see ``SizeDistribution._one``); numpy takes the points left after them
FEW_POINTS = 32


class SizeDistribution:
    """An empirical job-size distribution prepared for Gittins-index queries (paper eq. 1).

    With sorted samples ``x_0 <= ... <= x_{n-1}`` and ``m`` of them above ``a``
    (from index ``i0``), the index for ``Δ = x_j - a`` is
    ``(j - i0 + 1) / (D_j - P_{i0} - m a)`` where ``P`` are prefix sums and
    ``D_j = P_{j+1} + (n - j - 1) x_j``; the supremum over ``Δ`` is the max over
    ``j >= i0`` (between sample points the numerator is flat and the
    denominator grows). No sample above ``a`` gives index 0.
    """

    __slots__ = ("x", "prefix", "d", "_xs", "_ds", "_ps")

    def __init__(self, samples: Sequence[float] | np.ndarray, max_points: int = 256) -> None:
        x = np.sort(np.asarray(samples, dtype=np.float64))
        if x.size == 0:
            raise ValueError("a size distribution needs at least one sample")
        if x.size > max_points:  # equal-weight quantile summary keeps queries O(max_points)
            x = np.quantile(x, (np.arange(max_points) + 0.5) / max_points)
        self.x = x
        n = x.size
        self.prefix = np.concatenate(([0.0], np.cumsum(x)))
        self.d = self.prefix[1:] + (n - 1 - np.arange(n)) * x
        self._xs = x.tolist()
        self._ds = self.d.tolist()
        self._ps = self.prefix.tolist()

    def index(self, a: np.ndarray, delta: float | None = None) -> np.ndarray:
        """Gittins index for each attained service in ``a`` (sup over Δ, or the fixed ``delta``)."""
        a = np.asarray(a, dtype=np.float64)
        if delta is None and a.ndim == 1 and a.size <= SMALL_BATCH:
            return np.array([self._one(v) for v in a.tolist()], dtype=np.float64)
        x, n = self.x, self.x.size
        i0 = np.searchsorted(x, a, side="right")
        m = n - i0
        out = np.zeros(a.shape)
        live = m > 0
        if not live.any():
            return out
        a_l, i0_l, m_l = a[live], i0[live], m[live]
        if delta is not None:
            i1 = np.searchsorted(x, a_l + delta, side="right")
            cnt = i1 - i0_l
            done = self.prefix[i1] - self.prefix[i0_l] - cnt * a_l
            den = done + (m_l - cnt) * delta
            out[live] = np.where(cnt > 0, cnt / np.maximum(den, 1e-300), 0.0)
            return out
        j = np.arange(n)
        num = (j[None, :] - i0_l[:, None] + 1).astype(np.float64)
        den = self.d[None, :] - self.prefix[i0_l][:, None] - (m_l * a_l)[:, None]
        ratio = np.where(num > 0, num / np.maximum(den, 1e-300), -np.inf)
        out[live] = ratio.max(axis=1)
        return out

    def indices(self, a: list[float], delta: float | None = None) -> list[float]:
        """``index(np.array(a), delta).tolist()``: a few services (up to ``SMALL_BATCH``, sup over Δ) are indexed one
        by one without the arrays around them."""
        if delta is None and len(a) <= SMALL_BATCH:
            return [self._one(v) for v in a]
        return self.index(np.array(a, dtype=np.float64), delta).tolist()

    def _one(self, a: float) -> float:
        """:meth:`index` of one attained service ``a`` (sup over Δ): the same terms, computed only for the
        sample points above ``a`` (the others are not candidates), with the same operations in the same
        order, so the same value as the batch (tiresias-gittins asks for a few new services per round)."""
        i0 = bisect_right(self._xs, a)
        m = len(self._xs) - i0
        if m <= 0:
            return 0.0
        # Python floats, the same IEEE operations element by element, from the first point above ``a`` on. The
        # denominators never decrease with j (d does not: its steps are (n - j - 1) (x_{j+1} - x_j) >= 0, and
        # rounding is monotone) and no numerator exceeds m, so once m / den <= best no later term can beat best
        # (correctly rounded division is monotone in both operands): the scan stops there, with the same max.
        p, ma = self._ps[i0], m * a
        best, k = -math.inf, 1.0
        ds = self._ds
        stop = i0 + (m if m <= FEW_POINTS else FEW_POINTS)
        for j in range(i0, stop):
            den = ds[j] - p - ma
            if den <= 1e-300:
                den = 1e-300
            elif m / den <= best:
                return best
            r = k / den
            if r > best:
                best = r
            k += 1.0
        if stop == i0 + m:
            return best
        den_rest = self.d[stop:] - self.prefix[i0] - ma  # (the rest as numpy computes it: the same terms)
        rest = float((np.arange(k, m + 1.0) / np.maximum(den_rest, 1e-300)).max())
        return rest if rest > best else best


def gittins_index(samples: Sequence[float], a: float, delta: float | None = None) -> float:
    """Gittins index of a job with attained service ``a`` under the empirical ``samples``."""
    return float(SizeDistribution(samples, max_points=max(len(samples), 1)).index(np.array([a]), delta)[0])


def lognormal_prior(median: float, sigma: float, points: int = 256) -> np.ndarray:
    """Equal-weight quantiles of a log-normal size distribution (the prior before history exists)."""
    nd = NormalDist()
    z = np.array([nd.inv_cdf((i + 0.5) / points) for i in range(points)])
    return median * np.exp(sigma * z)

