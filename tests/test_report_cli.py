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
