"""A job's followed loss history as :class:`~.loss_curve.LossFits` keeps it (:class:`Track`: its fit, what
was seen of it, its loss drops per iteration) and those drop rates caught up for many jobs in one numpy pass
(:func:`take_rates_many`, issue 18, eleventh session). Split out of :mod:`.loss_curve`, which re-exports
:class:`Track` as ``_Track``.

The rates are SLAQ's normaliser: between each pair of consecutive reports ``(k1, l1), (k2, l2)`` with
``k2 > k1``, ``rate = (l1 - l2) / (k2 - k1)``, kept as ``max(rate, 0)`` (a NaN kept); ``last_rate`` is the
newest such rate and ``max_rate`` the largest (a NaN never counts for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .loss_curve import LossCurve, Points


class Track:
    """One job's loss fit and drop rates (see the module docstring)."""

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
        self.take_rates_of([p[0] for p in run], [p[1] for p in run])

    def take_rates_of(self, ks: Sequence[float], ls: Sequence[float]) -> None:
        """:meth:`take_rates` of the points ``(ks[i], ls[i])`` (two columns: no tuples)."""
        if len(ks) < 2:
            return
        last, top = self.last_rate, self.max_rate
        it = zip(ks, ls)
        k1, l1 = next(it)
        for k2, l2 in it:
            if k2 > k1:
                rate = (l1 - l2) / (k2 - k1)
                last = 0.0 if rate < 0.0 else rate  # max(rate, 0.0), nan kept
                if last > top:
                    top = last
            k1, l1 = k2, l2
        self.last_rate, self.max_rate = last, top


def take_rates_many(tracks: Sequence[Track], spans: Sequence[tuple[int, int]]) -> None:
    """:meth:`Track.take_rates_of` of each ``tracks[i]`` over its points ``spans[i] = (lo, hi)`` (at least
    two each), for all of them in one numpy pass: the iterations of points in a series' last grid run computed
    from the run's numbers (``MetricSeries.last_run_grid``, the same operations as the series' own reads),
    every rate elementwise (the same subtraction, division and clip per pair), then per track its newest rate
    of a pair with ``k2 > k1`` and the largest (a maximum, exact in any order; NaN skipped, as ``last > top``
    skips it): the same floats as the loop over each pair
    (``tests/test_models_loss_curve.py::test_rates_caught_up_together_are_the_rates_one_by_one``)."""
    n = len(tracks)
    counts = [hi - lo for lo, hi in spans]
    ends = np.cumsum(np.array(counts, dtype=np.int64))
    total = int(ends[-1])
    starts = ends - np.array(counts, dtype=np.int64)
    xs = np.empty(total)
    ys: list[float] = []
    grid_at: list[int] = []  # tracks whose points lie in their last grid run: their iterations by formula
    grid_nums: list[tuple[int, float, float, float, float]] = []
    for i, (tr, (lo, hi)) in enumerate(zip(tracks, spans)):
        pts = tr.points
        grid = getattr(pts, "last_run_grid", None)
        g = grid(lo, hi) if grid is not None else None
        if g is not None:
            grid_at.append(i)
            grid_nums.append(g[:5])
            ys.extend(g[5])
            continue
        columns = getattr(pts, "columns", None)
        if columns is not None:
            ks, ls = columns(lo, hi)
        else:
            run = pts[lo:hi]  # type: ignore[index]
            ks, ls = [p[0] for p in run], [p[1] for p in run]
        s = int(starts[i])
        xs[s:s + hi - lo] = ks
        ys.extend(ls)
    if grid_at:
        if len(grid_at) == n:
            flat = np.arange(total)
            cnt, first = np.array(counts, dtype=np.int64), starts
        else:
            at = np.array(grid_at, dtype=np.int64)
            is_grid = np.zeros(n, dtype=bool)
            is_grid[at] = True
            flat = np.flatnonzero(np.repeat(is_grid, counts))
            cnt, first = ends[at] - starts[at], starts[at]
        k_lo, every, done0, t0, rate = (np.array(c) for c in zip(*grid_nums))
        k = flat - np.repeat(first - k_lo.astype(np.int64), cnt)  # each point's grid index
        tg = k * np.repeat(every, cnt)  # (an index is exact in float64: the series' int * float)
        t0r = np.repeat(t0, cnt)
        d0 = np.repeat(done0, cnt)
        xs[flat] = np.where(tg > t0r, d0 + (tg - t0r) * np.repeat(rate, cnt), d0)
    ya = np.array(ys, dtype=np.float64)
    k1, k2 = xs[:-1], xs[1:]
    valid = k2 > k1
    valid[(ends[:-1] - 1)] = False  # (no pair across two tracks)
    with np.errstate(all="ignore"):
        r = (ya[:-1] - ya[1:]) / (k2 - k1)
    r = np.where(r < 0.0, 0.0, r)
    idx = starts.copy()  # each track's pairs start at its first point (it has at least one pair)
    newest = np.maximum.reduceat(np.where(valid, np.arange(total - 1), -1), idx).tolist()
    top = np.maximum.reduceat(np.where(valid & ~np.isnan(r), r, -np.inf), idx).tolist()
    rl = r.tolist()
    for i in range(n):
        j = newest[i]
        if j < 0:
            continue  # no pair with k2 > k1: nothing moves
        tr = tracks[i]
        tr.last_rate = rl[j]
        m = top[i]
        if m > tr.max_rate:
            tr.max_rate = m
