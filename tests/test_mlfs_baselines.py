"""MLFS's baselines: graphene, hypersched, tf-fair, rl-placement (one rule each)."""

from __future__ import annotations

import numpy as np

from cohabit.engine.job import JobView
from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.graphene import troublesome
from cohabit.policies.rl_placement import CHOICES, RLPlacement
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources

from test_mlfs_graph import graph_job


def _cluster(nodes: int = 1, gpus: int = 2) -> ClusterSpec:
    return ClusterSpec.homogeneous("t", nodes, Resources(gpu=gpus, cpu=32, mem_gb=256, net_gbps=10))


def _first(out) -> str:  # type: ignore[no-untyped-def]
    return next(e.job for e in out.result.record if e.kind is EventKind.STARTED)


def test_graphene_more_dependants_first() -> None:
    cap = np.array([[4.0, 32.0, 256.0, 10.0]])
    d = np.array([1.0, 4.0, 16.0, 0.0])
    chain = JobView(graph_job("chain", partitions=2), 0)
    flat = JobView(graph_job("flat", partitions=1, replicas=2, arch="allreduce"), 1)
    assert troublesome(chain, cap, d) > troublesome(flat, cap, d)
    blocker = TraceJob(graph_job("b", partitions=1, replicas=2), JobTruth(iterations=10, compute_s=1.0))
    a = TraceJob(graph_job("flat", partitions=1, replicas=2, submit_time=1.0), JobTruth(iterations=10, compute_s=1.0))
    b = TraceJob(graph_job("chain", partitions=2, submit_time=1.0), JobTruth(iterations=10, compute_s=1.0))
    out = simulate([blocker, a, b], _cluster(), make_policy("graphene"))
    order = [e.job for e in out.result.record if e.kind is EventKind.STARTED]
    assert order == ["b", "chain", "flat"]


def test_hypersched_earliest_deadline_first() -> None:
    blocker = TraceJob(graph_job("b", partitions=1, replicas=2), JobTruth(iterations=10, compute_s=1.0))
    late = TraceJob(graph_job("late", partitions=1, replicas=2, submit_time=1.0, deadline=9000.0),
                    JobTruth(iterations=10, compute_s=1.0))
    soon = TraceJob(graph_job("soon", partitions=1, replicas=2, submit_time=2.0, deadline=600.0),
                    JobTruth(iterations=10, compute_s=1.0))
    out = simulate([blocker, late, soon], _cluster(), make_policy("hypersched"))
    order = [e.job for e in out.result.record if e.kind is EventKind.STARTED]
    assert order == ["b", "soon", "late"]


def test_tf_fair_least_served_tenant_first() -> None:
    big = TraceJob(graph_job("a1", partitions=1, replicas=1, tenant="a"), JobTruth(iterations=100, compute_s=1.0))
    a2 = TraceJob(graph_job("a2", partitions=1, replicas=1, tenant="a", submit_time=1.0),
                  JobTruth(iterations=10, compute_s=1.0))
    b1 = TraceJob(graph_job("b1", partitions=1, replicas=1, tenant="b", submit_time=2.0),
                  JobTruth(iterations=10, compute_s=1.0))
    short = TraceJob(graph_job("c1", partitions=1, replicas=1, tenant="c"), JobTruth(iterations=5, compute_s=1.0))
    out = simulate([big, short, a2, b1], _cluster(1, gpus=2), make_policy("tf-fair"))
    order = [e.job for e in out.result.record if e.kind is EventKind.STARTED]
    assert order[2:] == ["b1", "a2"]  # when c1 ends, b holds nothing and a holds a GPU: b goes first


def test_rl_placement_learns_the_faster_spread() -> None:
    pol = RLPlacement(lr=0.5)
    for i in range(60):
        a = pol._choose("m")
        job = JobView(graph_job(f"j{i}"), i)
        job._iter_time = 1.0 if CHOICES[a] == 1 else 2.0  # consolidated is twice as fast
        pol.pending_reward[job.id] = ("m", a)
        pol.on_progress(job, None)  # type: ignore[arg-type]
    assert int(np.argmax(pol.logits["m"])) == 0
