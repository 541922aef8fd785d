"""The Philly trace (Jeon et al., ATC'19) as released with Pollux: ~82k jobs, Sep–Dec 2017.

Columns ``timestamp,duration,num_gpus,gpu_time,cluster``; ``gpu_time``
(= duration x num_gpus) is redundant and ignored, extra columns are allowed.

* ``timestamp`` ``YYYY-MM-DD HH:MM:SS`` (no time zone): the submission;
  ``submit_time`` is seconds since the earliest timestamp among the good rows.
* ``duration`` seconds, must be > 0 (rows with ``duration <= 0`` are bad rows).
* ``num_gpus`` >= 1: one worker per GPU, as ``simple_job`` builds it.
* ``cluster``: the virtual cluster, i.e. the team; it becomes ``tenant``.

The file has no job ids: job ``philly-00042`` is the 43rd data row in file
order (bad rows keep their number, so ids do not move when rows are skipped).
Philly users declared no iteration count and no model, so ``spec.iterations``
is None and ``spec.model`` is ``"unknown"``; the truth uses nominal one-second
iterations: ``JobTruth(iterations=ceil(duration), duration=duration,
ref_workers=num_gpus)``.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime

from ..truth import TraceJob
from ...spec.limits import MAX_TASKS
from ._common import Sink, Source, build, gpu_job, truth_for_duration
from ._csvrows import Row, read_rows
from .errors import TraceRowError

DEFAULT_CLUSTER = "philly"
COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
REQUIRED = ("timestamp", "duration", "num_gpus", "cluster")

_STAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
_EPOCH = datetime(1970, 1, 1)


def parse_timestamp(row: Row, column: str = "timestamp") -> float:
    """Seconds since 1970-01-01 of a naive ``YYYY-MM-DD HH:MM:SS`` field."""
    v = row.raw(column)
    if _STAMP.fullmatch(v):
        try:
            return (datetime.fromisoformat(v) - _EPOCH).total_seconds()
        except ValueError:
            pass
    raise row.error(column, f"expected a time 'YYYY-MM-DD HH:MM:SS', got {v!r}")


def _parse(row: Row) -> tuple[float, float, int, str]:
    stamp = parse_timestamp(row)
    duration = row.float("duration", positive=True)
    gpus = row.int("num_gpus", min=1, cap=MAX_TASKS)
    tenant = row.text("cluster", what="a virtual cluster id")
    return stamp, duration, gpus, sys.intern(tenant)  # ~15 teams: one string each, not one per job


def load(src: Source, sink: Sink) -> None:
    """Read every row of ``src`` into ``sink`` (two passes: times are relative to the earliest)."""
    good: list[tuple[int, int, float, float, int, str]] = []
    with src.open_text() as f:
        for ordinal, row in enumerate(read_rows(f, src.name, REQUIRED)):
            if isinstance(row, TraceRowError):
                sink.bad(row)
                continue
            try:
                good.append((ordinal, row.line, *_parse(row)))
            except TraceRowError as e:
                sink.bad(e)
    if not good:
        return
    t0 = min(g[2] for g in good)
    for ordinal, line, stamp, duration, gpus, tenant in good:
        job_id = f"philly-{ordinal:05d}"
        try:
            job = build(
                src.name, line,
                lambda: TraceJob(
                    gpu_job(job_id, gpus, submit_time=stamp - t0, tenant=tenant),
                    truth_for_duration(duration, gpus),
                ),
                columns={"tenant": "cluster", "submit_time": "timestamp"}, compacted=True,
            )
        except TraceRowError as e:
            sink.bad(e)
            continue
        sink.add(src.name, line, job, id_column=None)
