"""The tables bench scripts print and keep: a title with the load average beside it, a header, one
line per row; and in the JSON, each table's data with the load average it was measured under."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

#: a column: its header, the format spec of its cells (``"<6"``, ``">10.2f"``), and a row's cell value
Column = tuple[str, str, Callable[[Any], Any]]


def load() -> str:
    """``load average 1.0 2.0 3.0`` (1, 5 and 15 minutes): the machine is shared."""
    return "load average %.1f %.1f %.1f" % os.getloadavg()


def print_table(title: str, columns: Sequence[Column], rows: Iterable[Any]) -> None:
    """Print ``title`` with the load average, a header aligned like each column's cells, then the rows."""
    print(f"\n{title}   [{load()}]")
    heads = []
    for head, spec, _ in columns:
        align, width = re.match(r"([<>^]?)(\d*)", spec).groups()  # type: ignore[union-attr]
        heads.append(f"{head:{align or '<'}{width}}")
    print(" ".join(heads))
    for r in rows:
        print(" ".join(f"{cell(r):{spec}}" for _, spec, cell in columns))


def keep(result: dict[str, Any], key: str, value: Any) -> None:
    """``result[key] = value`` and ``result[key + "_load"]``: the load average now (after measuring)."""
    result[key] = value
    result[f"{key}_load"] = load()
