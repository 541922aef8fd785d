"""The command line end to end: every trace format, JSON shape, plots, errors that name what is wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cohabit.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
REQUIRED = {"avg_jct", "median_jct", "p95_jct", "makespan", "avg_queueing_delay", "allocated_share", "used_share", "jobs_finished",
            "jobs_rejected", "preemptions", "decision_time_ms"}


def test_simulate_end_to_end_in_a_real_process(tmp_path: Path) -> None:
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    cmd = [sys.executable, "-m", "cohabit.cli", "simulate", "--trace", "tiresias_480", "--limit", "80",
           "--policy", "fifo,srtf", "--seed", "3", "--json", str(out), "--plot", str(png)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 0, res.stderr
    assert "tiresias_480" in res.stdout and "(default run:" in res.stdout
    data = json.loads(out.read_text())
    assert set(data["policies"]) == {"fifo", "srtf"}
    assert data["cluster"] == "tiresias" and "tiresias_480" in data["trace"]
    for metrics in data["policies"].values():
        assert REQUIRED <= set(metrics)
        assert metrics["jobs_finished"] == 80
        assert 0 < metrics["allocated_share"]["gpu"] <= 1
        assert 0 < metrics["used_share"]["gpu"] <= metrics["allocated_share"]["gpu"]
        assert set(metrics["decision_time_ms"]) >= {"mean", "p99"}
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("trace", "fmt", "cluster", "limit"),
    [
        ("tiresias_480", "tiresias", "tiresias", 50),
        ("philly_82k", "philly", "philly-800", 300),
        ("pollux_workload-1", "pollux", "pollux", 20),
        ("alibaba_openb", "alibaba", "alibaba-openb-1in8", 300),
        (str(ROOT / "examples" / "trace.yaml"), "cohabit", "tiresias", None),
    ],
)
def test_every_format_runs_on_its_default_preset(tmp_path: Path, trace: str, fmt: str, cluster: str,
                                                 limit: int | None) -> None:
    out = tmp_path / "r.json"
    args = ["simulate", "--trace", trace, "--format", fmt, "--policy", "fifo,srtf", "--json", str(out)]
    if limit:
        args += ["--limit", str(limit)]
    res = runner.invoke(app, args)
    # Alibaba's default run stops at 48 h with its month-long services still running: exit code 4
    assert res.exit_code == (4 if trace == "alibaba_openb" else 0), res.output
    data = json.loads(out.read_text())
    assert data["cluster"] == cluster
    for m in data["policies"].values():
        assert m["jobs_finished"] + m["jobs_rejected"] + m["jobs_pending_at_end"] == (limit or 5)
        assert m["jobs_finished"] > 0


def test_unknown_policy_and_format_list_the_known_ones() -> None:
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--policy", "fifo,nope"])
    assert res.exit_code == 2 and "nope" in res.output and "srtf" in res.output
    res = runner.invoke(app, ["simulate", "--trace", "x.csv", "--format", "slurm"])
    assert res.exit_code == 2 and "tiresias" in res.output and "alibaba" in res.output


def test_bad_rows_are_named_or_skipped(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                   "0,1,0,100,resnet50,100,0\n"
                   "1,two,5,100,resnet50,100,0\n"
                   "2,1,9,100,vgg16,50,0\n")
    res = runner.invoke(app, ["simulate", "--trace", str(bad), "--format", "tiresias", "--policy", "fifo"])
    assert res.exit_code == 2
    assert "bad.csv:3" in res.output and "num_gpu" in res.output
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["simulate", "--trace", str(bad), "--format", "tiresias", "--policy", "fifo",
                              "--skip-bad-rows", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "skipped" in res.output
    assert json.loads(out.read_text())["policies"]["fifo"]["jobs_finished"] == 2


def test_job_too_big_for_the_cluster_is_rejected_with_its_reason(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                     "0,128,0,100,resnet50,100,0\n1,2,1,100,resnet50,100,0\n")
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--format", "tiresias", "--policy", "fifo",
                              "--json", str(out)])
    assert res.exit_code == 3, res.output  # the run ended with a rejected job: documented exit code 3
    assert "rejected" in res.output and "gpu=128" in res.output
    m = json.loads(out.read_text())["policies"]["fifo"]
    assert (m["jobs_rejected"], m["jobs_finished"]) == (1, 1)


def test_oracle_flag_is_explicit_and_tagged(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--limit", "30", "--policy", "srtf",
                              "--oracle", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert set(json.loads(out.read_text())["policies"]) == {"srtf[oracle]"}


def test_pollux_artifact_physics_option(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    res = runner.invoke(app, ["simulate", "--trace", "pollux_workload-1", "--limit", "6", "--policy", "fifo",
                              "--physics", "pollux-artifact", "--json", str(out)])
    assert res.exit_code == 0, res.output
    plain = tmp_path / "d.json"
    assert runner.invoke(app, ["simulate", "--trace", "pollux_workload-1", "--limit", "6", "--policy", "fifo",
                               "--json", str(plain)]).exit_code == 0
    docs = [json.loads(p.read_text()) for p in (out, plain)]
    assert [d["physics"] for d in docs] == ["pollux-artifact", "cohabit"]
    avg = [d["policies"]["fifo"]["avg_jct"] for d in docs]
    assert avg[0] > avg[1]  # goodput (statistical efficiency) and start delays make jobs slower
    bad = runner.invoke(app, ["simulate", "--trace", "pollux_workload-1", "--physics", "fast"])
    assert bad.exit_code == 2 and "--physics" in bad.output and "pollux-artifact" in bad.output
