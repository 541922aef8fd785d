"""A rich comparison table of several policies' :class:`~cohabit.report.metrics.Metrics`.

One row per policy, one column per metric, times in human units, and the best
value of each column in bold green (ties all highlighted; nothing is
highlighted when only one policy is shown or all values are equal).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .metrics import Metrics

BEST_STYLE = "bold green"
MISSING = "—"


def format_duration(seconds: float | None) -> str:
    """Seconds in the largest fitting unit: ``"42.0 s"``, ``"3.5 min"``, ``"2.25 h"``, ``"3.1 d"``."""
    if seconds is None or not math.isfinite(seconds):
        return MISSING
    s = float(seconds)
    a = abs(s)
    if a < 60:
        return f"{s:.1f} s"
    if a < 3600:
        return f"{s / 60:.1f} min"
    if a < 48 * 3600:
        return f"{s / 3600:.2f} h"
    return f"{s / 86400:.1f} d"


def format_ms(ms: float | None) -> str:
    """Milliseconds; switches to seconds from 1,000 ms."""
    if ms is None or not math.isfinite(ms):
        return MISSING
    return f"{ms:.2f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def format_percent(x: float | None) -> str:
    """A fraction in [0, 1] as a percentage."""
    return MISSING if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def format_ratio(x: float | None) -> str:
    """A dimensionless ratio with three decimals."""
    return MISSING if x is None or not math.isfinite(x) else f"{x:.3f}"


def format_count(n: float | None) -> str:
    """An integer count with thousands separators."""
    return MISSING if n is None else f"{int(n):,}"


@dataclass(frozen=True)
class Column:
    """One table column: header, how to read and format the value, which way is better.

    An ``optional`` column is left out when no policy has a non-zero value in it
    (e.g. migrations under policies that never migrate).
    """

    header: str
    value: Callable[[Metrics], float | None]
    fmt: Callable[[float | None], str]
    higher_is_better: bool
    optional: bool = False


#: At most this many resources get share columns by default (gpu first, then capacity order).
MAX_UTIL_COLUMNS = 3


def default_columns(results: Mapping[str, Metrics], resources: list[str] | None = None) -> list[Column]:
    """The standard columns.

    Each name in ``resources`` gets an ``alloc`` column (share of capacity the ledger
    allocated) and a ``used`` column (share jobs actually used; left out when no
    policy's run measured it); by default ``gpu`` (if any result has it) and then
    the other names seen, up to :data:`MAX_UTIL_COLUMNS`.
    """
    if resources is None:
        resources = _default_resources(results)
    cols = [
        Column("avg\nJCT", lambda m: m.avg_jct, format_duration, False),
        Column("median\nJCT", lambda m: m.median_jct, format_duration, False),
        Column("p95\nJCT", lambda m: m.p95_jct, format_duration, False),
        Column("make-\nspan", lambda m: m.makespan, format_duration, False),
        Column("avg\nqueue", lambda m: m.avg_queueing_delay, format_duration, False),
    ]
    for r in resources:
        cols += [Column(f"alloc\n{r}", _share_getter("allocated", r), format_percent, True),
                 Column(f"used\n{r}", _share_getter("used", r), format_percent, True, optional=True)]
    cols += [
        Column("fin-\nished", lambda m: m.jobs_finished, format_count, True),
        Column("re-\njected", lambda m: m.jobs_rejected, format_count, False),
        Column("pre-\nempt", lambda m: m.preemptions, format_count, False, optional=True),
        Column("mig-\nrate", lambda m: m.migrations, format_count, False, optional=True),
        Column("re-\nsize", lambda m: m.resizes, format_count, False, optional=True),
        Column("Jain\nindex", lambda m: m.jain_fairness, format_ratio, True),
        Column("dead-\nline", lambda m: m.deadline_met_ratio, format_percent, True, optional=True),
        Column("decide\nmean", lambda m: m.decision_time_ms.mean, format_ms, False),
        Column("decide\np99", lambda m: m.decision_time_ms.p99, format_ms, False),
    ]
    return cols


def _default_resources(results: Mapping[str, Metrics]) -> list[str]:
    seen: list[str] = []
    for m in results.values():
        seen += [r for r in m.allocated if r not in seen]
    if "gpu" in seen:
        seen.remove("gpu")
        seen.insert(0, "gpu")
    return seen[:MAX_UTIL_COLUMNS]


def _share_getter(kind: str, resource: str) -> Callable[[Metrics], float | None]:
    """Read ``Metrics.allocated`` or ``Metrics.used`` (``kind``) for ``resource``."""
    return lambda m: getattr(m, kind).get(resource)


def _best(values: list[float | None], higher_is_better: bool) -> set[int]:
    """Indices of the best defined values; empty if fewer than two distinct values exist."""
    defined = [(i, v) for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if len({v for _, v in defined}) < 2:
        return set()
    target = max(v for _, v in defined) if higher_is_better else min(v for _, v in defined)
    return {i for i, v in defined if math.isclose(v, target, rel_tol=1e-9, abs_tol=1e-12)}


def comparison_table(results: Mapping[str, Metrics], title: str | None = "Policy comparison",
                     columns: list[Column] | None = None) -> Table:
    """A :class:`rich.table.Table` with one row per policy in ``results`` (in its order)."""
    cols = default_columns(results) if columns is None else columns
    names = list(results)
    table = Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1),
                  pad_edge=False)
    table.add_column("policy", style="cyan", no_wrap=True)
    cells: list[list[Text]] = [[Text(name)] for name in names]
    for col in cols:
        values = [col.value(results[n]) for n in names]
        if col.optional and not any(values):
            continue
        table.add_column(col.header, justify="right")
        best = _best(values, col.higher_is_better)
        for i, v in enumerate(values):
            cells[i].append(Text(col.fmt(v), style=BEST_STYLE if i in best else ""))
    for row in cells:
        table.add_row(*row)
    return table


def print_comparison(results: Mapping[str, Metrics], console: Console | None = None,
                     title: str | None = "Policy comparison") -> None:
    """Print :func:`comparison_table` to ``console`` (a new stdout console by default)."""
    (console or Console()).print(comparison_table(results, title))
