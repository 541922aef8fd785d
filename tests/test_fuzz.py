"""Fuzzing every trace format, the YAML loaders and the command line (issue 12), bounded in time.

Each property: the input either loads (or the command succeeds) or fails with
a clean, expected error — never another exception (a traceback), a hang or
a crash. A small run of ``bench/robustness.py``'s seeded campaign checks the
same in a separate process (crashes and hangs included).
"""

from __future__ import annotations

import importlib.util
import string
import sys
from importlib import resources as ilr
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cohabit.cli import app
from cohabit.sim.traces import FORMATS, TraceRowError, load_trace
from cohabit.spec.yamlio import SpecError, loads_cluster, loads_jobs

ROOT = Path(__file__).resolve().parents[1]
CLEAN = (TraceRowError, SpecError)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
EMBEDDED_FILE = {"tiresias": "tiresias_480.csv", "philly": "philly_82k.csv", "pollux": "pollux_workload-1.csv",
                 "alibaba": "alibaba_openb_pods_default.csv", "harmony": "harmony_80.csv",
                 "muri": "muri_trace1.csv", "gavel": "gavel_max_min_fairness.trace"}
#: formats without an embedded trace: their reference-run inputs (bench/reference/inputs)
REFERENCE_INPUT = {"muri", "gavel"}
SEP = {"gavel": "\t"}
NASTY = ["", "-1", "0", "1e308", "inf", "nan", "1e8", "1e8", "100000000", "1e20", "99999999999999999999999", "abc", "[/x]", "x" * 3000,
         "1_0", "\x00", "é", "9223372036854775808", '"']
YAML_NASTY = [".inf", ".nan", "1e400", "100000000", "123456789012345678901", "-5", "null", "[1, 2]", "{a: 1}",
              "&a [*a]", "!!python/object/apply:os.system [echo]", "[" * 100 + "]" * 100, "~", "'x'"]


def _window(fmt: str, n: int = 12) -> list[str]:
    if fmt in REFERENCE_INPUT:
        lines = (ROOT / "bench" / "reference" / "inputs" / EMBEDDED_FILE[fmt]).read_text().splitlines()
    else:
        lines = ilr.files("cohabit.data").joinpath("traces", EMBEDDED_FILE[fmt]).read_text().splitlines()
    return lines[: n + 1]


def _load_cleanly(path: Path, fmt: str, skip: bool) -> None:
    """Load; what loads must be usable: its per-task demands (what a huge count used to blow up) are cheap."""
    try:
        load = load_trace(path, fmt, skip_bad_rows=skip, max_bad_rows=50)
    except CLEAN:
        return
    for job in load.jobs:
        assert len(job.spec.task_demands()) <= 100_000


@pytest.mark.parametrize("fmt", sorted(EMBEDDED_FILE))
@FAST
@given(data=st.data())
def test_mutated_csv_traces_load_or_fail_cleanly(tmp_path_factory, fmt: str, data) -> None:
    rows = _window(fmt)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(1, len(rows) - 1))
        sep = SEP.get(fmt, ",")
        fields = rows[i].split(sep)
        j = data.draw(st.integers(0, len(fields) - 1))
        fields[j] = data.draw(st.sampled_from(NASTY) if data.draw(st.integers(0, 3)) else st.text(max_size=12))
        rows[i] = sep.join(fields)
    raw = ("\n".join(rows) + "\n").encode(errors="surrogatepass")
    if data.draw(st.booleans()):  # byte-level damage too
        b = bytearray(raw)
        k = data.draw(st.integers(0, len(b) - 1))
        b[k] = data.draw(st.integers(0, 255))
        raw = bytes(b[: data.draw(st.integers(1, len(b)))])
    path = tmp_path_factory.mktemp("fz") / "t.csv"
    path.write_bytes(raw)
    _load_cleanly(path, fmt, data.draw(st.booleans()))


@pytest.mark.parametrize("fmt", sorted(EMBEDDED_FILE))
@FAST
@given(data=st.data())
def test_extreme_numbers_in_any_column_load_or_fail_cleanly(tmp_path_factory, fmt: str, data) -> None:
    """One row, one column set to a huge, tiny, negative or non-finite number (counts, sizes, times)."""
    header, row = _window(fmt, 1)
    sep = SEP.get(fmt, ",")
    fields = row.split(sep)
    j = data.draw(st.integers(0, len(fields) - 1))
    value = data.draw(st.integers(10**5, 10**25) | st.integers(-(10**25), -1) | st.floats()
                      | st.sampled_from(["1e8", "1e20", "inf", "nan", "-0"]))
    fields[j] = str(value)
    path = tmp_path_factory.mktemp("fz") / "t.csv"
    path.write_text(f"{header}\n{sep.join(fields)}\n")
    _load_cleanly(path, fmt, data.draw(st.booleans()))


def _tiresias_yaml(rows: list[str]) -> str:
    out = ["cluster: tiresias", "jobs:"]
    for r in rows[1:]:
        f = r.split(",")
        out.append(f"  - {{id: {f[0]}, gpus: {f[1]}, submit_time: {f[2]}, iterations: {f[3]}, "
                   f"truth: {{iterations: {f[3]}, duration: {f[5]}}}}}")
    return "\n".join(out) + "\n"


@FAST
@given(data=st.data())
def test_mutated_yaml_traces_and_job_files_load_or_fail_cleanly(tmp_path_factory, data) -> None:
    text = _tiresias_yaml(_window("tiresias"))
    lines = text.splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(2, len(lines) - 1))
        key = data.draw(st.sampled_from(["gpus: ", "submit_time: ", "iterations: ", "duration: ", "id: "]))
        if key in lines[i]:
            head, _, tail = lines[i].partition(key)
            rest = tail.split(",", 1)[1] if "," in tail else "}"
            lines[i] = f"{head}{key}{data.draw(st.sampled_from(YAML_NASTY))},{rest}"
    text = "\n".join(lines) + "\n"
    path = tmp_path_factory.mktemp("fz") / "t.yaml"
    path.write_text(text)
    _load_cleanly(path, "cohabit", data.draw(st.booleans()))
    body = text.split("\n", 1)[1]  # the same jobs as a jobs file ("truth" is unknown there: a clean error)
    try:
        loads_jobs(body, "j.yaml")
    except SpecError:
        pass


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(string.ascii_lowercase, max_size=8), inner,
                                                                max_size=4),
    max_leaves=30,
)


@FAST
@given(doc=yaml_values, junk=st.text(max_size=40))
def test_arbitrary_yaml_documents_are_specs_or_spec_errors(doc, junk: str) -> None:
    for text in (yaml.safe_dump(doc), yaml.safe_dump({"jobs": doc}), yaml.safe_dump({"name": "c", "nodes": doc}),
                 junk, yaml.safe_dump(doc) + junk):
        for load in (loads_jobs, loads_cluster):
            try:
                load(text, "f.yaml")
            except SpecError:
                pass


OPTIONS = {
    "--seed": ["-1", "0", "4294967296", "abc"], "--horizon": ["-5", "nan", "inf", "0", "10"],
    "--limit": ["-1", "0", "5", "abc"], "--max-bad-rows": ["-1", "0", "3"],
    "--policy": ["nope", "srtf:preempt_margin=nan", "gandiva:slice_length=1e-9", "srtf:x=1", "fifo:", ":", "fifo"],
    "--format": ["nope", "philly", "tiresias"], "--cluster": ["nope", "philly", "/proc/none.yaml"],
    "--json": ["/proc/none/x.json", "/"], "--plot": ["/tmp/x.txt", "/proc/none/x.png"],
}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(picked=st.lists(st.sampled_from(sorted(OPTIONS)), min_size=1, max_size=3, unique=True), data=st.data())
def test_random_command_line_options_never_give_a_traceback(picked: list[str], data) -> None:
    args = ["simulate", "--trace", "tiresias_480", "--limit", "10"]
    for k in picked:
        args += [k, data.draw(st.sampled_from(OPTIONS[k]))]
    res = CliRunner().invoke(app, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, res.exception)
    assert res.exit_code in (0, 2, 3, 4, 5), (args, res.output[-500:])  # the documented exit codes


def test_every_format_is_fuzzed() -> None:
    assert set(EMBEDDED_FILE) | {"cohabit"} == set(FORMATS)


def test_bench_campaign_small_run_has_no_traceback_hang_or_crash() -> None:
    spec = importlib.util.spec_from_file_location("robustness", ROOT / "bench" / "robustness.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["robustness"] = mod
    spec.loader.exec_module(mod)
    out = mod.run_fuzz(None, seed=5, cases=40)
    counts = out["counts"]
    assert sum(counts.values()) == 40
    assert counts["traceback"] == counts["hang"] == counts["crash"] == 0, out["examples"]
