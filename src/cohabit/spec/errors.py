"""The error of a bad spec file, :class:`SpecError` (``file:line: field: message``).

Its own module, without YAML: ``cohabit simulate`` names it (and :func:`~cohabit.spec.cluster.cluster_from_arg`)
on every run, and a run on a preset cluster and a CSV trace parses no YAML (PyYAML and the YAML loaders are
imported on first use; docs/speed.md, "Thirteenth session ... (speed17b)"). :mod:`.yamlparse` and
:mod:`.yamlio` export the same class.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["SpecError"]


class SpecError(ValueError):
    """A bad spec file: ``file:line: field: message``.

    ``line`` is 1-based (None when unknown, e.g. an unreadable file), ``field``
    a path such as ``jobs[3].workers.count`` (None for syntax errors). When a
    file has several problems, the first is this error and the rest are in
    ``others``; ``str()`` shows them all, one per line.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        others: Iterable[SpecError] = (),
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        self.others: tuple[SpecError, ...] = tuple(others)
        super().__init__(str(self))

    def _one(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line) if p is not None)
        parts = [p for p in (where, self.field) if p]
        return ": ".join([*parts, self.message])

    def __str__(self) -> str:
        return "\n".join([self._one(), *(e._one() for e in self.others)])

    def __reduce__(self) -> Any:
        return _rebuild_spec_error, (self.message, self.file, self.line, self.field, self.others)

    @classmethod
    def collect(cls, errors: Sequence[SpecError]) -> SpecError:
        """One error carrying all of ``errors`` (the first, with the rest in ``others``)."""
        first = errors[0]
        return cls(first.message, file=first.file, line=first.line, field=first.field, others=errors[1:])


def _rebuild_spec_error(message: str, file: str | None, line: int | None, field: str | None,
                        others: tuple[SpecError, ...]) -> SpecError:
    return SpecError(message, file=file, line=line, field=field, others=others)
