"""optimus-oracle: the Pollux artifact's Optimus+Oracle (docs/pollux.md, policies/optimus_oracle.py)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.optimus_oracle import packed, predicted_step_time
from cohabit.sim.physics import POLLUX_ARTIFACT
from cohabit.sim.pollux_goodput import PolluxWork, goodput_app
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace

from conftest import load_bench, small_cluster


def bench() -> ModuleType:
    return load_bench("fidelity_pollux")


def pollux_jobs(tmp_path: Path, rows: list[str]):  # type: ignore[no-untyped-def]
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size\n" + "\n".join(rows) + "\n")
    return load_trace(str(path), "pollux").jobs


def test_within_5_percent_of_the_artifact_and_every_action_applies() -> None:
    """workload-1 at load 0.5 (80 jobs): the artifact's Optimus+Oracle gives 1,309.7 s avg JCT. strict:
    an action the scheduler refuses (e.g. a start on GPUs a later resize frees) raises."""
    ref = bench().reference()
    want = next(r for r in ref["runs"] if r["workload"] == "workload-1-load0.5" and r["policy"] == "optimus")
    jobs = bench().workload_jobs("workload-1-load0.5", ref)
    out = simulate(jobs, bench().preset("pollux"), make_policy("optimus-oracle"), config=POLLUX_ARTIFACT,
                   oracle=True, strict=True)
    assert out.metrics.jobs_finished == len(jobs)
    assert out.metrics.avg_jct / want["metrics"]["avg_jct"] == pytest.approx(1.0, abs=0.05)
    kinds = [e.kind for e in out.result.record]
    assert EventKind.RESIZED in kinds and EventKind.MIGRATED not in kinds


def test_it_reads_the_oracle_or_is_refused(tmp_path: Path) -> None:
    jobs = pollux_jobs(tmp_path, ["a,0,cifar10,1,512"])
    policy = make_policy("optimus-oracle")
    assert policy.uses_oracle
    with pytest.raises(ValueError, match="--oracle"):
        simulate(jobs, small_cluster(1, 4), policy, config=POLLUX_ARTIFACT)


def test_minimum_first_then_gain_with_the_artifacts_limits(tmp_path: Path) -> None:
    """On 4 GPUs: NCF is held to one GPU (the artifact's rule), CIFAR-10 at batch 512 takes the other
    three; a later arrival gets one GPU at the next round, taken from the CIFAR-10 job (resized)."""
    jobs = pollux_jobs(tmp_path, ["ncf,0,ncf,1,32768", "cifar,0,cifar10,1,512", "late,100,cifar10,1,512"])
    out = simulate(jobs, small_cluster(1, 4), make_policy("optimus-oracle"), config=POLLUX_ARTIFACT, oracle=True,
                   strict=True)
    first = {e.job: len(e.data["nodes"]) for e in out.result.record if e.kind is EventKind.STARTED}
    assert first["ncf"] == 1 and first["cifar"] == 3 and first["late"] == 1
    late_start = next(e.time for e in out.result.record if e.kind is EventKind.STARTED and e.job == "late")
    assert late_start == 120.0  # the first round after its arrival
    shrink = [e for e in out.result.record if e.kind is EventKind.RESIZED and e.job == "cifar" and e.time == 120.0]
    assert len(shrink) == 1 and len(shrink[0].data["nodes"]) <= 2
    alone = simulate([j for j in jobs if j.spec.id == "ncf"], small_cluster(1, 4), make_policy("optimus-oracle"), config=POLLUX_ARTIFACT, oracle=True)
    grew = [len(e.data["nodes"]) for e in alone.result.record if e.kind in (EventKind.STARTED, EventKind.RESIZED)]
    assert grew == [1]  # NCF alone on 4 GPUs still runs on one
    for e in out.result.record:  # no job ever above its limit
        if e.kind in (EventKind.STARTED, EventKind.RESIZED, EventKind.RESUMED):
            assert len(e.data["nodes"]) <= (1 if e.job == "ncf" else 512 // PolluxWork("cifar10", 512, goodput=True)
                                            .batch_limits[2])


def test_predicted_step_time_is_the_artifacts_split() -> None:
    """One GPU always accumulates once; the per-GPU batch is ceil(B / n) split by max_local."""
    w = PolluxWork("cifar10", 512, goodput=True)
    _, max_batch, _, max_local = w.batch_limits
    step, sync = w.step_time((1,), 256)
    assert predicted_step_time(w, 1, 4) == pytest.approx(step + (step - sync) * 1)  # 512 = 2 x 256, one accumulation
    step3, sync3 = w.step_time((3,), 171)  # ceil(512 / 3) = 171 <= max_local: no accumulation
    assert max_local >= 171 and predicted_step_time(w, 3, 4) == pytest.approx(step3)
    assert packed(9, 4) == (4, 4, 1) and packed(4, 4) == (4,)


def test_work_model_iterations_follow_the_profile() -> None:
    """With goodput physics the iterations to an epoch's end are the profile's ``iteration`` column at the
    job's batch (cifar10 at 128: 390 after the first epoch); without, the progress there x M0 / B."""
    w = PolluxWork("cifar10", 128, goodput=True)
    assert w.iterations_after_epoch(0) == pytest.approx(390.0)
    assert w.epochs == 100 and w.epoch(0.0) == 0 and w.epoch(391.0) == 1
    plain = PolluxWork("cifar10", 256, goodput=False)
    end = goodput_app("cifar10").epoch_ends[0]  # progress (steps at M0 = 128) at the first epoch's end
    assert 380 < end < 392 and plain.iterations_after_epoch(0) == pytest.approx(end * 128 / 256)


def test_jobs_without_gpus_still_run_beside_the_gpu_round(tmp_path: Path) -> None:
    """A CPU-only job (no GPUs, no work model) starts in arrival order where it fits; non-Pollux GPU jobs
    run at their minimum."""
    from cohabit.spec.job import JobSpec, TaskGroup
    from cohabit.spec.resources import Resources
    from cohabit.sim.truth import JobTruth, TraceJob
    from conftest import trace_job

    cpu = TraceJob(JobSpec(id="cpu", workers=TaskGroup(count=1, demand=Resources(cpu=2.0, mem_gb=1.0)),
                           iterations=50), JobTruth(iterations=50, duration=50.0, ref_workers=1))
    jobs = [*pollux_jobs(tmp_path, ["n1,0,ncf,1,32768"]), cpu, trace_job("g", 2, 100)]
    out = simulate(jobs, small_cluster(1, 4), make_policy("optimus-oracle"), config=POLLUX_ARTIFACT, oracle=True,
                   strict=True)
    assert out.metrics.jobs_finished == 3
    started = {e.job: (e.time, len(e.data["nodes"])) for e in out.result.record if e.kind is EventKind.STARTED}
    assert started["g"] == (60.0, 2) and started["cpu"] == (60.0, 1)  # the first round, beside the GPU jobs
