"""Tiny workloads whose schedules and JCTs are computed by hand."""

from __future__ import annotations

import pytest

from cohabit.engine.record import EventKind
from cohabit.policies import FIFO, SRTF
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate

from conftest import small_cluster, trace_job

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)


def jcts(outcome) -> dict[str, float]:
    sub = {e.job: e.time for e in outcome.result.record if e.kind == EventKind.SUBMITTED}
    return {e.job: e.time - sub[e.job] for e in outcome.result.record if e.kind == EventKind.FINISHED}


def test_fifo_runs_in_arrival_order_on_one_gpu() -> None:
    # one GPU; A(100s) at 0, B(10s) at 1, C(50s) at 2 -> FIFO: A 0-100, B 100-110, C 110-160
    jobs = [trace_job("A", 1, 100, 0), trace_job("B", 1, 10, 1), trace_job("C", 1, 50, 2)]
    out = simulate(jobs, small_cluster(1, 1), FIFO(), config=NO_COST, strict=True)
    assert jcts(out) == pytest.approx({"A": 100, "B": 109, "C": 158})
    assert out.metrics.avg_jct == pytest.approx((100 + 109 + 158) / 3)
    assert out.metrics.makespan == pytest.approx(160)


def test_srtf_oracle_preempts_for_shorter_jobs_hand_computed() -> None:
    # one GPU, no checkpoint cost, margin 0.
    # t=0 A(100) starts. t=1 B(10) arrives: A has 99 left > 10 -> A paused, B runs 1-11.
    # t=2 C(50) arrives: B has 9 left < 50 -> C waits. t=11 B ends; C(50) < A(99) -> C 11-61; A 61-160.
    jobs = [trace_job("A", 1, 100, 0), trace_job("B", 1, 10, 1), trace_job("C", 1, 50, 2)]
    out = simulate(jobs, small_cluster(1, 1), SRTF(use_oracle=True, preempt_margin=0.0, min_run_time=0.0),
                   config=NO_COST, oracle=True, strict=True)
    assert jcts(out) == pytest.approx({"A": 160, "B": 10, "C": 59})
    assert out.metrics.preemptions == 1


def test_srtf_without_oracle_uses_declared_iterations_and_measured_speed() -> None:
    # Iterations are declared (a real user states them); iteration time is measured after
    # the first iteration, so the observed estimate matches the oracle here once measured.
    jobs = [trace_job("A", 1, 100, 0), trace_job("B", 1, 10, 1), trace_job("C", 1, 50, 2)]
    out = simulate(jobs, small_cluster(1, 1), SRTF(preempt_margin=0.0, min_run_time=0.0), config=NO_COST, strict=True)
    # B and C have no measurement and no history at arrival: unknown length -> they wait behind A
    # until history exists; A finishes first at 100, then B (10) and C (50) by arrival order.
    assert jcts(out)["A"] == pytest.approx(100)
    assert set(jcts(out)) == {"A", "B", "C"}


def test_checkpoint_cost_delays_a_preempted_job() -> None:
    cfg = SimConfig(checkpoint_s=5.0, restore_s=5.0)
    jobs = [trace_job("A", 1, 100, 0), trace_job("B", 1, 10, 1)]
    out = simulate(jobs, small_cluster(1, 1), SRTF(use_oracle=True, preempt_margin=0.0, min_run_time=0.0), config=cfg,
                   oracle=True, strict=True)
    # A runs 0-1 (1 done), paused; B 1-11; A resumes at 11, pays 10 s, then 99 s -> ends at 120.
    assert jcts(out) == pytest.approx({"A": 120, "B": 10})


def test_job_that_never_fits_is_rejected_and_the_run_goes_on() -> None:
    jobs = [trace_job("big", 8, 10, 0), trace_job("ok", 1, 10, 0)]
    out = simulate(jobs, small_cluster(1, 4), FIFO(), config=NO_COST)
    assert out.metrics.jobs_rejected == 1
    assert out.metrics.jobs_finished == 1
    big = out.result.jobs["big"]
    assert big.state == "rejected" and "gpu=8" in big.reason


def test_spread_job_runs_slower_than_consolidated() -> None:
    from cohabit.engine.ledger import Allocation, TaskSlot
    from cohabit.sim.physics import solo_rate
    from cohabit.spec import Resources

    tj = trace_job("v", 4, 100, 0, model="vgg16")
    cfg = SimConfig(gpus_per_node=4)
    one = Allocation("v", tuple(TaskSlot(0, ((i, 1.0),)) for i in range(4)), Resources(gpu=4))
    two = Allocation("v", tuple(TaskSlot(i // 2, ((i % 2, 1.0),)) for i in range(4)), Resources(gpu=4))
    consolidated = solo_rate(tj.spec, tj.truth, one, cfg)
    spread = solo_rate(tj.spec, tj.truth, two, cfg)
    assert consolidated == pytest.approx(1.0)  # 100 iterations in 100 s, as the trace says
    assert spread < consolidated


class ScriptedBackend:
    """A backend that replays fixed events (a fake runner, as Ray Tune tests its schedulers)."""

    def __init__(self, events):
        self.events = list(events)

    def launch(self, spec, alloc, now, *, from_checkpoint):
        pass

    def halt(self, job, now, *, checkpoint):
        pass

    def next_event_time(self):
        return self.events[0].time if self.events else None

    def advance(self, until):
        if not self.events or self.events[0].time > until:
            return until, []
        t = self.events[0].time
        out = [e for e in self.events if e.time == t]
        self.events = [e for e in self.events if e.time != t]
        return t, out

    def close(self):
        pass


def test_finished_job_reports_exactly_its_iterations() -> None:
    from cohabit.engine.backend import BackendEvent, BackendEventKind as K
    from cohabit.engine.loop import Scheduler

    # the job measured 1 s/iteration early on, then slowed down: its final count (5) is the truth,
    # not the extrapolation from the first measurement (9.5)
    backend = ScriptedBackend([
        BackendEvent(0.5, K.PROGRESS, "A", {"iterations": 0.0, "iter_time": 1.0}),
        BackendEvent(10.0, K.FINISHED, "A", {"iterations": 5.0}),
    ])
    result = Scheduler(small_cluster(1, 1), FIFO(), backend, strict=True).run([trace_job("A", 1, 10).spec])
    assert result.jobs["A"].reported_iterations == pytest.approx(5.0)


def test_srtf_pauses_a_spared_job_when_its_minimum_run_ends() -> None:
    # one GPU, min_run_time 30: A(1000) starts at 0; B(10) arrives at 5, A is spared until t=30, when the
    # policy decides again (next_decision_time) and pauses it: B runs 30-40, A resumes at 40 and ends at 1010.
    jobs = [trace_job("A", 1, 1000, 0), trace_job("B", 1, 10, 5)]
    out = simulate(jobs, small_cluster(1, 1), SRTF(use_oracle=True, preempt_margin=0.0, min_run_time=30.0),
                   config=NO_COST, oracle=True, strict=True)
    paused = [e.time for e in out.result.record if e.kind == EventKind.PAUSED]
    assert paused == pytest.approx([30.0])
    assert jcts(out) == pytest.approx({"A": 1010, "B": 35})


def test_a_wake_up_between_decision_rounds_waits_for_the_round() -> None:
    # 60 s rounds, min_run_time 90: A starts at the round of 60; B (shorter) arrives at 70; at 120 A has run
    # 60 s: spared, wake-up asked for 150, between rounds. The loop goes on to the round of 180 (before the
    # loop ignored past wake-ups it turned at 150 for ever), where A is paused.
    jobs = [trace_job("A", 1, 1000, 0), trace_job("B", 1, 10, 70)]
    out = simulate(jobs, small_cluster(1, 1), SRTF(use_oracle=True, preempt_margin=0.0, min_run_time=90.0),
                   config=NO_COST, oracle=True, strict=True, decision_period=60.0)
    assert [e.time for e in out.result.record if e.kind == EventKind.PAUSED] == pytest.approx([180.0])
