"""The rich comparison table: units, missing values, best-value highlighting."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record
from cohabit.report import Metrics, comparison_table, compute_metrics, format_duration, print_comparison
from cohabit.report.table import BEST_STYLE, MISSING, format_ms, format_percent
from cohabit.spec import Resources

CAP = Resources(gpu=4, cpu=8)


def one_job_run(duration: float, wait: float = 0.0, pause: bool = False) -> Metrics:
    r = Record()
    r.append(0, K.SUBMITTED, "a")
    r.append(wait, K.STARTED, "a", alloc={"gpu": 2}, nodes=[0])
    if pause:
        r.append(wait + 1, K.PAUSED, "a")
        r.append(wait + 2, K.RESUMED, "a", alloc={"gpu": 2}, nodes=[0])
    r.append(wait + duration, K.FINISHED, "a")
    r.append(wait + duration, K.DECISION, ms=duration / 100)
    return compute_metrics(r, CAP)


def column_cells(table, header: str) -> list[Text]:
    col = next(c for c in table.columns if str(c.header).replace("\n", " ") == header)
    return list(col._cells)


@pytest.mark.parametrize(("seconds", "text"), [
    (None, MISSING), (float("nan"), MISSING), (0.0, "0.0 s"), (42.04, "42.0 s"), (90, "1.5 min"),
    (9000, "2.50 h"), (3 * 86400, "3.0 d"),
])
def test_table_format_duration_units(seconds, text: str) -> None:
    assert format_duration(seconds) == text


def test_table_format_ms_and_percent() -> None:
    assert format_ms(2.5) == "2.50 ms" and format_ms(2500) == "2.50 s" and format_ms(None) == MISSING
    assert format_percent(0.675) == "67.5%" and format_percent(None) == MISSING


def test_table_has_one_row_per_policy_and_highlights_best() -> None:
    results = {"fast": one_job_run(10), "slow": one_job_run(100, wait=50, pause=True)}
    table = comparison_table(results, "t")
    assert table.row_count == 2 and table.title == "t"
    jct = column_cells(table, "avg JCT")
    assert [c.plain for c in jct] == ["10.0 s", "2.5 min"]
    assert jct[0].style == BEST_STYLE and jct[1].style == ""
    preempt = column_cells(table, "pre- empt")  # optional column shown: one policy paused
    assert [c.plain for c in preempt] == ["0", "1"] and preempt[0].style == BEST_STYLE


def test_table_hides_all_zero_optional_columns_and_skips_ties() -> None:
    results = {"a": one_job_run(10), "b": one_job_run(10)}
    table = comparison_table(results)
    headers = [str(c.header).replace("\n", " ") for c in table.columns]
    assert "mig- rate" not in headers and "pre- empt" not in headers and "dead- line" not in headers
    assert "alloc gpu" in headers and "alloc cpu" in headers
    assert "used gpu" not in headers  # nothing measured use: no used column
    assert all(c.style == "" for c in column_cells(table, "avg JCT"))  # equal values: no winner


def test_table_prints_missing_values_for_empty_run() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None)
    print_comparison({"fifo": one_job_run(30), "[empty]": compute_metrics(Record(), CAP)}, console=console)
    out = buf.getvalue()
    assert "fifo" in out and "[empty]" in out and MISSING in out and "30.0 s" in out


def many_policies_run(scale: float) -> Metrics:
    """Two tenants' jobs with a deadline, a pause and a migration: every optional column has a value."""
    cap = Resources(gpu=64, cpu=512, mem_gb=4096, net_gbps=100)
    r = Record()
    r.append(0, K.SUBMITTED, "a", tenant="x", deadline=5000)
    r.append(0, K.SUBMITTED, "b", tenant="y")
    r.append(3, K.STARTED, "b", alloc={"gpu": 1}, nodes=[0])
    r.append(5, K.DECISION, ms=1234.5 * scale)
    r.append(1190 * scale, K.STARTED, "a", alloc={"gpu": 2, "cpu": 8, "mem_gb": 30, "net_gbps": 1}, nodes=[0])
    r.append(1195 * scale, K.PAUSED, "a")
    r.append(1196 * scale, K.RESUMED, "a", alloc={"gpu": 2}, nodes=[0])
    r.append(1197 * scale, K.MIGRATED, "a", alloc={"gpu": 2}, nodes=[1])
    r.append(2000 * scale, K.FINISHED, "a")
    r.append(99999 * scale, K.FINISHED, "b")
    return compute_metrics(r, cap)


@pytest.mark.parametrize("width", [80, 120])
def test_table_fits_the_console_without_cutting_or_wrapping_a_cell(width: int) -> None:
    """17 long policy names and every column: no line wider than the console, no ellipsis, every
    cell whole on one line (a cell such as '19.9 min' that wraps or is cut fails the search)."""
    from cohabit.report.table import all_columns

    results = {f"tiresias-gittins[oracle]-{i}": many_policies_run(1 + i / 10) for i in range(17)}
    buf = io.StringIO()
    cols = all_columns(results)
    print_comparison(results, Console(file=buf, width=width, color_system=None), title="t", columns=cols)
    out = buf.getvalue()
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in out
    shown = [c for c in cols if not c.optional or any(c.value(m) for m in results.values())]
    for name, m in results.items():
        rows = " ".join(" ".join(line.split()[1:]) for line in lines if line.strip().startswith(name + " "))
        for col in shown:
            text = col.fmt(col.value(m))
            assert text in rows, (name, col.key, text)
    assert "19.9 min" in out


def test_table_columns_selected_by_key() -> None:
    from cohabit.report.table import select_columns

    results = {"a": one_job_run(10), "b": one_job_run(20)}
    assert [c.key for c in select_columns("avg-jct, alloc-gpu,makespan,AVG-JCT", results)] == ["avg-jct", "alloc-gpu",
                                                                                       "makespan"]
    default = [c.key for c in select_columns(None, results)]
    assert "avg-jct" in default and "decide-p99" not in default and "median-jct" not in default
    everything = [c.key for c in select_columns("all", results)]
    assert {"median-jct", "decide-p99", "alloc-cpu"} <= set(everything)
    with pytest.raises(ValueError, match=r"unknown column 'avg-jtc'.*avg-jct"):
        select_columns("avg-jtc", results)
    table = comparison_table(results, columns=select_columns("p95-jct,migrate", results))
    assert [str(c.header) for c in table.columns] == ["policy", "p95\nJCT", "mig-\nrate"]  # named: shown at 0
