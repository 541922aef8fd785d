"""Naive co-location: time-shares busy GPUs when none is free, blind to interference."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine.actions import Colocate
from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies import make_policy
from cohabit.policies.naive import NaiveColocation
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources, simple_job
from cohabit.spec.cluster import NodeSpec

from conftest import small_cluster, trace_job

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)


def starts(outcome) -> dict[str, dict]:
    return {e.job: {"t": e.time, **e.data} for e in outcome.result.record if e.kind == EventKind.STARTED}


def test_colocates_when_every_gpu_is_busy() -> None:
    # 2 nodes x 2 GPUs, four long 1-GPU jobs fill them; E arrives at t=1 and time-shares a GPU
    # on the lowest-numbered node, with no free GPU and no regard to who is there.
    jobs = [trace_job(f"h{i}", 1, 1000, model="resnet50") for i in range(4)] + \
           [trace_job("E", 1, 100, submit=1.0, model="resnet50")]
    out = simulate(jobs, small_cluster(2, 2), NaiveColocation(), config=NO_COST, strict=True)
    e = starts(out)["E"]
    assert e["t"] == 1.0 and e["nodes"] == [0]
    assert e["colocated_with"] and set(e["colocated_with"]) <= {"h0", "h1"}
    assert e["alloc"].get("gpu", 0.0) == 0.0  # a time-sharing guest owns no GPU
    jct = {ev.job: ev.time for ev in out.result.record if ev.kind == EventKind.FINISHED}
    # two ResNet-50s on one GPU run at 0.767 of their solo speed each (Lucid's measured pair)
    assert jct["E"] - 1.0 == pytest.approx(100.0 / 0.7670238095238096)
    assert out.result.unfinished == {}


def test_sharing_limit_per_gpu() -> None:
    # 4 GPUs, 32 CPUs; 1-GPU jobs with 2 CPUs each, so the GPUs' sharing limit is what binds
    jobs = [TraceJob(simple_job(f"j{i}", 1, cpu_per_gpu=2, iterations=500),
                     JobTruth(iterations=500, duration=500.0)) for i in range(10)]
    for limit, running in ((1, 4), (2, 8), (3, 10)):
        out = simulate(jobs, small_cluster(1, 4), NaiveColocation(max_jobs_per_gpu=limit), config=NO_COST,
                       strict=True)
        assert sum(1 for s in starts(out).values() if s["t"] == 0.0) == running
        assert out.result.unfinished == {}


def test_plan_uses_free_gpus_first_then_shares() -> None:
    # one node, 4 GPUs: A (2 GPUs) and B (2 GPUs) start normally, C (2 GPUs) shares two GPUs
    jobs = [trace_job("A", 2, 300), trace_job("B", 2, 300), trace_job("C", 2, 300)]
    out = simulate(jobs, small_cluster(1, 4), NaiveColocation(), config=NO_COST, strict=True)
    s = starts(out)
    assert "colocated_with" not in s["A"] and "colocated_with" not in s["B"]
    assert s["C"]["t"] == 0.0 and s["C"]["nodes"] == [0, 0] and s["C"]["colocated_with"]


def test_non_gpu_resources_must_still_be_free() -> None:
    # the hosts take all the CPUs: nothing can share their GPUs, so E waits
    node = Resources(gpu=2, cpu=8, mem_gb=64)
    hosts = [TraceJob(simple_job(f"h{i}", 1, cpu_per_gpu=4, iterations=100),
                      JobTruth(iterations=100, duration=100.0)) for i in range(2)]
    e = TraceJob(simple_job("E", 1, submit_time=1.0, iterations=10), JobTruth(iterations=10, duration=10.0))
    out = simulate(hosts + [e], ClusterSpec.homogeneous("c", 1, node), NaiveColocation(), config=NO_COST,
                   strict=True)
    assert starts(out)["E"]["t"] == 100.0 and "colocated_with" not in starts(out)["E"]


def test_decide_emits_colocate_actions() -> None:
    seen: list[Colocate] = []

    class Spy(NaiveColocation):
        def decide(self, view):  # type: ignore[override]
            plan = super().decide(view)
            seen.extend(a for a in plan if isinstance(a, Colocate))
            return plan

    jobs = [trace_job(f"j{i}", 1, 100) for i in range(3)]
    simulate(jobs, small_cluster(1, 2), Spy(), config=NO_COST, strict=True)
    assert seen == [Colocate(("j2", "j0"), (0,))]  # fewest jobs first, then lowest device: j0's GPU


def test_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match=r"max_jobs_per_gpu must be an integer in \[1, 4\], got 5"):
        NaiveColocation(max_jobs_per_gpu=5)
    with pytest.raises(ValueError, match="got 0"):
        NaiveColocation(max_jobs_per_gpu=0)
    with pytest.raises(ValueError, match="backfill"):
        NaiveColocation(backfill=None)  # type: ignore[arg-type]
    assert make_policy("naive").name == "naive"


@st.composite
def workloads(draw: st.DrawFn) -> list[TraceJob]:
    out, t = [], 0.0
    for i in range(draw(st.integers(1, 20))):
        t += draw(st.floats(0, 40))
        g = draw(st.sampled_from([0.25, 0.5, 1, 1, 2, 4]))
        spec = simple_job(f"j{i}", g, submit_time=t, iterations=100,
                          model=draw(st.sampled_from(["resnet50", "vgg16", "bert"])),
                          cpu_per_gpu=draw(st.sampled_from([2.0, 8.0])))
        out.append(TraceJob(spec, JobTruth(iterations=100, duration=draw(st.floats(1, 300)),
                                           ref_workers=max(int(g), 1))))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.integers(1, 4), st.booleans())
def test_never_over_allocates_and_every_job_ends(jobs, limit, backfill) -> None:
    out = simulate(jobs, small_cluster(2, 4), NaiveColocation(max_jobs_per_gpu=limit, backfill=backfill),
                   strict=True)
    assert out.result.unfinished == {}
    assert all(j.state in (JobState.FINISHED, JobState.REJECTED) for j in out.result.jobs.values())


def test_nodes_with_fewer_gpus_share_only_the_devices_they_have() -> None:
    # node 0 has 2 GPUs, node 1 has 4 (the device table is 4 wide: node 0's last two slots are
    # absent). Six long hosts fill every GPU; of seven guests arriving at t=1, two share node 0's
    # GPUs and four node 1's (max 2 jobs per GPU); the seventh waits for a host to end.
    nodes = tuple(NodeSpec(name=f"n{i}", capacity=Resources(gpu=g, cpu=64, mem_gb=512))
                  for i, g in enumerate((2, 4)))
    hosts = [trace_job(f"h{i}", 1, 1000) for i in range(6)]
    guests = [trace_job(f"g{i}", 1, 50, submit=1.0) for i in range(7)]
    out = simulate(hosts + guests, ClusterSpec(name="mixed", nodes=nodes), NaiveColocation(),
                   config=NO_COST, strict=True)
    s = starts(out)
    at_once = [s[f"g{i}"]["nodes"] for i in range(7) if s[f"g{i}"]["t"] == 1.0]
    assert sorted(n for ns in at_once for n in ns) == [0, 0, 1, 1, 1, 1]
    assert s["g6"]["t"] > 1.0 and out.result.unfinished == {}
