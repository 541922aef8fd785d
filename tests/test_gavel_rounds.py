"""Gavel's round mechanism in the scheduler loop (issue 19): physics ``gavel`` means 360 s rounds from t=0."""

from __future__ import annotations

import pytest

from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.sim.physics import PHYSICS_DECISION_PERIOD, PHYSICS_FIRST_ROUND, physics_config
from cohabit.sim.runner import simulate

from conftest import small_cluster, trace_job

ROUND = PHYSICS_DECISION_PERIOD["gavel"]


def _gavel(jobs, policy="fifo", cluster=None):
    return simulate(jobs, cluster or small_cluster(1, 1), make_policy(policy), config=physics_config("gavel"),
                    decision_period=PHYSICS_DECISION_PERIOD["gavel"], first_round=PHYSICS_FIRST_ROUND["gavel"])


def test_gavel_physics_rounds_are_360_s_from_zero() -> None:
    assert ROUND == 360.0 and PHYSICS_FIRST_ROUND["gavel"] == 0.0


def test_a_job_that_ends_mid_round_leaves_its_gpu_idle_until_the_boundary() -> None:
    # one GPU: a ends at 100 s; b waits for the round boundary at 360 s although the GPU is free at 100 s
    out = _gavel([trace_job("a", 1, 100.0), trace_job("b", 1, 50.0)])
    jobs = out.result.jobs
    assert jobs["a"].first_start == pytest.approx(0.0)
    assert jobs["a"].end_time == pytest.approx(100.0)
    assert jobs["b"].first_start == pytest.approx(ROUND)
    assert jobs["b"].end_time == pytest.approx(ROUND + 50.0)


def test_decisions_and_launches_only_at_round_boundaries() -> None:
    jobs = [trace_job("a", 1, 500.0), trace_job("b", 1, 130.0, submit=10.0), trace_job("c", 1, 90.0, submit=700.0)]
    out = _gavel(jobs, cluster=small_cluster(1, 2))
    rec = out.result.record
    decided = [e.time for e in rec.of_kind(EventKind.DECISION)]
    launched = [e.time for k in (EventKind.STARTED, EventKind.RESUMED) for e in rec.of_kind(k)]
    assert decided and launched
    for t in decided + launched:
        assert t / ROUND == pytest.approx(round(t / ROUND), abs=1e-9), t
    assert out.result.jobs["b"].first_start == pytest.approx(ROUND)  # arrived at 10 s: the next boundary
    assert out.result.jobs["c"].first_start == pytest.approx(2 * ROUND)


def test_without_the_option_the_loop_decides_at_every_event() -> None:
    out = simulate([trace_job("a", 1, 100.0), trace_job("b", 1, 50.0)], small_cluster(1, 1), make_policy("fifo"),
                   config=physics_config("gavel"))
    assert out.result.jobs["b"].first_start == pytest.approx(100.0)


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_first_round_must_be_a_finite_time_at_or_after_zero(bad: float) -> None:
    with pytest.raises(ValueError, match="first_round"):
        simulate([trace_job("a", 1, 10.0)], small_cluster(), make_policy("fifo"), decision_period=60.0,
                 first_round=bad)
