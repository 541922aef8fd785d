"""Malformed traces: file:line and column in every error; skip_bad_rows skips and reports."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from cohabit.sim.traces import TraceRowError, load_trace

TIRESIAS_HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster"
POLLUX_HEADER = "name,time,application,num_replicas,batch_size"
ALIBABA_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
                  "scheduled_time")


def _write(tmp_path: Path, name: str, header: str, *rows: str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_error_text_names_file_line_and_column() -> None:
    e = TraceRowError("philly_82k.csv", 17, "num_gpus", "expected an integer >= 1, got 'abc'")
    assert str(e) == "philly_82k.csv:17: column 'num_gpus': expected an integer >= 1, got 'abc'"
    assert isinstance(e, ValueError)
    assert str(TraceRowError("a.csv", 3, None, "row has 2 fields")) == "a.csv:3: row has 2 fields"
    copy = pickle.loads(pickle.dumps(e))
    assert copy == e and str(copy) == str(e)


def test_philly_bad_gpu_count(tmp_path: Path) -> None:
    path = _write(tmp_path, "philly_82k.csv", PHILLY_HEADER,
                  "2017-10-09 07:01:55,66.0,1,66.0,11cb48", "2017-10-09 07:01:56,6.0,abc,6.0,11cb48")
    with pytest.raises(TraceRowError) as info:
        load_trace(path, "philly")
    e = info.value
    assert (Path(e.file).name, e.line, e.column) == ("philly_82k.csv", 3, "num_gpus")
    assert str(e).endswith("philly_82k.csv:3: column 'num_gpus': expected an integer >= 1, got 'abc'")


@pytest.mark.parametrize(
    ("row", "column", "message"),
    [
        ("2017-10-09 07:01:55,0,1,0,c", "duration", "expected a number > 0, got '0'"),
        ("2017-10-09 07:01:55,-5,1,0,c", "duration", "expected a number > 0, got '-5'"),
        ("2017-10-09 07:01:55,nan,1,0,c", "duration", "expected a number > 0, got 'nan'"),
        ("2017-13-09 07:01:55,5,1,5,c", "timestamp",
         "expected a time 'YYYY-MM-DD HH:MM:SS', got '2017-13-09 07:01:55'"),
        ("2017-10-09T07:01:55,5,1,5,c", "timestamp", "expected a time"),
        ("2017-10-09 07:01:55,5,0,5,c", "num_gpus", "expected an integer >= 1, got '0'"),
        ("2017-10-09 07:01:55,5,1.5,5,c", "num_gpus", "expected an integer >= 1, got '1.5'"),
        ("2017-10-09 07:01:55,5,1_0,5,c", "num_gpus", "expected an integer >= 1, got '1_0'"),
        ("2017-10-09 07:01:55,5,1,5,", "cluster", "expected a virtual cluster id, got ''"),
        ("2017-10-09 07:01:55,5,1", None, "row has 3 fields but the header has 5"),
    ],
)
def test_philly_bad_rows(tmp_path: Path, row: str, column: str | None, message: str) -> None:
    path = _write(tmp_path, "p.csv", PHILLY_HEADER, "2017-10-09 07:00:00,5,1,5,c", row)
    with pytest.raises(TraceRowError) as info:
        load_trace(path, "philly")
    assert (info.value.line, info.value.column) == (3, column)
    assert message in info.value.message


def test_integral_float_counts_are_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path, "p.csv", PHILLY_HEADER, "2017-10-09 07:00:00,5,4.0,20,c")
    assert load_trace(path, "philly").jobs[0].spec.workers.count == 4


def test_skip_bad_rows_reports_and_continues(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.csv", TIRESIAS_HEADER,
                  "0,4,0,271,inception3,128,33",
                  "1,x,33,241,vgg16,211,32",
                  "",
                  "2,8,65,8707,googlenet,-3,31",
                  "3,1,70,10,alexnet,5,0",
                  "3,1,80,10,alexnet,5,0")
    with pytest.raises(TraceRowError, match=r"t\.csv:3: column 'num_gpu'"):
        load_trace(path, "tiresias")
    load = load_trace(path, "tiresias", skip_bad_rows=True)
    assert [j.spec.id for j in load.jobs] == ["0", "3"]
    assert [(e.line, e.column) for e in load.skipped] == [(3, "num_gpu"), (5, "duration"), (7, "job_id")]
    assert "duplicate job id '3' (first on line 6)" in str(load.skipped[2])


def test_missing_required_column_names_column_and_header_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.csv", "job_id,num_gpu,submit_time,iterations,duration", "0,1,0,1,1")
    for skip in (False, True):
        with pytest.raises(TraceRowError) as info:
            load_trace(path, "tiresias", skip_bad_rows=skip)
        assert (info.value.line, info.value.column) == (1, "model_name")
        assert "missing required column" in str(info.value)
        assert "header has: job_id, num_gpu, submit_time, iterations, duration" in str(info.value)


def test_optional_columns_may_be_missing(tmp_path: Path) -> None:
    path = _write(tmp_path, "p.csv", "cluster,num_gpus,duration,timestamp", "c,2,10,2017-10-09 07:00:00")
    job = load_trace(path, "philly").jobs[0]
    assert (job.spec.workers.count, job.truth.duration) == (2, 10.0)


def test_empty_file_and_duplicate_header(tmp_path: Path) -> None:
    empty = tmp_path / "e.csv"
    empty.write_text("\n\n")
    with pytest.raises(TraceRowError, match="e.csv:1: empty file"):
        load_trace(empty, "pollux")
    dup = _write(tmp_path, "d.csv", POLLUX_HEADER + ",name", "a,1,cifar10,1,128,a")
    with pytest.raises(TraceRowError, match="column 'name': duplicate column name"):
        load_trace(dup, "pollux")


def test_header_only_file_has_no_jobs(tmp_path: Path) -> None:
    path = _write(tmp_path, "p.csv", POLLUX_HEADER)
    load = load_trace(path, "pollux")
    assert (load.jobs, load.skipped) == ([], [])


def test_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(("\ufeff" + TIRESIAS_HEADER + "\n0,1,0,1,m,1,0\n").encode())
    assert len(load_trace(path, "tiresias").jobs) == 1


def test_not_utf8_is_a_trace_error(tmp_path: Path) -> None:
    path = tmp_path / "bin.csv"
    path.write_bytes(TIRESIAS_HEADER.encode() + b"\n0,1,0,1,m\xff\xfe,1,0\n")
    with pytest.raises(TraceRowError, match="not UTF-8"):
        load_trace(path, "tiresias")


@pytest.mark.parametrize(
    ("row", "column", "message"),
    [
        ("a,1,gpt,1,128", "application",
         "expected one of bert, cifar10, deepspeech2, imagenet, ncf, yolov3, got 'gpt'"),
        ("a,1,cifar10,65,2048", "num_replicas", "expected an integer in [1, 64], got '65'"),
        ("a,1,cifar10,4,64", "batch_size", "in [128, 4096], got 64"),
        ("a,-1,cifar10,4,512", "time", "expected a number >= 0, got '-1'"),
        (",1,cifar10,4,512", "name", "expected a job name, got ''"),
    ],
)
def test_pollux_bad_rows(tmp_path: Path, row: str, column: str, message: str) -> None:
    path = _write(tmp_path, "w.csv", POLLUX_HEADER, row)
    with pytest.raises(TraceRowError) as info:
        load_trace(path, "pollux")
    assert (info.value.line, info.value.column) == (2, column)
    assert message in info.value.message


@pytest.mark.parametrize(
    ("row", "column", "message"),
    [
        ("p,1000,1024,1,1200,,LS,Running,0,10,0", "gpu_milli", "expected an integer in [0, 1000], got '1200'"),
        ("p,1000,1024,0,500,,LS,Running,0,10,0", "gpu_milli", "expected 0 for a CPU-only pod"),
        ("p,1000,1024,1,0,,LS,Running,0,10,0", "gpu_milli", "for a pod with num_gpu 1, got 0"),
        ("p,1000,1024,2,500,,LS,Running,0,10,0", "gpu_milli", "expected 1000 for a multi-GPU pod"),
        ("p,1000,1024,1,500,,LS,Running,5,10,4", "scheduled_time", "expected a time >= creation_time (5), got 4"),
        ("p,1000,1024,1,500,,LS,Running,0,3,4", "deletion_time", "expected a time >= scheduled_time (4), got 3"),
        ("p,1000,1024,1,500,,LS,Running,0,,4", "deletion_time", "got '' for a scheduled pod"),
        ("p,0,0,0,0,,LS,Running,0,5,1", None, "pod requests no cpu, memory or GPU"),
        ("p,1000,1024,1,500,,,Running,0,5,1", "qos", "expected a QoS class, got ''"),
    ],
)
def test_alibaba_bad_rows(tmp_path: Path, row: str, column: str | None, message: str) -> None:
    path = _write(tmp_path, "pods.csv", ALIBABA_HEADER, row)
    with pytest.raises(TraceRowError) as info:
        load_trace(path, "alibaba")
    assert (info.value.line, info.value.column) == (2, column)
    assert message in info.value.message


def test_alibaba_exclusions_are_reported_not_raised(tmp_path: Path) -> None:
    path = _write(tmp_path, "pods.csv", ALIBABA_HEADER,
                  "ok,1000,1024,1,500,,LS,Running,10,20,12",
                  "never,1000,1024,1,500,,LS,Pending,0,50,",
                  "zero,1000,1024,1,500,,BE,Failed,5,7,7")
    load = load_trace(path, "alibaba")
    assert [j.spec.id for j in load.jobs] == ["ok"]
    assert load.jobs[0].spec.submit_time == 10.0  # the earliest creation (pod 'never', at 0) is the origin
    assert [e.line for e in load.excluded] == [3, 4]
    assert "never scheduled (pod_phase 'Pending')" in str(load.excluded[0])
    assert "ran for 0 s" in str(load.excluded[1])
    assert load.skipped == []


def test_unknown_format_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="known formats: tiresias, philly, pollux, alibaba, cohabit"):
        load_trace("tiresias_480", "csv")
    path = _write(tmp_path, "t.csv", TIRESIAS_HEADER)
    with pytest.raises(ValueError, match="unknown trace format 'gavvel'"):
        load_trace(path, "gavvel")
    with pytest.raises(ValueError, match="give the format"):
        load_trace(path)


def test_missing_file_names_it_and_the_embedded_traces(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.csv.*embedded traces: tiresias_480"):
        load_trace(tmp_path / "nope.csv", "tiresias")


def test_bad_limit() -> None:
    with pytest.raises(ValueError, match="limit"):
        load_trace("tiresias_480", limit=-1)
    assert len(load_trace("tiresias_480", limit=0).jobs) == 0
