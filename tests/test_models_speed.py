"""Optimus's resource-speed model: NNLS recovers known coefficients; the one-point prior."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.models.speed import SpeedModel, features, fit_speed, predict


def test_sync_fit_recovers_a_known_function() -> None:
    theta = np.array([2.0, 0.1, 0.05, 0.02, 0.03])  # f(p,w) = (2/w + 0.1 + 0.05 w/p + 0.02 w + 0.03 p)^-1
    pts = [(p, w, predict(theta, p, w, "sync")) for p in (1, 2, 4) for w in (1, 2, 4, 8)]
    assert fit_speed(pts, "sync") == pytest.approx(theta, rel=1e-6)
    # hand check of one point: p=2, w=4 -> 1/(0.5 + 0.1 + 0.1 + 0.08 + 0.06) = 1/0.84
    assert predict(theta, 2, 4, "sync") == pytest.approx(1 / 0.84)


def test_async_fit_recovers_a_known_function() -> None:
    theta = np.array([1.0, 0.2, 0.01, 0.05])  # f = w (1 + 0.2 w/p + 0.01 w + 0.05 p)^-1
    pts = [(p, w, predict(theta, p, w, "async")) for p in (1, 2, 3) for w in (1, 3, 6)]
    assert fit_speed(pts, "async") == pytest.approx(theta, rel=1e-6)


def test_allreduce_model_and_the_one_point_prior() -> None:
    m = SpeedModel("allreduce")
    assert m.speed(0, 4) is None
    m.observe(0, 2, 10.0)  # one configuration: perfect scaling from it
    assert m.speed(0, 4) == pytest.approx(20.0)
    assert m.speed(0, 1) == pytest.approx(5.0)
    theta = np.array([4.0, 0.5, 0.1])  # 1/f = 4/w + 0.5 + 0.1 w
    for w in (1, 2, 4):
        m.observe(0, w, predict(theta, 0, w, "allreduce"))
    assert m.theta == pytest.approx(theta, rel=1e-6)
    assert m.speed(0, 8) == pytest.approx(1 / (0.5 + 0.5 + 0.8))


def test_latest_measurement_replaces_an_older_one() -> None:
    m = SpeedModel("sync")
    m.observe(1, 2, 4.0)
    m.observe(1, 2, 5.0)
    assert m.points == {(1, 2): 5.0}
    assert m.speed(1, 4) == pytest.approx(10.0)


def test_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="mode"):
        SpeedModel("ring")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="speed"):
        SpeedModel().observe(1, 1, 0.0)
    with pytest.raises(ValueError, match="w must be"):
        SpeedModel().observe(1, 0, 1.0)
    with pytest.raises(ValueError, match="p must be"):
        features(0, 2, "sync")
    with pytest.raises(ValueError, match="at least one"):
        fit_speed([], "sync")


def test_the_one_point_coefficients_are_those_of_its_theta() -> None:
    """``SpeedModel.coefficients`` of a one-point model, read without its theta (issue 18, seventeenth session),
    are the floats the theta gives, in both modes and at any parameter-server count, bit for bit; after a
    second point the fit is read as before."""
    rng = np.random.default_rng(5)
    for _ in range(500):
        mode = "sync" if rng.random() < 0.5 else "allreduce"
        p, w, s = int(rng.integers(0, 5)), int(rng.integers(1, 9)), float(rng.uniform(0.01, 50.0))
        quick, slow = SpeedModel(mode), SpeedModel(mode)
        quick.observe(p, w, s)
        slow.observe(p, w, s)
        slow.theta  # noqa: B018  (the fit made first: coefficients then read from it)
        for q in (p, 0, 1, 3):
            got, want = quick.coefficients(q), slow.coefficients(q)
            assert got is not None and want is not None
            assert [x.hex() for x in got] == [x.hex() for x in want], (mode, p, w, s, q)
        if mode == "sync" and p == 0:
            continue  # (a fit of two points needs servers in sync mode)
        quick.observe(p, w + 1, s * 0.5)
        fresh = SpeedModel(mode)
        fresh.observe(p, w, s)
        fresh.observe(p, w + 1, s * 0.5)
        assert quick.coefficients(p) == fresh.coefficients(p)
