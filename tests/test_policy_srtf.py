"""SRTF: the remaining-time estimate (observed and oracle) and the preemption rules, by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from cohabit.engine.record import EventKind
from cohabit.policies import SRTF
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate

from conftest import small_cluster, trace_job

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)


def _job(iterations: int | None = 100, done: float = 40.0, iter_time: float | None = 2.0, executed: float = 80.0):
    return SimpleNamespace(id="j", iter_time=iter_time, spec=SimpleNamespace(iterations=iterations, model="m"),
                           iterations_done=lambda now: done, executed_time=lambda now: executed)


def _view(mean_iter: float | None = 3.0, mean_run: float | None = 500.0):
    return SimpleNamespace(now=0.0, history=SimpleNamespace(mean_iter_time=lambda model: mean_iter,
                                                            mean_run_time=lambda: mean_run))


def test_observed_remaining_is_declared_iterations_left_times_measured_iteration_time() -> None:
    p = SRTF()
    assert p.remaining(_job(), _view()) == pytest.approx(60 * 2.0)
    assert p.remaining(_job(done=120.0), _view()) == 0.0  # past the declared length: nothing left
    # before its first measurement: the mean iteration time of finished jobs of its model
    assert p.remaining(_job(iter_time=None), _view(mean_iter=3.0)) == pytest.approx(60 * 3.0)


def test_observed_remaining_without_declared_length_is_the_mean_run_time_minus_what_ran() -> None:
    p = SRTF()
    assert p.remaining(_job(iterations=None), _view(mean_run=500.0)) == pytest.approx(500 - 80)
    assert p.remaining(_job(iterations=None, executed=600.0), _view(mean_run=500.0)) == 0.0
    assert p.remaining(_job(iterations=None), _view(mean_run=None)) == math.inf  # no history yet
    assert p.remaining(_job(iter_time=None), _view(mean_iter=None, mean_run=None)) == math.inf


def test_oracle_remaining_uses_the_true_length() -> None:
    p = SRTF(use_oracle=True)
    p.bind_oracle(SimpleNamespace(total_iterations=lambda jid: 100, duration=lambda jid: 300.0))  # type: ignore[arg-type]
    assert p.remaining(_job(iterations=None, iter_time=2.0), _view()) == pytest.approx(60 * 2.0)
    # not measured yet: the trace's duration scaled by the fraction left
    assert p.remaining(_job(iterations=None, iter_time=None), _view()) == pytest.approx(300 * 0.6)
    p.bind_oracle(SimpleNamespace(total_iterations=lambda jid: 100, duration=lambda jid: None))  # type: ignore[arg-type]
    assert p.remaining(_job(iterations=None, iter_time=None), _view(mean_iter=4.0)) == pytest.approx(60 * 4.0)


def _paused(out) -> list[tuple[float, str]]:
    return [(e.time, e.job) for e in out.result.record if e.kind == EventKind.PAUSED]


def _run(jobs, gpus: int, margin: float = 0.0, min_run_time: float = 0.0):  # type: ignore[no-untyped-def]
    pol = SRTF(use_oracle=True, preempt_margin=margin, min_run_time=min_run_time)
    out = simulate(jobs, small_cluster(1, gpus), pol, config=NO_COST, oracle=True, strict=True)
    assert not [e for e in out.result.record if e.kind == EventKind.ACTION_REJECTED]
    assert all(j.state == "finished" for j in out.result.jobs.values())
    return out


def test_a_job_that_fits_starts_without_pausing_anyone() -> None:
    out = _run([trace_job("L", 1, 1000, 0), trace_job("J", 1, 10, 10)], gpus=2)
    assert _paused(out) == []


def test_preemption_pauses_the_longest_remaining_job_first() -> None:
    # 2 GPUs: L (990 s left at t=10) and M (490 s left) run; J (10 s) arrives: L is paused, not M
    out = _run([trace_job("L", 1, 1000, 0), trace_job("M", 1, 500, 0), trace_job("J", 1, 10, 10)], gpus=2)
    assert _paused(out) == [(pytest.approx(10), "L")]


def test_a_preemption_that_cannot_make_room_pauses_nothing_and_frees_nothing() -> None:
    """4 GPUs, margin 60: L (2 GPUs, 1000 s) and S (2 GPUs, 50 s) run. At 5, J (4 GPUs, 10 s) would need
    both, but S has only 45 s left (not > 10 + 60): no pause. K (2 GPUs, 990 s), arriving with J, may
    not take L's GPUs either (the attempt for J is undone). At 50 S ends and J pauses L."""
    jobs = [trace_job("L", 2, 1000, 0), trace_job("S", 2, 50, 0), trace_job("J", 4, 10, 5), trace_job("K", 2, 990, 5)]
    out = _run(jobs, gpus=4, margin=60.0)
    assert _paused(out)[0] == (pytest.approx(50), "L")
    started = {e.job: e.time for e in out.result.record if e.kind == EventKind.STARTED}
    assert started["J"] == pytest.approx(50) and started["K"] > 50


def test_a_job_is_not_paused_before_it_ran_min_run_time() -> None:
    """min_run_time 60 s: L starts at 0; J (shorter) arrives at 10 and waits: L is spared until it has run
    60 s, and paused then (the policy asks to decide again at 60; K arrives only at 70). With
    min_run_time 0 L is paused at 10."""
    jobs = [trace_job("L", 1, 1000, 0), trace_job("J", 1, 10, 10), trace_job("K", 1, 5000, 70)]
    assert _paused(_run(jobs, gpus=1, min_run_time=60.0))[0] == (pytest.approx(60), "L")
    assert _paused(_run(jobs, gpus=1))[0] == (pytest.approx(10), "L")
    assert SRTF().min_run_time == 60.0  # bounded by default (see the module doc)
