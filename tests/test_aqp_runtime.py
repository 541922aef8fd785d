"""Query jobs (kind: query) run for real: a DuckDB worker process per query through LocalBackend."""

from __future__ import annotations

import pytest

from cohabit.aqp import QUERIES
from cohabit.aqp.online import ProgressiveQuery
from cohabit.engine.backend import BackendEventKind as K
from cohabit.engine.ledger import Ledger
from cohabit.runtime.local import LocalBackend
from cohabit.spec import Resources
from cohabit.spec.job import JobSpec, TaskGroup
from runtime_helpers import allocate, cluster, ended, final_event, no_orphans, wait_for  # noqa: F401

BATCHES = 40


def query_job(id: str, query: str, *, seed: int = 0, batches: int = BATCHES) -> JobSpec:
    return JobSpec(id=id, kind="query", workers=TaskGroup(count=1, demand=Resources(cpu=1, mem_gb=0.5)),
                   iterations=batches, criteria="accuracy >= 0.95 within 600s",
                   workload={"name": "tpch-query", "query": query, "scale": 0.01, "seed": seed})


def test_aqp_query_job_reports_accuracy_every_batch_and_resumes_exactly(tmp_path, tpch_dir) -> None:
    cl = cluster(2)
    spec = query_job("q9", "q9", seed=4)
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=30.0, checkpoint_interval=0) as be:
        be.launch(spec, allocate(cl, spec, (0,), led), 0.0, from_checkpoint=False)
        first = wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] >= 3 for e in ev))
        be.halt("q9", be.now(), checkpoint=True)  # pause at a batch boundary
        led.release("q9")
        paused_at = be.store.latest("q9").iteration
        assert 0 < paused_at < BATCHES
        be.launch(spec, allocate(cl, spec, (1,), led), be.now(), from_checkpoint=True)  # resume on another node
        events = wait_for(be, ended("q9"))
        assert final_event(events, "q9").kind is K.FINISHED
        got, _ = be.store.load("q9")
    # one progress report per batch although the report interval is 30 s
    prog = [e.data for e in first + events if e.kind is K.PROGRESS]
    batches = [int(p["metrics"]["batches"]) for p in prog]
    assert batches == sorted(batches) and len(set(batches)) == len(batches)
    assert set(range(paused_at + 1, BATCHES + 1)) <= set(batches)
    assert all(0.0 <= p["metrics"]["accuracy"] <= 1.0 for p in prog)
    assert got["workload"]["iteration"] == BATCHES
    # the resumed query's final state gives exactly the uninterrupted answer
    resumed = ProgressiveQuery(QUERIES["q9"], tpch_dir, batches=BATCHES, seed=4, scale_factor=0.01)
    resumed.restore(got["workload"]["query"])
    ref = ProgressiveQuery(QUERIES["q9"], tpch_dir, batches=BATCHES, seed=4, scale_factor=0.01).run()
    assert resumed.answer().rows == ref.rows


def test_aqp_query_job_spec_needs_batches_and_one_task() -> None:
    with pytest.raises(ValueError, match="iterations"):
        JobSpec(id="q", kind="query", workers=TaskGroup(count=1, demand=Resources(cpu=1)),
                workload={"name": "tpch-query", "query": "q1"})
    with pytest.raises(ValueError, match="one task"):
        JobSpec(id="q", kind="query", architecture="allreduce", iterations=5,
                workers=TaskGroup(count=2, demand=Resources(cpu=1)), workload={"name": "tpch-query"})


def test_aqp_bad_query_option_is_reported_at_load(tmp_path) -> None:
    from cohabit.runtime.workloads import WorkloadError, parse_config

    with pytest.raises(WorkloadError, match="window"):
        parse_config("j", {"name": "tpch-query", "query": "q1", "windw": 3})
    with pytest.raises(WorkloadError, match="q1 .. q22") as err:
        parse_config("j", {"name": "tpch-query", "query": "q23"})
    assert err.value.field == "query"
    with pytest.raises(WorkloadError, match="window must be >= 2"):
        parse_config("j", {"name": "tpch-query", "query": "q1", "window": 1})


def test_aqp_query_share_raised_mid_run_reports_the_new_threads_and_stays_exact(tmp_path, tpch_dir) -> None:
    """SetShare on a real query (LocalBackend.set_share): the worker changes DuckDB's threads at the next
    batch boundary, reports them, and the answer is exactly the uninterrupted one."""
    cl = cluster(1, cpu=2)
    spec = query_job("q18", "q18", seed=2, batches=30)
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=30.0, checkpoint_interval=0) as be:
        be.launch(spec, allocate(cl, spec, (0,), led), 0.0, from_checkpoint=False)
        first = wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] >= 2 for e in ev))
        led.release("q18")
        wider = spec.model_copy(update={"workers": TaskGroup(count=1, demand=Resources(cpu=2, mem_gb=1.0))})
        be.set_share("q18", allocate(cl, wider, (0,), led), be.now())
        events = wait_for(be, ended("q18"))
        assert final_event(events, "q18").kind is K.FINISHED
        got, _ = be.store.load("q18")
    threads = [(int(e.data["metrics"]["batches"]), int(e.data["metrics"]["threads"]))
               for e in first + events if e.kind is K.PROGRESS]
    assert threads[0][1] == 1 and threads[-1][1] == 2  # raised at a batch boundary, and kept
    at = next(i for i, (_, t) in enumerate(threads) if t == 2)
    assert all(t == 1 for _, t in threads[:at]) and all(t == 2 for _, t in threads[at:])
    resumed = ProgressiveQuery(QUERIES["q18"], tpch_dir, batches=30, seed=2, scale_factor=0.01)
    resumed.restore(got["workload"]["query"])
    ref = ProgressiveQuery(QUERIES["q18"], tpch_dir, batches=30, seed=2, scale_factor=0.01).run()
    assert resumed.answer().rows == ref.rows


@pytest.mark.parametrize("budget_mb, tier", [(64.0, "memory"), (0.0, "disk")])
def test_aqp_paused_query_state_kept_by_ratchets_tiers_resumes_exactly(tmp_path, tpch_dir, budget_mb, tier) -> None:
    """LocalBackend(paused_memory_mb=...): a paused query's state stays in the backend's memory within the
    budget (no checkpoint file written) or is spilled to the checkpoint store; either way the resumed
    query gives exactly the uninterrupted answer."""
    cl = cluster(1)
    spec = query_job("q10", "q10", seed=5, batches=24)
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=30.0, checkpoint_interval=0,
                      paused_memory_mb=budget_mb) as be:
        be.launch(spec, allocate(cl, spec, (0,), led), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] >= 3 for e in ev))
        be.halt("q10", be.now(), checkpoint=True)
        led.release("q10")
        halt = [t for t in be.timings if t["kind"] == "halt"][-1]
        assert halt["tier"] == tier and be.tiers.tier_of("q10") == tier
        assert (be.store.latest("q10") is None) == (tier == "memory")  # in memory: nothing written
        paused_at = halt["checkpoint_iteration"]
        assert 0 < paused_at < 24
        be.launch(spec, allocate(cl, spec, (0,), led), be.now(), from_checkpoint=True)
        events = wait_for(be, ended("q10"))
        assert final_event(events, "q10").kind is K.FINISHED
        assert be.tiers.tier_of("q10") is None
        got, _ = be.store.load("q10")
    batches = [int(e.data["metrics"]["batches"]) for e in events if e.kind is K.PROGRESS]
    assert min(batches) > paused_at  # continued where it paused (not from scratch)
    resumed = ProgressiveQuery(QUERIES["q10"], tpch_dir, batches=24, seed=5, scale_factor=0.01)
    resumed.restore(got["workload"]["query"])
    ref = ProgressiveQuery(QUERIES["q10"], tpch_dir, batches=24, seed=5, scale_factor=0.01).run()
    assert resumed.answer().rows == ref.rows
