"""Parameter-server jobs on the LocalBackend: real server and worker processes over loopback TCP."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from cohabit.engine.backend import BackendEventKind as K
from cohabit.engine.ledger import Ledger
from cohabit.runtime.local import LocalBackend
from cohabit.runtime.ps import load_model
from cohabit.runtime.ps.reference import run_in_process
from cohabit.runtime.runner import check_jobs
from cohabit.spec import Resources
from cohabit.spec.job import JobSpec, TaskGroup

from runtime_helpers import cluster, ended, final_event, job, losses, no_orphans, wait_for  # noqa: F401

SMALL = Resources(cpu=0.25, mem_gb=0.1)
LDA_SMALL = {"name": "ps-lda", "data": "synthetic", "n_docs": 200, "vocab_size": 400, "doc_len": 40, "n_topics": 5}


def ps_job(id: str, workload: dict, iterations: int, *, workers: int = 2, servers: int = 1) -> JobSpec:
    return JobSpec(id=id, architecture="ps", workers=TaskGroup(count=workers, demand=SMALL),
                   ps=TaskGroup(count=servers, demand=SMALL), iterations=iterations, workload=workload,
                   model=workload["name"])


def place(led: Ledger, spec: JobSpec, nodes: tuple[int, ...]):
    """Allocate ``spec`` with its tasks (workers first, then servers) on ``nodes``."""
    n_workers = len(nodes) - spec.num_ps
    demands = [spec.workers.demand] * n_workers + [spec.ps.demand] * spec.num_ps
    return led.allocate(spec.id, nodes, [led.vector(d) for d in demands])


def resized(spec: JobSpec, workers: int, servers: int) -> JobSpec:
    return spec.model_copy(update={"workers": TaskGroup(count=workers, demand=SMALL),
                                   "ps": TaskGroup(count=servers, demand=SMALL)})


@pytest.mark.parametrize("workload, iterations", [
    ({"name": "ps-mlr"}, 300), ({"name": "ps-lasso"}, 1500), ({"name": "ps-nmf"}, 1500), (LDA_SMALL, 50),
])
def test_ps_job_trains_to_lower_loss(tmp_path, workload, iterations) -> None:
    cl = cluster(2)
    spec = ps_job("ps", workload, iterations)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05) as be:
        be.launch(spec, place(Ledger(cl), spec, (0, 0, 1)), 0.0, from_checkpoint=False)
        events = wait_for(be, ended("ps"))
        fin = final_event(events, "ps")
        assert fin.kind is K.FINISHED and fin.data["iterations"] == iterations, fin.data
        seen = losses(events, "ps")
        # the loss of the initial model (iteration 0, the same seed, computed in this process)
        start = run_in_process(workload, iterations=1, n_workers=2, n_servers=1)[2][0]
        assert seen and fin.data["metrics"]["loss"] < 0.9 * start, (start, seen, fin.data["metrics"])
        prog = [e for e in events if e.kind is K.PROGRESS]
        assert all(e.data["comm_s"] > 0 and e.data["compute_s"] > 0 and e.data["net_bytes_s"] > 0 for e in prog)
        assert all(e.data["compute_s"] + e.data["comm_s"] <= e.data["iter_time"] * 1.05 for e in prog)
        it, model, _ = load_model(be.store.root, "ps")
        assert it == iterations and be.pids() == []


def test_ps_pause_migrate_and_resize_equal_an_uninterrupted_run(tmp_path) -> None:
    cl = cluster(2)
    workload, iterations = {"name": "ps-nmf", "data": "synthetic", "n_rows": 120, "n_cols": 80, "seed": 3}, 600
    spec = ps_job("nmf", workload, iterations, workers=2, servers=2)
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05, checkpoint_interval=0) as be:
        be.launch(spec, place(led, spec, (0, 1, 0, 1)), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] > 10 for e in ev))
        be.halt("nmf", be.now(), checkpoint=True)  # pause: every task saves its part at one boundary
        led.release("nmf")
        paused = load_model(be.store.root, "nmf")[0]
        assert 0 < paused < iterations and be.pids() == []
        be.launch(spec, place(led, spec, (1, 0, 1, 0)), be.now(), from_checkpoint=True)  # migrate every task
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] > paused + 5 for e in ev))
        be.halt("nmf", be.now(), checkpoint=True)
        led.release("nmf")
        bigger = resized(spec, 3, 1)  # resize (Dorm): 3 workers reshard W's rows, 1 server re-joins H
        be.launch(bigger, place(led, bigger, (0, 1, 1, 0)), be.now(), from_checkpoint=True)
        fin = final_event(wait_for(be, ended("nmf")), "nmf")
        assert fin.kind is K.FINISHED
        restored = [t["restored_iteration"] for t in be.timings if t["kind"] == "start" and t["rank"] == 0]
        assert restored[0] is None and all(r is not None and r > 0 for r in restored[1:])
        halts = [t for t in be.timings if t["kind"] == "halt"]
        assert len(halts) == 2 and not any(h["timed_out"] for h in halts)
        it, model, local = load_model(be.store.root, "nmf")
    ref, workers, _ = run_in_process(workload, iterations=iterations, n_workers=1, n_servers=1)
    assert it == iterations and len(local) == 3
    np.testing.assert_allclose(model["Ht"], ref["Ht"], rtol=1e-8)
    np.testing.assert_allclose(np.vstack([s["W"] for s in local]), workers[0].W, rtol=1e-8)


def test_ps_lasso_pause_and_migrate_equal_the_reference(tmp_path) -> None:
    cl = cluster(2)
    workload, iterations = {"name": "ps-lasso", "data": "synthetic", "n_samples": 2000, "seed": 4}, 800
    spec = ps_job("lasso", workload, iterations, workers=2, servers=1)
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05, checkpoint_interval=0) as be:
        be.launch(spec, place(led, spec, (0, 0, 1)), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] > 10 for e in ev))
        be.halt("lasso", be.now(), checkpoint=True)
        led.release("lasso")
        be.launch(spec, place(led, spec, (1, 1, 0)), be.now(), from_checkpoint=True)
        assert final_event(wait_for(be, ended("lasso")), "lasso").kind is K.FINISHED
        it, model, _ = load_model(be.store.root, "lasso")
    ref, _, _ = run_in_process(workload, iterations=iterations, n_workers=2, n_servers=1)
    assert it == iterations
    np.testing.assert_allclose(model["w"], ref["w"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("victim", ["worker", "server"])
def test_ps_killed_task_restarts_the_job_from_checkpoint(tmp_path, victim) -> None:
    cl = cluster(2)
    workload, iterations = {"name": "ps-lasso", "data": "synthetic", "n_samples": 2000, "seed": 2}, 1500
    spec = ps_job("victim", workload, iterations, workers=2, servers=1)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05, checkpoint_interval=0.3,
                      restart_backoff=0.1) as be:
        be.launch(spec, place(Ledger(cl), spec, (0, 1, 1)), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: (load_model(be.store.root, "victim") or (0,))[0] > 0
                 and any(e.kind is K.PROGRESS for e in ev))
        pids = be.status["victim"].pids
        os.kill(pids[1] if victim == "worker" else pids[2], signal.SIGKILL)
        events = wait_for(be, ended("victim"))
        assert final_event(events, "victim").kind is K.FINISHED
        st = be.status["victim"]
        assert st.restarts == 1 and f"task {1 if victim == 'worker' else 2}" in st.reason
        restart = next(t for t in be.timings if t["kind"] == "restart")
        assert restart["checkpoint_iteration"] > 0
        restored = [t["restored_iteration"] for t in be.timings if t["kind"] == "start"]
        assert restored[-1] == restart["checkpoint_iteration"]
        it, model, _ = load_model(be.store.root, "victim")
    ref, _, _ = run_in_process(workload, iterations=iterations, n_workers=2, n_servers=1)
    np.testing.assert_allclose(model["w"], ref["w"], rtol=1e-9, atol=1e-12)


def _comm(events, job_id: str) -> float:
    prog = [e.data["comm_s"] for e in events if e.job == job_id and e.kind is K.PROGRESS]
    assert prog, f"no progress of {job_id}"
    return float(np.median(prog))


def test_ps_bandwidth_budget_is_shared_by_colocated_jobs(tmp_path) -> None:
    """Workers on node 0, servers on node 1: every byte crosses both nodes' links."""
    cl = cluster(2)
    mbps = 40.0  # 5 MB/s per node; ps-mlr moves ~2 x 63 kB per iteration per worker
    led = Ledger(cl)
    a, b = ps_job("a", {"name": "ps-mlr"}, 60, workers=1), ps_job("b", {"name": "ps-mlr"}, 60, workers=1)
    fast = ps_job("a", {"name": "ps-mlr"}, 400, workers=1)  # unlimited iterations are ~10x quicker
    with LocalBackend(cl, root=tmp_path / "free", report_interval=0.05) as be:
        be.launch(fast, place(led, fast, (0, 1)), 0.0, from_checkpoint=False)
        free = _comm(wait_for(be, ended("a")), "a")
    led.release("a")
    with LocalBackend(cl, root=tmp_path / "limited", report_interval=0.1, bandwidth_mbps=mbps) as be:
        be.launch(a, place(led, a, (0, 1)), 0.0, from_checkpoint=False)
        ev = wait_for(be, ended("a"))
        alone = _comm(ev, "a")
        rates = [e.data["net_bytes_s"] for e in ev if e.kind is K.PROGRESS]
        led.release("a")
        be.launch(a, place(led, a, (0, 1)), be.now(), from_checkpoint=False)
        be.launch(b, place(led, b, (0, 1)), be.now(), from_checkpoint=False)
        ev = wait_for(be, lambda seen: ended("a")(seen) and ended("b")(seen), timeout=90)
        shared = (_comm(ev, "a") + _comm(ev, "b")) / 2
    budget = mbps * 1e6 / 8
    assert max(rates) < 1.15 * budget and np.median(rates) > 0.5 * budget  # measured bytes/s near the cap
    assert alone > 3 * free  # the limit slows communication ...
    assert shared > 1.4 * alone  # ... and two jobs sharing the nodes' links slow each other


def test_ps_architecture_and_workload_must_match(tmp_path) -> None:
    cl = cluster(2)
    not_ps = job("flat", {"name": "ps-mlr"}, 10)
    wrong = ps_job("wrong", {"name": "mlr"}, 10)
    problems = check_jobs([not_ps, wrong, ps_job("fine", {"name": "ps-lda"}, 10)])
    assert len(problems) == 2
    assert "is a parameter-server workload: give the job 'architecture: ps'" in problems[0]
    assert "architecture 'ps' runs a parameter-server workload" in problems[1]
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path) as be:
        be.launch(not_ps, led.allocate("flat", (0,), [led.vector(not_ps.workers.demand)]), 0.0,
                  from_checkpoint=False)
        fin = final_event(wait_for(be, ended("flat")), "flat")
        assert fin.kind is K.FAILED and "architecture: ps" in fin.data["reason"]
        led.release("flat")
        bad = ps_job("bad", {"name": "ps-lda", "kappa": 2.0}, 10)  # caught in the task processes
        be.launch(bad, place(led, bad, (0, 0, 1)), be.now(), from_checkpoint=False)
        fin = final_event(wait_for(be, ended("bad")), "bad")
        assert fin.kind is K.FAILED and "workload.kappa must lie in (0.5, 1]" in fin.data["reason"]
        assert be.status["bad"].restarts == 0


def test_ps_jobs_run_from_yaml_through_the_cli_under_a_bandwidth_budget(tmp_path) -> None:
    import typer
    from typer.testing import CliRunner

    from cohabit.runtime.cli import run
    from cohabit.spec.yamlio import load_jobs

    examples = load_jobs(Path(__file__).parent.parent / "examples" / "ps_jobs.yaml")
    assert {s.workload["name"] for s in examples} == {"ps-mlr", "ps-lasso", "ps-nmf", "ps-lda"}
    assert check_jobs(examples) == []
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "jobs:\n"
        "  - {id: p, architecture: ps, workers: {count: 2, demand: {cpu: 0.5}}, ps: {count: 1, demand: {cpu: 0.5}},\n"
        "     iterations: 200, workload: {name: ps-lasso}}\n"
    )
    app = typer.Typer(add_completion=False)
    app.command("run")(run)
    app.command("other")(lambda: None)
    res = CliRunner().invoke(app, ["run", str(jobs), "--policy", "fifo", "--nodes", "2", "--bandwidth-mbps", "400"])
    assert res.exit_code == 0, res.output
    assert "finished" in res.output and "avg" in res.output
    bad = CliRunner().invoke(app, ["run", str(jobs), "--policy", "fifo", "--bandwidth-mbps", "-1"])
    assert bad.exit_code != 0 and "--bandwidth-mbps: expected a number (finite) >= 0" in bad.output
