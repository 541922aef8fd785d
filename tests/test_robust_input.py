"""Bad input is refused where it is parsed, with file:line: field, before anything is allocated per task.

Issue 12: huge counts, infinite times, deep YAML, alias bombs, recursive
aliases, non-UTF-8 bytes, floods of bad rows, bad numeric options and
unwritable output paths. Each test names the bound it relies on; removing the
bound makes the test fail (a traceback, a hang caught by the timeout, a crash,
or the wrong line).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cohabit.cli import app
from cohabit.policies.params import PolicyParamError
from cohabit.policies import make_policy
from cohabit.sim.traces import TraceRowError, load_trace
from cohabit.sim.traces.errors import TooManyBadRows
from cohabit.spec.limits import MAX_TASKS, MAX_YAML_DEPTH
from cohabit.spec.yamlio import SpecError, loads_cluster, loads_jobs, load_jobs

runner = CliRunner()
TIRESIAS_HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"


@contextmanager
def cpu_at_most(seconds: float) -> Iterator[None]:
    """Fail when the block spends more than ``seconds`` of this process's CPU time (``time.process_time``:
    unlike the wall clock it does not grow when a loaded machine keeps the process waiting)."""
    c0 = time.process_time()
    yield
    spent = time.process_time() - c0
    assert spent < seconds, f"took {spent:.2f} CPU s (bound {seconds:g})"


def _jobs_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        loads_jobs(text, "j.yaml")
    return info.value


# --- YAML shape ---------------------------------------------------------------------------------------
def test_deep_nesting_is_refused_with_its_line() -> None:
    deep = "[" * 5000 + "]" * 5000
    e = _jobs_error(f"jobs:\n  - id: a\n    gpus: 1\n    workload: {{x: {deep}}}\n")
    assert e.line == 4 and f"more than {MAX_YAML_DEPTH} levels" in e.message


def test_deep_nesting_of_40000_levels_does_not_crash_the_interpreter(tmp_path: Path) -> None:
    f = tmp_path / "deep.yaml"
    f.write_text("jobs:\n  - id: a\n    gpus: 1\n    workload: " + "[" * 40_000 + "]" * 40_000 + "\n")
    # in a child process: without the depth guard the YAML composer overflows the C stack (exit -11)
    res = subprocess.run([sys.executable, "-m", "cohabit.cli", "simulate", "--trace", str(f), "--format", "cohabit"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "levels deep" in res.stderr, (res.returncode, res.stderr[-500:])


def _bomb(levels: int) -> str:
    text = "jobs:\n  - id: a\n    gpus: 1\n    workload:\n      l0: &l0 [x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, levels):
        text += f"      l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n"
    return text


def test_alias_bomb_is_refused_quickly() -> None:
    with cpu_at_most(5):
        e = _jobs_error(_bomb(9))  # 9**9 scalars if expanded
    assert "aliases expand to more than" in e.message and e.line is not None and e.line >= 5


def test_small_alias_use_still_loads() -> None:
    jobs = loads_jobs(_bomb(3))
    assert jobs[0].workload is not None and len(jobs[0].workload["l2"]) == 9


def test_recursive_alias_is_refused() -> None:
    e = _jobs_error("jobs:\n  - id: a\n    gpus: 1\n    workload: &r {x: *r}\n")
    assert "recursive YAML alias" in e.message and e.line == 4


# --- counts, sizes, times, lengths ---------------------------------------------------------------------
@pytest.mark.parametrize("item, field, words", [
    ("{id: a, gpus: 100000000}", "jobs[0].gpus", f"<= {MAX_TASKS}"),
    ("{id: a, gpus: 1e30}", "jobs[0].gpus", f"<= {MAX_TASKS}"),
    ("{id: a, gpus: .inf}", "jobs[0].gpus", f"<= {MAX_TASKS}"),
    ("{id: a, gpus: .nan}", "jobs[0].gpus", "greater than 0"),
    ("{id: a, architecture: allreduce, workers: {count: 100000000, demand: {cpu: 1}}}",
     "jobs[0].workers.count", "less than or equal"),
    ("{id: a, architecture: allreduce, workers: {count: 9223372036854775808, demand: {cpu: 1}}}",
     "jobs[0].workers.count", "less than or equal"),
    ("{id: a, gpus: 1, iterations: 123456789012345678901}", "jobs[0].iterations", "less than or equal"),
    ("{id: a, gpus: 1, submit_time: .inf}", "jobs[0].submit_time", "finite"),
    ("{id: a, gpus: 1, submit_time: 1e12}", "jobs[0].submit_time", "less than or equal"),
    ("{id: a, gpus: 1, deadline: .inf}", "jobs[0].deadline", "finite"),
    ("{id: " + "x" * 5000 + ", gpus: 1}", "jobs[0].id", "at most 256 characters"),
    ("{id: a, workers: {count: 1, demand: {cpu: 1e300}}}", "jobs[0].workers.demand", "<= 1e+09"),
])
def test_huge_or_infinite_job_fields_are_field_errors(item: str, field: str, words: str) -> None:
    with cpu_at_most(2):
        e = _jobs_error(f"jobs:\n  - {item}\n")
    assert (e.file, e.line, e.field) == ("j.yaml", 2, field) and words in e.message, str(e)
    assert len(str(e)) < 400  # a 5,000-character value is not echoed whole


def test_huge_node_capacity_and_node_counts_are_refused() -> None:
    with pytest.raises(SpecError) as info:
        loads_cluster("name: c\nnodes:\n  - {name: n, capacity: {gpu: 100000000, cpu: 1}}\n", "c.yaml")
    assert info.value.line == 3 and "at most 1024 GPUs" in info.value.message
    with cpu_at_most(10), pytest.raises(SpecError) as info:
        loads_cluster("name: c\nnodes:\n" + "  - {count: 100000, capacity: {gpu: 1}}\n" * 50, "c.yaml")
    assert "more than 100,000 nodes" in info.value.message


@pytest.mark.parametrize("row, column", [
    ("j1,100000000,0,10,m,10,1", "num_gpu"),
    ("j1,9223372036854775808,0,10,m,10,1", "num_gpu"),
    ("j1,1,0,123456789012345678901,m,10,1", "iterations"),
    ("j1,1,1e300,10,m,10,1", "submit_time"),
    ("j1,1,0,10,m,1e300,1", "duration"),
])
def test_huge_csv_values_name_their_column(tmp_path: Path, row: str, column: str) -> None:
    f = tmp_path / "t.csv"
    f.write_text(TIRESIAS_HEADER + "j0,1,0,10,m,10,1\n" + row + "\n")
    with pytest.raises(TraceRowError) as info:
        load_trace(f, "tiresias")
    assert (info.value.line, info.value.column) == (3, column), str(info.value)


# --- bytes ---------------------------------------------------------------------------------------------
def test_non_utf8_byte_names_its_own_line_in_a_csv(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_bytes(TIRESIAS_HEADER.encode() + b"j1,1,0,10,m,10,1\n" * 3000 + b"j\xff,1,0,10,m,10,1\n")
    with pytest.raises(TraceRowError) as info:
        load_trace(f, "tiresias")
    assert info.value.line == 3002 and "not UTF-8" in info.value.message


def test_non_utf8_byte_names_its_own_line_in_yaml(tmp_path: Path) -> None:
    f = tmp_path / "j.yaml"
    f.write_bytes(b"jobs:\n" + b"  - {id: a, gpus: 1}\n" + b"# \xfe\n")
    with pytest.raises(SpecError) as info:
        load_jobs(f)
    assert info.value.line == 3 and "not UTF-8" in info.value.message


# --- bad rows: capped, summarised; excluded rows reported ------------------------------------------------
def test_skip_bad_rows_is_capped(tmp_path: Path) -> None:
    f = tmp_path / "g.csv"
    f.write_text(TIRESIAS_HEADER + "x,y\n" * 5000)
    with pytest.raises(TooManyBadRows) as info:
        load_trace(f, "tiresias", skip_bad_rows=True, max_bad_rows=100)
    assert info.value.line == 102 and "more than 100 malformed rows" in info.value.message
    assert len(load_trace(f, "tiresias", skip_bad_rows=True, max_bad_rows=5000).skipped) == 5000


def test_cli_summarises_a_flood_of_bad_rows(tmp_path: Path) -> None:
    f = tmp_path / "g.csv"
    f.write_text(TIRESIAS_HEADER + "j0,1,0,10,m,10,1\n" + "x,y\n" * 500)
    res = runner.invoke(app, ["simulate", "--trace", str(f), "--format", "tiresias", "--skip-bad-rows",
                              "--policy", "fifo"])
    assert res.exit_code == 0, res.output
    assert res.output.count("skipped ") <= 25 and "500 rows in all" in res.output
    res = runner.invoke(app, ["simulate", "--trace", str(f), "--format", "tiresias", "--skip-bad-rows",
                              "--max-bad-rows", "10", "--policy", "fifo"])
    assert res.exit_code == 2 and "more than 10 malformed rows" in res.output


def test_cli_reports_excluded_alibaba_rows(tmp_path: Path) -> None:
    f = tmp_path / "a.csv"
    f.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                 "deletion_time,scheduled_time\n"
                 "p1,1000,1024,1,1000,,LS,Running,0,100,10\n"
                 "p2,1000,1024,1,1000,,LS,Pending,0,,\n")
    res = runner.invoke(app, ["simulate", "--trace", str(f), "--format", "alibaba", "--policy", "fifo"])
    assert res.exit_code == 0, res.output
    assert "excluded" in res.output and "never scheduled" in res.output and "1 rows excluded" in res.output


# --- command-line options --------------------------------------------------------------------------------
@pytest.mark.parametrize("args, words", [
    (["--seed", "-1"], "--seed"), (["--seed", "4294967296"], "--seed"),
    (["--horizon", "-5"], "--horizon"), (["--horizon", "nan"], "--horizon"),
    (["--limit", "-1"], "--limit"), (["--max-bad-rows", "-1"], "--max-bad-rows"),
    (["--policy", "gandiva:slice_length=1e-9"], "shortest interval"),
    (["--policy", "srtf:preempt_margin=.nan"], "preempt_margin"),
    (["--policy", "srtf:preempt_margin=1e300"], "preempt_margin"),
])
def test_bad_simulate_options_fail_cleanly(args: list[str], words: str) -> None:
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--limit", "5", *args])
    assert res.exit_code == 2 and words in res.output and res.exception is None or isinstance(
        res.exception, SystemExit), res.output


def test_output_paths_are_checked_before_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for args in (["--json", str(blocker / "r.json")], ["--json", str(tmp_path)],
                 ["--plot", str(tmp_path / "r.txt")], ["--plot", str(blocker / "r.png")]):
        res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--policy", "fifo", *args])
        assert res.exit_code == 2 and args[0] in res.output, res.output
        assert "jobs_finished" not in res.output  # refused before the simulation ran


@pytest.mark.parametrize("args, words", [
    (["--max-restarts", "-1"], "--max-restarts"), (["--checkpoint-interval", "-1"], "--checkpoint-interval"),
    (["--checkpoint-interval", "nan"], "--checkpoint-interval"), (["--bandwidth-mbps", "nan"], "--bandwidth-mbps"),
    (["--nodes", "0"], "--nodes"),
])
def test_bad_run_options_fail_before_any_job_starts(tmp_path: Path, args: list[str], words: str) -> None:
    jobs = tmp_path / "j.yaml"
    jobs.write_text("jobs:\n  - {id: a, workers: {count: 1, demand: {cpu: 1}}, iterations: 5, "
                    "workload: {name: mlr}}\n")
    res = runner.invoke(app, ["run", str(jobs), "--policy", "fifo", *args])
    assert res.exit_code == 2 and words in res.output, res.output


def test_run_refuses_a_workdir_that_is_a_file(tmp_path: Path) -> None:
    jobs = tmp_path / "j.yaml"
    jobs.write_text("jobs:\n  - {id: a, workers: {count: 1, demand: {cpu: 1}}, iterations: 5, "
                    "workload: {name: mlr}}\n")
    blocker = tmp_path / "f"
    blocker.write_text("x")
    res = runner.invoke(app, ["run", str(jobs), "--policy", "fifo", "--workdir", str(blocker)])
    assert res.exit_code == 2 and "--workdir" in res.output


def test_ray_address_that_refuses_connections_fails_fast() -> None:
    from cohabit.runtime.ray_backend import check_reachable

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    # "refused": the answer of a port nobody listens on, at once (not a connect timeout waited out)
    with pytest.raises(ConnectionError, match="nothing accepts connections at .*[Rr]efused"):
        check_reachable(f"127.0.0.1:{port}")
    with pytest.raises(ValueError, match="HOST:PORT"):
        check_reachable("127.0.0.1")


def test_policy_parameters_must_be_finite_and_ticks_not_tiny() -> None:
    with pytest.raises(PolicyParamError, match="shortest interval"):
        make_policy("gandiva:slice_length=1e-9")
    with pytest.raises(PolicyParamError, match="finite"):
        make_policy("srtf:preempt_margin=.inf")
    assert make_policy("gandiva:slice_length=0.5").wake_interval == 0.5  # (its ticks, asked for by next_decision_time)


def test_real_run_refuses_a_submit_time_it_would_wait_years_for(tmp_path: Path) -> None:
    jobs = tmp_path / "j.yaml"
    jobs.write_text("jobs:\n  - {id: a, workers: {count: 1, demand: {cpu: 1}}, iterations: 5, submit_time: 1e9, "
                    "workload: {name: mlr}}\n")
    res = runner.invoke(app, ["run", str(jobs), "--policy", "fifo"])  # (waiting would hang to the timeout)
    assert res.exit_code == 2 and "submit_time" in res.output


@pytest.mark.parametrize("args", [["--seed", "-1"], ["--synthetic-jobs", "0"], ["--out", "/proc/none/x"]])
def test_bad_demo_options_fail_before_any_work(args: list[str]) -> None:
    res = runner.invoke(app, ["demo", "--no-real", *args])
    assert res.exit_code == 2 and args[0] in res.output, res.output
