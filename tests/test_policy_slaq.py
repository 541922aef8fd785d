"""SLAQ (Zhang et al., SoCC'17): normalised loss reduction per unit of resource decides; properties."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.slaq import SLAQ
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster
from test_policy_optimus import check_terminates

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)


def job(id: str, gpus: int, iterations: int, *, declare: bool = True, curve=(10.0, 1.0, 0.1)) -> TraceJob:
    spec = simple_job(id, gpus, iterations=iterations if declare else None)
    return TraceJob(spec, JobTruth(iterations=iterations, duration=float(iterations), ref_workers=gpus,
                                   loss_curve=curve))


def starts(out) -> list[tuple[float, str]]:
    return [(e.time, e.job) for e in out.result.record if e.kind in (EventKind.STARTED, EventKind.RESUMED)]


def test_prefers_the_larger_predicted_reduction_per_unit_of_resource() -> None:
    # Three new jobs, 2 GPUs. A new job's iterations are its best: each predicted iteration counts 1
    # (normalised), capped by what the job declared it has left; the prior speed is 1 iteration/s
    # per worker, so an epoch of 300 s would give 300 per worker.
    #   A: 2 GPUs, 200 left -> 200 over a share of 2/2 = 1   -> 200 per unit of dominant share
    #   B: 1 GPU, 150 left  -> 150 over 1/2                  -> 300
    #   C: 1 GPU, 120 left  -> 120 over 1/2                  -> 240
    # A promises the most in total but the least per resource: SLAQ starts B and C.
    jobs = [job("A", 2, 200), job("B", 1, 150), job("C", 1, 120)]
    sched = Scheduler(small_cluster(1, 2), SLAQ(epoch=300.0), SimBackend(jobs, NO_COST), horizon=0.0, strict=True)
    sched.run([j.spec for j in jobs])
    assert sorted(sched.view.running) == ["B", "C"] and list(sched.view.pending) == ["A"]


def test_a_job_whose_loss_flattens_yields_to_a_new_one_and_the_slower_curve_keeps_it() -> None:
    # One GPU, epochs of 300 s, loss reports every 30 s, no restart cost. 3000 iterations of 1 s each.
    # A: l = 1/(k/100 + 1) + 0.1 (fast), B: l = 1/(k/600 + 1) + 0.1 (slow); tie at t=0 -> A (arrival).
    # Reports: after the first iteration (t=1), then on the global 30-s grid (30, 60, ...).
    # Round at t=300 (the grid's reports at 300): A has a fit. Over the next epoch (300 iterations):
    #   A: l(300) - l(600) = 1/4 - 1/7 = 0.107143; its largest drop per iteration so far was the
    #      first report interval, (1/1.01 - 1/1.30) / 29 = 0.0076161 -> normalised 14.07;
    #   B: new, each iteration counts 1 -> 300.  A is paused and B runs.
    # Round at 600: B done 300: (l(300) - l(600)) = 2/3 - 1/2 = 0.16667 over its best rate
    #   (1/(1+1/600) - 1/(1+30/600)) / 29 = 0.0015847 -> 105.2 > A's 14.07: B keeps the GPU.
    jobs = [job("A", 1, 3000, declare=False, curve=(30.0, 1.0, 0.1)),
            job("B", 1, 3000, declare=False, curve=(5.0, 1.0, 0.1))]
    pol = SLAQ(epoch=300.0, report_interval=30.0, restart_cost=0.0)
    sched = Scheduler(small_cluster(1, 1), pol, SimBackend(jobs, SimConfig(checkpoint_s=0, restore_s=0,
                                                                        report_interval_s=30.0)),
                      horizon=301.0, strict=True)
    sched.run([j.spec for j in jobs])
    view = sched.view
    assert list(view.paused) == ["A"] and list(view.running) == ["B"]
    snap = pol.models.snapshot(view, [view.jobs["A"], view.jobs["B"]])
    import numpy as np
    gains = pol.predicted_gains(snap, np.array([[1], [1]]))[:, 0]
    assert gains[0] == pytest.approx(0.107143 / 0.0076161, rel=0.001)
    assert gains[1] == pytest.approx(300.0)

    out = simulate(jobs, small_cluster(1, 1), SLAQ(epoch=300.0, report_interval=30.0, restart_cost=0.0),
                   config=NO_COST, strict=True)
    paused = [(e.time, e.job) for e in out.result.record if e.kind == EventKind.PAUSED]
    assert paused[0] == (pytest.approx(300.0), "A")
    assert all(t > 900 for t, _ in paused[1:])  # B kept the GPU at the round near t=601 (and 901)
    assert out.metrics.jobs_finished == 2


def test_left_over_room_goes_to_jobs_with_no_predicted_gain() -> None:
    # A job that has nothing left to gain (its declared work is done by the estimate) still runs
    # when the room would otherwise idle.
    out = simulate([job("A", 1, 50), job("B", 1, 60)], small_cluster(1, 4), SLAQ(), config=NO_COST, strict=True)
    assert sorted(j for _, j in starts(out)) == ["A", "B"]


@pytest.mark.parametrize("kw,word", [({"epoch": 0.0}, "epoch"), ({"report_interval": -2}, "report_interval"),
                                     ({"restart_cost": -1.0}, "restart_cost"), ({"recency": 0.0}, "recency"),
                                     ({"recency": 1.5}, "recency")])
def test_constructor_rejects_bad_values(kw: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word) as err:
        SLAQ(**kw)
    assert repr(next(iter(kw.values()))) in str(err.value)


def test_registry_builds_it() -> None:
    assert make_policy("slaq").name == "slaq"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31))
def test_property_no_over_allocation_and_every_job_terminates(seed: int) -> None:
    check_terminates(SLAQ(epoch=40.0, report_interval=15.0, restart_cost=5.0), seed)
