"""Reading CSV traces row by row with typed, line-numbered field access.

:func:`read_rows` checks the header for the required columns and yields one
:class:`Row` per data line. A ``Row`` parses its fields on request
(``row.int("num_gpu", min=1)``) and raises :class:`TraceRowError` naming the
file, the line and the column when a value is wrong. Extra columns are
allowed and ignored; blank lines are skipped.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import IO

from ...spec.limits import MAX_CSV_NUMBER
from .errors import TraceRowError


class Row:
    """One data row of a CSV trace: raw text fields plus typed accessors."""

    __slots__ = ("file", "line", "_fields", "_index")

    def __init__(self, file: str, line: int, fields: Sequence[str], index: dict[str, int]) -> None:
        self.file = file
        self.line = line
        self._fields = fields
        self._index = index

    def error(self, column: str | None, message: str) -> TraceRowError:
        """A :class:`TraceRowError` for this row (to raise)."""
        return TraceRowError(self.file, self.line, column, message)

    def has(self, column: str) -> bool:
        """True if the header has ``column`` (optional columns)."""
        return column in self._index

    def raw(self, column: str) -> str:
        """The field's text with surrounding whitespace removed."""
        return self._fields[self._index[column]].strip()

    def text(self, column: str, *, what: str = "a non-empty value", allow_empty: bool = False) -> str:
        """A string field; empty is an error unless ``allow_empty``."""
        v = self.raw(column)
        if not v and not allow_empty:
            raise self.error(column, f"expected {what}, got ''")
        return v

    def int(self, column: str, *, min: int | None = None, max: int | None = None,
            cap: int = int(MAX_CSV_NUMBER)) -> int:
        """An integer field (``"4"`` or ``"4.0"``), checked against ``[min, max]``.

        ``cap`` is a sanity bound (default :data:`~cohabit.spec.limits.MAX_CSV_NUMBER`),
        named in the message only when the value exceeds it.
        """
        v = self.raw(column)
        try:
            n = int(_plain(v))
        except ValueError:
            try:
                f = float(_plain(v))
            except ValueError:
                f = math.nan
            if not (math.isfinite(f) and f.is_integer()):
                raise self.error(column, f"expected {_int_range(min, max)}, got {v!r}") from None
            n = int(f)
        if (min is not None and n < min) or (max is not None and n > max):
            raise self.error(column, f"expected {_int_range(min, max)}, got {v!r}")
        if n > cap:
            raise self.error(column, f"expected {_int_range(min, cap)}, got {v!r}")
        return n

    def float(self, column: str, *, min: float | None = None, positive: bool = False) -> float:
        """A finite number of magnitude <= ``MAX_CSV_NUMBER``; ``min`` is inclusive, ``positive`` requires ``> 0``."""
        v = self.raw(column)
        try:
            x = float(_plain(v))
        except ValueError:
            x = math.nan
        bad = not math.isfinite(x) or (min is not None and x < min) or (positive and x <= 0)
        if bad:
            raise self.error(column, f"expected {_float_range(min, positive)}, got {v!r}")
        if abs(x) > MAX_CSV_NUMBER:
            raise self.error(column, f"expected a number of magnitude <= {MAX_CSV_NUMBER:g}, got {v!r}")
        return x


def _plain(v: str) -> str:
    """``v`` if it is plain ASCII without digit-group underscores, which ``int()``/``float()`` would accept."""
    if not v.isascii() or "_" in v:
        raise ValueError(v)
    return v


def _int_range(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f"an integer in [{lo}, {hi}]"
    if lo is not None:
        return f"an integer >= {lo}"
    if hi is not None:
        return f"an integer <= {hi}"
    return "an integer"


def _float_range(lo: float | None, positive: bool) -> str:
    if positive:
        return "a number > 0"
    if lo is not None:
        return f"a number >= {lo:g}"
    return "a finite number"


def _records(f: IO[str], file: str) -> Iterator[tuple[int, list[str] | TraceRowError]]:
    """(first line, fields) for each CSV record; a record the csv module rejects comes as an error."""
    reader = csv.reader(f, strict=True)
    prev = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            yield prev + 1, TraceRowError(file, prev + 1, None, f"malformed CSV: {e}")
            prev = reader.line_num
            continue
        except UnicodeDecodeError as e:
            raise TraceRowError(file, prev + 1, None, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
        yield prev + 1, fields
        prev = reader.line_num


def read_rows(f: IO[str], file: str, required: Iterable[str]) -> Iterator[Row | TraceRowError]:
    """Yield the data rows of an open CSV file after checking its header.

    A header missing a required column, an empty file or a duplicated column
    name raises :class:`TraceRowError` at the header line (these are never
    skipped: no row of such a file can be read). A row with fewer or more
    fields than the header, or one the csv module cannot parse, is yielded
    as a :class:`TraceRowError` so that the caller can skip it or raise it.
    """
    records = _records(f, file)
    required = list(required)
    header: list[str] | None = None
    header_line = 1
    for header_line, fields in records:
        if isinstance(fields, TraceRowError):
            raise fields
        if any(x.strip() for x in fields):
            header = [x.strip() for x in fields]
            break
    if header is None:
        raise TraceRowError(file, 1, None, f"empty file: expected a header line with columns {', '.join(required)}")
    index: dict[str, int] = {}
    for i, name in enumerate(header):
        if name in index:
            raise TraceRowError(file, header_line, name, "duplicate column name in the header")
        index[name] = i
    for name in required:
        if name not in index:
            raise TraceRowError(
                file, header_line, name,
                f"missing required column in the header (header has: {', '.join(header)}; "
                f"required: {', '.join(required)})",
            )
    width = len(header)
    for line, fields in records:
        if isinstance(fields, TraceRowError):
            yield fields
        elif not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        elif len(fields) != width:
            yield TraceRowError(file, line, None, f"row has {len(fields)} fields but the header has {width}")
        else:
            yield Row(file, line, fields, index)
