"""Run one policy over real jobs on :class:`LocalBackend` and compute the same metrics as the simulator.

:func:`local_cluster` builds the default cluster of logical nodes for this
machine; :func:`check_jobs` validates every job's ``workload:`` before any
process starts; :func:`run_local` drives the scheduler on real processes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.live import JobSource
from ..engine.loop import RunResult, Scheduler
from ..report.metrics import Metrics, compute_metrics
from ..spec.cluster import ClusterSpec
from ..spec.job import JobSpec
from ..spec.resources import Resources
from .local import Listener, LocalBackend
from .status import JobStatus
from .ps.launch import ps_job_problem
from .workloads import WorkloadError, parse_config


def machine_memory_gb() -> float:
    """Physical memory of this machine in GB (8 if unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 8.0


def usable_cores() -> int:
    """Cores this process may run on (affinity), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def local_cluster(nodes: int | None = None, *, cores: int | None = None, mem_gb: float | None = None,
                  net_gbps: float | None = None) -> ClusterSpec:
    """Logical nodes for real execution on this machine.

    Defaults: one node per usable core (``os.sched_getaffinity`` /
    ``os.cpu_count()``); each node gets ``cpu = max(1, cores // nodes)`` and
    ``mem_gb = 0.8 * physical memory / nodes`` (rounded down to 0.1 GB). With
    more nodes than cores, nodes share cores (LocalBackend pins node ``i`` to
    core ``i mod cores``), so CPU capacity is oversubscribed on purpose.
    ``net_gbps``: each node's network capacity (the parameter-server bandwidth budget;
    default none, i.e. unlimited and not a resource).
    """
    c = cores if cores is not None else usable_cores()
    n = nodes if nodes is not None else c
    if n < 1:
        raise ValueError(f"nodes must be >= 1, got {n!r}")
    mem = mem_gb if mem_gb is not None else machine_memory_gb()
    per_mem = math.floor(0.8 * mem / n * 10) / 10
    return ClusterSpec.homogeneous("local", n, Resources(cpu=max(1, c // n), mem_gb=max(per_mem, 0.1),
                                                          net_gbps=net_gbps or 0.0))


def job_problems(spec: JobSpec) -> list[tuple[tuple[str, ...], str]]:
    """What stops ``spec`` from running for real, as ``(field path, message)`` (empty if it can run).

    The path (``("workload", "data")``) lets a jobs-file loader point at the line
    (:func:`cohabit.spec.yamlio.load_jobs` with ``check=``).
    """
    try:
        problem = ps_job_problem(spec, parse_config(spec.id, spec.workload))
    except WorkloadError as exc:
        return [(("workload", exc.field) if exc.field else ("workload",), str(exc))]
    if problem is not None:
        return [(("architecture",), problem)]
    if spec.submit_time > MAX_REAL_SUBMIT_S:
        return [(("submit_time",), f"job {spec.id!r}: submit_time {spec.submit_time:g} s is real time to wait "
                                   f"here; at most {MAX_REAL_SUBMIT_S:g} s (a day) in a real run")]
    return []


#: Latest submit time a real run waits for (seconds after its start).
MAX_REAL_SUBMIT_S = 86_400.0


def check_jobs(specs: Sequence[JobSpec]) -> list[str]:
    """Problems that stop real execution, one message per job (empty if all jobs can run)."""
    return [msg for s in specs for _, msg in job_problems(s)]


@dataclass
class RealOutcome:
    """A real run: the scheduler's result, its metrics, and what the backend measured."""

    result: RunResult
    metrics: Metrics
    status: dict[str, JobStatus] = field(default_factory=dict)
    timings: list[dict[str, Any]] = field(default_factory=list)


def run_local(
    specs: Sequence[JobSpec],
    cluster: ClusterSpec,
    policy: object,
    *,
    root: str | Path | None = None,
    listener: Listener | None = None,
    on_scheduler: Callable[[Scheduler], None] | None = None,
    strict: bool = False,
    backend_cls: Callable[..., LocalBackend] = LocalBackend,
    source: JobSource | None = None,
    **backend_options: Any,
) -> RealOutcome:
    """Run ``specs`` under ``policy`` on real processes; blocks until every job ended.

    ``backend_options`` go to ``backend_cls`` (:class:`LocalBackend` or
    :class:`~.ray_backend.RayBackend`: ``max_restarts``, ``checkpoint_interval``, ...). ``on_scheduler`` sees the scheduler before
    it runs (a progress display uses it to read job states). ``source`` (a
    :class:`~cohabit.engine.live.JobSource`) submits further jobs while the run goes on;
    the run then ends when the source says stop.
    """
    backend = backend_cls(cluster, root=root, listener=listener, **backend_options)
    try:
        sched = Scheduler(cluster, policy, backend, strict=strict)
        if on_scheduler is not None:
            on_scheduler(sched)
        result = sched.run(specs, source)
    finally:
        backend.close()
    return RealOutcome(result, compute_metrics(result.record, cluster.capacity), dict(backend.status),
                       list(backend.timings))
