"""Harmony parameter-server traces (Lee et al., §V-B): one CSV row per PS job with its ground truth.

Columns (extra columns are allowed and ignored):

========================  ========  ==========================================================
column                    required  meaning
========================  ========  ==========================================================
``job_id``                yes       unique id
``submit_time``           yes       seconds, >= 0, kept as written
``app``                   yes       application (``nmf``, ``lda``, ``mlr``, ``lasso``, ...)
``dataset``               no        dataset name (public, informational)
``iterations``            yes       iterations to convergence (truth), >= 1
``input_gb``              yes       input data size (GB, Table I), >= 0
``model_gb``              yes       model size (GB, Table I), >= 0
``t_cpu1``                yes       seconds of one COMP subtask on one machine (Eq. 2: /m on m)
``t_pull`` / ``t_push``   yes       seconds of the PULL / PUSH subtask alone on the link
``iters_per_epoch``       no        iterations per pass over the input (default 20)
``deser``                 no        deserialisation CPU of reloaded blocks, fraction of COMP
                                    at alpha = 1 (default 0.15)
``profile_dop``           no        DoP of the earlier profiling run (default 16)
``profile_compute_s``     no        measured COMP seconds at ``profile_dop`` (default exact:
                                    ``t_cpu1 / profile_dop``)
``profile_comm_s``        no        measured PULL + PUSH seconds (default exact)
``n_max``                 no        most machines the job may use (default 100, the size of
                                    the ``harmony`` cluster preset)
========================  ========  ==========================================================

The truth columns become a :class:`~cohabit.sim.truth.PSTruth` (the simulator's secret);
the spec (:func:`~cohabit.sim.harmony_workload.ps_job`) carries only what a user submits:
application, dataset, sizes and the profile (``workload.profile``), which the Isolated and
Naive baselines size their DoP from and Harmony replaces by online profiling.
:func:`write_csv` writes jobs in this format so that a generated workload
(:func:`cohabit.sim.harmony_workload.generate`) round-trips exactly.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable

from ..harmony_workload import REF_DOP, ps_job
from ..truth import PSTruth, TraceJob
from ...spec.limits import MAX_ITERATIONS
from ._common import Sink, Source, build, parsed_rows
from ._csvrows import Row
from .errors import TraceRowError

DEFAULT_CLUSTER = "harmony"
DEFAULT_N_MAX = 100
REQUIRED = ("job_id", "submit_time", "app", "iterations", "input_gb", "model_gb", "t_cpu1", "t_pull", "t_push")
COLUMNS = REQUIRED[:4] + ("dataset",) + REQUIRED[4:] + (
    "iters_per_epoch", "deser", "profile_dop", "profile_compute_s", "profile_comm_s", "n_max")


def parse_row(row: Row) -> TraceJob:
    """One row as a :class:`TraceJob`; raises :class:`TraceRowError` naming file, line and column."""
    job_id = row.text("job_id", what="a job id")
    submit = row.float("submit_time", min=0.0)
    app = row.text("app", what="an application name")
    dataset = row.text("dataset", allow_empty=True) if row.has("dataset") else ""
    iterations = row.int("iterations", min=1, cap=MAX_ITERATIONS)
    t_cpu1 = row.float("t_cpu1", positive=True)
    t_pull = row.float("t_pull", min=0.0)
    t_push = row.float("t_push", min=0.0)
    if t_pull + t_push <= 0:
        raise row.error("t_push", "expected t_pull + t_push > 0 (a PS job communicates every iteration), got 0")
    dop = _opt_int(row, "profile_dop", REF_DOP)
    n_max = _opt_int(row, "n_max", DEFAULT_N_MAX)
    truth_kw = {
        "input_gb": row.float("input_gb", min=0.0), "model_gb": row.float("model_gb", min=0.0),
        "iters_per_epoch": _opt_int(row, "iters_per_epoch", 20),
        "deser": row.float("deser", min=0.0) if _given(row, "deser") else 0.15,
    }
    comp = row.float("profile_compute_s", positive=True) if _given(row, "profile_compute_s") else t_cpu1 / dop
    comm = row.float("profile_comm_s", positive=True) if _given(row, "profile_comm_s") else t_pull + t_push
    return build(
        row.file, row.line,
        lambda: _with_dop(ps_job(job_id, PSTruth(t_cpu1=t_cpu1, t_pull=t_pull, t_push=t_push, **truth_kw),
                                 iterations, n_machines=n_max, submit=submit, app=app,
                                 dataset=dataset),
                          dop, comp, comm),
        columns={"id": "job_id", "submit_time": "submit_time", "n_max": "n_max"},
    )


def _given(row: Row, column: str) -> bool:
    return row.has(column) and row.raw(column) != ""


def _opt_int(row: Row, column: str, default: int) -> int:
    return row.int(column, min=1) if _given(row, column) else default


def _with_dop(job: TraceJob, dop: int, comp: float, comm: float) -> TraceJob:
    """``job`` with its profile stated at ``dop`` with the measured times exactly as written."""
    workload = dict(job.spec.workload or {})
    workload["profile"] = {"dop": dop, "compute_s": comp, "comm_s": comm}
    return TraceJob(job.spec.model_copy(update={"workload": workload}), job.truth)


def load(src: Source, sink: Sink) -> None:
    """Read every row of ``src`` into ``sink``."""
    sink.default_cluster = DEFAULT_CLUSTER
    for row, job in parsed_rows(src, sink, REQUIRED, parse_row):
        sink.add(src.name, row.line, job, id_column="job_id")


def write_csv(jobs: Iterable[TraceJob], path: str | os.PathLike[str]) -> None:
    """Write PS jobs (each with a ``PSTruth``) in this format; floats in ``repr`` so they round-trip."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for job in jobs:
            ps, spec = job.truth.ps, job.spec
            if ps is None:
                raise ValueError(f"job {spec.id!r} has no PSTruth: not a Harmony parameter-server job")
            wl = spec.workload or {}
            prof = wl.get("profile", {})
            w.writerow([spec.id, _f(spec.submit_time), wl.get("app", spec.model), job.truth.iterations,
                        wl.get("dataset", ""), _f(ps.input_gb), _f(ps.model_gb), _f(ps.t_cpu1), _f(ps.t_pull),
                        _f(ps.t_push), ps.iters_per_epoch, _f(ps.deser), prof.get("dop", REF_DOP),
                        _f(prof["compute_s"]), _f(prof["comm_s"]), spec.n_max])


def _f(x: float) -> str:
    """Shortest text that reads back as the same float (numpy scalars included)."""
    return repr(float(x))


__all__ = ["COLUMNS", "DEFAULT_CLUSTER", "REQUIRED", "TraceRowError", "load", "parse_row", "write_csv"]

