"""Alibaba GPU cluster trace 2023 (Weng et al., ATC'23), ``openb_pod_list_*.csv``.

Columns ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
creation_time,deletion_time,scheduled_time``; extra columns are allowed.
Each pod becomes one job:

* ``id = name``; ``tenant = qos`` (LS, BE, Burstable, Guaranteed);
  ``submit_time = creation_time`` minus the earliest ``creation_time`` among
  the well-formed rows (seconds).
* Demand. ``num_gpu == 1``: one worker with ``gpu = gpu_milli / 1000``
  (fractional GPU sharing). ``num_gpu > 1``: ``num_gpu`` workers of one GPU
  each (``gpu_milli`` must then be 1000), architecture ``allreduce``.
  ``num_gpu == 0``: a CPU-only, single-task job with ``gpu = 0``
  (``gpu_milli`` must be 0). ``cpu = cpu_milli / 1000`` and
  ``mem_gb = memory_mib / 1024`` are split evenly over the workers.
* A non-empty ``gpu_spec`` (the GPU models the pod accepts, e.g.
  ``V100M16|V100M32``) goes to ``workload = {"gpu_spec": ...}``; empty and
  ``nan`` mean no constraint.
* ``pod_phase`` is not exposed: it tells how the pod ended, which a scheduler
  cannot know in advance.
* Truth: ``duration = deletion_time - scheduled_time`` with nominal
  one-second iterations, whatever the phase: Running, Succeeded and Failed
  pods all held their resources for that long.

Odd rows, decided from the data (8,152 pods in ``alibaba_openb_pods_default.csv``):

* Pods never scheduled (empty ``scheduled_time``; all 897 are ``Pending``)
  have no run time to replay. They are *excluded*: left out and listed in
  ``TraceLoad.excluded`` with the reason, whatever ``skip_bad_rows`` says.
  The embedded trace therefore loads 7,255 jobs.
* A scheduled pod that ran for 0 s (``deletion_time == scheduled_time``) is
  excluded the same way (none in the embedded file).
* Bad rows (errors): ``scheduled_time < creation_time``,
  ``deletion_time < scheduled_time``, a scheduled pod without
  ``deletion_time``, ``gpu_milli`` outside [0, 1000] or inconsistent with
  ``num_gpu`` as above, and a pod that requests no resource at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...spec.job import JobSpec, TaskGroup
from ...spec.resources import Resources
from ..truth import TraceJob
from ...spec.limits import MAX_TASKS
from ._common import parsed_rows, Sink, Source, build, truth_for_duration
from ._csvrows import Row
from .errors import TraceRowError

DEFAULT_CLUSTER = "alibaba-openb"
COLUMNS = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
    "creation_time", "deletion_time", "scheduled_time",
)
REQUIRED = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "qos",
    "creation_time", "deletion_time", "scheduled_time",
)


@dataclass(frozen=True, slots=True)
class _Pod:
    line: int
    name: str
    created: float
    duration: float
    workers: int
    demand: Resources
    tenant: str
    gpu_spec: str


def _demand(row: Row) -> tuple[int, Resources]:
    cpu = row.float("cpu_milli", min=0.0) / 1000.0
    mem = row.float("memory_mib", min=0.0) / 1024.0
    n_gpu = row.int("num_gpu", min=0, cap=MAX_TASKS)
    milli = row.int("gpu_milli", min=0, max=1000)
    if n_gpu == 0:
        if milli != 0:
            raise row.error("gpu_milli", f"expected 0 for a CPU-only pod (num_gpu 0), got {milli}")
        workers, gpu = 1, 0.0
    elif n_gpu == 1:
        if milli == 0:
            raise row.error("gpu_milli", "expected an integer in [1, 1000] for a pod with num_gpu 1, got 0")
        workers, gpu = 1, milli / 1000.0
    else:
        if milli != 1000:
            raise row.error("gpu_milli", f"expected 1000 for a multi-GPU pod (num_gpu {n_gpu}), got {milli}")
        workers, gpu = n_gpu, 1.0
    if gpu == 0 and cpu == 0 and mem == 0:
        raise row.error(None, "pod requests no cpu, memory or GPU")
    return workers, Resources(gpu=gpu, cpu=cpu / workers, mem_gb=mem / workers)


def _parse(row: Row) -> _Pod | TraceRowError:
    """A pod, or the reason to exclude it (a well-formed row that cannot be replayed)."""
    name = row.text("name", what="a pod name")
    tenant = row.text("qos", what="a QoS class")
    workers, demand = _demand(row)
    created = row.float("creation_time", min=0.0)
    if not row.raw("scheduled_time"):
        phase = row.raw("pod_phase") if row.has("pod_phase") else ""
        return row.error(None, f"pod never scheduled (pod_phase {phase!r}): no run time to replay; excluded")
    scheduled = row.float("scheduled_time", min=0.0)
    if scheduled < created:
        raise row.error("scheduled_time", f"expected a time >= creation_time ({created:g}), got {scheduled:g}")
    if not row.raw("deletion_time"):
        raise row.error("deletion_time", "expected the time the pod ended, got '' for a scheduled pod")
    deleted = row.float("deletion_time", min=0.0)
    if deleted < scheduled:
        raise row.error("deletion_time", f"expected a time >= scheduled_time ({scheduled:g}), got {deleted:g}")
    if deleted == scheduled:
        return row.error(None, "pod ran for 0 s (deletion_time == scheduled_time): nothing to replay; excluded")
    gpu_spec = row.raw("gpu_spec") if row.has("gpu_spec") else ""
    if gpu_spec.lower() == "nan":  # how pandas writes "no constraint" in some openb files
        gpu_spec = ""
    return _Pod(row.line, name, created, deleted - scheduled, workers, demand, tenant, gpu_spec)


def _job(pod: _Pod, t0: float) -> TraceJob:
    spec = JobSpec(
        id=pod.name,
        submit_time=pod.created - t0,
        tenant=pod.tenant,
        architecture="single" if pod.workers == 1 else "allreduce",
        workers=TaskGroup(count=pod.workers, demand=pod.demand),
        workload={"gpu_spec": pod.gpu_spec} if pod.gpu_spec else None,
    )
    return TraceJob(spec, truth_for_duration(pod.duration, pod.workers))


def load(src: Source, sink: Sink) -> None:
    """Read every row of ``src`` into ``sink`` (two passes: times are relative to the earliest)."""
    pods: list[_Pod] = []
    t0: float | None = None
    for row, pod in parsed_rows(src, sink, REQUIRED, _parse):
        created = row.float("creation_time")
        t0 = created if t0 is None else min(t0, created)
        if isinstance(pod, TraceRowError):
            sink.exclude(pod)
        else:
            pods.append(pod)
    for pod in pods:
        assert t0 is not None
        try:
            job = build(src.name, pod.line, lambda: _job(pod, t0), columns={"id": "name", "tenant": "qos"})
        except TraceRowError as e:
            sink.bad(e)
            continue
        sink.add(src.name, pod.line, job, id_column="name")
