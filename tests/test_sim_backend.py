"""SimBackend physics seen through the scheduler: reports, co-location slowdown, PS and Pollux jobs."""

from __future__ import annotations

import pytest

from cohabit.engine import actions as A
from cohabit.policies import FIFO
from cohabit.policies.base import BasePolicy
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import JobSpec, Resources, TaskGroup

from conftest import small_cluster, trace_job


class Reporting(FIFO):
    report_interval = 10.0


def test_periodic_reports_carry_a_decreasing_loss() -> None:
    out = simulate([trace_job("a", 1, 100)], small_cluster(1, 1), Reporting(), config=SimConfig())
    losses = [v for _, v in out.result.jobs["a"].metrics["loss"]]
    assert len(losses) >= 9
    assert all(b < a for a, b in zip(losses, losses[1:]))


class ShareEverything(BasePolicy):
    """Starts the first job, then co-locates every later one on the same GPU."""

    name = "share"

    def decide(self, view):  # type: ignore[override]
        plan = []
        host = next(iter(view.running), None)
        for job in view.pending.values():
            if host is None:
                plan.append(A.Start(job.id, (0,)))
                host = job.id
            else:
                plan.append(A.Colocate((job.id, host), (0,)))
        return plan


def test_jobs_sharing_a_gpu_run_slower_than_alone() -> None:
    cfg = SimConfig(checkpoint_s=0, restore_s=0)
    alone = simulate([trace_job("a", 1, 100, model="vgg16")], small_cluster(1, 1), FIFO(), config=cfg)
    pair = [trace_job("a", 1, 100, model="vgg16"), trace_job("b", 1, 100, model="resnet50")]
    shared = simulate(pair, small_cluster(1, 1), ShareEverything(), config=cfg, strict=True)
    assert alone.metrics.avg_jct == pytest.approx(100)
    assert shared.metrics.jobs_finished == 2
    # both run at once, each slower than alone, together faster than one after the other
    assert 100 < shared.metrics.makespan < 200


def test_ps_job_speed_follows_the_dl2_profile() -> None:
    from cohabit.sim.profiles.ps_speed import ps_throughput

    def ps_job(workers: int) -> TraceJob:
        spec = JobSpec(id=f"ps{workers}", architecture="ps", model="resnet-50",
                       workers=TaskGroup(count=workers, demand=Resources(cpu=1, gpu=1)),
                       ps=TaskGroup(count=1, demand=Resources(cpu=1)))
        return TraceJob(spec, JobTruth(iterations=10_000, app="resnet-50"))

    cfg = SimConfig(checkpoint_s=0, restore_s=0)
    for w in (1, 4):
        out = simulate([ps_job(w)], small_cluster(1, 4), FIFO(), config=cfg, strict=True)
        assert out.metrics.avg_jct == pytest.approx(10_000 / ps_throughput("resnet-50", 1, w), rel=1e-6)


def test_pollux_workload_runs_to_completion() -> None:
    from cohabit.sim.traces import load_trace

    load = load_trace("pollux_workload-1", "pollux", limit=12)
    out = simulate(load.jobs, small_cluster(4, 4), FIFO())
    # imagenet-11 asks for 32 replicas on 16 GPUs; it is elastic (n_min=1), so it starts with 16
    assert load.jobs[-1].spec.workers.count == 32
    assert out.metrics.jobs_finished == 12
    assert out.result.jobs["imagenet-11"].n_workers == 0  # finished: holds nothing
    started = [e for e in out.result.record if e.kind == "started" and e.job == "imagenet-11"]
    assert len(started[0].data["nodes"]) == 16
