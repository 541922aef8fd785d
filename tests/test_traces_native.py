"""cohabit's own YAML trace format: jobs with a truth mapping, errors with file:line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from cohabit.sim.traces import TraceRowError, load_trace
from cohabit.sim.traces.native import dump
from cohabit.sim.truth import JobTruth

GOOD = """\
cluster: pollux
jobs:
  - id: resnet-a
    gpus: 4
    submit_time: 30
    model: resnet50
    iterations: 2000
    tenant: vision
    truth: {iterations: 2000, duration: 1860}
  - id: cifar
    architecture: allreduce
    workers: {count: 2, demand: {gpu: 1, cpu: 4, mem_gb: 16}}
    n_min: 1
    n_max: 8
    truth: {iterations: 39063, app: cifar10}
  - id: quick
    gpus: 1
    truth: {duration: 12.5}
"""


def _yaml(tmp_path: Path, text: str, name: str = "jobs.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_native_loads_specs_truth_and_cluster(tmp_path: Path) -> None:
    load = load_trace(_yaml(tmp_path, GOOD), "cohabit")
    assert (load.fmt, load.default_cluster, load.skipped) == ("cohabit", "pollux", [])
    assert [j.spec.id for j in load.jobs] == ["cifar", "quick", "resnet-a"]  # by submit time, then id
    by_id = {j.spec.id: j for j in load.jobs}
    a = by_id["resnet-a"]
    assert (a.spec.workers.count, a.spec.tenant, a.spec.submit_time) == (4, "vision", 30.0)
    assert a.truth == JobTruth(iterations=2000, duration=1860.0, ref_workers=4)
    assert by_id["cifar"].truth == JobTruth(iterations=39063, ref_workers=2, app="cifar10")
    assert by_id["cifar"].spec.max_workers == 8
    assert by_id["quick"].truth == JobTruth(iterations=13, duration=12.5, ref_workers=1)


def test_native_bare_list_and_default_cluster(tmp_path: Path) -> None:
    path = _yaml(tmp_path, "- {id: a, gpus: 2, truth: {duration: 5}}\n", "jobs.yml")
    load = load_trace(path)  # .yml: format inferred
    assert (load.default_cluster, len(load.jobs)) == ("tiresias", 1)


@pytest.mark.parametrize(
    ("job", "line", "field", "message"),
    [
        ("  - id: x\n    gpus: 1\n", 2, "jobs[0].truth", "missing: give truth"),
        ("  - id: x\n    gpus: 1\n    truth: {iterations: 0}\n", 4, "jobs[0].truth.iterations",
         "expected an integer >= 1, got 0"),
        ("  - id: x\n    gpus: 1\n    truth:\n      duration: -5\n", 5, "jobs[0].truth.duration",
         "expected a number > 0, got -5"),
        ("  - id: x\n    gpus: 1\n    truth: {speed: 3}\n", 4, "jobs[0].truth.speed", "unknown key"),
        ("  - id: x\n    gpus: 1\n    truth: {app: cifar10}\n", 4, "jobs[0].truth", "give iterations, duration"),
        ("  - id: x\n    workers: {count: -1, demand: {gpu: 1}}\n    truth: {duration: 5}\n", 3,
         "jobs[0].workers.count", "greater than or equal to 0"),
        ("  - 17\n", 2, "jobs[0]", "a job must be a mapping"),
    ],
)
def test_native_bad_job_names_line_and_field(tmp_path: Path, job: str, line: int, field: str, message: str) -> None:
    path = _yaml(tmp_path, "jobs:\n" + job)
    with pytest.raises(TraceRowError) as info:
        load_trace(path, "cohabit")
    e = info.value
    assert (e.line, e.column) == (line, field), str(e)
    assert message in e.message
    assert str(e).startswith(f"{path}:{line}: field '{field}': ")


def test_native_skip_bad_rows_skips_jobs_and_reports(tmp_path: Path) -> None:
    text = GOOD + (
        "  - id: bad\n    gpus: 0\n    truth: {duration: 5}\n"
        "  - id: cifar\n    gpus: 1\n    truth: {duration: 3}\n"
    )
    path = _yaml(tmp_path, text)
    with pytest.raises(TraceRowError, match=r"jobs\.yaml:20: field 'jobs\[3\]\.gpus': .*greater than 0"):
        load_trace(path, "cohabit")
    load = load_trace(path, "cohabit", skip_bad_rows=True)
    assert len(load.jobs) == 3
    assert [e.line for e in load.skipped] == [20, 22]
    assert "duplicate job id 'cifar' (first on line 10)" in str(load.skipped[1])


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("jobs: [\n", 2, "YAML syntax error"),
        ("", 1, "the file is empty"),
        ("cluster: mars\njobs: []\n", 1, "expected a cluster preset"),
        ("jobz: []\n", 1, "unknown top-level key"),
        ("jobs: 3\n", 1, "got int"),
    ],
)
def test_native_bad_file_always_raises(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = _yaml(tmp_path, text)
    with pytest.raises(TraceRowError) as info:
        load_trace(path, "cohabit", skip_bad_rows=True)
    assert info.value.line == line and message in str(info.value)


def test_native_dump_round_trips(tmp_path: Path) -> None:
    original = load_trace("tiresias_480", limit=50).jobs + load_trace("pollux_workload-1", limit=20).jobs
    path = tmp_path / "out.yaml"
    dump(original, path, cluster="tiresias")
    again = load_trace(path)
    key = lambda j: j.spec.id  # noqa: E731
    assert sorted(again.jobs, key=key) == sorted(original, key=key)
    assert again.default_cluster == "tiresias"


def test_native_dump_rejects_unknown_cluster() -> None:
    with pytest.raises(ValueError, match="known presets"):
        dump([], cluster="mars")


def test_dump_quotes_strings_that_would_read_back_as_numbers(tmp_path) -> None:
    """The loader reads YAML 1.2 exponent floats (1e-3, 6214e9): a tenant or id that looks like one
    must be written quoted, or it comes back as a number (and fails the spec's string fields)."""
    from cohabit.sim.traces import load_trace
    from cohabit.sim.traces.native import dump
    from cohabit.sim.truth import JobTruth, TraceJob
    from cohabit.spec.job import simple_job

    jobs = [TraceJob(simple_job("1e5", gpus=1, tenant="6214e9"), JobTruth(iterations=10, duration=10.0))]
    path = tmp_path / "t.yaml"
    dump(jobs, path)
    back = load_trace(path, "cohabit").jobs[0]
    assert back.spec.tenant == "6214e9" and back.spec.id == "1e5"
