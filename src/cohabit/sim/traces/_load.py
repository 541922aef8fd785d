"""``load_trace``: one entry point for every trace format and the embedded traces."""

from __future__ import annotations

import gc
import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources as ilr
from importlib.resources.abc import Traversable
from pathlib import Path

from ...spec.cluster import ClusterSpec
from ...spec.job import unknown_demands
from ...suggest import did_you_mean
from ..truth import TraceJob
from ._common import Sink, Source, sort_jobs
from .errors import TraceRowError

FORMATS: tuple[str, ...] = ("tiresias", "philly", "pollux", "alibaba", "cohabit", "harmony", "muri", "gavel")
"""Trace formats :func:`load_trace` reads."""

#: format -> (its module in this package, the loader's name there, the name of its default cluster preset
#: there). A format's module is imported when a trace of that format is loaded (the others are not: a
#: replay of one CSV format needs neither YAML nor the other parsers; docs/speed.md, speed17b).
_LOADERS: dict[str, tuple[str, str, str]] = {
    "tiresias": ("tiresias", "load", "DEFAULT_CLUSTER"),
    "muri": ("tiresias", "load_muri", "MURI_CLUSTER"),
    "philly": ("philly", "load", "DEFAULT_CLUSTER"),
    "pollux": ("pollux", "load", "DEFAULT_CLUSTER"),
    "alibaba": ("alibaba", "load", "DEFAULT_CLUSTER"),
    "cohabit": ("native", "load", "DEFAULT_CLUSTER"),
    "harmony": ("harmony", "load", "DEFAULT_CLUSTER"),
    "gavel": ("gavel", "load", "DEFAULT_CLUSTER"),
}


def _loader(fmt: str) -> tuple[Callable[[Source, Sink], None], str]:
    """``(load(source, sink), default cluster preset)`` of a known format, its module imported now."""
    module_name, load, cluster = _LOADERS[fmt]
    module = importlib.import_module(f"{__package__}.{module_name}")
    return getattr(module, load), getattr(module, cluster)


EMBEDDED: dict[str, tuple[str, str]] = {
    "tiresias_480": ("tiresias_480.csv", "tiresias"),
    "philly_82k": ("philly_82k.csv", "philly"),
    "pollux_workload-1": ("pollux_workload-1.csv", "pollux"),
    "alibaba_openb": ("alibaba_openb_pods_default.csv", "alibaba"),
    "harmony_80": ("harmony_80.csv", "harmony"),
    "drl_uniform": ("drl_uniform.yaml", "cohabit"),
    "drl_poisson": ("drl_poisson.yaml", "cohabit"),
    "drl_bursty": ("drl_bursty.yaml", "cohabit"),
}
"""Traces shipped in ``cohabit/data/traces``: name -> (file name, format)."""


@dataclass(frozen=True)
class TraceLoad:
    """The result of :func:`load_trace`.

    * ``jobs``: sorted by submit time, then id (natural order: ``j2`` < ``j10``).
    * ``skipped``: malformed rows left out because ``skip_bad_rows=True``.
    * ``path``: the file read (for an embedded trace, its name, e.g. ``tiresias_480``).
    * ``fmt``: the format read.
    * ``default_cluster``: the cluster preset this trace was recorded on.
    * ``excluded``: well-formed rows deliberately left out, with the reason
      (e.g. Alibaba pods that were never scheduled); reported, never raised.
    * ``lines``: job id -> the line of the file it was read from.
    """

    jobs: list[TraceJob]
    skipped: list[TraceRowError]
    path: str
    fmt: str
    default_cluster: str
    excluded: list[TraceRowError] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.jobs)


def embedded_trace(name: str) -> Traversable:
    """The packaged file of an embedded trace; unknown names list the known ones."""
    try:
        filename, _ = EMBEDDED[name]
    except KeyError:
        raise ValueError(f"unknown embedded trace {name!r}; embedded traces: {', '.join(EMBEDDED)}") from None
    return ilr.files("cohabit.data").joinpath("traces", filename)


def _check_format(fmt: str) -> None:
    if fmt not in _LOADERS:
        raise ValueError(f"unknown trace format {fmt!r}; known formats: {', '.join(FORMATS)}")


def _resolve(path: str | os.PathLike[str], fmt: str | None) -> tuple[Source, str, str]:
    """(source, format, label) for a file path or an embedded trace name."""
    if isinstance(path, str) and path in EMBEDDED and not os.path.exists(path):
        filename, embedded_fmt = EMBEDDED[path]
        if fmt is not None:
            _check_format(fmt)
            if fmt != embedded_fmt:
                raise ValueError(f"embedded trace {path!r} is in format {embedded_fmt!r}, not {fmt!r}")
        return Source(embedded_trace(path), filename), embedded_fmt, path
    p = Path(path)
    if fmt is not None:
        _check_format(fmt)
    if not p.is_file():
        raise FileNotFoundError(_not_found(str(path)))
    if fmt is None:
        if p.suffix.lower() not in (".yaml", ".yml"):
            raise ValueError(f"give the format of {str(path)!r}; known formats: {', '.join(FORMATS)}")
        fmt = "cohabit"
    return Source(p, str(path)), fmt, str(path)


def _not_found(path: str) -> str:
    """Neither a file nor an embedded trace: say so, suggesting the nearest embedded name."""
    return (f"unknown trace {path!r}{did_you_mean(path, EMBEDDED)}: no such file, and not an embedded "
            f"trace (embedded traces: {', '.join(EMBEDDED)})")


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small objects (about 40% faster)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_trace(
    path: str | os.PathLike[str],
    fmt: str | None = None,
    *,
    skip_bad_rows: bool = False,
    limit: int | None = None,
    max_bad_rows: int | None = None,
) -> TraceLoad:
    """Load a trace file, or an embedded trace by name (see :data:`EMBEDDED`).

    A string that names an embedded trace loads it unless a file of that
    name exists (then the file is read).

    ``fmt`` is one of :data:`FORMATS`; it may be omitted for an embedded trace
    and for ``.yaml``/``.yml`` files (cohabit format). A malformed row raises
    :class:`TraceRowError` (file:line and column) unless ``skip_bad_rows``, in
    which case it is listed in ``TraceLoad.skipped`` and loading goes on.
    ``max_bad_rows`` caps the rows ``skip_bad_rows`` may skip (None: no cap); one more
    raises :class:`~cohabit.sim.traces.errors.TooManyBadRows` with a summary.
    ``limit`` keeps the ``limit`` earliest-submitted jobs; the whole file is
    still read and checked, so submit times (which some formats count from
    the earliest row) are the same with or without it.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be an integer >= 0 or None, got {limit!r}")
    src, fmt, label = _resolve(path, fmt)
    loader, default_cluster = _loader(fmt)
    if max_bad_rows is not None and (isinstance(max_bad_rows, bool) or not isinstance(max_bad_rows, int)
                                     or max_bad_rows < 0):
        raise ValueError(f"max_bad_rows must be an integer >= 0 or None, got {max_bad_rows!r}")
    sink = Sink(skip_bad_rows=skip_bad_rows, max_bad_rows=max_bad_rows)
    with _gc_paused():
        loader(src, sink)
        jobs = sort_jobs(sink.jobs)
    if limit is not None:
        jobs = jobs[:limit]
    return TraceLoad(
        jobs=jobs,
        skipped=sink.skipped,
        path=label,
        fmt=fmt,
        default_cluster=sink.default_cluster or default_cluster,
        excluded=sink.excluded,
        lines=sink.lines,
    )


def unknown_resources(load: TraceLoad, cluster: ClusterSpec, *, at_most: int = 5) -> list[str]:
    """``file:line: ...`` for jobs of ``load`` demanding a resource no node of ``cluster`` has.

    Such a job could never start (the scheduler would reject it); this says so before the run,
    with its line. At most ``at_most`` messages, then a count of the rest; empty when all is well.
    """
    names = cluster.resource_names
    known = set(names)
    where = f"cluster {cluster.name!r}"
    out: list[str] = []
    bad = 0
    for job in load.jobs:
        spec = job.spec
        if spec.workers.demand.keys() <= known and (spec.ps is None or spec.ps.demand.keys() <= known):
            continue
        bad += 1
        if len(out) < at_most:
            loc, msg = unknown_demands(spec, names, where)[0]
            line = load.lines.get(spec.id, 1)
            out.append(str(TraceRowError(load.path, line, None, f"job {spec.id!r}: {'.'.join(loc)}: {msg}")))
    if bad > len(out):
        out.append(f"... and {bad - len(out)} more job(s) demanding resources {cluster.name!r} does not have")
    return out
