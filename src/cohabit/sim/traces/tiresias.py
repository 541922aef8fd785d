"""Tiresias-format CSV traces (Gu et al., NSDI'19; also used by Muri and mltiply).

Columns ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``;
``interval`` (the gap to the next arrival) is redundant and ignored, extra
columns are allowed. Each row becomes::

    spec  = simple_job(job_id, num_gpu, submit_time=submit_time,
                       model=model_name, iterations=iterations)
    truth = JobTruth(iterations=iterations, duration=duration, ref_workers=num_gpu)

``submit_time`` is kept as written (seconds, not rebased). The user declared
``iterations``; ``duration`` (seconds at ``num_gpu`` consolidated GPUs) is the
hidden truth.

The ``muri`` format (:func:`load_muri`) is the same CSV as the Muri artifact
(Zhao et al., SIGCOMM'22, ``simulator/trace-data``) writes it: times in
**milliseconds** and an ``iteration_time`` column (ms per iteration at
``num_gpu`` GPUs). Muri's simulator runs a job for ``iterations x
iteration_time``, not for its ``duration`` column (``jobs.py``:
``remaining_iteration`` counts down at ``1 / iteration_time``), so the truth
here is ``duration = iterations x iteration_time / 1000`` seconds and
``submit_time`` is divided by 1000. Extra columns (``batch_size``,
``resource_time_*``, ``priority``) are ignored.
"""

from __future__ import annotations

from ..truth import JobTruth, TraceJob
from ...spec.limits import MAX_ITERATIONS, MAX_TASKS
from ._common import parsed_rows, Sink, Source, build, gpu_job
from ._csvrows import Row
from .errors import TraceRowError

DEFAULT_CLUSTER = "tiresias"
MURI_CLUSTER = "muri-n8g8"
COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval")
REQUIRED = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration")
MURI_REQUIRED = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "iteration_time")
MS = 1000.0


def parse_row(row: Row, *, muri: bool = False) -> TraceJob:
    """One Tiresias row (``muri``: one Muri row, times in ms) as a :class:`TraceJob`;
    raises :class:`TraceRowError`."""
    job_id = row.text("job_id", what="a job id")
    gpus = row.int("num_gpu", min=1, cap=MAX_TASKS)
    submit = row.float("submit_time", min=0.0)
    iterations = row.int("iterations", min=1, cap=MAX_ITERATIONS)
    model = row.text("model_name", what="a model name")
    if muri:
        submit /= MS
        duration = iterations * row.float("iteration_time", positive=True) / MS
    else:
        duration = row.float("duration", positive=True)
    return build(
        row.file, row.line,
        lambda: TraceJob(
            gpu_job(job_id, gpus, submit_time=submit, model=model, iterations=iterations),
            JobTruth(iterations=iterations, duration=duration, ref_workers=gpus),
        ),
        columns={"id": "job_id", "submit_time": "submit_time", "model": "model_name", "iterations": "iterations",
                 "duration": "iteration_time" if muri else "duration"}, compacted=True,
    )


def load(src: Source, sink: Sink) -> None:
    """Read every row of ``src`` into ``sink``."""
    for row, job in parsed_rows(src, sink, REQUIRED, parse_row):
        sink.add(src.name, row.line, job, id_column="job_id")


def _parse_muri(row: Row) -> TraceJob:
    return parse_row(row, muri=True)


def load_muri(src: Source, sink: Sink) -> None:
    """Read every row of a Muri-artifact trace (times in ms, ``iteration_time``) into ``sink``."""
    for row, job in parsed_rows(src, sink, MURI_REQUIRED, _parse_muri):
        sink.add(src.name, row.line, job, id_column="job_id")
