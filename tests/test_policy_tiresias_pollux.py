"""The Pollux artifact's Tiresias (``tiresias-pollux``): queue-order statuses by GPU count, every 60 s."""

from __future__ import annotations

import pytest

from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.tiresias_pollux import TiresiasPollux
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate

from conftest import small_cluster, trace_job

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)


def _events(out, kind):  # type: ignore[no-untyped-def]
    return [(round(e.time), e.job) for e in out.result.record if e.kind == kind]


def test_an_earlier_job_that_fits_takes_gpus_back_from_a_later_one_at_the_next_round() -> None:
    # 4 GPUs. Queue 0 in arrival order: A (2 GPUs, 100 s), B (4), C (2). Round at 60: A runs, B does not
    # fit the 2 GPUs left, C does. A ends at 160; at the round of 180, B (before C in the queue) claims
    # all 4 GPUs: C is paused and B starts. (cohabit's tiresias never preempts within a queue.)
    jobs = [trace_job("A", 2, 100, 0), trace_job("B", 4, 50, 1), trace_job("C", 2, 1000, 2)]
    out = simulate(jobs, small_cluster(1, 4), TiresiasPollux(), config=NO_COST, strict=True)
    assert _events(out, EventKind.STARTED)[:3] == [(60, "A"), (60, "C"), (180, "B")]
    assert _events(out, EventKind.PAUSED) == [(180, "C")]
    assert _events(out, EventKind.RESUMED) == [(240, "C")]


def test_without_reclaim_a_running_job_keeps_its_gpus_against_its_own_queue() -> None:
    # The same jobs with reclaim=false (cohabit's Tiresias rule): C keeps running, B waits for it.
    jobs = [trace_job("A", 2, 100, 0), trace_job("B", 4, 50, 1), trace_job("C", 2, 1000, 2)]
    out = simulate(jobs, small_cluster(1, 4), TiresiasPollux(reclaim=False), config=NO_COST, strict=True)
    assert _events(out, EventKind.PAUSED) == []
    assert _events(out, EventKind.STARTED)[:2] == [(60, "A"), (60, "C")]
    assert _events(out, EventKind.STARTED)[2][1] == "B" and _events(out, EventKind.STARTED)[2][0] >= 1060


def test_placement_most_free_first_or_consolidated() -> None:
    # Two 4-GPU nodes. A (1 GPU) goes to node 0; C (2 GPUs): the artifact takes the node with the most
    # free GPUs (node 1), cohabit's placement the node it fills best (node 0, beside A).
    jobs = [trace_job("A", 1, 1000, 0), trace_job("C", 2, 1000, 1)]
    for placement, node in (("most-free", 1), ("consolidated", 0)):
        out = simulate(jobs, small_cluster(2, 4), TiresiasPollux(placement=placement), config=NO_COST, strict=True)
        nodes = {e.job: e.data["nodes"] for e in out.result.record if e.kind is EventKind.STARTED}
        assert nodes["A"] == [0] and nodes["C"] == [node, node], placement


def test_a_job_past_the_threshold_goes_behind_queue_0() -> None:
    # 2 GPUs, threshold 100 GPU-s. L (2 GPUs, from 60) has 120 GPU-s at the round of 120: it moves to
    # queue 1. S arrives at 150 in queue 0 and takes L's GPUs at the round of 180.
    jobs = [trace_job("L", 2, 1000, 0), trace_job("S", 2, 30, 150)]
    out = simulate(jobs, small_cluster(1, 2), TiresiasPollux(threshold=100.0), config=NO_COST, strict=True)
    assert _events(out, EventKind.PAUSED) == [(180, "L")]
    assert _events(out, EventKind.STARTED) == [(60, "L"), (180, "S")]


def test_registry_and_bad_values() -> None:
    assert make_policy("tiresias-pollux").name == "tiresias-pollux"
    with pytest.raises(ValueError, match="threshold"):
        TiresiasPollux(threshold=0)
    with pytest.raises(ValueError, match="round_s"):
        TiresiasPollux(round_s=float("inf"))
    with pytest.raises(ValueError, match="placement"):
        TiresiasPollux(placement="random")

