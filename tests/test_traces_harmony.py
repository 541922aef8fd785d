"""Harmony PS trace format: exact round trip of the generated workload, errors naming file:line:column, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cohabit.cli import app
from cohabit.sim.harmony_workload import generate, ps_job
from cohabit.sim.traces import EMBEDDED, TraceRowError, load_trace
from cohabit.sim.traces._common import sort_jobs
from cohabit.sim.traces.harmony import REQUIRED, write_csv
from cohabit.sim.truth import PSTruth
from cohabit.spec.cluster import preset

HEADER = ",".join(REQUIRED)
GOOD = "j1,0,mlr,100,78.4,12.0,320.0,3.0,2.0"


def _write(tmp_path: Path, *lines: str) -> Path:
    p = tmp_path / "ps.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_embedded_trace_is_the_generated_workload_exactly() -> None:
    assert EMBEDDED["harmony_80"] == ("harmony_80.csv", "harmony")
    load = load_trace("harmony_80")
    assert (load.fmt, load.default_cluster, len(load.jobs)) == ("harmony", "harmony", 80)
    assert load.jobs == sort_jobs(generate(n_machines=100, seed=0, mean_gap_s=240.0))
    assert preset("harmony").name == "harmony" and len(preset("harmony").nodes) == 100


def test_round_trip_of_a_written_trace(tmp_path: Path) -> None:
    jobs = sort_jobs(generate(n_machines=100, seed=3, mean_gap_s=0.0, hyper=2))
    write_csv(jobs, tmp_path / "t.csv")
    assert load_trace(tmp_path / "t.csv", "harmony").jobs == jobs


def test_optional_columns_default_to_exact_profile(tmp_path: Path) -> None:
    job = load_trace(_write(tmp_path, HEADER, GOOD), "harmony").jobs[0]
    assert job.truth.ps == PSTruth(t_cpu1=320.0, t_pull=3.0, t_push=2.0, input_gb=78.4, model_gb=12.0)
    assert job.truth.iterations == 100
    assert job.spec.workload["profile"] == {"dop": 16, "compute_s": 20.0, "comm_s": 5.0}
    assert job.spec.n_max == 100
    ref = ps_job("j1", job.truth.ps, 100, n_machines=100, app="mlr")
    assert job.spec.workers == ref.spec.workers


@pytest.mark.parametrize(("row", "column", "expected"), [
    ("j1,0,mlr,0,78.4,12.0,320.0,3.0,2.0", "iterations", "an integer >= 1"),
    ("j1,-1,mlr,100,78.4,12.0,320.0,3.0,2.0", "submit_time", "a number >= 0"),
    ("j1,0,mlr,100,78.4,12.0,zero,3.0,2.0", "t_cpu1", "a number > 0"),
    ("j1,0,mlr,100,78.4,12.0,320.0,0,0", "t_push", "t_pull + t_push > 0"),
    ("j1,0,,100,78.4,12.0,320.0,3.0,2.0", "app", "an application name"),
    ("j1,0,mlr,100,-2,12.0,320.0,3.0,2.0", "input_gb", "a number >= 0"),
])
def test_bad_rows_name_file_line_and_column(tmp_path: Path, row: str, column: str, expected: str) -> None:
    p = _write(tmp_path, HEADER, GOOD.replace("j1", "j0"), row)
    with pytest.raises(TraceRowError) as e:
        load_trace(p, "harmony")
    assert (e.value.file, e.value.line, e.value.column) == (str(p), 3, column)
    assert expected in str(e.value) and str(e.value).startswith(f"{p}:3: column {column!r}")
    load = load_trace(p, "harmony", skip_bad_rows=True)
    assert [j.spec.id for j in load.jobs] == ["j0"] and len(load.skipped) == 1


def test_missing_column_and_duplicate_id(tmp_path: Path) -> None:
    with pytest.raises(TraceRowError, match="column 't_pull': missing required column"):
        load_trace(_write(tmp_path, HEADER.replace(",t_pull", ""), "j1,0,mlr,100,78.4,12.0,320.0,2.0"), "harmony")
    with pytest.raises(TraceRowError, match="duplicate job id 'j1'"):
        load_trace(_write(tmp_path, HEADER, GOOD, GOOD), "harmony")


def test_cli_simulates_the_embedded_trace_under_the_three_harmony_policies(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["simulate", "--trace", "harmony_80", "--limit", "16", "--policy",
                                   "harmony,harmony-isolated,harmony-naive", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "cluster harmony (100 nodes" in res.output
    data = json.loads(out.read_text())
    assert data["cluster"] == "harmony"
    for name in ("harmony", "harmony-isolated", "harmony-naive"):
        assert data["policies"][name]["jobs_finished"] == 16, data["policies"][name]
