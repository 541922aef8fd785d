"""Gavel's ``.trace`` files (Narayanan et al., OSDI'20; stanford-futuredata/gavel ``scheduler/traces``).

One job per line, no header, ten tab-separated fields (Gavel's ``utils.parse_trace``)::

    job_type  command  working_directory  num_steps_arg  needs_data_dir
    total_steps  scale_factor  priority_weight  SLO  arrival_time

* ``job_type`` names a model and batch size as Gavel's throughput table does
  (``ResNet-18 (batch size 128)``, ``A3C``); it must be in
  ``data/profiles/gavel_throughputs.json`` for ``scale_factor`` GPUs.
* ``total_steps`` >= 1: the job's work (Gavel counts steps of all its workers together).
* ``scale_factor`` >= 1: GPUs (one worker each).
* ``priority_weight`` > 0 becomes the spec's ``weight``; ``SLO`` (-1: none) and
  ``arrival_time`` (seconds, >= 0) the deadline (arrival + SLO x isolated
  duration on a V100, as Gavel defines it) and the submit time.
* ``command``, ``working_directory``, ``num_steps_arg`` and ``needs_data_dir``
  describe how Gavel's runtime launches the job; they are checked for shape
  and otherwise ignored.

Truth: ``duration`` is ``total_steps`` over the measured V100 throughput
(steps/s, alone, ``'null'`` entry) for ``(job_type, scale_factor)`` -- the
reference GPU of Gavel's simulator -- and ``gpu_speed`` holds each GPU
type's throughput relative to the V100's (``k80``, ``p100``, ``v100``), so that
``sim.physics`` runs a job on P100 or K80 nodes (cluster nodes labelled
``gpu_model``) at its measured speed there. Gavel measured no throughput for a
few job types on some GPUs (ResNet-50 at batch size 128 on 2+ K80s: out of
memory); such a job's workers also demand one ``gpu16gb`` each (a GPU of at
least 16 GB, ``spec.cluster.BIG_GPU``), which K80 nodes have none of, so the
ledger keeps them off K80s (``gavel_cluster`` declares it; a cluster file that
does not is refused for such a trace before the run, naming the job's line). Job ids are
``gavel-<n>``, ``n`` counting lines from 0 as Gavel numbers jobs.
"""

from __future__ import annotations

import math

from ...data.gavel_table import GPU_TYPES, solo_throughputs
from ...spec.cluster import BIG_GPU, GAVEL_GPU_MEM_GB
from ...spec.job import JobSpec, TaskGroup, simple_job
from ...spec.limits import MAX_ITERATIONS, MAX_TASKS
from ..truth import JobTruth, TraceJob
from ._common import Sink, Source, build, gpu_job
from .errors import TraceRowError

DEFAULT_CLUSTER = "gavel-v100-p100-k80"
FIELDS = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
          "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time")
REFERENCE_GPU = "v100"


def throughputs() -> dict[str, dict[tuple[str, int], float]]:
    """GPU type -> (job_type, scale_factor) -> steps/s alone, from Gavel's measured table
    (:mod:`cohabit.data.gavel_table`)."""
    return solo_throughputs()


def _number(fields: list[str], i: int, file: str, line: int, *, integer: bool = False) -> float:
    v = fields[i].strip()
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or (integer and not x.is_integer()):
        raise TraceRowError(file, line, FIELDS[i], f"expected {'an integer' if integer else 'a number'}, got {v!r}")
    return x


def parse_line(text: str, file: str, line: int, ordinal: int) -> TraceJob:
    """One ``.trace`` line as a :class:`TraceJob`; raises :class:`TraceRowError` naming file, line and field."""
    fields = text.rstrip("\r\n").split("\t")
    if len(fields) != len(FIELDS):
        raise TraceRowError(file, line, None,
                            f"expected {len(FIELDS)} tab-separated fields ({', '.join(FIELDS)}), got {len(fields)}")
    job_type = fields[0].strip()
    if not job_type:
        raise TraceRowError(file, line, "job_type", "expected a job type, got ''")
    steps = _number(fields, 5, file, line, integer=True)
    if not 1 <= steps <= MAX_ITERATIONS:
        raise TraceRowError(file, line, "total_steps", f"expected an integer in [1, {MAX_ITERATIONS}], got {fields[5]!r}")
    scale = _number(fields, 6, file, line, integer=True)
    if not 1 <= scale <= MAX_TASKS:
        raise TraceRowError(file, line, "scale_factor", f"expected an integer in [1, {MAX_TASKS}], got {fields[6]!r}")
    if fields[4].strip() not in ("0", "1"):
        raise TraceRowError(file, line, "needs_data_dir", f"expected 0 or 1, got {fields[4]!r}")
    weight = _number(fields, 7, file, line)
    if weight <= 0:
        raise TraceRowError(file, line, "priority_weight", f"expected a number > 0, got {fields[7]!r}")
    slo = _number(fields, 8, file, line)
    if slo <= 0 and slo != -1:
        raise TraceRowError(file, line, "SLO", f"expected -1 (none) or a number > 0, got {fields[8]!r}")
    arrival = _number(fields, 9, file, line)
    if arrival < 0:
        raise TraceRowError(file, line, "arrival_time", f"expected a number >= 0, got {fields[9]!r}")
    key = (job_type, int(scale))
    table = throughputs()
    ref = table[REFERENCE_GPU].get(key)
    if ref is None or ref <= 0:
        known = sorted({name for name, _ in table[REFERENCE_GPU]})
        raise TraceRowError(file, line, "job_type",
                            f"no measured throughput for {job_type!r} on {int(scale)} GPU(s) "
                            f"(known job types: {', '.join(known)})")
    duration = steps / ref
    speed = {gpu: table[gpu].get(key, 0.0) / ref for gpu in GPU_TYPES}
    job_id = f"gavel-{ordinal}"
    deadline = arrival + slo * duration if slo > 0 else None
    too_small = [GAVEL_GPU_MEM_GB[g] for g in GPU_TYPES if speed[g] <= 0]
    if any(m >= 16 for m in too_small):
        raise TraceRowError(file, line, "job_type", f"{job_type!r} on {int(scale)} GPU(s) has no measured "
                            f"throughput on a 16 GB GPU ({', '.join(g for g in GPU_TYPES if speed[g] <= 0)})")
    return build(
        file, line,
        lambda: TraceJob(
            _spec(job_id, int(scale), arrival, job_type, int(steps), weight, deadline, bool(too_small)),
            JobTruth(iterations=int(steps), duration=duration, ref_workers=int(scale), gpu_speed=speed),
        ),
        columns={"submit_time": "arrival_time", "weight": "priority_weight", "deadline": "SLO",
                 "iterations": "total_steps", "model": "job_type"},
    )


def _spec(job_id: str, gpus: int, arrival: float, job_type: str, steps: int, weight: float,
          deadline: float | None, big_gpu: bool) -> JobSpec:
    kw = dict(submit_time=arrival, model=job_type, iterations=steps, weight=weight, deadline=deadline)
    if not big_gpu:
        return gpu_job(job_id, gpus, **kw)  # type: ignore[arg-type]
    plain = simple_job(job_id, gpus, **kw)  # type: ignore[arg-type]
    demand = plain.workers.demand + {BIG_GPU: 1.0}
    return plain.model_copy(update={"workers": TaskGroup(count=gpus, demand=demand)})


def load(src: Source, sink: Sink) -> None:
    """Read every line of ``src`` into ``sink`` (blank lines are skipped; they do not number jobs)."""
    ordinal = 0
    with src.open_text() as f:
        for line, text in enumerate(f.read().splitlines(), start=1):
            if not text.strip():
                continue
            try:
                job = parse_line(text, src.name, line, ordinal)
            except TraceRowError as e:
                sink.bad(e)
                ordinal += 1
                continue
            ordinal += 1
            sink.add(src.name, line, job, id_column=None, what="field")
