"""What-if: a live state (as ``GET /v1/whatif/state`` gives it) replayed in the simulator."""

from __future__ import annotations

import pytest

from cohabit.service.whatif import simulate_from, trace_jobs
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.yamlio import dump_cluster


def spec(name: str, iterations: int, model: str = "mlr") -> dict:
    return {"id": name, "model": model, "iterations": iterations,
            "workers": {"count": 1, "demand": {"cpu": 1.0, "mem_gb": 0.5}}}


def state() -> dict:
    # one cpu: job 1 runs (100 of 1,100 iterations done at 0.1 s each: 100 s left); job 2 (100
    # iterations, never measured: its model's history says 0.1 s -> 10 s) and job 3 (500 at the
    # mean measured speed 0.1 s -> 50 s) wait in this order.
    cl = ClusterSpec.homogeneous("one", 1, Resources(cpu=1, mem_gb=2))
    return {
        "cluster": dump_cluster(cl), "policy": "fifo",
        "jobs": [{"id": 1, "spec": spec("a", 1100)}, {"id": 2, "spec": spec("b", 100, "cnn")},
                 {"id": 3, "spec": spec("c", 500, "lasso")}, {"id": 4, "spec": {**spec("d", 5), "iterations": None}}],
        "observed": {"jobs": {"j1": {"iterations": 100.0, "iter_time": 0.1, "model": "mlr", "state": "running"},
                              "j2": {"iterations": 0.0, "iter_time": None, "model": "cnn", "state": "pending"},
                              "j3": {"iterations": 0.0, "iter_time": None, "model": "lasso", "state": "pending"}},
                     "model_iter_time": {"cnn": 0.1}},
    }


def test_trace_jobs_carry_remaining_work_at_observed_speed() -> None:
    jobs, skipped = trace_jobs(state())
    assert [(j.spec.id, j.spec.iterations, j.truth.duration) for j in jobs] == [
        ("j1", 1000, pytest.approx(100.0)), ("j2", 100, pytest.approx(10.0)), ("j3", 500, pytest.approx(50.0))]
    assert skipped == [4]  # no declared length: nothing to extrapolate


def test_policies_compared_from_now() -> None:
    rows = {r["policy"]: r for r in simulate_from(state(), ["fifo", "srtf:preempt_margin=0"])}
    # FIFO keeps the queue order: JCTs 100, 110, 160 s from now
    assert rows["fifo"]["avg_jct_s"] == pytest.approx((100 + 110 + 160) / 3, rel=0.02)
    assert rows["fifo"]["unfinished"] == 0 and rows["fifo"]["skipped_no_speed"] == [4]
    # SRTF runs the short jobs first and wins on average JCT
    assert rows["srtf:preempt_margin=0"]["avg_jct_s"] < rows["fifo"]["avg_jct_s"] - 20
    short = simulate_from(state(), ["fifo"], hours=50 / 3600)[0]
    assert short["unfinished"] > 0  # the horizon cuts the simulation
