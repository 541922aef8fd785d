"""LocalBackend + Harmony: pipelined groups' PS workers run through the node queues; others do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from cohabit.engine.backend import BackendEventKind as K
from cohabit.engine.ledger import Ledger
from cohabit.policies import make_policy
from cohabit.runtime.local import LocalBackend
from cohabit.runtime.runner import local_cluster, run_local
from cohabit.spec import Resources
from cohabit.spec.job import JobSpec, TaskGroup
from cohabit.spec.yamlio import load_jobs

from runtime_helpers import ended, final_event, wait_for  # noqa: F401

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "harmony_ps_jobs.yaml"


def _jobs(n: int, scale: float = 1.0):
    specs = load_jobs(EXAMPLE)[:n]
    return [s.model_copy(update={"iterations": max(10, int(s.iterations * scale))}) for s in specs]


def test_pipelined_group_workers_go_through_the_queues(tmp_path: Path) -> None:
    cl = local_cluster(2, cores=2)
    a, b = _jobs(2, 0.25)
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05) as be:
        for spec in (a, b):
            vecs = [led.vector(spec.workers.demand)] * 2 + [led.vector(spec.ps.demand)]
            alloc = led.allocate_group(spec.id, (0, 1, 0), vecs, mode="pipelined", nodes=(0, 1))
            be.launch(spec, alloc, be.now(), from_checkpoint=False)
        events = wait_for(be, lambda ev: all(any(e.job == j and e.kind in (K.FINISHED, K.FAILED) for e in ev)
                                             for j in (a.id, b.id)))
        for spec in (a, b):
            fin = final_event(events, spec.id)
            assert fin.kind is K.FINISHED and fin.data["iterations"] == spec.iterations, fin.data
        stats = be.harmony.stats()
    total = {j.id: j.iterations for j in (a, b)}
    for node in ("0", "1"):  # one worker per job per node: one COMP and two COMM subtasks per iteration
        assert stats[node]["comp"] == sum(total.values())
        assert stats[node]["comm"] == 2 * sum(total.values())
    assert be.harmony.service is None  # stopped with the backend


def test_naive_group_and_isolated_jobs_get_no_harmony_gate(tmp_path: Path) -> None:
    cl = local_cluster(2, cores=2)
    (a,) = _jobs(1, 0.1)
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05) as be:
        vecs = [led.vector(a.workers.demand)] * 2 + [led.vector(a.ps.demand)]
        be.launch(a, led.allocate_group(a.id, (0, 1, 0), vecs, mode="naive", nodes=(0, 1)), 0.0, from_checkpoint=False)
        assert final_event(wait_for(be, ended(a.id)), a.id).kind is K.FINISHED
        assert be.harmony.service is None


@pytest.mark.parametrize("policy", ["harmony", "harmony-naive"])
def test_cohabit_run_with_the_harmony_policies_on_real_ps_jobs(tmp_path: Path, policy: str) -> None:
    cl = local_cluster(2, cores=2)
    specs = _jobs(4, 0.2)
    backends = []
    out = run_local(specs, cl, make_policy(policy), root=tmp_path, report_interval=0.1,
                    on_scheduler=lambda s: backends.append(s.backend))
    assert out.metrics.jobs_finished == 4 and not out.result.unfinished
    stats = backends[0].harmony.last_stats
    if policy == "harmony":  # Harmony put jobs in pipelined groups: their subtasks went through the queues
        assert stats is not None and sum(s["comp"] for s in stats.values()) > 0
    else:
        assert stats is None


def _lda(job_id: str, iterations: int):
    """A communication-heavy PS job: LDA's topic-word model (vocab x topics, 0.64 MB) crosses the link twice
    per iteration; one worker on node 0, its server on node 1."""
    d = Resources(cpu=0.5, mem_gb=0.2)
    return JobSpec(id=job_id, architecture="ps", workers=TaskGroup(count=1, demand=d), ps=TaskGroup(count=1, demand=d),
                   iterations=iterations, workload={"name": "ps-lda", "data": "synthetic", "n_docs": 40,
                                                    "vocab_size": 8000, "doc_len": 10, "n_topics": 10,
                                                    "e_steps": 2})


def test_real_ps_traffic_of_a_pipelined_group_draws_from_harmonys_link_primary_first(tmp_path: Path) -> None:
    """Node 0 (both workers) has a 100 Mbit/s budget, node 1 (both servers) none. The workers' PULL/PUSH
    bytes are charged through their Harmony gates to node 0's ONE link (the file bucket is not used), and
    while both jobs transfer the primary COMM subtask gets a higher transfer rate than the secondary."""
    cl = local_cluster(2, cores=2)
    jobs = [_lda("a", 25), _lda("b", 25)]
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05, bandwidth_mbps=[100.0, 0.0]) as be:
        for spec in jobs:
            vecs = [led.vector(spec.workers.demand), led.vector(spec.ps.demand)]
            alloc = led.allocate_group(spec.id, (0, 1), vecs, mode="pipelined", nodes=(0, 1))
            be.launch(spec, alloc, be.now(), from_checkpoint=False)
        events = wait_for(be, lambda ev: all(any(e.job == j.id and e.kind in (K.FINISHED, K.FAILED) for e in ev)
                                             for j in jobs), timeout=120)
        for spec in jobs:
            fin = final_event(events, spec.id)
            assert fin.kind is K.FINISHED and fin.data["iterations"] == spec.iterations, fin.data
        stats = be.harmony.stats()
    link = stats["0"]
    assert "link_bytes" not in stats["1"]  # node 1 is unlimited: no link
    model = 8000 * 10 * 8
    assert link["link_bytes"] >= 2 * 2 * 25 * model  # both jobs' pulls and pushes went through it
    assert not (tmp_path / "net" / "node-0.bucket").exists()  # ... and not also through the file bucket
    high = link["take_bytes_high"] / link["take_s_high"]
    low = link["take_bytes_low"] / link["take_s_low"]
    assert link["take_bytes_low"] > 0, link  # the two jobs' COMM subtasks did overlap
    assert high > 1.3 * low, (high, low, link)
    assert high <= 100e6 / 8 * 1.25  # never faster than the node's budget
