"""Goodput physics of Pollux jobs (SimConfig.pollux_goodput) and the shared goodput formulas."""

from __future__ import annotations

from pathlib import Path

import pytest

from cohabit.engine.record import EventKind
from cohabit.models.goodput import candidate_batches, gain, split_batch
from cohabit.policies import make_policy
from cohabit.sim.physics import POLLUX_ARTIFACT, SimConfig
from cohabit.sim.pollux_goodput import adaptive_config, fixed_config, goodput_app, run_config
from cohabit.sim.profiles.pollux import pollux_step_time
from cohabit.sim.runner import simulate
from cohabit.sim.traces._load import load_trace
from cohabit.spec.cluster import preset

from conftest import small_cluster, trace_job


def _pollux_jobs(tmp_path: Path, rows: list[str]):
    p = tmp_path / "w.csv"
    p.write_text("name,time,application,num_replicas,batch_size\n" + "\n".join(rows) + "\n")
    return load_trace(p, "pollux").jobs


def _jct(out, job: str) -> float:
    j = out.result.jobs[job]
    assert j.end_time is not None
    return j.end_time - j.spec.submit_time


def test_gain_is_one_at_the_initial_batch_and_below_linear_above_it() -> None:
    assert gain(128, 128, 2.0, 5.0) == pytest.approx(1.0)
    g = gain(1024, 128, 2.0, 5.0)
    assert 1.0 < g < 8.0
    assert gain(1024, 128, 1e-9, 5.0) == pytest.approx(8.0, rel=1e-6)  # noise-dominated: linear scaling


def test_split_batch_accumulates_on_one_gpu_above_the_initial_batch_and_caps_the_batch() -> None:
    assert split_batch(128, 1, 1024, 128, 4096) == (128, 0)
    assert split_batch(256, 1, 1024, 128, 4096) == (128, 1)  # fits, but one replica accumulates once
    assert split_batch(4096, 2, 1024, 128, 4096) == (1024, 1)
    atomic, accum = split_batch(4000, 3, 1024, 128, 4096)
    assert 3 * atomic * (accum + 1) <= 4096


def test_rate_at_the_initial_batch_on_one_gpu_is_one_step_per_step_time() -> None:
    cfg = fixed_config("cifar10", (1,), 128, 0)
    step, _ = pollux_step_time("cifar10", (1,), 128)
    assert (cfg.batch, cfg.accum) == (128, 0)
    assert cfg.rate == pytest.approx(1.0 / step)


def test_statistical_efficiency_makes_a_large_batch_job_slower_than_its_throughput_says(tmp_path: Path) -> None:
    jobs = _pollux_jobs(tmp_path, ["c,0,cifar10,4,4096"])
    fifo = make_policy("fifo")
    plain = simulate(jobs, small_cluster(1, 4), fifo)
    good = simulate(jobs, small_cluster(1, 4), make_policy("fifo"), config=SimConfig(pollux_goodput=True))
    assert _jct(good, "c") > 1.5 * _jct(plain, "c")


def test_the_job_runs_each_epoch_at_that_epochs_goodput(tmp_path: Path) -> None:
    jobs = _pollux_jobs(tmp_path, ["b,0,bert,2,96"])  # 2 epochs of different gradient statistics
    out = simulate(jobs, small_cluster(1, 4), make_policy("fifo"), config=SimConfig(pollux_goodput=True))
    app = goodput_app("bert")
    expected, start = 0.0, 0.0
    for epoch, end in enumerate(app.epoch_ends):
        expected += (end - start) / fixed_config("bert", (2,), 96, epoch).rate
        start = end
    assert fixed_config("bert", (2,), 96, 0).rate != pytest.approx(fixed_config("bert", (2,), 96, 1).rate)
    total = jobs[0].truth.iterations  # ceil of the last epoch's end
    expected += (total - app.target) / fixed_config("bert", (2,), 96, 1).rate
    assert _jct(out, "b") == pytest.approx(expected, rel=1e-6)


def test_goodput_option_leaves_other_jobs_alone() -> None:
    jobs = [trace_job("a", 2, 500.0), trace_job("b", 1, 300.0, submit=10.0)]
    cl = small_cluster(1, 4)
    base = simulate(jobs, cl, make_policy("fifo"))
    good = simulate(jobs, cl, make_policy("fifo"), config=SimConfig(pollux_goodput=True, adaptive_batch=True))
    assert {j: _jct(base, j) for j in "ab"} == {j: _jct(good, j) for j in "ab"}


def test_start_delay_postpones_a_first_start() -> None:
    jobs = [trace_job("a", 1, 100.0)]
    out = simulate(jobs, small_cluster(), make_policy("fifo"), config=SimConfig(start_s=30.0))
    assert _jct(out, "a") == pytest.approx(130.0)


def test_adaptive_batch_is_the_best_candidate_and_beats_the_initial_batch() -> None:
    lim = goodput_app("cifar10").limits
    best = adaptive_config("cifar10", (4, 4), 10)
    _, atomics, accums = candidate_batches(8, lim.init_batch, lim.max_batch, lim.min_local, lim.max_local)
    for atomic, accum in zip(atomics.tolist(), accums.tolist()):
        assert best.rate >= fixed_config("cifar10", (4, 4), 8 * atomic * (accum + 1), 10).rate * (1 - 1e-9)
    assert best.rate > fixed_config("cifar10", (4, 4), 256, 10).rate
    cfg, end = run_config("cifar10", (4, 4), 256, 0.0, adaptive=True)
    assert cfg == adaptive_config("cifar10", (4, 4), 0) and end == goodput_app("cifar10").epoch_ends[0]


def test_decision_period_holds_decisions_to_its_rounds() -> None:
    jobs = [trace_job("a", 1, 100.0, submit=53.0), trace_job("b", 1, 100.0, submit=61.0)]
    out = simulate(jobs, small_cluster(), make_policy("fifo"), decision_period=60.0)
    assert out.result.jobs["a"].first_start == pytest.approx(60.0)
    assert out.result.jobs["b"].first_start == pytest.approx(120.0)
    times = [e.time for e in out.result.record.of_kind(EventKind.DECISION)]
    assert times and all(abs(t / 60.0 - round(t / 60.0)) < 1e-9 and t >= 60.0 for t in times)


def test_artifact_physics_on_the_embedded_workload_prefix() -> None:
    jobs = load_trace("pollux_workload-1", limit=12).jobs
    out = simulate(jobs, preset("pollux"), make_policy("fifo"), config=POLLUX_ARTIFACT, decision_period=60.0)
    assert not out.result.unfinished
    for j in out.result.jobs.values():
        assert j.first_start is not None and j.first_start % 60.0 == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("bad", [0.0, -60.0, float("inf"), float("nan")])
def test_decision_period_must_be_a_positive_finite_number(bad: float) -> None:
    with pytest.raises(ValueError, match="decision_period"):
        simulate([trace_job("a", 1, 10.0)], small_cluster(), make_policy("fifo"), decision_period=bad)
