"""compute_metrics on hand-built records whose answers are worked out by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record
from cohabit.report import Metrics, compute_metrics, jain_index, report_json
from cohabit.spec import Resources

from metrics_helpers import scale_record

CAP = Resources(gpu=4, cpu=16)


def three_jobs() -> Record:
    """Jobs a, b, c on 4 GPUs / 16 CPUs, plus d that is rejected.

    a: submit 0, run [0, 10) with 2 gpu / 4 cpu                -> JCT 10, queue 0, run 10
    b: submit 2, run [5, 8), paused, run [12, 20) (migrated at 14), 2 gpu / 8 cpu
                                                               -> JCT 18, queue 3, run 11
    c: submit 4, run [10, 16) with 2 gpu / 2 cpu               -> JCT 12, queue 6, run 6
    GPU-seconds: 20 + 22 + 12 = 54 over 4 x 20 -> 0.675
    CPU-seconds: 40 + 88 + 12 = 140 over 16 x 20 -> 0.4375
    """
    r = Record()
    r.append(0, K.SUBMITTED, "a", tenant="x", deadline=12.0, demand={"gpu": 2})
    r.append(0, K.STARTED, "a", alloc={"gpu": 2, "cpu": 4}, nodes=[0])
    r.append(1, K.SUBMITTED, "d", tenant="x", deadline=None, demand={"gpu": 64})
    r.append(1, K.REJECTED, "d", reason="needs 64 GPUs, cluster has 4")
    r.append(1, K.DECISION, ms=1.0)
    r.append(2, K.SUBMITTED, "b", tenant="x", deadline=15.0, demand={"gpu": 2})
    r.append(2, K.DECISION, ms=2.0)
    r.append(4, K.SUBMITTED, "c", tenant="y", deadline=None, demand={"gpu": 2})
    r.append(5, K.STARTED, "b", alloc={"gpu": 2, "cpu": 8}, nodes=[1])
    r.append(5, K.PROGRESS, "b", iterations=10, iter_time=0.3)
    r.append(8, K.PAUSED, "b")
    r.append(8, K.ACTION_REJECTED, "c", action="Start", reason="no room")
    r.append(10, K.FINISHED, "a")
    r.append(10, K.STARTED, "c", alloc={"gpu": 2, "cpu": 2}, nodes=[0])
    r.append(10, K.DECISION, ms=3.0)
    r.append(12, K.RESUMED, "b", alloc={"gpu": 2, "cpu": 8}, nodes=[1])
    r.append(14, K.MIGRATED, "b", alloc={"gpu": 2, "cpu": 8}, nodes=[2])
    r.append(16, K.FINISHED, "c")
    r.append(20, K.FINISHED, "b")
    r.append(20, K.DECISION, ms=4.0)
    return r


@pytest.fixture(scope="module")
def m3() -> Metrics:
    return compute_metrics(three_jobs(), CAP)


def test_metrics_jct_statistics(m3: Metrics) -> None:
    assert m3.avg_jct == pytest.approx(40 / 3)
    assert m3.median_jct == pytest.approx(12.0)
    assert m3.p95_jct == pytest.approx(12 + 0.9 * 6)  # linear interpolation at rank 1.9 of [10, 12, 18]
    assert list(m3.jct_values) == [10.0, 12.0, 18.0]  # in order of finishing: a, c, b


def test_metrics_makespan_and_queueing(m3: Metrics) -> None:
    assert m3.makespan == pytest.approx(20.0)
    assert m3.avg_queueing_delay == pytest.approx((0 + 3 + 6) / 3)
    assert m3.window == (0.0, 20.0)


def test_metrics_utilization_with_pause_and_migration(m3: Metrics) -> None:
    assert m3.allocated == pytest.approx({"gpu": 0.675, "cpu": 0.4375})


def test_metrics_utilization_series_is_exact_step_function(m3: Metrics) -> None:
    s = m3.allocated_series
    # the migration at 14 and the a->c hand-over at 10 leave the GPU level unchanged
    assert list(s.times) == [0, 5, 8, 10, 12, 16, 20]
    assert list(s.fractions["gpu"]) == [0.5, 1.0, 0.5, 0.5, 1.0, 0.5, 0.0]
    assert list(s.fractions["cpu"]) == [0.25, 0.75, 0.25, 0.125, 0.625, 0.5, 0.0]
    area = np.sum(s.fractions["gpu"][:-1] * np.diff(s.times)) / 20
    assert area == pytest.approx(m3.allocated["gpu"])


def test_metrics_counts(m3: Metrics) -> None:
    assert (m3.jobs_submitted, m3.jobs_finished, m3.jobs_rejected) == (4, 3, 1)
    assert (m3.jobs_stopped, m3.jobs_failed, m3.jobs_cancelled, m3.jobs_pending_at_end) == (0, 0, 0, 0)
    assert (m3.preemptions, m3.migrations, m3.resizes) == (1, 1, 0)
    assert m3.action_rejections == 1


def test_metrics_jain_over_service_fraction(m3: Metrics) -> None:
    x = [10 / 10, 11 / 18, 6 / 12]  # time running / JCT of a, b, c
    assert m3.jain_fairness == pytest.approx(sum(x) ** 2 / (3 * sum(v * v for v in x)))


def test_metrics_tenant_jain_over_mean_slowdown(m3: Metrics) -> None:
    sx, sy = (1.0 + 18 / 11) / 2, 12 / 6  # tenant x: a, b; tenant y: c
    assert m3.tenant_jain_fairness == pytest.approx((sx + sy) ** 2 / (2 * (sx * sx + sy * sy)))


def test_metrics_deadline_met_ratio(m3: Metrics) -> None:
    assert m3.deadline_met_ratio == pytest.approx(0.5)  # a met 12 (finished 10), b missed 15 (finished 20)


def test_metrics_decision_stats(m3: Metrics) -> None:
    d = m3.decision_time_ms
    assert (d.mean, d.max, d.count) == (pytest.approx(2.5), 4.0, 4)
    assert d.p99 == pytest.approx(3.97)


@pytest.mark.parametrize(("values", "expected"), [
    ([1, 1, 1, 1], 1.0), ([1, 0, 0, 0], 0.25), ([1, 2, 3], 36 / 42), ([5.0], 1.0), ([], None), ([0, 0], None),
])
def test_jain_index_known_vectors(values: list[float], expected: float | None) -> None:
    assert jain_index(values) == (None if expected is None else pytest.approx(expected))


def test_metrics_empty_record_gives_defined_values() -> None:
    m = compute_metrics(Record(), CAP)
    assert m.avg_jct is m.median_jct is m.p95_jct is m.makespan is m.avg_queueing_delay is None
    assert m.jain_fairness is m.tenant_jain_fairness is m.deadline_met_ratio is None
    assert m.allocated == {"gpu": 0.0, "cpu": 0.0}
    assert m.jobs_submitted == m.jobs_finished == m.preemptions == 0
    assert m.decision_time_ms.count == 0 and m.decision_time_ms.mean is None
    assert m.window is None and len(m.allocated_series) == 0 and m.jct_values.size == 0
    json.dumps(m.to_json(series=True), allow_nan=False)


def test_metrics_nothing_finished_reports_pending_states() -> None:
    r = Record()
    r.append(0, K.SUBMITTED, "run")
    r.append(0, K.STARTED, "run", alloc={"gpu": 4}, nodes=[0])
    r.append(1, K.SUBMITTED, "wait")
    r.append(2, K.SUBMITTED, "nap")
    r.append(2, K.PROGRESS, "run", iterations=5, iter_time=1.0)
    r.append(10, K.DECISION, ms=0.5)
    m = compute_metrics(r, CAP)
    assert m.avg_jct is None and m.makespan is None and m.jain_fairness is None
    assert m.jobs_pending_at_end == 3 and m.jobs_finished == 0
    assert m.pending_states == {"run": "running", "wait": "pending", "nap": "pending"}
    assert m.pending_by_state == {"running": 1, "pending": 2}
    assert m.window == (0.0, 10.0)  # up to the last event, as some job never ended
    assert m.allocated["gpu"] == pytest.approx(1.0)
    assert m.avg_queueing_delay == 0.0
    json.dumps(m.to_json(), allow_nan=False)


def test_metrics_rejected_only() -> None:
    r = Record()
    for i in range(3):
        r.append(float(i), K.SUBMITTED, f"j{i}", deadline=100.0)
        r.append(float(i), K.REJECTED, f"j{i}", reason="too big")
    m = compute_metrics(r, CAP)
    assert (m.jobs_submitted, m.jobs_rejected, m.jobs_finished, m.jobs_pending_at_end) == (3, 3, 0, 0)
    assert m.avg_jct is None and m.makespan is None and m.avg_queueing_delay is None
    assert m.deadline_met_ratio == 0.0  # a rejected job misses its deadline
    assert m.allocated == {"gpu": 0.0, "cpu": 0.0}
    json.dumps(m.to_json(series=True), allow_nan=False)


def test_metrics_other_endings_and_resize() -> None:
    r = Record()
    for j in "abcd":
        r.append(0, K.SUBMITTED, j)
        r.append(0, K.STARTED, j, alloc={"gpu": 1}, nodes=[0])
    r.append(2, K.RESIZED, "a", alloc={"gpu": 2}, nodes=[0, 0])
    r.append(4, K.STOPPED, "a", reason="converged")
    r.append(4, K.FAILED, "b", reason="oom")
    r.append(4, K.CANCELLED, "c")
    r.append(4, K.FINISHED, "d")
    m = compute_metrics(r, CAP)
    assert (m.jobs_stopped, m.jobs_failed, m.jobs_cancelled, m.jobs_finished, m.resizes) == (1, 1, 1, 1, 1)
    assert m.allocated["gpu"] == pytest.approx((3 * 4 + 1 * 2 + 2 * 2) / 16)
    assert m.makespan == 4.0 and list(m.jct_values) == [4.0]


def test_metrics_horizon_truncates_the_run() -> None:
    m = compute_metrics(three_jobs(), CAP, horizon=9.0)
    assert m.window == (0.0, 9.0)
    assert m.jobs_finished == 0 and m.avg_jct is None
    assert m.pending_states == {"a": "running", "b": "paused", "c": "pending"}
    assert m.allocated["gpu"] == pytest.approx((2 * 9 + 2 * 3) / (4 * 9))
    assert m.decision_time_ms.count == 2 and m.preemptions == 1


def test_metrics_horizon_beyond_the_end_lowers_utilization() -> None:
    m = compute_metrics(three_jobs(), CAP, horizon=40.0)
    assert m.allocated["gpu"] == pytest.approx(54 / (4 * 40))
    assert m.makespan == 20.0


def test_metrics_json_shape_and_no_nan(m3: Metrics) -> None:
    d = m3.to_json()
    required = {"avg_jct", "median_jct", "p95_jct", "makespan", "avg_queueing_delay", "allocated_share", "used_share",
                "jobs_finished", "jobs_rejected", "preemptions", "decision_time_ms"}
    assert required <= set(d)
    assert {"mean", "p99"} <= set(d["decision_time_ms"])
    text = json.dumps(report_json({"fifo": m3}, trace="t.csv", cluster="tiresias"), allow_nan=False)
    back = json.loads(text)
    assert back["policies"]["fifo"] == d and back["cluster"] == "tiresias"


def test_metrics_json_replaces_non_finite_values() -> None:
    r = Record()
    r.append(0, K.DECISION, ms=float("nan"))
    r.append(0, K.DECISION, ms=float("inf"))
    m = compute_metrics(r, CAP)
    assert m.decision_time_ms.count == 0
    json.dumps(m.to_json(series=True), allow_nan=False)


def test_metrics_from_jsonl_round_trip(tmp_path, m3: Metrics) -> None:
    path = tmp_path / "run.jsonl"
    three_jobs().write_jsonl(path)
    again = compute_metrics(Record.read_jsonl(path), CAP)
    assert again.to_json(series=True) == m3.to_json(series=True)


def test_metrics_accepts_resources_allocations_and_ignores_unknown_resources() -> None:
    r = Record()
    r.append(0, K.SUBMITTED, "a")
    r.append(0, K.STARTED, "a", alloc=Resources(gpu=2, fpga=1), nodes=[0])
    r.append(10, K.FINISHED, "a")
    m = compute_metrics(r, Resources(gpu=4))
    assert m.allocated == {"gpu": 0.5}


def test_metrics_zero_length_window() -> None:
    r = Record()
    r.append(5, K.SUBMITTED, "a")
    r.append(5, K.STARTED, "a", alloc={"gpu": 1}, nodes=[0])
    r.append(5, K.FINISHED, "a")
    m = compute_metrics(r, CAP)
    assert m.window == (5.0, 5.0) and m.allocated["gpu"] == 0.0
    assert m.jain_fairness == 1.0 and m.avg_jct == 0.0


def test_metrics_decimates_long_series_preserving_area() -> None:
    rng = np.random.default_rng(1)
    r = Record()
    t = 0.0
    for i in range(6000):
        r.append(t, K.SUBMITTED, f"j{i}")
        r.append(t, K.STARTED, f"j{i}", alloc={"gpu": int(rng.integers(1, 5))}, nodes=[0])
        t += float(rng.exponential(1.0))
        r.append(t, K.FINISHED, f"j{i}")
    m = compute_metrics(r, CAP, max_series_points=500)
    s = m.allocated_series
    assert 2 <= len(s) <= 500
    area = np.sum(s.fractions["gpu"][:-1] * np.diff(s.times)) / (s.times[-1] - s.times[0])
    assert area == pytest.approx(m.allocated["gpu"], rel=1e-9)
    assert s.times[0] == m.window[0] and s.times[-1] == m.window[1]


def test_metrics_arrays_are_read_only(m3: Metrics) -> None:
    with pytest.raises(ValueError):
        m3.jct_values[0] = 0.0


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"max_series_points": 1}, "max_series_points"), ({"horizon": math.nan}, "horizon"),
])
def test_metrics_rejects_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        compute_metrics(Record(), CAP, **kwargs)


def test_metrics_on_a_large_record_count_every_job_and_cap_the_series() -> None:
    """8,200 jobs (~43k events): counts stay exact and the series stays capped. (How long the 82k-job
    record takes is measured by bench/metrics_scale.py, not asserted here.)"""
    r = scale_record(8_200)
    assert len(r) > 42_000
    m = compute_metrics(r, Resources(gpu=2500, cpu=10_000))
    assert m.jobs_finished == 8_200 and m.preemptions == 820
    assert 1000 < len(m.allocated_series) <= 2000  # ~18k change points, thinned to the cap
