"""LocalBackend + Harmony: pipelined groups' PS workers run through the node queues; others do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from cohabit.engine.backend import BackendEventKind as K
from cohabit.engine.ledger import Ledger
from cohabit.policies import make_policy
from cohabit.runtime.local import LocalBackend
from cohabit.runtime.runner import local_cluster, run_local
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
