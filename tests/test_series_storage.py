"""A metric history's compact storage (``engine/series.MetricSeries``, issue 18): periodic reports'
iterations kept as their formula, finished histories kept compressed. Every read must give the points
appended, bit for bit, whatever mix of appends and freezes built the history."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine.series import MetricSeries
from cohabit.policies import make_policy
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace

from conftest import small_cluster

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _grid_x(k: int, every: float, done0: float, t0: float, rate: float) -> float:
    """A grid report's iterations, as the simulator computes them (``sim/report_grid._reports_python``)."""
    t = k * every
    return done0 + (t - t0) * rate if t > t0 else done0


def _bits(points) -> list[tuple[bytes, bytes]]:
    return [(struct.pack("<d", x), struct.pack("<d", y)) for x, y in points]


finite = st.floats(-1e6, 1e6, allow_nan=False)
values = st.one_of(finite, st.sampled_from([0.0, -0.0, math.inf, 1e-300, 5e-324]))


@st.composite
def histories(draw):
    """A list of writes: explicit points, runs of grid reports (some continuing the previous run:
    the next index at the same numbers), and where a freeze happens."""
    ops = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["add", "extend", "grid", "grid", "freeze"]))
        if kind == "add":
            ops.append(("add", draw(finite), draw(values)))
        elif kind == "extend":
            n = draw(st.integers(0, 5))
            ops.append(("extend", draw(st.lists(finite, min_size=n, max_size=n)),
                        draw(st.lists(values, min_size=n, max_size=n))))
        elif kind == "freeze":
            ops.append(("freeze",))
        else:
            k0 = draw(st.integers(0, 10_000))
            every = draw(st.sampled_from([60.0, 300.0, 7.3, 0.1]))
            t0 = k0 * every + draw(st.floats(-500.0, 500.0))  # before and after the first grid times
            args = (k0, every, draw(st.floats(0.0, 1e7)), t0, draw(st.floats(1e-6, 1e3)))
            n = draw(st.integers(1, 80))
            ops.append(("grid", *args, draw(st.lists(values, min_size=n, max_size=n))))
            if draw(st.booleans()):  # the next fold of the same segment
                m = draw(st.integers(1, 5))
                ops.append(("grid", k0 + n, *args[1:], draw(st.lists(values, min_size=m, max_size=m))))
    return ops


def _build(ops):
    s, ref = MetricSeries(), []
    for op in ops:
        if op[0] == "add":
            s.add(op[1], op[2])
            ref.append((op[1], op[2]))
        elif op[0] == "extend":
            s.extend(op[1], op[2])
            ref.extend(zip(op[1], op[2]))
        elif op[0] == "freeze":
            s.freeze()
        else:
            _, k0, every, done0, t0, rate, ys = op
            s.add_grid(k0, every, done0, t0, rate, ys)
            ref.extend((_grid_x(k0 + i, every, done0, t0, rate), y) for i, y in enumerate(ys))
    return s, ref


def _check_reads(s: MetricSeries, ref: list[tuple[float, float]], lo: int, hi: int) -> None:
    n = len(ref)
    assert len(s) == n
    assert _bits(s) == _bits(ref)  # iteration
    assert _bits(s[i] for i in range(n)) == _bits(ref)  # indexing
    if n:
        assert _bits([s[-1]]) == _bits([ref[-1]])
        assert _bits(s.head(n).tolist()) == _bits(ref)
    lo, hi = min(lo, n), min(hi, n)
    assert _bits(s[lo:hi]) == _bits(ref[lo:hi])  # (short slices: Python steps; long ones: numpy)
    assert _bits(s[lo:]) == _bits(ref[lo:])
    assert _bits(s[::3]) == _bits(ref[::3])
    assert _bits(zip(s.xs(lo, max(lo, hi)).tolist(), s.ys(lo, max(lo, hi)).tolist())) == _bits(ref[lo:max(lo, hi)])
    assert s == ref and s == MetricSeries(ref)


@SETTINGS
@given(histories(), st.integers(0, 200), st.integers(0, 200))
def test_every_read_gives_the_points_appended_bit_for_bit(ops, lo, hi):
    s, ref = _build(ops)
    _check_reads(s, ref, lo, hi)
    s.freeze()  # (the engine's call when the job ends)
    assert s.frozen == bool(ref)
    _check_reads(s, ref, lo, hi)
    s.add(1.5, 2.5)  # appending to a frozen history thaws it
    assert not s.frozen
    _check_reads(s, [*ref, (1.5, 2.5)], lo, hi)


def test_a_run_gives_the_formulas_iterations_at_its_own_indices():
    """Each grid point's iterations at its own index: ``k0 + i`` (fails when the run is off by one)."""
    s = MetricSeries()
    s.add(3.0, 9.0)  # the segment's first-iteration report (an event)
    s.add_grid(5, 60.0, 3.0, 250.0, 0.25, [8.0, 7.0, 6.0])  # t = 300, 360, 420
    s.add_grid(8, 60.0, 3.0, 250.0, 0.25, [5.5])  # continues the run
    s.add_grid(2, 60.0, 0.0, 200.0, 2.0, [4.0, 3.0])  # t = 120 <= t0: done0; then t = 180 <= t0: done0
    assert list(s) == [(3.0, 9.0), (15.5, 8.0), (30.5, 7.0), (45.5, 6.0), (60.5, 5.5), (0.0, 4.0), (0.0, 3.0)]
    assert len(s._runs) == 2  # the continuing fold extends its run, the new segment starts one


def test_a_frozen_history_is_small():
    """A long smooth loss history (the simulator's curve shape) frozen holds a few bytes per point
    instead of 16, and reads back exactly."""
    k = np.arange(1, 20_001)
    xs = (k * 60.0 - 17.0) * 0.37
    ys = 1.0 / (0.8 * np.minimum(xs / xs[-1], 1.0) + 0.2) + 0.05
    s = MetricSeries()
    s.extend(xs.tolist(), ys.tolist())
    assert s.nbytes >= 16 * len(k)
    s.freeze()
    assert s.frozen and s.nbytes < 4 * len(k)
    assert s.head(len(k)).tobytes() == np.column_stack((xs, ys)).tobytes()


@pytest.fixture(scope="module")
def slaq_run():
    jobs = load_trace("tiresias_480", "tiresias").jobs[:40]
    return simulate(jobs, small_cluster(2, 4), make_policy("slaq"))


def test_the_engine_freezes_a_history_when_its_job_ends(slaq_run):
    """Ended jobs' loss histories are frozen (the engine's ``_end``), in fewer bytes; running
    jobs' are not."""
    jobs = [j for j in slaq_run.result.jobs.values() if "loss" in j.metrics]
    ended = [j.metrics["loss"] for j in jobs if j.end_time is not None]
    assert len(ended) > 20 and all(s.frozen for s in ended)
    assert not any(j.metrics["loss"].frozen for j in jobs if j.end_time is None)
    points = sum(len(s) for s in ended)
    assert points > 300 and sum(s.nbytes for s in ended) < 16 * points  # (short histories here: ~12 points)


@pytest.mark.parametrize("runs", [False, True])
@pytest.mark.parametrize("n", range(1, 9))
def test_a_short_history_is_frozen_raw_and_reads_back_exactly(n, runs):
    """A history of at most ``_RAW_MAX`` points is frozen as its raw bytes (16 a point, no zlib), a longer
    one compressed; both read back bit for bit (values with NaN payloads, -0.0, infinities and
    subnormals; grid runs' iterations materialised)."""
    from cohabit.engine import series

    rng = np.random.default_rng(n)
    odd = [math.nan, -0.0, math.inf, -math.inf, 5e-324, struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000123))[0]]
    ys = [odd[i % len(odd)] if i % 2 else float(rng.normal()) for i in range(n)]
    s = MetricSeries()
    if runs:  # one explicit point, then grid runs
        s.add(0.5, ys[0])
        if n > 1:
            s.add_grid(3, 60.0, 10.0, 100.0, 0.25, ys[1:])
    else:
        s.extend([float(x) for x in rng.normal(size=n)], ys)
    ref = list(s)
    s.freeze()
    assert s.frozen
    assert (s.nbytes == 16 * n) is (n <= series._RAW_MAX)
    assert _bits(list(s)) == _bits(ref) and _bits(s[0:n]) == _bits(ref)
    assert _bits([s[i] for i in range(n)]) == _bits(ref)
    assert s.head(n).tobytes() == np.array(ref, dtype=np.float64).reshape(n, 2).tobytes()
