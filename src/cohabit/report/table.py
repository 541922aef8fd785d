"""A rich comparison table of several policies' :class:`~cohabit.report.metrics.Metrics`.

One row per policy, one column per metric, times in human units, and the best
value of each column in bold green (ties all highlighted; nothing is
highlighted when only one policy is shown or all values are equal).

Columns have keys (``avg-jct``, ``alloc-gpu``...) that ``--columns`` selects;
a comparison wider than the console is printed as several stacked tables,
each repeating the policy column, so no cell is ever cut or wrapped (at 80
columns as well as in a file).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from rich import box
from rich.cells import cell_len
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


def format_per_job(x: float | None) -> str:
    """A mean count per job with two decimals."""
    return MISSING if x is None or not math.isfinite(x) else f"{x:,.2f}"


@dataclass(frozen=True)
class Column:
    """One table column: header, how to read and format the value, which way is better.

    An ``optional`` column is left out when no policy has a non-zero value in it
    (e.g. migrations under policies that never migrate). A column with
    ``default=False`` is shown only when asked for by key (``--columns``).
    """

    header: str
    value: Callable[[Metrics], float | None]
    fmt: Callable[[float | None], str]
    higher_is_better: bool
    optional: bool = False
    default: bool = True

    @property
    def key(self) -> str:
        """The name ``--columns`` uses: the header on one line, ``-`` for line breaks, lower case
        (``"avg\\nJCT"`` -> ``avg-jct``, ``"make-\\nspan"`` -> ``makespan``, ``"alloc\\ngpu"`` -> ``alloc-gpu``)."""
        return self.header.replace("-\n", "").replace("\n", "-").replace(" ", "-").lower()


#: At most this many resources get share columns by default (gpu first, then capacity order).
MAX_UTIL_COLUMNS = 3


def all_columns(results: Mapping[str, Metrics], resources: list[str] | None = None) -> list[Column]:
    """Every column, in display order; those with ``default=False`` are left out unless selected.

    Each name in ``resources`` gets an ``alloc`` column (share of capacity the ledger
    allocated) and a ``used`` column (share jobs actually used; left out when no
    policy's run measured it); by default every name seen, ``gpu`` first, of which
    the first :data:`MAX_UTIL_COLUMNS` are shown by default.
    """
    if resources is None:
        resources = _resources(results)
    cols = [
        Column("avg\nJCT", lambda m: m.avg_jct, format_duration, False),
        Column("median\nJCT", lambda m: m.median_jct, format_duration, False, default=False),
        Column("p95\nJCT", lambda m: m.p95_jct, format_duration, False),
        Column("make-\nspan", lambda m: m.makespan, format_duration, False),
        Column("avg\nqueue", lambda m: m.avg_queueing_delay, format_duration, False),
    ]
    for i, r in enumerate(resources):
        cols += [Column(f"alloc\n{r}", _share_getter("allocated", r), format_percent, True,
                        default=i < MAX_UTIL_COLUMNS),
                 Column(f"used\n{r}", _share_getter("used", r), format_percent, True, optional=True,
                        default=i < MAX_UTIL_COLUMNS)]
    cols += [
        Column("fin-\nished", lambda m: m.jobs_finished, format_count, True),
        Column("re-\njected", lambda m: m.jobs_rejected, format_count, False),
        Column("pre-\nempt", lambda m: m.preemptions, format_count, False, optional=True),
        Column("preempt\nper job", lambda m: m.preemptions_per_job, format_per_job, False, optional=True),
        Column("mig-\nrate", lambda m: m.migrations, format_count, False, optional=True),
        Column("re-\nsize", lambda m: m.resizes, format_count, False, optional=True),
        Column("Jain\nindex", lambda m: m.jain_fairness, format_ratio, True),
        Column("tenant\nJain", lambda m: m.tenant_jain_fairness, format_ratio, True, optional=True),
        Column("dead-\nline", lambda m: m.deadline_met_ratio, format_percent, True, optional=True),
        Column("at-\ntained", lambda m: m.attainment.attained if m.attainment else None, format_count, True,
               optional=True),
        Column("false\nattain", lambda m: m.attainment.false_attained if m.attainment else None, format_count,
               False, optional=True),
        Column("acc\nreached", lambda m: m.attainment.mean_reached if m.attainment else None, format_ratio, True,
               optional=True),
        Column("decide\nmean", lambda m: m.decision_time_ms.mean, format_ms, False),
        Column("decide\np99", lambda m: m.decision_time_ms.p99, format_ms, False, default=False),
    ]
    return cols


def default_columns(results: Mapping[str, Metrics], resources: list[str] | None = None) -> list[Column]:
    """The columns shown when none are named: :func:`all_columns` with ``default=True``."""
    return [c for c in all_columns(results, resources) if c.default]


def select_columns(spec: str | None, results: Mapping[str, Metrics],
                   resources: list[str] | None = None) -> list[Column]:
    """The columns a ``--columns`` value names, in the order given.

    ``None`` or ``""``: :func:`default_columns`; ``"all"``: every column.
    Otherwise comma-separated keys (:attr:`Column.key`, e.g. ``avg-jct,alloc-gpu``);
    a column named this way is shown even where it is all zero.

    Raises:
        ValueError: a key names no column; the message lists the known keys.
    """
    cols = all_columns(results, resources)
    if spec is None or not spec.strip():
        return [c for c in cols if c.default]
    if spec.strip().lower() == "all":
        return cols
    by_key = {c.key: c for c in cols}
    chosen: list[Column] = []
    for raw in spec.split(","):
        key = raw.strip().lower()
        if not key:
            continue
        if key not in by_key:
            raise ValueError(f"--columns: unknown column {raw.strip()!r}; expected 'all' or comma-separated "
                             f"names from: {', '.join(by_key)}")
        if all(c.key != key for c in chosen):
            chosen.append(replace(by_key[key], optional=False))  # named: shown even when all zero
    if not chosen:
        raise ValueError(f"--columns: no column named; expected 'all' or names from: {', '.join(by_key)}")
    return chosen


def _resources(results: Mapping[str, Metrics]) -> list[str]:
    seen: list[str] = []
    for m in results.values():
        seen += [r for r in m.allocated if r not in seen]
    if "gpu" in seen:
        seen.remove("gpu")
        seen.insert(0, "gpu")
    return seen


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


@dataclass(frozen=True)
class _Filled:
    """One column's header and formatted cells, and the width they need."""

    header: str
    cells: list[Text]
    width: int


def _fill(results: Mapping[str, Metrics], cols: list[Column]) -> list[_Filled]:
    """Format every shown column (all-zero optional columns dropped)."""
    names = list(results)
    out: list[_Filled] = []
    for col in cols:
        values = [col.value(results[n]) for n in names]
        if col.optional and not any(values):
            continue
        best = _best(values, col.higher_is_better)
        cells = [Text(col.fmt(v), style=BEST_STYLE if i in best else "") for i, v in enumerate(values)]
        width = max([cell_len(line) for line in col.header.split("\n")] + [c.cell_len for c in cells])
        out.append(_Filled(col.header, cells, width))
    return out


def _table(names: list[str], filled: list[_Filled], title: str | None) -> Table:
    table = Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1),
                  pad_edge=False)
    table.add_column("policy", style="cyan", no_wrap=True)
    for f in filled:
        table.add_column(f.header, justify="right", no_wrap=True, min_width=f.width)
    for i, name in enumerate(names):
        table.add_row(Text(name), *(f.cells[i] for f in filled))
    return table


#: Characters a column takes besides its content: one of left padding, one of the box's column separator.
_COLUMN_OVERHEAD = 2


def comparison_tables(results: Mapping[str, Metrics], title: str | None = "Policy comparison",
                      columns: list[Column] | None = None, width: int | None = None) -> list[Table]:
    """The comparison as one table, or, when it is wider than ``width`` characters, as several
    stacked tables that each repeat the policy column and hold as many whole columns as fit.

    No cell is ever shortened or wrapped: a column goes to the next table instead.
    """
    names = list(results)
    filled = _fill(results, default_columns(results) if columns is None else columns)
    if width is None:
        return [_table(names, filled, title)]
    first = max([cell_len("policy")] + [cell_len(n) for n in names]) + 1
    groups: list[list[_Filled]] = []
    used = first
    for f in filled:
        if groups and used + f.width + _COLUMN_OVERHEAD <= width:
            groups[-1].append(f)
            used += f.width + _COLUMN_OVERHEAD
        else:
            groups.append([f])
            used = first + f.width + _COLUMN_OVERHEAD
    if not groups:
        return [_table(names, [], title)]
    return [_table(names, g, title if i == 0 else (f"{title} (continued)" if title else None))
            for i, g in enumerate(groups)]


def comparison_table(results: Mapping[str, Metrics], title: str | None = "Policy comparison",
                     columns: list[Column] | None = None) -> Table:
    """A :class:`rich.table.Table` with one row per policy in ``results`` (in its order), all columns in one."""
    return comparison_tables(results, title, columns)[0]


def print_comparison(results: Mapping[str, Metrics], console: Console | None = None,
                     title: str | None = "Policy comparison", columns: list[Column] | None = None) -> None:
    """Print the comparison to ``console`` (a new stdout console by default), split into stacked
    tables where it is wider than the console (see :func:`comparison_tables`)."""
    console = console or Console()
    for table in comparison_tables(results, title, columns, width=console.width):
        console.print(table)
