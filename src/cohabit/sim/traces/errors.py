"""Errors raised while reading traces: every one names the file, the line and the column."""

from __future__ import annotations


class TraceRowError(ValueError):
    """A row of a trace file that cannot be turned into a job.

    ``file`` is the path as the caller gave it (or the file name of an
    embedded trace), ``line`` is 1-based (the header is line 1 of a CSV file),
    ``column`` is the offending column or field (``None`` when the problem is
    the row as a whole) and ``message`` says what was expected and what was
    found::

        philly_82k.csv:17: column 'num_gpus': expected an integer >= 1, got 'abc'

    ``what`` is the word used for ``column`` in the text: ``"column"`` for CSV
    files, ``"field"`` for YAML files.
    """

    def __init__(
        self, file: str, line: int, column: str | None, message: str, *, what: str = "column"
    ) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.message = message
        self.what = what
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: "
        if self.column is not None:
            where += f"{self.what} {self.column!r}: "
        return where + self.message

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.file, self.line, self.column, self.message, self.what))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TraceRowError):
            return NotImplemented
        return (self.file, self.line, self.column, self.message) == (
            other.file, other.line, other.column, other.message
        )

    def __hash__(self) -> int:
        return hash((self.file, self.line, self.column, self.message))


def _rebuild(file: str, line: int, column: str | None, message: str, what: str) -> TraceRowError:
    return TraceRowError(file, line, column, message, what=what)


class TooManyBadRows(TraceRowError):
    """``skip_bad_rows`` gave up: more malformed rows than ``max_bad_rows`` (never skipped itself)."""
