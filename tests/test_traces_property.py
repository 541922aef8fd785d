"""Property: any rows either load as valid jobs or raise TraceRowError — never another exception."""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.sim.traces import TraceRowError, load_trace
from cohabit.sim.traces.alibaba import COLUMNS as ALIBABA_COLUMNS
from cohabit.sim.traces.philly import COLUMNS as PHILLY_COLUMNS
from cohabit.sim.traces.pollux import COLUMNS as POLLUX_COLUMNS
from cohabit.sim.traces.tiresias import COLUMNS as TIRESIAS_COLUMNS
from cohabit.spec import JobSpec

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
INT = st.integers(-3, 2000).map(str)
NUMBER = st.one_of(INT, st.floats(allow_nan=True, allow_infinity=True).map(repr), st.sampled_from(["1e3", "4.0"]))
STAMP = st.builds(lambda d, h, s: f"2017-{d // 28 + 9:02d}-{d % 28 + 1:02d} {h:02d}:00:{s:02d}",
                  st.integers(0, 130), st.integers(0, 25), st.integers(0, 61))
TIME = st.one_of(st.integers(0, 10**7).map(str), st.just(""))

PLAUSIBLE = {
    "job_id": st.sampled_from(["a", "b", "c", "7"]), "num_gpu": INT, "submit_time": NUMBER, "iterations": INT,
    "model_name": st.sampled_from(["vgg16", "resnet50", ""]), "duration": NUMBER, "interval": NUMBER,
    "timestamp": STAMP, "num_gpus": INT, "gpu_time": NUMBER, "cluster": st.sampled_from(["6214e9", "", "x"]),
    "name": st.sampled_from(["p0", "p1", "p2"]), "time": NUMBER,
    "application": st.sampled_from(["cifar10", "ncf", "bert", "imagenet", "gpt"]),
    "num_replicas": INT, "batch_size": st.sampled_from(["128", "384", "2048", "32768", "99999", "0"]),
    "cpu_milli": INT, "memory_mib": INT, "gpu_milli": st.sampled_from(["0", "460", "1000", "1001"]),
    "gpu_spec": st.sampled_from(["", "nan", "V100M16|V100M32"]),
    "qos": st.sampled_from(["LS", "BE", ""]), "pod_phase": st.sampled_from(["Running", "Pending", "Failed"]),
    "creation_time": TIME, "deletion_time": TIME, "scheduled_time": TIME,
}


GOOD = {
    "tiresias": "0,4,0,271,inception3,128,33",
    "philly": "2017-10-09 07:01:55,66.0,1,66.0,11cb48",
    "pollux": "cifar10-0,107,cifar10,6,2048",
    "alibaba": "openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061",
}


def _mutated(columns: tuple[str, ...], good: str) -> st.SearchStrategy[list[str]]:
    """A good row with one field replaced by a plausible or arbitrary value."""
    base = good.split(",")

    def mutate(i: int, value: str) -> list[str]:
        row = list(base)
        row[i] = value
        return row

    return st.integers(0, len(columns) - 1).flatmap(
        lambda i: st.one_of(PLAUSIBLE[columns[i]], TEXT).map(lambda v: mutate(i, v))
    )


def _row(columns: tuple[str, ...], good: str) -> st.SearchStrategy[list[str]]:
    fields = st.tuples(*(st.one_of(PLAUSIBLE[c], PLAUSIBLE[c], TEXT) for c in columns)).map(list)
    mutated = _mutated(columns, good)
    # Mostly near-valid rows, some random ones, now and then a row of the wrong width.
    return st.one_of(mutated, mutated, fields, st.lists(TEXT, max_size=len(columns) + 2))


def _render(header: tuple[str, ...], rows: list[list[str]], raw: bool) -> str:
    if raw:  # no quoting: commas and quotes inside fields make malformed rows
        return "\n".join(",".join(r) for r in [list(header), *rows]) + "\n"
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def _check(fmt: str, columns: tuple[str, ...], rows: list[list[str]], raw: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.csv"
        path.write_text(_render(columns, rows, raw), encoding="utf-8")
        try:
            load = load_trace(path, fmt)
        except TraceRowError as e:
            assert e.line >= 2 and str(e).startswith(f"{path}:{e.line}: ")
        else:
            for job in load.jobs:
                assert JobSpec.model_validate(job.spec.model_dump()) == job.spec
                assert job.truth.iterations >= 1
        load = load_trace(path, fmt, skip_bad_rows=True)  # the header is good: never raises
        assert all(isinstance(e, TraceRowError) for e in load.skipped)
        ids = [j.spec.id for j in load.jobs]
        assert len(ids) == len(set(ids))
        times = [j.spec.submit_time for j in load.jobs]
        assert times == sorted(times) and all(t >= 0 for t in times)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(_row(TIRESIAS_COLUMNS, GOOD["tiresias"]), max_size=6), st.booleans())
def test_tiresias_rows_parse_or_raise_trace_row_error(rows: list[list[str]], raw: bool) -> None:
    _check("tiresias", TIRESIAS_COLUMNS, rows, raw)


@SETTINGS
@given(st.lists(_row(PHILLY_COLUMNS, GOOD["philly"]), max_size=6), st.booleans())
def test_philly_rows_parse_or_raise_trace_row_error(rows: list[list[str]], raw: bool) -> None:
    _check("philly", PHILLY_COLUMNS, rows, raw)


@SETTINGS
@given(st.lists(_row(POLLUX_COLUMNS, GOOD["pollux"]), max_size=6), st.booleans())
def test_pollux_rows_parse_or_raise_trace_row_error(rows: list[list[str]], raw: bool) -> None:
    _check("pollux", POLLUX_COLUMNS, rows, raw)


@SETTINGS
@given(st.lists(_row(ALIBABA_COLUMNS, GOOD["alibaba"]), max_size=6), st.booleans())
def test_alibaba_rows_parse_or_raise_trace_row_error(rows: list[list[str]], raw: bool) -> None:
    _check("alibaba", ALIBABA_COLUMNS, rows, raw)
