"""Plumbing shared by the trace loaders: the source file, the row sink, spec helpers."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from ...spec.job import JobSpec, TaskGroup, compact, derived, simple_job
from ...spec.limits import decode_utf8
from ..truth import JobTruth, TraceJob
from ._csvrows import read_rows
from .errors import TooManyBadRows, TraceRowError


@dataclass(frozen=True)
class Source:
    """A trace file to read and the name used for it in error messages."""

    resource: Traversable | Path
    name: str

    def open_text(self) -> IO[str]:
        """Open as UTF-8 text (a leading byte-order mark is dropped), newlines untranslated for csv.

        The whole file is decoded first, so a byte that is not UTF-8 is
        reported on its own line (:class:`TraceRowError`, column None).
        """
        text, line, reason = decode_utf8(self.resource.read_bytes())
        if text is None:
            raise TraceRowError(self.name, line, None, f"not UTF-8 text ({reason})")
        return io.StringIO(text, newline="")


@dataclass
class Sink:
    """Collects the jobs of one trace; bad rows raise or are kept, as asked.

    * :meth:`bad` — a malformed row: raised, or recorded in ``skipped`` when
      ``skip_bad_rows`` (:class:`TooManyBadRows` past ``max_bad_rows``).
    * :meth:`exclude` — a well-formed row deliberately left out (e.g. an
      Alibaba pod that was never scheduled); always recorded, never raised.
    * :meth:`add` — a good job; a job id seen before makes the row bad.
    """

    skip_bad_rows: bool
    max_bad_rows: int | None = None
    jobs: list[TraceJob] = field(default_factory=list)
    skipped: list[TraceRowError] = field(default_factory=list)
    excluded: list[TraceRowError] = field(default_factory=list)
    default_cluster: str | None = None
    lines: dict[str, int] = field(default_factory=dict)  # job id -> line it was read from

    def bad(self, err: TraceRowError) -> None:
        """Raise ``err``, or skip it; past ``max_bad_rows`` skipped rows, give up with a summary."""
        if not self.skip_bad_rows:
            raise err
        if self.max_bad_rows is not None and len(self.skipped) >= self.max_bad_rows:
            first = self.skipped[0] if self.skipped else err
            raise TooManyBadRows(
                err.file, err.line, None,
                f"more than {self.max_bad_rows} malformed rows (raise --max-bad-rows to skip more); "
                f"is this file in the format given? The first bad row: {first}",
            )
        self.skipped.append(err)

    def exclude(self, err: TraceRowError) -> None:
        self.excluded.append(err)

    def add(self, file: str, line: int, job: TraceJob, *, id_column: str | None, what: str = "column") -> None:
        first = self.lines.get(job.spec.id)
        if first is not None:
            self.bad(TraceRowError(file, line, id_column, f"duplicate job id {job.spec.id!r} (first on line {first})",
                                   what=what))
            return
        self.lines[job.spec.id] = line
        self.jobs.append(job)


@cache
def _gpu_template(n_gpus: int) -> tuple[str, TaskGroup, JobSpec]:
    template = simple_job("template", n_gpus)
    base = JobSpec(id="template", submit_time=0.0, workers=template.workers, architecture=template.architecture)
    return template.architecture, template.workers, base


def gpu_job(id: str, n_gpus: int, *, submit_time: float, **kw: Any) -> JobSpec:
    """The same JobSpec as ``simple_job(id, n_gpus, ...)``, sharing one TaskGroup per size (fast).

    ``architecture`` may be given in ``kw`` to override simple_job's choice
    (``single`` for one GPU, else ``allreduce``). A row whose fields need no more than their own
    field checks is derived from one validated spec per size (``spec.job.derived``); anything
    else is validated in full (and raises validation's error). Either way the spec is compact
    (``spec.job.compact``): pass ``compacted=True`` to :func:`build`.
    """
    architecture, workers, base = _gpu_template(n_gpus)
    if kw.get("architecture", architecture) == architecture:
        kw.pop("architecture", None)
        spec = derived(base, id=id, submit_time=submit_time, **kw)
        if spec is not None:
            return spec
    kw.setdefault("architecture", architecture)
    return compact(JobSpec(id=id, submit_time=submit_time, workers=workers, **kw))


def build(
    file: str, line: int, make: Callable[[], TraceJob], *, what: str = "column",
    columns: dict[str, str] | None = None, compacted: bool = False,
) -> TraceJob:
    """Run ``make``; turn a validation error from JobSpec or JobTruth into a :class:`TraceRowError`.

    ``columns`` maps a spec field name to the trace column it came from, so
    that the error names the column the user can fix. The spec is made compact
    (``spec.job.compact``) unless ``make`` did (``compacted``: :func:`gpu_job` does).
    """
    try:
        job = make()
        return job if compacted else _slim(job)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        col = (columns or {}).get(loc.split(".")[0], loc or None)
        raise TraceRowError(file, line, col, err.get("msg", str(e)), what=what) from None
    except ValueError as e:  # JobTruth and Resources raise plain ValueError
        raise TraceRowError(file, line, None, str(e), what=what) from None


def _slim(job: TraceJob) -> TraceJob:
    """``job`` with its spec compact (``spec.job.compact``: its fields in JobSpec's shared key
    table, its set of explicitly set fields shared with every spec that set the same ones)."""
    small = compact(job.spec)
    return job if small is job.spec else TraceJob(small, job.truth)


def truth_for_duration(duration: float, ref_workers: int) -> JobTruth:
    """Truth of a duration-driven job with nominal one-second iterations (see ``JobTruth``)."""
    return JobTruth(iterations=max(1, _ceil(duration)), duration=duration, ref_workers=ref_workers)


def _ceil(x: float) -> int:
    n = int(x)
    return n if n >= x else n + 1


_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that orders ``job-2`` before ``job-10``."""
    parts = _DIGITS.split(text)
    return (tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), text)


def sort_jobs(jobs: list[TraceJob]) -> list[TraceJob]:
    """Jobs by submit time, then by id in natural order (``j2`` before ``j10``).

    Sorts on the float key first and applies the (slower) natural id key only
    within runs of equal submit times.
    """
    out = sorted(jobs, key=lambda j: j.spec.submit_time)
    i, n = 0, len(out)
    while i < n:
        t = out[i].spec.submit_time
        j = i + 1
        while j < n and out[j].spec.submit_time == t:
            j += 1
        if j - i > 1:
            out[i:j] = sorted(out[i:j], key=lambda job: natural_key(job.spec.id))
        i = j
    return out


def parsed_rows(src: Source, sink: Sink, required: Any, parse: Callable[[Any], Any]) -> Any:
    """Yield ``(row, parse(row))`` for each good CSV row of ``src``; bad rows go to ``sink``."""
    with src.open_text() as f:
        for row in read_rows(f, src.name, required):
            if isinstance(row, TraceRowError):
                sink.bad(row)
                continue
            try:
                parsed = parse(row)
            except TraceRowError as e:
                sink.bad(e)
                continue
            yield row, parsed
