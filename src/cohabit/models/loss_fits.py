"""The schedulers' per-job cache of loss-curve fits (Optimus: Peng et al., EuroSys'18, §3.1; SLAQ's drop
rates): :class:`LossFits` follows each job's append-only loss reports and refits the curve of
:func:`.loss_curve.fit_loss_curve` only when enough new points arrived (every report while a job has few,
then whenever the count has grown by 10%), so schedulers never refit in a decision; it also keeps SLAQ's
largest and last loss drop per iteration between consecutive reports (:meth:`LossFits.max_rate`). Split
from :mod:`.loss_curve` (the curve and its fit) in issue 18's fifteenth session."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np

from .loss_curve import LossCurve, Points, fit_loss_curve, fit_loss_curves


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


#: tracks from which :meth:`LossFits.fit_many` catches up their drop rates in one numpy pass (measured: ~1.9 us
#: a track at 116 tracks, ~3.0 at 32, against ~3.4 us one by one)
CATCH_UP_BATCH = 32


class LossFits:
    """Per-job cache of loss-curve fits, refitted only when new loss reports arrived.

    ``min_points``: reports needed before a first fit. ``max_points``: longer histories
    are thinned evenly (keeping the first and the latest points) before fitting.
    Refits happen on every new report while a job has fewer than ``dense`` points,
    then when its number of points has grown by ``growth`` (10%) since the last fit.
    ``recency`` (optional, in (0, 1]) weighs the i-th newest point ``recency ** i``
    (SLAQ's weighting of recent history). ``rates``: follow the loss drops per iteration between
    consecutive reports (:meth:`max_rate`, :meth:`last_rate`; SLAQ's normaliser); without, both stay 0
    and a read skips that Python pass over the new points.
    """

    def __init__(self, min_points: int = 4, max_points: int = 64, dense: int = 16, growth: float = 0.1,
                 recency: float | None = None, polish: bool = False, rates: bool = True) -> None:
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
        self.rates = rates  # follow the drop rates (max_rate, last_rate: 0 when not followed)
        self._tracks: dict[str, _Track] = {}
        self._tracks_ro = MappingProxyType(self._tracks)
        self.fits = 0  # number of fits done (for cost accounting)
        self._ages = np.empty(0)  # recency ** age for ages max_points - 1 down to 0 (grown when needed)
        self._thin: dict[int, np.ndarray] = {}  # history length -> the indices it is thinned to (_thinned)

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
            if self.rates:
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
        if self.rates:
            columns = getattr(points, "columns", None)  # a MetricSeries: the new points without tuples
            if columns is not None:
                t.take_rates_of(*columns(max(start, 1) - 1, n))
            else:
                t.take_rates(points[max(start, 1) - 1:n])
        t.n_seen = n
        self._due_rule(t, start, n, points)

    def _due_rule(self, t: _Track, start: int, n: int, points: Points) -> None:
        """Mark the fit due at the last count in ``(start, n]`` at which :meth:`fold`'s rule fires, given the
        fits before it (the points ``start:n`` just caught up)."""
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

    def _catch_up_many(self, tracks: Sequence[_Track]) -> None:
        """:meth:`_catch_up` of each of ``tracks`` (each with new followed points), the drop rates of all of
        them in one numpy pass over their new points (issue 18, fifteenth session): the points of engine
        series read together (:meth:`MetricSeries.grid_columns`), each consecutive pair's rate by the same
        IEEE operations as :meth:`_Track.take_rates_of`, and per track the last rate of a pair with more
        iterations and the largest non-NaN one (a maximum: exact in any order), so the same floats. Below
        :data:`CATCH_UP_BATCH` tracks (or without rates) one by one, as cheap there."""
        grid_columns = getattr(type(tracks[0].points), "grid_columns", None) if tracks else None
        if not self.rates or len(tracks) < CATCH_UP_BATCH or grid_columns is None:
            for t in tracks:
                self._catch_up(t)
            return
        pts = [t.points for t in tracks]
        ns = list(map(len, pts))  # type: ignore[arg-type]
        starts = [t.n_seen for t in tracks]
        los = [s - 1 if s > 1 else 0 for s in starts]
        x, y, left = grid_columns(pts, los, ns)
        if left:
            for i in left:
                self._catch_up(tracks[i])
            gone = set(left)
            keep = [i for i in range(len(tracks)) if i not in gone]
            if not keep:
                return
        else:
            keep = list(range(len(tracks)))
        counts = np.array([ns[i] - los[i] for i in keep], dtype=np.int64)
        ends = np.cumsum(counts)
        # pair p: points p and p + 1, of one track (not the last point of a track), with more iterations
        ok = x[1:] > x[:-1]
        ok[ends[:-1] - 1] = False
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            rate = (y[:-1] - y[1:]) / (x[1:] - x[:-1])
        last = np.where(rate < 0.0, 0.0, rate)  # max(rate, 0.0), nan kept
        has = counts >= 2  # (a track read from its first point alone has no pair)
        lasts: list[float | None] = [None] * len(keep)
        tops: list[float] = [-math.inf] * len(keep)
        if has.any():
            at = (ends - counts)[has]
            pos = np.maximum.reduceat(np.where(ok, np.arange(last.size), -1), at)
            top = np.maximum.reduceat(np.where(ok & (last == last), last, -np.inf), at)
            found = pos >= 0
            where = np.flatnonzero(has)[found].tolist()
            for r, v, m in zip(where, last[pos[found]].tolist(), top[found].tolist()):
                lasts[r], tops[r] = v, m
        g1 = 1 + self.growth
        for r, i in enumerate(keep):
            t = tracks[i]
            v = lasts[r]
            if v is not None:
                t.last_rate = v
                if tops[r] > t.max_rate:
                    t.max_rate = tops[r]
            n = ns[i]
            t.n_seen = n
            # (the due rule fires in (start, n] only if n reaches the growth threshold or a count below dense)
            if n >= t.n_fit * g1 + 1 or starts[i] + 1 < self.dense:
                self._due_rule(t, starts[i], n, pts[i])  # type: ignore[arg-type]

    def _fit_due(self, t: _Track) -> None:
        t.curve = fit_loss_curve(*self._due_points(t), polish=self.polish)
        self.fits += 1

    def _due_points(self, t: _Track) -> tuple[Points, np.ndarray | None]:
        """The points (thinned to ``max_points``) and weights of ``t``'s due fit, which is taken off it."""
        points, n = t.due  # type: ignore[misc]
        t.due = None
        head = getattr(points, "head", None)  # a MetricSeries: its first n points as one array
        if head is not None:
            pts = head(n)
            if n > self.max_points:
                pts = pts[self._thinned(n)]
        else:
            pts = points[:n] if n <= self.max_points else [points[int(i)] for i in self._thinned(n)]
        weights = None
        if self.recency is not None:  # recency ** age, the newest point's age 0
            ages = self._ages
            if ages.shape[0] < len(pts):
                ages = self._ages = self.recency ** np.arange(max(len(pts), self.max_points), dtype=np.float64)[::-1]
            weights = ages[ages.shape[0] - len(pts):]
        return pts, weights

    def fit_many(self, job_ids: Sequence[str]) -> None:
        """Catch up with the jobs' followed points and do every fit that fell due among them, all in one
        stacked grid search (:func:`fit_loss_curves`: the curves :meth:`track` would fit one by one, bit for
        bit); a later :meth:`track` of these jobs finds nothing due. Jobs without a track are skipped."""
        tracks = self._tracks
        due: list[_Track] = []
        behind: list[_Track] = []
        for jid in job_ids:
            t = tracks.get(jid)
            if t is None:
                continue
            points = t.points
            if points is not None and len(points) > t.n_seen:
                behind.append(t)
            elif t.due is not None:
                due.append(t)
        if behind:
            self._catch_up_many(behind)
            due += [t for t in behind if t.due is not None]
        if not due:
            return
        if self.polish or len(due) == 1:
            for t in due:
                self._fit_due(t)
            return
        for t, curve in zip(due, fit_loss_curves([self._due_points(t) for t in due])):
            t.curve = curve
        self.fits += len(due)

    def _thinned(self, n: int) -> np.ndarray:
        """The ``max_points`` indices, evenly spread over ``n`` points, a history longer than that is fitted
        on (``np.linspace(0, n - 1, max_points)`` rounded), kept per ``n``: fits of many jobs fall due at
        the same lengths."""
        idx = self._thin.get(n)
        if idx is None:
            if len(self._thin) >= 4096:
                self._thin.clear()
            idx = self._thin[n] = np.linspace(0, n - 1, self.max_points).round().astype(np.int64)
        return idx

    @property
    def tracks(self) -> Mapping[str, _Track]:
        """The jobs whose losses were folded in (read-only)."""
        return self._tracks_ro

    def track(self, job_id: str) -> _Track:
        """The job's fit (done now if one fell due) and drop rates (``KeyError`` if none of its
        losses were folded in)."""
        t = self._tracks[job_id]
        points = t.points
        if points is not None and len(points) > t.n_seen:  # (_catch_up's own test: new points since)
            self._catch_up(t)
        if t.due is not None:
            self._fit_due(t)
        return t

    def get(self, job_id: str) -> LossCurve | None:
        return self.track(job_id).curve if job_id in self._tracks else None

    def max_rate(self, job_id: str) -> float:
        """Largest observed loss decrease per iteration (SLAQ's normaliser); 0 if unknown."""
        t = self._caught_up(job_id)
        return 0.0 if t is None else t.max_rate

    def last_rate(self, job_id: str) -> float:
        """Loss decrease per iteration between the last two reports; 0 if unknown."""
        t = self._caught_up(job_id)
        return 0.0 if t is None else t.last_rate

    def _caught_up(self, job_id: str) -> _Track | None:
        """``job_id``'s track with every loss point it follows folded in (None if not tracked)."""
        t = self._tracks.get(job_id)
        if t is not None and t.points is not None:
            self._catch_up(t)
        return t

    def drop(self, job_id: str) -> None:
        self._tracks.pop(job_id, None)
