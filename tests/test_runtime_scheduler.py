"""The Scheduler loop driving real processes: FIFO and SRTF to completion, preemption, and `cohabit run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cohabit.engine.record import EventKind
from cohabit.policies import SRTF, make_policy
from cohabit.runtime.cli import run
from cohabit.runtime.runner import check_jobs, local_cluster, run_local
from cohabit.spec.yamlio import load_jobs

from runtime_helpers import cluster, job, no_orphans  # noqa: F401

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "real_jobs.yaml"


def three_jobs() -> list:
    return [
        job("a", {"name": "mlr"}, 800, model="mlr"),
        job("b", {"name": "torch-mlp", "n_samples": 512}, 300, submit=0.2),
        job("c", {"name": "lasso"}, 8000, submit=0.4),
    ]


@pytest.mark.parametrize("policy", ["fifo", "srtf"])
def test_scheduler_runs_three_real_jobs_to_completion(policy, tmp_path) -> None:
    cl = cluster(1)  # one core-sized node: the jobs must queue
    out = run_local(three_jobs(), cl, make_policy(policy), root=tmp_path, strict=True)
    assert {j: str(v.state) for j, v in out.result.jobs.items()} == {"a": "finished", "b": "finished",
                                                                       "c": "finished"}
    assert not out.result.unfinished
    assert out.metrics.jobs_finished == 3 and out.metrics.avg_jct > 0
    assert all(out.status[j].state == "finished" for j in "abc")
    starts = [e for e in out.result.record if e.kind == EventKind.STARTED]
    assert len(starts) == 3  # one task slot: never two at once
    assert [e.job for e in starts][0] == "a"


def test_scheduler_srtf_preempts_a_real_job_and_it_resumes_from_its_checkpoint(tmp_path) -> None:
    # "long" must still have seconds to run when "short" arrives at 1.5 s on a fast, quiet machine
    # (60,000 iterations finished in 1.7 s there: nothing left to preempt).
    cl = cluster(1)
    specs = [
        job("first", {"name": "mlr"}, 300, model="mlr"),  # gives SRTF a speed history for 'mlr'
        job("long", {"name": "mlr", "data": "synthetic", "n_samples": 2000, "n_features": 20}, 300000,
            model="long", submit=0.1),
        job("short", {"name": "mlr"}, 400, model="mlr", submit=1.5),
    ]
    out = run_local(specs, cl, SRTF(preempt_margin=0.5, min_run_time=0.0), root=tmp_path, strict=True, report_interval=0.1)
    kinds = [(e.kind, e.job) for e in out.result.record if e.kind not in (EventKind.PROGRESS, EventKind.USED) and e.job]
    assert (EventKind.PAUSED, "long") in kinds and (EventKind.RESUMED, "long") in kinds
    assert kinds.index((EventKind.PAUSED, "long")) < kinds.index((EventKind.STARTED, "short")) \
        < kinds.index((EventKind.FINISHED, "short")) < kinds.index((EventKind.RESUMED, "long"))
    assert all(str(v.state) == "finished" for v in out.result.jobs.values())
    assert out.metrics.preemptions == 1
    assert out.status["long"].iterations == 300000
    restored = [t["restored_iteration"] for t in out.timings if t["kind"] == "start" and t["job"] == "long"]
    assert restored[0] is None and restored[1] > 0  # resumed where the pause checkpointed it


def test_scheduler_default_local_cluster_follows_the_machine() -> None:
    cl = local_cluster(cores=4, mem_gb=10)
    assert len(cl.nodes) == 4 and cl.nodes[0].capacity["cpu"] == 1 and cl.nodes[0].capacity["mem_gb"] == 2.0
    two = local_cluster(2, cores=4, mem_gb=10)
    assert two.nodes[0].capacity["cpu"] == 2
    with pytest.raises(ValueError, match="nodes must be >= 1"):
        local_cluster(0)


def test_scheduler_example_jobs_are_valid_for_real_execution() -> None:
    specs = load_jobs(EXAMPLE)
    assert len(specs) >= 4 and check_jobs(specs) == []


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False)
    app.command("run")(run)
    app.command("other")(lambda: None)  # two commands: typer keeps "run" as a subcommand
    return app


def test_scheduler_cli_run_prints_the_comparison_and_writes_json(tmp_path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "jobs:\n"
        "  - {id: m, workers: {count: 1, demand: {cpu: 1}}, iterations: 800, workload: {name: mlr}}\n"
        "  - {id: l, submit_time: 0.2, workers: {count: 1, demand: {cpu: 1}}, iterations: 5000,\n"
        "     workload: {name: lasso}}\n"
    )
    out_json = tmp_path / "out.json"
    res = CliRunner().invoke(_app(), ["run", str(jobs), "--policy", "fifo,srtf", "--nodes", "1",
                                      "--json", str(out_json)])
    assert res.exit_code == 0, res.output
    assert "fifo" in res.output and "srtf" in res.output and "avg" in res.output
    data = json.loads(out_json.read_text())
    assert set(data["policies"]) == {"fifo", "srtf"}
    assert data["real"]["fifo"]["jobs"]["m"]["state"] == "finished"


def test_scheduler_cli_run_rejects_bad_input_with_reasons(tmp_path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {id: x, workers: {count: 1, demand: {cpu: 1}}, iterations: 5,\n"
                    "     workload: {name: mlr, learning_rate: 1}}\n")
    app = _app()
    res = CliRunner().invoke(app, ["run", str(jobs), "--policy", "fifo"])
    assert res.exit_code == 2 and "workload.learning_rate is not a parameter of 'mlr'" in res.output
    res = CliRunner().invoke(app, ["run", str(jobs), "--policy", "nope"])
    assert res.exit_code == 2 and "unknown policy" in res.output
    res = CliRunner().invoke(app, ["run", str(jobs), "--policy", "fifo", "--ray-address", "auto"])
    assert res.exit_code == 2 and "--ray-address needs --backend ray" in res.output
    res = CliRunner().invoke(app, ["run", str(jobs), "--policy", "fifo", "--backend", "k8s"])
    assert res.exit_code == 2 and "unknown backend 'k8s'" in res.output
