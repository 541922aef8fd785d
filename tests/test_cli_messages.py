"""What the command line tells a user and a script: exit codes, messages that show user text as
written, suggestions for near-miss names, problems reported when the file is loaded (file:line),
plot formats that follow the suffix, --version and -h (issue 11, item 5)."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console
from rich.progress import Progress, TextColumn
from typer.testing import CliRunner

from cohabit import __version__
from cohabit.cli import app
from cohabit.cli_common import ExitCode, exit_code
from cohabit.policies import REGISTRY, make_policy
from cohabit.runtime.cli import LiveBoard
from cohabit.runtime.workloads import WorkloadError, parse_config
from cohabit.spec import simple_job

runner = CliRunner()
HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"


def _flat(text: str) -> str:
    """Output with rich's line wrapping undone, so a message can be matched whole."""
    return " ".join(text.split())


def _csv(tmp_path: Path, rows: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + rows)
    return path


# ------------------------------------------------------------------ exit codes
def test_exit_code_is_the_worst_job_outcome() -> None:
    def result(*states: str) -> SimpleNamespace:
        return SimpleNamespace(jobs={str(i): SimpleNamespace(state=s) for i, s in enumerate(states)})

    assert exit_code([result("finished", "stopped-early")]) is ExitCode.OK
    assert exit_code([result("finished", "rejected")]) is ExitCode.REJECTED
    assert exit_code([result("rejected", "pending"), result("finished")]) is ExitCode.UNFINISHED
    assert exit_code([result("paused")]) is ExitCode.UNFINISHED
    assert exit_code([result("cancelled")]) is ExitCode.UNFINISHED
    assert exit_code([result("finished"), result("pending", "failed", "rejected")]) is ExitCode.FAILED
    assert [int(c) for c in ExitCode] == [0, 2, 3, 4, 5]


def test_simulate_exit_codes_tell_finished_rejected_and_unfinished_apart(tmp_path: Path) -> None:
    fine = _csv(tmp_path, "0,1,0,100,resnet50,100,0\n1,2,1,100,resnet50,100,0\n", "fine.csv")
    res = runner.invoke(app, ["simulate", "--trace", str(fine), "--format", "tiresias", "--policy", "fifo"])
    assert res.exit_code == 0, res.output
    too_big = _csv(tmp_path, "0,128,0,100,resnet50,100,0\n1,2,1,100,resnet50,100,0\n", "big.csv")
    res = runner.invoke(app, ["simulate", "--trace", str(too_big), "--format", "tiresias", "--policy", "fifo"])
    assert res.exit_code == 3, res.output
    assert "exit code 3" in res.output and "rejected" in res.output
    # stopped at --horizon before the 100 s job ends (and one job still rejected): did not finish wins
    res = runner.invoke(app, ["simulate", "--trace", str(too_big), "--format", "tiresias", "--policy", "fifo",
                              "--horizon", "10"])
    assert res.exit_code == 4, res.output


def test_exit_codes_are_documented_in_help() -> None:
    for args in (["--help"], ["simulate", "--help"], ["run", "--help"]):
        res = runner.invoke(app, args, env={"COLUMNS": "200"})
        text = _flat(res.output)
        assert res.exit_code == 0
        assert "Exit codes of simulate and run: 0 every job finished; 2 bad input" in text
        assert "3 some job was rejected" in text and "5 some job failed" in text, args
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "| 3 |" in readme and "| 5 |" in readme


def test_run_exits_5_on_a_failed_job_and_shows_bracketed_job_ids(tmp_path: Path, monkeypatch) -> None:
    pkg = tmp_path / "userpkg"
    pkg.mkdir()
    (pkg / "tiny.py").write_text(textwrap.dedent("""
        class Count:
            def __init__(self, ctx):
                self.x = 0.0
            def step(self):
                self.x += 1.0
                return {"loss": 1.0 / self.x}
            def state_dict(self):
                return {"x": self.x}
            def load_state_dict(self, s):
                self.x = s["x"]

        class Crash(Count):
            def step(self):
                raise RuntimeError("boom")
    """))
    monkeypatch.syspath_prepend(str(pkg))  # LocalBackend passes sys.path on to its tasks
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(textwrap.dedent("""
        jobs:
          - id: "ok[/x]"
            workers: {count: 1, demand: {cpu: 1, mem_gb: 0.1}}
            iterations: 20
            workload: {entry: "tiny:Count"}
          - id: "[bold]crash"
            workers: {count: 1, demand: {cpu: 1, mem_gb: 0.1}}
            iterations: 20
            workload: {entry: "tiny:Crash"}
    """))
    res = runner.invoke(app, ["run", str(jobs), "--policy", "fifo", "--nodes", "1", "--max-restarts", "0"],
                        env={"COLUMNS": "200"})
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert res.exit_code == 5, res.output
    assert "ok[/x]" in res.output and "[bold]crash" in res.output
    assert "exit code 5" in res.output


def test_a_policy_that_reads_the_oracle_needs_it_and_never_runs_real_jobs(tmp_path: Path) -> None:
    """optimus-oracle declares uses_oracle: simulate without --oracle and run (no oracle for real jobs)
    refuse it with exit 2 and one line, before any work, never a traceback."""
    trace = tmp_path / "p.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\nn1,0,ncf,1,32768\n")
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--format", "pollux", "--policy", "optimus-oracle"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "allow it explicitly with --oracle" in _flat(res.output)
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--format", "pollux", "--policy", "optimus-oracle",
                              "--oracle"])
    assert res.exit_code == 0, res.output
    jobs = Path(__file__).resolve().parents[1] / "examples" / "real_jobs.yaml"  # refused before any job starts
    res = runner.invoke(app, ["run", str(jobs), "--policy", "optimus-oracle"], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "which real jobs do not have" in _flat(res.output)


def test_live_progress_survives_job_ids_that_look_like_markup() -> None:
    out = io.StringIO()
    console = Console(file=out, width=120)
    bar = Progress(TextColumn("[bold]{task.description}"), TextColumn("{task.fields[info]}"), console=console)
    specs = [simple_job("a[/x]", 1, iterations=10), simple_job("[red]b", 1, iterations=10)]
    LiveBoard(bar, specs, "srtf[oracle]")
    console.print(bar.get_renderable())  # as the live display draws it: unescaped, "[/x]" raises MarkupError
    assert "srtf[oracle] · a[/x]" in out.getvalue() and "[red]b" in out.getvalue()


# ------------------------------------------------------------------ user text shown as written
def test_bracketed_policy_name_is_shown_and_explained() -> None:
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--policy", "srtf[oracle]"])
    assert res.exit_code == 2
    text = _flat(res.output)
    assert "unknown policy 'srtf[oracle]'" in text
    assert "--policy srtf --oracle" in text


def test_paths_with_brackets_are_printed_whole(tmp_path: Path) -> None:
    trace = _csv(tmp_path, "0,1,0,100,resnet50,100,0\n", "runs/[abc]/t.csv")
    out = tmp_path / "runs" / "[abc]" / "r.json"
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--format", "tiresias", "--policy", "fifo",
                              "--json", str(out)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "runs/[abc]/t.csv" in res.output and "runs/[abc]/r.json" in res.output
    missing = tmp_path / "[abc]" / "nope.csv"
    res = runner.invoke(app, ["simulate", "--trace", str(missing), "--format", "tiresias"])
    assert res.exit_code == 2 and "[abc]/nope.csv" in _flat(res.output)


def test_oracle_tag_survives_in_progress_and_table() -> None:
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--limit", "10", "--policy", "srtf",
                              "--oracle"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "tiresias_480 · srtf[oracle]" in res.output  # the progress bar
    table_rows = [line for line in res.output.splitlines() if line.strip().startswith("srtf")]
    assert table_rows and table_rows[-1].strip().startswith("srtf[oracle]")


# ------------------------------------------------------------------ one name per policy, any case
def test_every_policy_is_shown_under_its_registry_name() -> None:
    for name in REGISTRY:
        assert make_policy(name).name == name
        assert make_policy(name, oracle=True).name in (name, f"{name}[oracle]")
    # parameters that change what the class calls itself keep the name the user can type back
    assert make_policy("drf:backfill=true:preemptive=true").name == "drf:backfill=True:preemptive=True"
    assert make_policy("static:by=job").name == "static:by=job"
    assert make_policy("srtf:preempt_margin=1", oracle=True).name == "srtf[oracle]:preempt_margin=1"


def test_policy_names_are_case_insensitive_and_the_table_uses_the_typed_name(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--limit", "10",
                              "--policy", "SRTF,Fifo-Backfill", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert list(json.loads(out.read_text())["policies"]) == ["srtf", "fifo-backfill"]
    assert "fifo+backfill" not in res.output
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--policy", "fifo+backfill"])
    assert res.exit_code == 2 and "did you mean 'fifo-backfill'?" in _flat(res.output)


# ------------------------------------------------------------------ near-miss trace names
def test_misspelt_embedded_trace_is_named_with_a_suggestion() -> None:
    res = runner.invoke(app, ["simulate", "--trace", "tiresias480"])
    text = _flat(res.output)
    assert res.exit_code == 2
    assert "unknown trace 'tiresias480'" in text and "did you mean 'tiresias_480'?" in text
    assert "--format" not in text


def test_yaml_trace_needs_no_format() -> None:
    path = Path(__file__).resolve().parents[1] / "examples" / "trace.yaml"
    res = runner.invoke(app, ["simulate", "--trace", str(path), "--policy", "fifo"])
    assert res.exit_code == 0, res.output


# ------------------------------------------------------------------ problems at load time, with file:line
def test_unknown_resource_in_a_trace_is_an_error_at_load_with_its_line(tmp_path: Path) -> None:
    trace = tmp_path / "t.yaml"
    trace.write_text(textwrap.dedent("""\
        jobs:
          - id: fine
            gpus: 1
            truth: {duration: 60}
          - id: typo
            workers: {count: 1, demand: {gpus: 1, cpu: 2}}
            truth: {duration: 60}
    """))
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--policy", "fifo"])
    text = _flat(res.output)
    assert res.exit_code == 2, res.output
    assert "t.yaml:5: job 'typo': workers.demand.gpus: unknown resource 'gpus' (did you mean 'gpu'?)" in text
    assert "cluster 'tiresias' has: " in text


def test_trace_demanding_what_a_user_cluster_lacks_is_named(tmp_path: Path) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text("name: lab\nnodes:\n  - {count: 2, capacity: {gpu: 4}}\n")
    trace = _csv(tmp_path, "0,1,0,100,resnet50,100,0\n1,1,5,100,resnet50,100,0\n")
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--format", "tiresias", "--cluster", str(cluster)])
    text = _flat(res.output)
    assert res.exit_code == 2, res.output
    assert "t.csv:2: job '0': workers.demand.cpu: unknown resource 'cpu'; cluster 'lab' has: gpu" in text
    assert "t.csv:3: job '1'" in text


def test_gpu_for_gpus_names_the_misspelt_field(tmp_path: Path) -> None:
    trace = tmp_path / "t.yaml"
    trace.write_text("jobs:\n  - id: a\n    gpu: 2\n    truth: {duration: 60}\n")
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--policy", "fifo"])
    text = _flat(res.output)
    assert res.exit_code == 2
    assert "t.yaml:3: field 'jobs[0].gpu': unknown field 'gpu' (did you mean 'gpus'?)" in text
    assert "workers" not in text.split("did you mean")[0]


def test_real_jobs_file_is_checked_at_load_with_lines(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(textwrap.dedent("""\
        jobs:
          - id: a
            workers: {count: 1, demand: {cpus: 1}}
            iterations: 100
            workload: {name: mlr, data: sample}
          - id: b
            workers: {count: 1, demand: {cpu: 1}}
            iterations: 100
            workload:
              name: mlr
              data: sampel
    """))
    res = runner.invoke(app, ["run", str(jobs), "--policy", "fifo", "--nodes", "1"])
    text = _flat(res.output)
    assert res.exit_code == 2, res.output
    assert "jobs.yaml:3: jobs[0].workers.demand.cpus: unknown resource 'cpus' (did you mean 'cpu'?)" in text
    assert "jobs.yaml:11: jobs[1].workload.data: " in text and "got 'sampel'" in text


def test_workload_options_are_checked_against_the_factory_signature() -> None:
    with pytest.raises(WorkloadError, match="workload.data must be one of sample, synthetic") as info:
        parse_config("j", {"name": "ps-lda", "data": "sampel"})
    assert info.value.field == "data"
    with pytest.raises(WorkloadError, match="workload.lr must be a number; got 'abc'"):
        parse_config("j", {"name": "mlr", "lr": "abc"})
    with pytest.raises(WorkloadError, match="without quotes"):
        parse_config("j", {"name": "torch-mlp", "lr": "1e-3"})  # a quoted "1e-3" is text
    with pytest.raises(WorkloadError, match="workload.hidden must be an integer; got True"):
        parse_config("j", {"name": "torch-mlp", "hidden": True})
    assert parse_config("j", {"name": "lasso", "lr": None, "data": "synthetic", "n_samples": 10}).params


# ------------------------------------------------------------------ plots in the suffix's format
@pytest.mark.parametrize(("suffix", "magic"), [(".svg", b"<?xml"), (".pdf", b"%PDF"), (".png", b"\x89PNG")])
def test_plot_is_written_in_the_format_its_suffix_names(tmp_path: Path, suffix: str, magic: bytes) -> None:
    plot = tmp_path / f"p{suffix}"
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--limit", "10", "--policy", "fifo",
                              "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    assert plot.read_bytes().startswith(magic)


def test_plot_suffix_without_a_format_is_refused_before_the_run(tmp_path: Path) -> None:
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--policy", "fifo",
                              "--plot", str(tmp_path / "p.txt")])
    assert res.exit_code == 2
    assert "--plot" in res.output and ".svg" in res.output
    assert "tiresias_480 on" not in res.output  # nothing was simulated


# ------------------------------------------------------------------ --version, -h, top-level help
def test_version_and_short_help() -> None:
    for flag in ("--version", "-V"):
        res = runner.invoke(app, [flag])
        assert res.exit_code == 0 and res.output.strip() == f"cohabit {__version__}"
    for args in (["-h"], ["simulate", "-h"], ["run", "-h"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and "Usage:" in res.output, args


def test_top_level_help_says_what_the_commands_are() -> None:
    res = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    text = _flat(res.output)
    assert "later issues" not in text
    for command in ("simulate", "demo", "run", "hyperband", "policies", "traces"):
        assert command in text


def test_a_policy_that_cannot_run_on_the_cluster_fails_before_any_work() -> None:
    """drl's weights fit the 6- and 30-server drl presets: another cluster is a clear exit 2, not a traceback."""
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--policy", "fifo,drl"])
    assert res.exit_code == 2, res.output
    assert "trained for 6 or 30 servers" in res.output and "Traceback" not in res.output
