"""MLF-H (``mlfs-h``): Eq. 2-6 priorities, ideal-virtual-host placement, overload migration."""

from __future__ import annotations

import pytest

from cohabit.engine import actions as A
from cohabit.engine.job import JobView
from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies.mlfs.heuristic import MLFH
from cohabit.policies.mlfs.priority import PriorityParams, loss_reduction_share, task_priorities
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, JobSpec, Resources, TaskGroup
from cohabit.spec.graph import TaskGraph

from test_mlfs_graph import graph_job

P = PriorityParams()


def view_of(spec: JobSpec) -> JobView:
    return JobView(spec, 0)


def test_eq2_urgency_raises_priority() -> None:
    lo = task_priorities(view_of(graph_job(urgency=1.0)), 0.0, P)
    hi = task_priorities(view_of(graph_job(urgency=9.0)), 0.0, P)
    assert (hi > lo).all()
    off = PriorityParams(use_urgency=False)
    assert task_priorities(view_of(graph_job(urgency=1.0)), 0.0, off) == pytest.approx(
        task_priorities(view_of(graph_job(urgency=9.0)), 0.0, off))


def test_eq2_larger_partition_larger_ml_priority() -> None:
    # two independent partitions (no edges), sizes 1 and 3: ML part proportional to size share
    g = TaskGraph(partitions=[{"params": 1.0}, {"params": 3.0}], edges=[])
    spec = JobSpec(id="j", architecture="allreduce", workers=TaskGroup(count=2, demand=Resources(gpu=1)),
                   graph=g, urgency=5.0, iterations=10)
    ml_only = PriorityParams(alpha=1.0)
    pr = task_priorities(view_of(spec), 0.0, ml_only)
    assert pr[1] == pytest.approx(3 * pr[0])


def test_eq3_parent_adds_discounted_children() -> None:
    spec = graph_job(partitions=2, urgency=4.0)  # chain 0 -> 1, sizes 1/3 and 2/3
    ml_only = PriorityParams(alpha=1.0, gamma=0.5)
    pr = task_priorities(view_of(spec), 0.0, ml_only)
    base0, base1 = 4.0 * (1 / 3), 4.0 * (2 / 3)
    assert pr[1] == pytest.approx(base1)
    assert pr[0] == pytest.approx(base0 + 0.5 * base1)


def test_parameter_server_has_the_highest_priority() -> None:
    pr = task_priorities(view_of(graph_job(arch="ps", replicas=2, urgency=3.0)), 0.0, P)
    assert pr[-1] > pr[:-1].max()


def test_eq4_closer_deadline_higher_priority() -> None:
    near = task_priorities(view_of(graph_job(deadline=600.0)), 0.0, P)
    far = task_priorities(view_of(graph_job(deadline=86400.0)), 0.0, P)
    assert (near > far).all()
    off = PriorityParams(use_deadline=False)
    assert task_priorities(view_of(graph_job(deadline=600.0)), 0.0, off) == pytest.approx(
        task_priorities(view_of(graph_job(deadline=86400.0)), 0.0, off))


def test_loss_reduction_share_from_reports() -> None:
    job = view_of(graph_job())
    assert loss_reduction_share(job) == 1.0  # nothing reported yet
    job._metrics["loss"] = [(1.0, 2.0), (11.0, 1.0), (21.0, 0.9)]
    # last interval: 0.1 over 10 iterations = 0.01 per iteration; total drop 1.1
    assert loss_reduction_share(job) == pytest.approx(0.01 / 1.1)


def _cluster(nodes: int, gpus: int = 4, link: float = 10.0) -> ClusterSpec:
    return ClusterSpec.homogeneous("t", nodes, Resources(gpu=gpus, cpu=32, mem_gb=256, net_gbps=link))


def test_placement_keeps_heavy_peers_on_one_node() -> None:
    # a 2-partition chain with heavy activations: both tasks on one node (lowest utilisation + traffic)
    spec = graph_job(act=100.0)
    out = simulate([TraceJob(spec, JobTruth(iterations=50, compute_s=0.5))], _cluster(3), MLFH())
    starts = [e for e in out.result.record if e.kind is EventKind.STARTED]
    assert len(set(starts[0].data["nodes"])) == 1


def test_placement_prefers_the_least_utilised_node() -> None:
    a = TraceJob(graph_job("a", partitions=1), JobTruth(iterations=1000, compute_s=1.0))
    b = TraceJob(graph_job("b", partitions=1), JobTruth(iterations=1000, compute_s=1.0))
    out = simulate([a, b], _cluster(2), MLFH())
    nodes = [tuple(e.data["nodes"]) for e in out.result.record if e.kind is EventKind.STARTED]
    assert nodes[0] != nodes[1]  # the second job goes to the empty node, not the used one


def test_queue_order_by_priority_urgent_first() -> None:
    # one GPU: the urgent job (higher Eq. 2 priority) starts first although it arrived second
    low = TraceJob(graph_job("low", partitions=1, urgency=1.0), JobTruth(iterations=100, compute_s=1.0))
    high = TraceJob(graph_job("high", partitions=1, urgency=10.0), JobTruth(iterations=100, compute_s=1.0))
    out = simulate([low, high], _cluster(1, gpus=1), MLFH())
    first = next(e for e in out.result.record if e.kind is EventKind.STARTED)
    assert first.job == "high"


class BadStart(MLFH):
    """Starts the heavy job spread over two nodes, then behaves as MLF-H."""

    def decide(self, view):  # type: ignore[override]
        if "heavy" in view.pending:
            return [A.Start("heavy", (0, 1))]
        return super().decide(view)


def test_overloaded_link_moves_a_task_out() -> None:
    # 1,000 MB of activations per iteration across a 10 Gb/s link at ~1 iteration/s: link > 90 %
    heavy = graph_job("heavy", act=1000.0)
    out = simulate([TraceJob(heavy, JobTruth(iterations=2000, compute_s=0.05))], _cluster(2), BadStart())
    kinds = [e.kind for e in out.result.record if e.job == "heavy"]
    assert EventKind.MIGRATED in kinds
    moved = next(e for e in out.result.record if e.kind is EventKind.MIGRATED)
    assert len(set(moved.data["nodes"])) == 1  # both partitions on one node: no link traffic
    assert out.result.jobs["heavy"].state is JobState.FINISHED
    still = simulate([TraceJob(heavy, JobTruth(iterations=2000, compute_s=0.05))], _cluster(2),
                     BadStart(migrate=False))
    assert EventKind.MIGRATED not in [e.kind for e in still.result.record]
    assert out.result.jobs["heavy"].end_time < still.result.jobs["heavy"].end_time


def test_a_move_must_cut_the_jobs_busiest_link() -> None:
    job = view_of(graph_job(act=100.0))
    job._placement = (0, 1)
    assert MLFH._helps(job, (0, 0))  # both partitions on one node: no traffic left
    assert not MLFH._helps(job, (1, 0))  # swapped: the same traffic, a restart for nothing
