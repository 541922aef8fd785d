"""Load balancing spreads, bin packing consolidates; both keep FIFO order and never over-allocate."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies import make_policy
from cohabit.policies.spread import BinPack, LoadBalance, node_load, pack_chooser, spread_chooser
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster, trace_job

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)


def nodes_of(outcome) -> dict[str, list[int]]:
    return {e.job: e.data["nodes"] for e in outcome.result.record if e.kind == EventKind.STARTED}


def test_node_load_is_the_mean_allocated_fraction_of_the_demanded_resources() -> None:
    cap = np.array([[4.0, 32, 128, 100]])
    free = np.array([[1.0, 16, 128, 100]])
    demand = np.array([1.0, 4, 0, 0])  # asks for GPU and CPU only
    load, step = node_load(free, cap, demand)
    assert load == pytest.approx([(3 / 4 + 16 / 32) / 2])
    assert step == pytest.approx([(1 / 4 + 4 / 32) / 2])


def test_lb_spreads_single_gpu_jobs_over_empty_nodes() -> None:
    jobs = [trace_job(f"j{i}", 1, 100) for i in range(4)]
    out = simulate(jobs, small_cluster(4, 4), LoadBalance(), config=NO_COST, strict=True)
    assert sorted(n[0] for n in nodes_of(out).values()) == [0, 1, 2, 3]


def test_binpack_consolidates_single_gpu_jobs_on_one_node() -> None:
    jobs = [trace_job(f"j{i}", 1, 100) for i in range(4)]
    out = simulate(jobs, small_cluster(4, 4), BinPack(), config=NO_COST, strict=True)
    assert {n[0] for n in nodes_of(out).values()} == {0}


def test_lb_water_fills_a_gang_and_binpack_fills_the_fullest_node_first() -> None:
    # node loads (GPU, CPU, mem all in proportion): 0.75, 0, 0.5, 0 -> free GPUs 1, 4, 2, 4
    cap = np.tile([4.0, 32, 256], (4, 1))
    used = np.array([3, 0, 2, 0])[:, None] * np.array([1.0, 8, 64])
    free = cap - used
    d = np.array([1.0, 8, 64])
    fit = np.array([1, 4, 2, 4])
    # load after one more task: node 0 1.0, node 1 .25, node 2 .75, node 3 .25 (+.25 per task):
    # 1, 3 (.25), 1, 3 (.5), then node 1, 2 and 3 tie at .75 -> lowest index
    assert spread_chooser(fit, free, cap, d, 4) == [1, 3, 1, 3]
    assert spread_chooser(fit, free, cap, d, 5) == [1, 3, 1, 3, 1]
    # fewest machines: a node that holds all 2 and is the most loaded (node 2); else fullest first
    assert pack_chooser(fit, free, cap, d, 2) == [2, 2]
    assert pack_chooser(fit, free, cap, d, 5) == [0, 2, 2, 1, 1]
    assert spread_chooser(fit, free, cap, d, 12) is None and pack_chooser(fit, free, cap, d, 12) is None


def test_binpack_uses_fewer_machines_than_lb_over_a_workload() -> None:
    # 10 GPUs of overlapping jobs on 4 nodes x 4 GPUs: bin packing needs ceil(10 / 4) = 3 nodes
    jobs = [trace_job(f"j{i}", g, 50 + 10 * i, submit=5.0 * i) for i, g in enumerate([1, 2, 1, 1, 2, 1, 1, 1])]
    used = {}
    for policy in (LoadBalance(), BinPack()):
        out = simulate(jobs, small_cluster(4, 4), policy, config=NO_COST, strict=True)
        used[policy.name] = len({n for nodes in nodes_of(out).values() for n in nodes})
    assert used == {"lb": 4, "binpack": 3}


def test_fifo_order_head_blocks_unless_backfill() -> None:
    jobs = [trace_job("a", 3, 100), trace_job("b", 4, 100, submit=1), trace_job("c", 1, 100, submit=2)]
    for cls in (LoadBalance, BinPack):
        strict = simulate(jobs, small_cluster(1, 4), cls(), config=NO_COST, strict=True)
        assert list(nodes_of(strict)) == ["a", "b", "c"]
        loose = simulate(jobs, small_cluster(1, 4), cls(backfill=True), config=NO_COST, strict=True)
        assert list(nodes_of(loose)) == ["a", "c", "b"]


def test_registry_and_arguments() -> None:
    assert make_policy("lb").name == "lb" and make_policy("binpack").name == "binpack"
    assert LoadBalance(backfill=True).name == "lb+backfill"
    with pytest.raises(ValueError, match="backfill must be True or False, got 'x'"):
        BinPack(backfill="x")  # type: ignore[arg-type]


@st.composite
def workloads(draw: st.DrawFn) -> list[TraceJob]:
    out, t = [], 0.0
    for i in range(draw(st.integers(1, 20))):
        t += draw(st.floats(0, 40))
        g = draw(st.sampled_from([0.25, 0.5, 1, 1, 2, 4, 8]))
        spec = simple_job(f"j{i}", g, submit_time=t, iterations=100)
        out.append(TraceJob(spec, JobTruth(iterations=100, duration=draw(st.floats(1, 300)),
                                           ref_workers=max(int(g), 1))))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.booleans(), st.booleans())
def test_never_over_allocates_and_every_job_ends(jobs, pack, backfill) -> None:
    policy = BinPack(backfill) if pack else LoadBalance(backfill)
    out = simulate(jobs, small_cluster(3, 4), policy, strict=True)
    assert out.result.unfinished == {}
    assert all(j.state in (JobState.FINISHED, JobState.REJECTED) for j in out.result.jobs.values())
