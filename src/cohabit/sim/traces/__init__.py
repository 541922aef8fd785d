"""Trace loaders and generators: each job as a public JobSpec plus its hidden JobTruth.

>>> load = load_trace("tiresias_480", "tiresias")
>>> len(load.jobs), load.default_cluster
(480, 'tiresias')

Formats (:data:`FORMATS`): ``tiresias`` (:mod:`.tiresias`), ``philly``
(:mod:`.philly`), ``pollux`` (:mod:`.pollux`), ``alibaba`` (:mod:`.alibaba`)
and ``cohabit`` — cohabit's own YAML (:mod:`.native`). Embedded traces
(:data:`EMBEDDED`) load by name. :mod:`.synthetic` generates workloads.
A malformed row raises :class:`TraceRowError` (``file:line: column 'x': ...``)
unless ``skip_bad_rows=True``.
"""

from typing import TYPE_CHECKING, Any

from ._load import EMBEDDED, FORMATS, TraceLoad, embedded_trace, load_trace, unknown_resources
from .errors import TraceRowError

if TYPE_CHECKING:
    from .synthetic import generate, write_tiresias_csv

__all__ = [
    "EMBEDDED", "FORMATS", "TraceLoad", "TraceRowError", "embedded_trace", "generate", "load_trace",
    "unknown_resources", "write_tiresias_csv",
]


def __getattr__(name: str) -> Any:
    """``generate`` and ``write_tiresias_csv`` import :mod:`.synthetic` on first use (a replay needs neither)."""
    if name in ("generate", "write_tiresias_csv"):
        from . import synthetic

        return getattr(synthetic, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
