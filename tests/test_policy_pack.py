"""The pack policy: family and distance by hand, one decision by hand, and a simulated trace where it beats FIFO."""

from __future__ import annotations

import pytest

from cohabit.engine.actions import Pack, Start
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies import FIFO, make_policy
from cohabit.policies.pack import PackPolicy, distance, family
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, JobSpec, Resources, TaskGroup

NO_CKPT = SimConfig(checkpoint_s=0, restore_s=0)


def gpu_cluster(gpus: int = 2, gpu_mem: float = 16.0) -> ClusterSpec:
    return ClusterSpec.homogeneous("pack", 1, Resources(gpu=gpus, cpu=8 * gpus, mem_gb=64 * gpus,
                                                        gpu_mem_gb=gpu_mem * gpus))


def job(id: str, *, model: str = "mlp3", batch: int = 32, mem: float = 4.0, iters: int = 200, submit: float = 0.0,
        workload: dict | None = None) -> TraceJob:
    spec = JobSpec(id=id, submit_time=submit, model=model, batch_size=batch, iterations=iters, workload=workload,
                   workers=TaskGroup(count=1, demand=Resources(gpu=1, cpu=2, mem_gb=8, gpu_mem_gb=mem)))
    return TraceJob(spec, JobTruth(iterations=iters, duration=float(iters)))


def test_family_ignores_hyper_parameters_but_not_the_model_or_data() -> None:
    a = job("a", workload={"name": "torch-mlp", "lr": 0.1, "hidden": 64, "seed": 1}).spec
    b = job("b", batch=64, workload={"name": "torch-mlp", "lr": 0.001, "hidden": 64, "seed": 2}).spec
    c = job("c", workload={"name": "torch-mlp", "lr": 0.1, "hidden": 32}).spec
    assert family(a) == family(b) != family(c)
    assert family(job("n", workload={"name": "mlr"}).spec) is None  # numpy: the real backend cannot pack it
    two = JobSpec(id="w", architecture="allreduce", workers=TaskGroup(count=2, demand=Resources(gpu=1)))
    assert family(two) is None


def test_distance_is_pack_opt_index_distance() -> None:
    def spec(batch: int, **wl: object) -> JobSpec:
        return job("x", batch=batch, workload={"name": "torch-mlp", **wl}).spec

    # the paper's example: batch 20 vs 40 is 4 grid steps
    assert distance(spec(20, lr=0.01), spec(40, lr=0.01)) == pytest.approx(4.0)
    assert distance(spec(32, lr=1e-3), spec(32, lr=1e-1)) == pytest.approx(2.0)  # two decades
    assert distance(spec(32, momentum=0.9), spec(32, momentum=0.5)) == pytest.approx(1.0)
    assert distance(spec(32, lr=0.1), spec(32, lr=0.1, seed=4)) == 0.0


def test_one_decision_by_hand() -> None:
    jobs = [job("a"), job("b"), job("c", model="cnn"), job("d", batch=64), job("e", mem=9.0)]

    class Once(PackPolicy):
        plans: list = []

        def decide(self, view):  # type: ignore[override]
            plan = super().decide(view)
            self.plans.append(plan)
            return plan

    pol = Once()
    sched = Scheduler(gpu_cluster(), pol, SimBackend(jobs, NO_CKPT), strict=True)
    sched.run([j.spec for j in jobs])
    # a heads the queue: it takes GPU 0 with its nearest, b (distance 0); e (distance 0) does not fit
    # (4 + 4 + 9 > 16 GB); d is 32/5 = 6.4 > 6 away. c is another model: a pack of one on GPU 1.
    assert pol.plans[0] == [Pack(("a", "b"), (0, 0)), Pack(("c",), (0, 1))]
    assert all(j.state == "finished" for j in sched.jobs.values())
    assert not sched.record.of_kind(EventKind.ACTION_REJECTED)


def test_a_later_arrival_joins_a_running_pack() -> None:
    jobs = [job("a", iters=400), job("b", iters=400, submit=5.0)]
    out = simulate(jobs, gpu_cluster(gpus=1), PackPolicy(), config=NO_CKPT, strict=True)
    packed = out.result.record.of_kind(EventKind.PACKED)
    assert [e.data["members"] for e in packed] == [["a"], ["a", "b"]]


def test_jobs_that_cannot_pack_start_alone() -> None:
    two = TraceJob(JobSpec(id="w2", architecture="allreduce", model="mlp3", iterations=10,
                           workers=TaskGroup(count=2, demand=Resources(gpu=1, cpu=1))),
                   JobTruth(iterations=10, duration=10.0, ref_workers=2))
    out = simulate([two, job("a")], gpu_cluster(gpus=4), PackPolicy(), config=NO_CKPT, strict=True)
    starts = {e.job: e.data for e in out.result.record.of_kind(EventKind.STARTED)}
    assert "pack" not in starts["w2"] and starts["a"]["pack"][0] == 0


def test_constructor_checks_arguments() -> None:
    with pytest.raises(ValueError, match="threshold"):
        PackPolicy(threshold=-1)
    with pytest.raises(ValueError, match="max_pack"):
        PackPolicy(max_pack=0)
    assert make_policy("pack").name == "pack"
    assert not isinstance(make_policy("pack"), Start)


def test_pack_beats_fifo_on_many_small_same_model_jobs() -> None:
    # 16 small MLP-3 hyper-parameter trials (batch 32, lr spread over 3 decades), one every 10 s, 2 GPUs
    jobs = [job(f"t{i}", iters=200, mem=2.0, submit=10.0 * i,
                workload={"name": "torch-mlp", "lr": 10 ** -(1 + i % 3)}) for i in range(16)]
    fifo = simulate(jobs, gpu_cluster(), FIFO(), config=NO_CKPT, strict=True)
    pack = simulate(jobs, gpu_cluster(), PackPolicy(), config=NO_CKPT, strict=True)
    assert all(j.state == "finished" for j in pack.result.jobs.values())
    assert pack.metrics.avg_jct < 0.95 * fifo.metrics.avg_jct  # measured: 739 s vs 830 s
    assert pack.metrics.makespan < 0.8 * fifo.metrics.makespan  # 1108 s vs 1610 s
    assert max(len(e.data["members"]) for e in pack.result.record.of_kind(EventKind.PACKED)) == 4
