"""Optimus's loss-curve model: exact recovery, remaining iterations, the NNLS step, the per-job cache."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import nnls

from cohabit.models.loss_fits import LossFits
from cohabit.models.loss_curve import (LossCurve, _coefficients, _grid_step, _moments, fit_loss_curve, fit_loss_curves,
                                      _COEF, _IDX)


def curve_points(b0: float, b1: float, b2: float, ks) -> list[tuple[float, float]]:
    return [(float(k), 1.0 / (b0 * k + b1) + b2) for k in ks]


@pytest.mark.parametrize("b0,b1,b2", [(0.002, 1.0, 0.1), (0.01, 0.5, 0.0), (0.0005, 2.0, 1.5)])
def test_fit_recovers_known_coefficients_from_exact_points(b0: float, b1: float, b2: float) -> None:
    pts = curve_points(b0, b1, b2, np.linspace(0, 2000, 12))
    fit = fit_loss_curve(pts)
    assert fit is not None
    assert (fit.beta0, fit.beta1, fit.beta2) == pytest.approx((b0, b1, b2), rel=1e-6, abs=1e-9)
    # the grid alone (what the schedulers' cache uses) is within 1e-3
    coarse = fit_loss_curve(pts, polish=False)
    assert coarse is not None
    assert (coarse.beta0, coarse.beta1, coarse.beta2) == pytest.approx((b0, b1, b2), rel=1e-3, abs=1e-4)


def test_remaining_iterations_hand_computed() -> None:
    # l(k) = 1/(0.01 k + 1) + 0.2, first report at k0 = 0: reducible loss 1 at k=0.
    # tolerance 0.05 -> 1/(0.01 k + 1) <= 0.05 -> k >= (20 - 1)/0.01 = 1900 iterations.
    pts = curve_points(0.01, 1.0, 0.2, [0, 50, 100, 200, 300])
    fit = fit_loss_curve(pts)
    assert fit is not None
    assert fit.iterations_to_converge(0.05) == pytest.approx(1900, rel=1e-6)
    assert fit.remaining_iterations(300, 0.05) == pytest.approx(1600, rel=1e-6)
    assert fit.remaining_iterations(5000, 0.05) == 0.0
    # loss 0.25 is reached when 1/(0.01 k + 1) = 0.05 -> the same 1900; the asymptote never is
    assert fit.iterations_to_loss(0.25) == pytest.approx(1900, rel=1e-6)
    assert LossCurve(0.01, 1.0, 0.2).iterations_to_loss(0.2) == math.inf
    # predicted reduction from 100 to 200 iterations: 1/2 - 1/3
    assert fit.reduction(100, 100) == pytest.approx(0.5 - 1 / 3, rel=1e-6)


def test_convergence_is_relative_to_the_first_report() -> None:
    c = LossCurve(0.01, 1.0, 0.0, k0=100.0)  # reducible loss 1/2 at k0 -> 0.05 * 1/2: 0.01 k + 1 >= 40
    assert c.iterations_to_converge(0.05) == pytest.approx(3900)
    with pytest.raises(ValueError, match="tolerance"):
        c.iterations_to_converge(1.5)


def test_fit_refuses_undetermined_or_flat_data() -> None:
    assert fit_loss_curve([(0, 1.0), (10, 0.9)]) is None  # two points
    assert fit_loss_curve([(5, 1.0), (5, 0.9), (5, 0.8)]) is None  # one distinct k
    assert fit_loss_curve([(0, 1.0), (10, 1.0), (20, 1.0)]) is None  # no decrease
    with pytest.raises(ValueError, match="grid"):
        fit_loss_curve([(0, 1.0), (10, 0.5), (20, 0.4)], grid=2)
    with pytest.raises(ValueError, match="weights"):
        fit_loss_curve([(0, 1.0), (10, 0.5), (20, 0.4)], weights=[1.0])


@pytest.mark.parametrize("k_zero", [False, True])
def test_closed_form_two_column_nnls_matches_scipy(k_zero: bool) -> None:
    """At every asymptote of a grid, the best of the grid step's three candidates is the NNLS
    optimum of the weighted rows (``scipy.optimize.nnls``), coefficients and objective."""
    rng = np.random.default_rng(3)
    for _ in range(40):
        n = int(rng.integers(3, 40))
        k = np.sort(rng.uniform(0, 1, n))
        if k_zero:
            k[0] = 0.0
        y = 1.0 / (rng.uniform(0, 3) * k + rng.uniform(0.3, 2)) + rng.normal(0, 0.05, n)
        y = np.abs(y) + 0.01
        d = y - y.min()
        w = rng.uniform(0.1, 2.0, n)
        q = _COEF * _moments(k, d, w).ravel()[_IDX]
        e = rng.uniform(1e-3, 1.0, 5)
        s, obj = _grid_step(q, e, k_zero)
        if k_zero:  # b1 = 0 would make the curve infinite at k = 0: never a candidate
            assert np.isinf(obj[:, 1]).all()
        for g in range(e.shape[0]):
            r = d + e[g]
            sq = np.sqrt(w * r**4)
            a = sq[:, None] * np.column_stack([k, np.ones_like(k)])
            ref, res = nnls(a, sq / r)
            cand = int(obj[g].argmin())
            b0, b1 = _coefficients(s[g], cand)
            assert (b0, b1) == pytest.approx(tuple(ref), rel=1e-7, abs=1e-7)
            assert obj[g, cand] == pytest.approx(res**2, rel=1e-6, abs=1e-9)


def test_the_moment_sums_are_the_direct_sums() -> None:
    """The six weighted sums from the 15 moments (binomial expansion of ``r = d + e``) equal the sums
    over the points, for asymptotes near the lowest loss (small ``e``) and far below it."""
    rng = np.random.default_rng(5)
    for _ in range(30):
        n = int(rng.integers(3, 70))
        k = np.sort(rng.uniform(0, 1, n))
        d = rng.uniform(0, 1, n)
        d[int(rng.integers(n))] = 0.0
        w = rng.uniform(0.1, 1, n)
        e = np.concatenate([[1e-9, 1e-4], rng.uniform(0, 2, 6)])
        s, _ = _grid_step(_COEF * _moments(k, d, w).ravel()[_IDX], e, False)
        for g, eg in enumerate(e):
            r = d + eg
            q = w * r**4
            want = [(q * k * k).sum(), (q * k).sum(), q.sum(), (q * k / r).sum(), (q / r).sum(), (q / r / r).sum()]
            assert s[g] == pytest.approx(want, rel=1e-12)


def test_the_fit_on_noisy_points_is_close_to_the_loss_space_optimum() -> None:
    """The grid's asymptote (least NNLS objective: the loss-space error to first order) is near the
    one least squares in loss space chooses (the polished fit), on noisy points."""
    rng = np.random.default_rng(11)
    for _ in range(10):
        b0, b1, b2 = rng.uniform(1e-4, 1e-2), rng.uniform(0.5, 2), rng.uniform(0.05, 1)
        pts = [(k, 1 / (b0 * k + b1) + b2 + rng.normal(0, 0.003)) for k in np.linspace(10, 3000, 40)]
        grid, best = fit_loss_curve(pts, polish=False), fit_loss_curve(pts)
        assert grid is not None and best is not None
        assert grid.iterations_to_converge(0.05) == pytest.approx(best.iterations_to_converge(0.05), rel=0.05)


def test_cache_refits_only_on_new_reports_and_tracks_drop_rates() -> None:
    fits = LossFits(min_points=4, dense=6, growth=0.5)
    pts = curve_points(0.01, 1.0, 0.2, range(0, 1000, 10))
    assert fits.update("j", pts[:3]) is None and fits.fits == 0
    first = fits.update("j", pts[:4])
    assert first is not None and fits.fits == 1
    assert fits.update("j", pts[:4]) is first and fits.fits == 1  # nothing new: no refit
    fits.update("j", pts[:5])
    assert fits.fits == 2  # dense phase: every new report
    fits.update("j", pts[:6])
    fits.update("j", pts[:8])
    assert fits.fits == 2  # past `dense`: last fit at 5 points -> the next needs >= 5 * 1.5 + 1
    fits.update("j", pts[:9])
    assert fits.fits == 3
    fits.update("j", pts[:10])
    # SLAQ's normaliser: the largest drop per iteration between consecutive reports (the first one)
    assert fits.max_rate("j") == pytest.approx((pts[0][1] - pts[1][1]) / 10)
    assert fits.last_rate("j") == pytest.approx((pts[8][1] - pts[9][1]) / 10)
    fits.drop("j")
    assert fits.get("j") is None and fits.max_rate("j") == 0.0


def test_cache_validates_its_arguments() -> None:
    for kw, word in [({"min_points": 2}, "min_points"), ({"max_points": 3}, "max_points"),
                     ({"dense": -1}, "dense"), ({"growth": -0.1}, "growth"), ({"recency": 0.0}, "recency")]:
        with pytest.raises(ValueError, match=word):
            LossFits(**kw)


def test_long_histories_are_thinned_and_still_fit() -> None:
    fits = LossFits(max_points=16)
    pts = curve_points(0.001, 1.0, 0.3, np.linspace(0, 50_000, 500))
    fit = fits.update("j", pts)
    assert fit is not None
    assert (fit.beta0, fit.beta1, fit.beta2) == pytest.approx((0.001, 1.0, 0.3), rel=1e-3, abs=1e-4)


@pytest.mark.parametrize("recency", [None, 0.9])
def test_a_deferred_fit_is_the_fit_made_at_the_report_it_fell_due(recency) -> None:
    """``fold`` defers a due fit to the next read; it must fit the same first ``n`` points (not the
    points appended since), so reading once per round equals refitting at every report."""
    pts = curve_points(0.004, 1.0, 0.1, range(0, 20000, 60))
    eager, lazy = LossFits(recency=recency), LossFits(recency=recency)
    history: list[tuple[float, float]] = []  # grows by appending, as the engine's metric list does
    reads = 0
    for i, p in enumerate(pts):
        history.append(p)
        want = eager.update("j", list(history))
        lazy.fold("j", history)
        if i % 7 == 3:  # read now and then, with several due fits in between
            assert lazy.get("j") == want
            reads += 1
        assert (lazy.max_rate("j"), lazy.last_rate("j")) == (eager.max_rate("j"), eager.last_rate("j"))
    assert lazy.get("j") == eager.get("j")
    assert lazy.fits < eager.fits  # fits not read were skipped


@pytest.mark.parametrize("recency", [None, 0.9])
def test_a_followed_history_reads_as_a_fold_after_every_append(recency) -> None:
    """``follow`` folds the appended points in only when read; what it reads (fit, drop rates) must be
    what ``fold`` after every append gives, however many points were appended between reads."""
    pts = curve_points(0.004, 1.0, 0.1, range(0, 30000, 60))
    eager, lazy = LossFits(recency=recency), LossFits(recency=recency)
    history: list[tuple[float, float]] = []
    lazy.follow("j", history)
    for i, p in enumerate(pts):
        history.append(p)
        eager.fold("j", history)
        if i % 11 in (2, 3) or i > 480:  # reads now and then, sometimes on consecutive points
            assert lazy.get("j") == eager.get("j")
            assert (lazy.max_rate("j"), lazy.last_rate("j")) == (eager.max_rate("j"), eager.last_rate("j"))
    assert lazy.get("j") == eager.get("j") and lazy.get("j") is not None
    assert lazy.fits == eager.fits  # the same fits, at the same reads


def test_without_rates_the_fits_are_the_same_and_no_rate_is_followed() -> None:
    pts = curve_points(0.004, 1.0, 0.1, range(0, 6000, 60))
    plain, lean = LossFits(), LossFits(rates=False)
    history: list[tuple[float, float]] = []
    plain.follow("j", history)
    lean.follow("j", history)
    for p in pts:
        history.append(p)
        assert lean.get("j") == plain.get("j")
    assert plain.max_rate("j") > 0 and plain.last_rate("j") > 0
    assert lean.max_rate("j") == 0.0 and lean.last_rate("j") == 0.0


def _random_fits(seed: int, count: int) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Point sets of every kind a fit meets: noisy and exact curves, a point at 0 iterations, repeated
    counts, a bad point (NaN, 0), too few or flat points (no curve), with and without recency weights."""
    rng = np.random.default_rng(seed)
    out: list[tuple[np.ndarray, np.ndarray | None]] = []
    for _ in range(count):
        n = int(rng.integers(2, 80))
        k = np.sort(rng.random(n) * 10.0 ** int(rng.integers(1, 6))).round(int(rng.integers(0, 3)))
        if rng.random() < 0.2:
            k[0] = 0.0
        y = 1 / (rng.uniform(0.5, 40) * k / (k.max() + 1) + 1.0) + rng.uniform(0.0, 0.5)
        if rng.random() < 0.5:
            y = y + rng.normal(0, 0.01, n)
        if rng.random() < 0.05:
            y[int(rng.integers(n))] = np.nan if rng.random() < 0.5 else 0.0
        if rng.random() < 0.03:
            y[:] = 0.5  # flat: nothing to extrapolate
        out.append((np.stack([k, y], 1), 0.95 ** np.arange(n)[::-1] if rng.random() < 0.7 else None))
    return out


def test_fits_in_one_pass_are_the_fits_one_by_one() -> None:
    """``fit_loss_curves`` stacks the grid searches of many fits (SLAQ's round fits its running jobs' due
    curves at once): every curve must be ``fit_loss_curve``'s, bit for bit, in batches of any size (fails if
    a batched step differs from its single-fit twin, e.g. the grid's step computed once for all)."""
    cases = _random_fits(3, 600)
    one = [fit_loss_curve(p, w, polish=False) for p, w in cases]
    assert sum(c is None for c in one) > 5 and sum(c is not None for c in one) > 500
    for size in (2, 7, 600):
        many: list[LossCurve | None] = []
        for s in range(0, len(cases), size):
            many += fit_loss_curves(cases[s:s + size])
        assert many == one, size


def test_fit_many_does_the_due_fits_a_read_would_do() -> None:
    """``LossFits.fit_many`` does the fits that fell due among some jobs at once: afterwards each job's fit,
    rates and fit count are those of reading it alone (fails if a due fit is missed or done on other points)."""
    rng = np.random.default_rng(5)
    alone, batched = LossFits(recency=0.95), LossFits(recency=0.95)
    histories = {f"j{i}": [] for i in range(9)}
    for jid, h in histories.items():
        alone.follow(jid, h)
        batched.follow(jid, h)
    curves = {jid: (rng.uniform(1e-4, 1e-2), rng.uniform(0.5, 2), rng.uniform(0, 0.3)) for jid in histories}
    for step in range(60):
        for jid, h in histories.items():
            if rng.random() < 0.7:
                b0, b1, b2 = curves[jid]
                k = 60.0 * len(h)
                h.append((k, 1.0 / (b0 * k + b1) + b2))
        ids = [jid for jid in histories if rng.random() < 0.6] + ["nobody"]
        batched.fit_many(ids)
        for jid in ids[:-1]:
            assert batched.get(jid) == alone.get(jid), (step, jid)
            assert (batched.max_rate(jid), batched.last_rate(jid)) == (alone.max_rate(jid), alone.last_rate(jid))
    assert batched.fits == alone.fits > 50


def test_the_rates_read_from_columns_are_the_rates_read_from_tuples() -> None:
    """The catch-up reads a MetricSeries' newest points as two columns (``MetricSeries.columns``): the same
    drop rates as from the tuples of a list history (runs continued, explicit points between them, a frozen
    history thawed by an append)."""
    from cohabit.engine.series import MetricSeries

    rng = np.random.default_rng(7)
    series, plain = MetricSeries(), []
    lazy, ref = LossFits(recency=0.9), LossFits(recency=0.9)
    lazy.follow("j", series)
    ref.follow("j", plain)
    k = 3
    for step in range(200):
        r = rng.random()
        if r < 0.1:
            x, y = float(rng.uniform(0, 1e5)), float(rng.uniform(0.1, 2))
            series.add(x, y)
            plain.append((x, y))
        else:
            n = int(rng.integers(1, 7))
            ys = [float(v) for v in rng.uniform(0.1, 2, n)]
            done0, t0, rate = (5.0, 100.0, 0.37) if r < 0.8 else (float(rng.uniform(0, 9)), 30.0 * k, 1.3)
            series.add_grid(k, 60.0, done0, t0, rate, ys)
            for i, y in enumerate(ys):
                t = (k + i) * 60.0
                plain.append((done0 + (t - t0) * rate if t > t0 else done0, y))
            k += n + int(rng.integers(0, 2))
        if rng.random() < 0.05:
            series.freeze()
        if rng.random() < 0.3:
            assert (lazy.max_rate("j"), lazy.last_rate("j")) == (ref.max_rate("j"), ref.last_rate("j")), step
    assert lazy.max_rate("j") > 0
    assert (lazy.max_rate("j"), lazy.last_rate("j"), lazy.get("j")) == (ref.max_rate("j"), ref.last_rate("j"), ref.get("j"))


def test_fit_many_reads_engine_series_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LossFits.fit_many`` catches up many jobs' engine histories at once (``MetricSeries.grid_columns``, the
    drop rates of all of them in one numpy pass): every job's rates, fit and fit count are those of reading
    it alone, through grid runs, explicit points between them, a point with no more iterations than the one
    before, NaN losses and a frozen history (fails if a pair across two jobs is counted, if the last rate is
    taken from a pair with no more iterations, or if a NaN rate becomes the maximum)."""
    from cohabit.engine.series import MetricSeries
    from cohabit.models import loss_fits

    monkeypatch.setattr(loss_fits, "CATCH_UP_BATCH", 2)  # (every read of two or more jobs batched)
    rng = np.random.default_rng(13)
    batched, alone = LossFits(recency=0.95), LossFits(recency=0.95)
    series = {f"j{i}": MetricSeries() for i in range(12)}
    for jid, s in series.items():
        batched.follow(jid, s)
        alone.follow(jid, s)
    k = {jid: 3 for jid in series}
    params = {jid: (float(rng.uniform(0, 50)), 60.0, float(rng.uniform(0.1, 3))) for jid in series}
    for step in range(120):
        for jid, s in series.items():
            r = rng.random()
            if r < 0.08:
                s.add(float(rng.uniform(0, 1e4)), float(rng.uniform(0.1, 2)))
            elif r < 0.7:
                n = int(rng.integers(1, 7))
                ys = [float(v) for v in 1.0 / (rng.uniform(0.001, 0.01) * (k[jid] + np.arange(n)) + 1.0)]
                if n >= 3 and rng.random() < 0.1:  # a NaN loss, then the largest drop yet: the maximum skips the NaN
                    ys[0], ys[-1] = math.nan, ys[-2] - 10.0 ** int(rng.integers(-3, 1))
                done0, t0, rate = params[jid]
                if rng.random() < 0.1:  # a new run (a new speed): the next read spans two runs
                    params[jid] = done0, t0, rate = (float(rng.uniform(0, 50)), 60.0 * k[jid] + 1, float(rng.uniform(0.1, 3)))
                s.add_grid(k[jid], 60.0, done0, t0, rate, ys)
                k[jid] += n
            if rng.random() < 0.01:
                s.freeze()
        ids = [jid for jid in series if rng.random() < 0.8]
        batched.fit_many(ids)
        for jid in ids:
            alone.track(jid)
            a, b = batched.tracks[jid], alone.tracks[jid]
            assert np.array([a.max_rate, a.last_rate]).tobytes() == np.array([b.max_rate, b.last_rate]).tobytes()
            assert (a.n_seen, a.curve) == (b.n_seen, b.curve), (step, jid)
    assert batched.fits == alone.fits > 50
    assert all(batched.tracks[j].max_rate > 0 for j in series)
