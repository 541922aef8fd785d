"""Pollux workload CSV (Qiao et al., OSDI'21; petuum/adaptdl ``simulator/workloads``).

Columns ``name,time,application,num_replicas,batch_size``; extra columns are
allowed. Each row is an elastic data-parallel job:

* ``id = name``, ``submit_time = time`` (seconds, kept as written),
  ``model = application``, ``batch_size`` = the job's total batch size.
* ``num_replicas`` workers of one GPU each (the same per-worker demand as
  ``simple_job``), architecture ``allreduce`` — also for one replica, because
  the job is elastic and may grow — with ``n_min = 1`` and ``n_max = 64``
  (:data:`MAX_REPLICAS`, the cap of the Pollux simulator); ``num_replicas``
  must lie in [1, 64].
* ``epochs`` = the number of epochs the application is trained for, which is
  the number of rows in each of its ``validation-<bsz>.csv`` profiles (what a
  user would declare: e.g. 100 for cifar10, 90 for imagenet).

The work amount (the truth) comes from the application's profiles in
``cohabit/data/profiles/pollux_apps/<app>/``. In those files ``progress`` is
statistically efficient progress, counted in iterations at the application's
smallest profiled batch size (the ``init_batch_size`` of the Pollux
simulator; e.g. cifar10 at batch 128: 391 per epoch = 50,000 images / 128).
A job completes when it reaches the progress recorded at the end of its last
epoch; as in the Pollux simulator, that target is the smallest final
``progress`` over all ``validation-*.csv`` files of the application, so it
does not depend on the batch size. We take::

    truth = JobTruth(iterations=ceil(target_progress), duration=None,
                     ref_workers=num_replicas, app=application)

How fast a job makes progress (throughput, statistical efficiency) belongs to
``cohabit.sim.profiles.pollux``; nothing here models it. ``application`` must
be one of the profiled apps and ``batch_size`` must lie within the batch sizes
profiled for it (the physics interpolates between them), else the row is bad.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources as ilr
from importlib.resources.abc import Traversable

from ..truth import JobTruth, TraceJob
from ._common import parsed_rows, Sink, Source, build, gpu_job
from ._csvrows import Row
from .errors import TraceRowError

DEFAULT_CLUSTER = "pollux"
COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
REQUIRED = COLUMNS
MAX_REPLICAS = 64
"""``n_max`` of every Pollux job: the Pollux simulator never gives a job more than 64 replicas."""

_VALIDATION = re.compile(r"validation-(\d+)\.csv")


@dataclass(frozen=True, slots=True)
class PolluxApp:
    """What the trace loader needs from one application's profiles.

    ``target_progress``: progress (iterations at ``init_batch_size``) at the
    end of the last epoch; ``epochs``: number of epochs trained;
    ``batch_sizes``: the profiled total batch sizes, ascending.
    """

    name: str
    target_progress: float
    epochs: int
    batch_sizes: tuple[int, ...]

    @property
    def init_batch_size(self) -> int:
        return self.batch_sizes[0]

    @property
    def target_iterations(self) -> int:
        return max(1, math.ceil(self.target_progress - 1e-9))


def _apps_dir() -> Traversable:
    return ilr.files("cohabit.data").joinpath("profiles/pollux_apps")


@cache
def known_apps() -> tuple[str, ...]:
    """Names of the applications with profiles in the package."""
    return tuple(sorted(p.name for p in _apps_dir().iterdir() if p.is_dir()))


@cache
def app_profile(name: str) -> PolluxApp:
    """Read ``validation-*.csv`` of one application; unknown names list the known ones."""
    if name not in known_apps():
        raise ValueError(f"unknown Pollux application {name!r}; known: {', '.join(known_apps())}")
    finals: dict[int, tuple[int, float]] = {}
    for entry in _apps_dir().joinpath(name).iterdir():
        m = _VALIDATION.fullmatch(entry.name)
        if not m:
            continue
        with entry.open("r", encoding="utf-8", newline="") as f:
            progress = [float(r["progress"]) for r in csv.DictReader(f)]
        if not progress:
            raise ValueError(f"profile {name}/{entry.name} has no rows")
        finals[int(m.group(1))] = (len(progress), progress[-1])
    if not finals:
        raise ValueError(f"Pollux application {name!r} has no validation-<batch>.csv profiles")
    epochs = min(n for n, _ in finals.values())
    if any(n != epochs for n, _ in finals.values()):
        raise ValueError(f"profiles of {name!r} disagree on the number of epochs: "
                         f"{ {b: n for b, (n, _) in sorted(finals.items())} }")
    return PolluxApp(
        name=name,
        target_progress=min(p for _, p in finals.values()),
        epochs=epochs,
        batch_sizes=tuple(sorted(finals)),
    )


def parse_row(row: Row) -> TraceJob:
    """One Pollux workload row as a :class:`TraceJob`; raises :class:`TraceRowError`."""
    name = row.text("name", what="a job name")
    submit = row.float("time", min=0.0)
    app_name = row.text("application", what="an application name")
    if app_name not in known_apps():
        raise row.error("application", f"expected one of {', '.join(known_apps())}, got {app_name!r}")
    app = app_profile(app_name)
    replicas = row.int("num_replicas", min=1, max=MAX_REPLICAS)
    bsz = row.int("batch_size", min=1)
    lo, hi = app.batch_sizes[0], app.batch_sizes[-1]
    if not lo <= bsz <= hi:
        raise row.error("batch_size", f"expected a batch size profiled for {app_name}, in [{lo}, {hi}], got {bsz}")
    return build(
        row.file, row.line,
        lambda: TraceJob(
            gpu_job(name, replicas, submit_time=submit, model=app_name, batch_size=bsz, epochs=app.epochs,
                    n_min=1, n_max=MAX_REPLICAS, architecture="allreduce"),
            JobTruth(iterations=app.target_iterations, ref_workers=replicas, app=app_name),
        ),
        columns={"id": "name", "submit_time": "time", "batch_size": "batch_size"}, compacted=True,
    )


def load(src: Source, sink: Sink) -> None:
    """Read every row of ``src`` into ``sink``."""
    for row, job in parsed_rows(src, sink, REQUIRED, parse_row):
        sink.add(src.name, row.line, job, id_column="name")
