"""The Pack action (Liu, Pack): ledger accounting, scheduler checks, record, unpacking, simulated speed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cohabit.engine import actions as A
from cohabit.engine.ledger import AllocationError, Ledger
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies.base import BasePolicy
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.profiles.pack import pack_profile
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, JobSpec, Resources, TaskGroup

NO_CKPT = SimConfig(checkpoint_s=0, restore_s=0)


def gpu_cluster(nodes: int = 1, gpus: int = 2, gpu_mem: float = 16.0) -> ClusterSpec:
    return ClusterSpec.homogeneous("pack", nodes, Resources(gpu=gpus, cpu=8 * gpus, mem_gb=64 * gpus,
                                                            gpu_mem_gb=gpu_mem * gpus))


def pjob(id: str, iters: int = 100, *, mem: float = 4.0, cpu: float = 2.0, model: str = "mlp3",
         batch: int | None = 32, submit: float = 0.0) -> TraceJob:
    spec = JobSpec(id=id, submit_time=submit, model=model, batch_size=batch, iterations=iters,
                   workers=TaskGroup(count=1, demand=Resources(gpu=1, cpu=cpu, mem_gb=8, gpu_mem_gb=mem)))
    return TraceJob(spec, JobTruth(iterations=iters, duration=float(iters)))  # 1 iteration/s alone


def vec(ledger: Ledger, r: Resources) -> np.ndarray:
    v = ledger.vector(r)
    assert v is not None
    return v


# ------------------------------------------------------------------ ledger
def test_ledger_pack_holds_the_device_max_cpu_and_summed_memory() -> None:
    led = Ledger(gpu_cluster())
    g, c, m = (led.index[k] for k in ("gpu", "cpu", "gpu_mem_gb"))
    a, b = vec(led, pjob("a", cpu=2).spec.workers.demand), vec(led, pjob("b", cpu=3).spec.workers.demand)
    led.allocate_pack("a", (0, 0), a)
    led.allocate_pack("b", (0, 0), b)
    assert led.device_free[0].tolist() == [0.0, 1.0]
    assert led.free[0, g] == 1.0
    assert led.free[0, c] == 16 - 3  # one process: the largest member's CPU, held by the owner
    assert led.free[0, m] == 32 - 8
    assert led.pack_mem[(0, 0)] == 8.0
    assert led.allocations["a"].total["cpu"] == 3 and led.allocations["a"].total["gpu"] == 1
    assert "gpu" not in led.allocations["b"].total and led.allocations["b"].total["gpu_mem_gb"] == 4
    assert led.sharers("a") == {"b"}
    led.check()
    assert led.release("a") == ["b"]  # the owner left: b inherits the device and the CPU
    assert led.allocations["b"].total["gpu"] == 1 and led.allocations["b"].total["cpu"] == 3
    led.check()
    led.release("b")
    assert np.allclose(led.free, led.capacity) and led.device_free[0].tolist() == [1.0, 1.0]
    assert not led.packs and not led.pack_mem


def test_ledger_refuses_a_pack_beyond_device_memory_and_a_busy_device() -> None:
    led = Ledger(gpu_cluster(gpu_mem=16.0))
    for j in "abc":
        led.allocate_pack(j, (0, 0), vec(led, pjob(j, mem=5).spec.workers.demand))
    with pytest.raises(AllocationError, match=r"needs 17 GB of device memory .* device has 16 GB"):
        led.allocate_pack("d", (0, 0), vec(led, pjob("d", mem=2).spec.workers.demand))
    led.allocate("solo", [0], [vec(led, Resources(gpu=1, cpu=1))])
    assert "a whole free GPU" in (led.pack_blocked((0, 1), [("x", vec(led, Resources(gpu=1)))]) or "")
    assert "GPUs 0..1, not 5" in (led.pack_blocked((0, 5), []) or "")
    led.check()


def test_undeclared_gpu_memory_fills_the_device() -> None:
    led = Ledger(gpu_cluster())
    d = vec(led, Resources(gpu=1, cpu=1))
    led.allocate_pack("a", (0, 0), d)
    assert led.pack_blocked((0, 0), [("b", d)]) is not None


def test_cpu_only_node_packs_on_its_cpu_device_within_host_memory() -> None:
    led = Ledger(ClusterSpec.homogeneous("cpu", 1, Resources(cpu=2, mem_gb=2)))
    d = vec(led, Resources(cpu=1, mem_gb=0.75))
    led.allocate_pack("a", (0, 0), d)
    led.allocate_pack("b", (0, 0), d)  # two 1-CPU jobs in one 1-CPU process
    assert led.free[0].tolist() == [1.0, 0.5]
    assert "mem_gb=0.5 free, needs 0.75" in (led.pack_blocked((0, 0), [("c", d)]) or "")
    assert "only device is the CPU" in (led.pack_blocked((0, 1), [("c", d)]) or "")


def test_time_sharing_never_lands_on_a_pack_device() -> None:
    led = Ledger(gpu_cluster(gpus=1))
    led.allocate_pack("a", (0, 0), vec(led, pjob("a").spec.workers.demand))
    with pytest.raises(AllocationError, match="fewer than"):
        led.allocate("g", [0], [vec(led, Resources(gpu=1, cpu=1))], share_gpus=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["pack", "solo", "release"]), st.integers(0, 1), st.integers(0, 1),
                          st.floats(0.5, 9.0), st.floats(0.5, 4.0)), max_size=40))
def test_ledger_pack_never_over_allocates(ops: list[tuple[str, int, int, float, float]]) -> None:
    led = Ledger(gpu_cluster(nodes=2, gpus=2, gpu_mem=16.0))
    n = 0
    for op, node, gpu, mem, cpu in ops:
        held = sorted(led.allocations)
        if op == "release" and held:
            led.release(held[int(mem * 10) % len(held)])
        elif op != "release":
            n += 1
            d = vec(led, Resources(gpu=1, cpu=cpu, mem_gb=4, gpu_mem_gb=mem))
            try:
                if op == "pack":
                    led.allocate_pack(f"j{n}", (node, gpu), d)
                else:
                    led.allocate(f"j{n}", [node], [d])
            except AllocationError:
                pass
        led.check()
        for dev, members in led.packs.items():
            assert led.pack_mem[dev] <= led.device_memory(dev) + 1e-9
            assert sum(led.allocations[j].total.get("gpu", 0.0) for j in members) == 1.0
    for j in sorted(led.allocations):
        led.release(j)
    assert np.allclose(led.free, led.capacity) and (led.device_free == 1.0).all()


# -------------------------------------------------------------- scheduler
class Scripted(BasePolicy):
    """Plays ``steps[t]`` once, at the first decision at or after time ``t``."""

    name = "scripted"
    tick_interval = 5.0

    def __init__(self, steps: dict[float, list[object]]) -> None:
        self.steps = dict(sorted(steps.items()))

    def decide(self, view):  # type: ignore[override]
        due = [t for t in self.steps if t <= view.now]
        return [a for t in due for a in self.steps.pop(t)]


def test_packed_members_run_at_the_profiled_speed_and_unpack_when_one_finishes() -> None:
    impv = pack_profile().impv("mlp3", 2, 32)
    assert impv == pytest.approx(0.256866)  # the CSV row (bench/pack_step.py measured it)
    out = simulate([pjob("a", 50), pjob("b", 100)], gpu_cluster(), Scripted({0: [A.Pack(("a", "b"), (0, 0))]}),
                   config=NO_CKPT, strict=True)
    step = (1 - impv) * (1.0 + 1.0)  # Eq. 2.3: one packed step of two 1 s/iteration members
    t_a = 50 * step
    assert out.result.jobs["a"].end_time == pytest.approx(t_a)
    assert out.result.jobs["b"].end_time == pytest.approx(t_a + 50)  # alone at 1 it/s afterwards
    rec = out.result.record
    (packed,) = rec.of_kind(EventKind.PACKED)
    assert packed.data == {"device": [0, 0], "members": ["a", "b"], "joined": ["a", "b"], "mem_gb": 8.0}
    unpacked = rec.of_kind(EventKind.UNPACKED)
    assert [(e.data["left"], e.data["members"]) for e in unpacked] == [("a", ["b"]), ("b", [])]
    started = {e.job: e.data for e in rec.of_kind(EventKind.STARTED)}
    assert started["a"]["pack"] == [0, 0] and started["a"]["packed_with"] == ["b"]
    assert [e.job for e in rec.of_kind(EventKind.REALLOCATED)] == ["b"]  # inherits the GPU from a


def test_pack_of_an_unmeasured_model_time_slices_the_device() -> None:
    out = simulate([pjob("a", 60, model="resnet50"), pjob("b", 60, model="resnet50")], gpu_cluster(),
                   Scripted({0: [A.Pack(("a", "b"), (0, 0))]}), config=NO_CKPT, strict=True)
    assert out.result.jobs["a"].end_time == pytest.approx(120.0)


def test_a_new_member_loads_into_a_running_pack_and_a_paused_one_resumes_alone() -> None:
    steps = {0: [A.Pack(("a", "b"), (0, 0))], 10: [A.Pack(("c",), (0, 0))], 50: [A.Pause("a")],
             60: [A.Resume("a", (0,))]}
    jobs = [pjob("a", 400), pjob("b", 400), pjob("c", 400, submit=10.0)]
    sim = SimBackend(jobs, NO_CKPT)
    sched = Scheduler(gpu_cluster(), Scripted(steps), sim, strict=True)
    sched.run([j.spec for j in jobs])
    rec = sched.record
    packed = rec.of_kind(EventKind.PACKED)
    assert [e.data["members"] for e in packed] == [["a", "b"], ["a", "b", "c"]]
    assert packed[1].data["joined"] == ["c"]
    paused = rec.of_kind(EventKind.PAUSED)[0]
    resumed = [e for e in rec.of_kind(EventKind.RESUMED) if e.job == "a"][0]
    assert "pack" not in resumed.data  # resumed alone on the second GPU
    assert all(j.state == "finished" for j in sched.jobs.values())
    # b and c kept training while a was paused: nothing restarted them
    assert [e.job for e in rec.of_kind(EventKind.STARTED)] == ["a", "b", "c"]
    assert 50.0 <= paused.time <= 55.0 and 60.0 <= resumed.time <= 65.0  # at the policy's next tick
    assert sched.jobs["a"].end_time < sched.jobs["b"].end_time  # alone on its own GPU afterwards


def test_pack_rejections_name_the_problem() -> None:
    def rejected(jobs: list[TraceJob], plan: list[object], cluster: ClusterSpec | None = None) -> list[str]:
        out = simulate(jobs, cluster or gpu_cluster(), Scripted({0: plan}), config=NO_CKPT)
        return [e.data["reason"] for e in out.result.record.of_kind(EventKind.ACTION_REJECTED)]

    big = [pjob(j, mem=9) for j in "ab"]
    assert "device memory" in rejected(big, [A.Pack(("a", "b"), (0, 0))])[0]
    assert "distinct" in rejected(big, [A.Pack(("a", "a"), (0, 0))])[0]
    two = TraceJob(JobSpec(id="w2", architecture="allreduce", model="mlp3", iterations=10,
                           workers=TaskGroup(count=2, demand=Resources(gpu=1, cpu=1))),
                   JobTruth(iterations=10, duration=10.0, ref_workers=2))
    assert "only single-task jobs" in rejected([two, pjob("a")], [A.Pack(("w2", "a"), (0, 0))])[0]
    assert "running outside the pack" in rejected(
        [pjob("a"), pjob("b")], [A.Start("a", (0,)), A.Pack(("a", "b"), (0, 1))])[0]


def test_a_backend_without_launch_pack_rejects_pack_as_unsupported() -> None:
    jobs = [pjob("a"), pjob("b")]

    class NoPack:
        def __init__(self) -> None:
            self.inner = SimBackend(jobs, NO_CKPT)

        def __getattr__(self, name: str) -> object:
            if name == "launch_pack":
                raise AttributeError(name)
            return getattr(self.inner, name)

    sched = Scheduler(gpu_cluster(), Scripted({0: [A.Pack(("a", "b"), (0, 0)), A.Start("a", (0,)),
                                                   A.Start("b", (0,))]}), NoPack())
    sched.run([j.spec for j in jobs])
    (rej,) = sched.record.of_kind(EventKind.ACTION_REJECTED)
    assert rej.data["action"] == "Pack" and "cannot run packs" in rej.data["reason"]
    assert not sched.ledger.packs and all(j.state == "finished" for j in sched.jobs.values())


def test_migrating_a_member_takes_it_out_of_its_pack() -> None:
    steps = {0: [A.Pack(("a", "b"), (0, 0))], 20: [A.Migrate("b", (0,))]}
    jobs = [pjob("a", 300), pjob("b", 300)]
    sim = SimBackend(jobs, NO_CKPT)
    sched = Scheduler(gpu_cluster(), Scripted(steps), sim, strict=True)
    sched.run([j.spec for j in jobs])
    (mig,) = sched.record.of_kind(EventKind.MIGRATED)
    assert mig.job == "b" and 20.0 <= mig.time <= 25.0 and mig.data["alloc"]["gpu"] == 1
    left = [e.data["left"] for e in sched.record.of_kind(EventKind.UNPACKED)]
    assert left[0] == "b"
    impv = pack_profile().impv("mlp3", 2, 32)
    done_b = mig.time / ((1 - impv) * 2)
    assert sched.jobs["b"].end_time == pytest.approx(mig.time + 300 - done_b)  # alone on GPU 1 afterwards
