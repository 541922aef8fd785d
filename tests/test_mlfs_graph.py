"""Task-graph jobs (MLFS §3.2): spec validation, per-task demands in the ledger, the simulator's
communication cost from partition traffic, accuracy reports, and the cohabit trace format."""

from __future__ import annotations


from pathlib import Path

import pytest
from pydantic import ValidationError

from cohabit.engine import actions as A
from cohabit.models.mlfs_curve import packaged_curves
from cohabit.policies.base import BasePolicy
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.sim.traces.errors import TraceRowError
from cohabit.sim.traces.native import dump
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, JobSpec, Resources, TaskGroup
from cohabit.spec.graph import TaskGraph, cross_node_mb

W = Resources(gpu=1, cpu=4, mem_gb=16)


def graph_job(id: str = "g", partitions: int = 2, replicas: int = 1, arch: str = "allreduce",
              act: float = 100.0, exch: float = 50.0, **kw) -> JobSpec:
    g = TaskGraph(partitions=[{"params": 1e6 * (i + 1)} for i in range(partitions)], replicas=replicas,
                  activation_mb=act, exchange_mb=exch)
    ps = TaskGroup(count=1, demand=Resources(cpu=2, mem_gb=8)) if arch == "ps" else None
    kw.setdefault("iterations", 100)
    return JobSpec(id=id, architecture=arch, workers=TaskGroup(count=g.num_tasks, demand=W), ps=ps, graph=g, **kw)


def test_graph_task_count_must_match_workers() -> None:
    g = TaskGraph(partitions=[{"params": 1}, {"params": 2}], replicas=2)
    with pytest.raises(ValidationError, match="workers.count must be 4"):
        JobSpec(id="x", architecture="allreduce", workers=TaskGroup(count=3, demand=W), graph=g)


def test_graph_rejects_cycles_and_bad_edges() -> None:
    with pytest.raises(ValidationError, match="cycle"):
        TaskGraph(partitions=[{"params": 1}] * 3, edges=[(0, 1), (1, 2), (2, 0)])
    with pytest.raises(ValidationError, match=r"edges\[0\]"):
        TaskGraph(partitions=[{"params": 1}] * 2, edges=[(0, 5)])


def test_partition_demand_must_be_bounded_by_workers_demand() -> None:
    g = TaskGraph(partitions=[{"params": 1}, {"params": 2, "demand": {"gpu": 2, "cpu": 1}}])
    with pytest.raises(ValidationError, match=r"partitions\[1\].demand.gpu"):
        JobSpec(id="x", architecture="allreduce", workers=TaskGroup(count=2, demand=W), graph=g)


def test_children_layers_and_size_shares() -> None:
    g = TaskGraph(partitions=[{"params": 1}, {"params": 1}, {"params": 2}], edges=[(0, 2), (1, 2)])
    assert g.children == ((2,), (2,), ())
    assert g.layers.index(2) == 2
    assert g.size_shares == (0.25, 0.25, 0.5)


def test_cross_node_traffic_counts_only_remote_peers() -> None:
    g = TaskGraph(partitions=[{"params": 1}, {"params": 1}], replicas=2, activation_mb=100, exchange_mb=10)
    # tasks: (p0,r0) (p1,r0) (p0,r1) (p1,r1); replica 0 on node 0, replica 1 on node 1
    out = cross_node_mb(g, "allreduce", 0, (0, 0, 1, 1))
    assert out == {0: 20.0, 1: 20.0}  # only the ring exchanges of both partitions leave a node
    out = cross_node_mb(g, "allreduce", 0, (0, 1, 0, 1))  # partitions split: activations cross
    assert out == {0: 200.0, 1: 200.0}
    assert cross_node_mb(g, "allreduce", 0, (0, 0, 0, 0)) == {}


class Place(BasePolicy):
    name = "place"

    def __init__(self, nodes: tuple[int, ...]) -> None:
        self.nodes = nodes

    def decide(self, view):  # type: ignore[override]
        return [A.Start(j.id, self.nodes) for j in view.pending.values()]


def _cluster(nodes: int = 2, link: float = 8.0) -> ClusterSpec:
    return ClusterSpec.homogeneous("t", nodes, Resources(gpu=4, cpu=32, mem_gb=256, net_gbps=link))


def test_iteration_time_adds_the_busiest_nodes_traffic() -> None:
    spec = graph_job(act=100.0)
    truth = JobTruth(iterations=100, compute_s=0.5)
    near = simulate([TraceJob(spec, truth)], _cluster(), Place((0, 0)), config=SimConfig())
    far = simulate([TraceJob(spec, truth)], _cluster(), Place((0, 1)), config=SimConfig())
    assert near.result.jobs["g"].end_time == pytest.approx(50.0)
    # 100 MB each way over an 8 Gb/s link: 0.1 s per iteration more
    assert far.result.jobs["g"].end_time == pytest.approx(60.0)


def test_partition_demands_are_what_the_ledger_takes() -> None:
    g = TaskGraph(partitions=[{"params": 1}, {"params": 1, "demand": {"gpu": 1, "cpu": 1, "mem_gb": 1}}])
    spec = JobSpec(id="g", architecture="allreduce", workers=TaskGroup(count=2, demand=W), graph=g,
                   iterations=10)
    seen = []

    class Watch(Place):
        def decide(self, view):  # type: ignore[override]
            if view.running:
                seen.append(view.free[0].copy())
            return super().decide(view)
    Watch.tick_interval = 1.0
    simulate([TraceJob(spec, JobTruth(iterations=10, compute_s=1.0))], _cluster(1), Watch((0, 0)))
    cpu = list(_cluster(1).resource_names).index("cpu")
    assert seen and seen[0][cpu] == pytest.approx(32 - 4 - 1)


def test_epoch_reports_carry_accuracy_from_the_real_curve() -> None:
    curve = tuple(packaged_curves()["alexnet"][0].accuracy)
    spec = graph_job()
    out = simulate([TraceJob(spec, JobTruth(iterations=100 * len(curve), compute_s=0.5, accuracy=curve))],
                   _cluster(), Place((0, 0)))
    acc = out.result.jobs["g"].metrics["accuracy"]
    values = [a for _, a in acc]
    # one report per epoch end before the last (the last comes with the finish), the curve's values in order
    assert len(values) >= len(curve) - 1 and values == list(curve[:len(values)])


def test_trace_round_trips_graph_and_truth(tmp_path: Path) -> None:
    spec = graph_job(arch="ps", replicas=2, accuracy=0.6, stop_option="optstop", stop_option_may_change=True)
    tj = TraceJob(spec, JobTruth(iterations=100, compute_s=0.25, accuracy=(0.3, 0.5)))
    path = tmp_path / "t.yaml"
    dump([tj], path)
    back = load_trace(path, "cohabit").jobs[0]
    assert back.spec == spec
    assert back.truth.compute_s == 0.25 and back.truth.accuracy == (0.3, 0.5)


def test_trace_bad_compute_time_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("jobs:\n  - id: a\n    gpus: 1\n    truth: {iterations: 5, duration: 5, compute_s: -1}\n")
    with pytest.raises(TraceRowError, match=r"jobs\[0\].truth"):
        load_trace(path, "cohabit")
