"""What the command line prints: the policy list, tables and progress in a file, --columns."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from rich.console import Console
from typer.testing import CliRunner

from cohabit.cli import app, policies_table
from cohabit.policies import DESCRIPTIONS, REGISTRY, make_policy

runner = CliRunner()


def test_every_policy_has_its_own_complete_one_line_description() -> None:
    assert set(DESCRIPTIONS) == set(REGISTRY)
    texts = list(DESCRIPTIONS.values())
    assert len(set(texts)) == len(texts), "two policies share a description"
    for name, text in DESCRIPTIONS.items():
        assert "\n" not in text and text.endswith(".") and 20 <= len(text) <= 90, name


def render(width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(policies_table())
    return buf.getvalue()


def test_policy_list_shows_whole_descriptions_and_which_accept_oracle() -> None:
    wide = render(400)
    lines = wide.splitlines()
    oracle = {n for n in REGISTRY if make_policy(n, oracle=True).uses_oracle}
    assert {"srtf", "tiresias-gittins"} <= oracle and "fifo" not in oracle
    for name in REGISTRY:
        row = next(line for line in lines if line.split()[:1] == [name])
        assert DESCRIPTIONS[name] in row, name  # whole, not cut at a line of the module docstring
        assert (row.split()[1] == "yes") == (name in oracle), name
    narrow = render(80)
    assert max(len(line) for line in narrow.splitlines()) <= 80 and "…" not in narrow
    flat = " ".join(narrow.split())
    for text in DESCRIPTIONS.values():
        assert " ".join(text.split()) in flat


def test_output_to_a_file_has_no_progress_bar_debris(tmp_path) -> None:
    """stdout and stderr redirected: no bar frames, one plain line per policy, tables uncut."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    cmd = [sys.executable, "-m", "cohabit.cli", "simulate", "--trace", "tiresias_480", "--limit", "30",
           "--policy", "fifo,srtf,tiresias"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert "━" not in res.stderr and "━" not in res.stdout
    for name in ("fifo", "srtf", "tiresias"):
        assert f"tiresias_480 · {name}: 30/30 jobs simulated in " in res.stderr
    assert "…" not in res.stdout


def test_columns_option_selects_and_checks_before_running() -> None:
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--limit", "10", "--policy", "fifo",
                              "--columns", "avg-jct,p95-jtc"])
    assert res.exit_code == 2 and "unknown column 'p95-jtc'" in res.output and "p95-jct" in res.output
    assert "fifo" not in res.output.split("error")[0]  # nothing ran
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--limit", "10", "--policy", "fifo",
                              "--columns", "makespan,decide-p99"])
    assert res.exit_code == 0, res.output
    assert "make-" in res.output and "p99" in res.output and "avg" not in res.output.split("make-")[0]


def test_real_run_job_table_fits_80_columns(monkeypatch) -> None:
    """`cohabit run`'s per-job table: every cell whole at 80 columns."""
    from types import SimpleNamespace

    import cohabit.runtime.cli as rcli
    from cohabit.engine.record import EventKind as K
    from cohabit.engine.record import Record

    rec = Record()
    jobs, status = {}, {}
    for i, name in enumerate(["mlr-synthetic", "lasso-sample-long", "mnist-mlr"]):
        rec.append(float(i), K.SUBMITTED, name)
        jobs[name] = SimpleNamespace(state="finished", end_time=100.0 + i * 1234.5, preemptions=i, reason="")
        status[name] = SimpleNamespace(metrics={"loss": 6.095e-05 * (i + 1), "accuracy": 0.8642}, iterations=240000,
                                       restarts=i, reason="", checkpoint_events=[])
    out = SimpleNamespace(result=SimpleNamespace(record=rec, jobs=jobs), status=status)
    buf = io.StringIO()
    monkeypatch.setattr(rcli, "console", Console(file=buf, width=80, color_system=None))
    rcli._print_jobs("srtf:preempt_margin=1", out)
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in text
    for name in jobs:
        row = next(line for line in text.splitlines() if line.strip().startswith(name))
        assert "240000" in row and "0.864" in row and "finished" in row


def test_real_run_writes_the_same_plot_and_per_job_json(tmp_path) -> None:
    """`cohabit run --plot --json`: the comparison figure of `simulate` and the per-job block."""
    import json

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {id: m, workers: {count: 1, demand: {cpu: 1}}, iterations: 600, workload: {name: mlr}}\n"
                    "  - {id: n, submit_time: 0.1, workers: {count: 1, demand: {cpu: 1}}, iterations: 300,\n"
                    "     workload: {name: mlr}}\n")
    png, out = tmp_path / "r.png", tmp_path / "r.json"
    res = runner.invoke(app, ["run", str(jobs), "--policy", "fifo", "--nodes", "1", "--plot", str(png),
                              "--json", str(out), "--columns", "avg-jct,makespan"])
    assert res.exit_code == 0, res.output
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 10_000
    block = json.loads(out.read_text())["policies"]["fifo"]["jobs"]
    assert block["id"] == ["m", "n"] and block["state"] == ["finished", "finished"]
    assert all(q is not None and q >= 0 for q in block["queueing"]) and all(j > 0 for j in block["jct"])
    assert "━" not in res.output and "fifo: 2/2 jobs finished in" in res.output
