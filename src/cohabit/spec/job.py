"""JobSpec: what a user submits — tasks by role, elasticity bounds, length, deadline, tenant.

A JobSpec carries only what a real user would write down. Ground truth used by
the simulator (how long the job really runs, how fast it really goes) lives in
``cohabit.sim.truth`` and never in a JobSpec, so a policy that reads specs
cannot learn it (see ``tests/test_barrier.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .criteria import Criterion, parse_criterion
from .graph import TaskGraph
from ..suggest import did_you_mean
from .limits import MAX_ITERATIONS, MAX_NAME_LEN, MAX_QUANTITY, MAX_TASKS, MAX_TIME_S, check_quantities
from .resources import Resources

Architecture = Literal["single", "ps", "allreduce"]
Role = Literal["worker", "ps"]
#: What a job runs: a training job, or a progressive query (Rotary-AQP, ``cohabit.aqp``).
Kind = Literal["training", "query"]


class TaskGroup(BaseModel):
    """``count`` identical tasks of one role, each demanding ``demand``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int = Field(ge=0, le=MAX_TASKS)
    demand: Resources

    @field_validator("demand")
    @classmethod
    def _bounded(cls, v: Resources) -> Resources:
        return check_quantities(v, "demand")


class JobSpec(BaseModel):
    """One training job as submitted.

    ``graph`` (MLFS) makes the job a task DAG of model partitions x data-parallel replicas
    (``spec.graph``); ``workers.demand`` then bounds every task's demand and ``workers.count``
    equals the number of tasks. ``accuracy`` is the accuracy the user requires;
    ``stop_option`` is the MLFS user option (§3.5: i ``max-iterations``, ii ``optstop``,
    iii ``accuracy``) and ``stop_option_may_change`` whether the system may switch it to a
    later option when the cluster is overloaded.

    Times are seconds. ``deadline`` is relative to ``submit_time``.
    ``n_min``/``n_max`` bound the number of workers of an elastic job
    (Dorm's n_min/n_max); both default to ``workers.count`` (rigid).
    ``kind: query`` is a progressive query (one task; ``iterations`` are its batches; its
    ``workers.demand`` cpu and mem_gb are the query engine's threads and memory limit).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=MAX_NAME_LEN)
    submit_time: float = Field(default=0.0, ge=0.0, le=MAX_TIME_S, allow_inf_nan=False)
    tenant: str = Field(default="default", max_length=MAX_NAME_LEN)
    kind: Kind = "training"
    architecture: Architecture = "single"
    workers: TaskGroup
    ps: TaskGroup | None = None
    n_min: int | None = Field(default=None, ge=1, le=MAX_TASKS)
    n_max: int | None = Field(default=None, ge=1, le=MAX_TASKS)
    iterations: int | None = Field(default=None, ge=1, le=MAX_ITERATIONS)
    epochs: int | None = Field(default=None, ge=1, le=MAX_ITERATIONS)
    model: str = Field(default="unknown", max_length=MAX_NAME_LEN)
    batch_size: int | None = Field(default=None, ge=1, le=MAX_ITERATIONS)
    workload: dict[str, Any] | None = None
    criteria: Criterion | None = None
    deadline: float | None = Field(default=None, gt=0.0, le=MAX_TIME_S, allow_inf_nan=False)
    urgency: float = Field(default=0.0, ge=0.0, le=MAX_QUANTITY, allow_inf_nan=False)
    weight: float = Field(default=1.0, gt=0.0, le=MAX_QUANTITY, allow_inf_nan=False)
    graph: TaskGraph | None = None
    accuracy: float | None = Field(default=None, gt=0.0, le=1.0, allow_inf_nan=False)
    stop_option: Literal["max-iterations", "optstop", "accuracy"] = "max-iterations"
    stop_option_may_change: bool = False

    @field_validator("criteria", mode="before")
    @classmethod
    def _parse_criteria(cls, v: Any) -> Any:
        return parse_criterion(v) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self) -> JobSpec:
        if self.architecture == "ps" and (self.ps is None or self.ps.count < 1):
            raise ValueError("architecture 'ps' needs ps.count >= 1")
        if self.architecture != "ps" and self.ps is not None and self.ps.count > 0:
            raise ValueError(f"architecture {self.architecture!r} cannot have parameter servers; use 'ps'")
        if self.architecture == "single" and self.workers.count != 1:
            raise ValueError(f"architecture 'single' needs workers.count == 1, got {self.workers.count}")
        if self.workers.count < 1:
            raise ValueError("workers.count must be >= 1")
        if self.kind == "query":
            if self.architecture != "single":
                raise ValueError(f"a query job runs as one task: architecture must be 'single', got {self.architecture!r}")
            if self.iterations is None:
                raise ValueError("a query job needs 'iterations': the number of batches its data is read in")
        lo, hi = self.min_workers, self.max_workers
        if self.n_min is not None and self.n_max is not None and lo > hi:
            raise ValueError(
                f"[n_min={lo}, n_max={hi}] is empty: n_min must be <= n_max, "
                f"with workers.count={self.workers.count} between them"
            )
        if not lo <= self.workers.count <= hi:
            raise ValueError(f"workers.count={self.workers.count} must lie in [n_min={lo}, n_max={hi}]")
        if self.graph is not None:
            self._check_graph(self.graph)
        return self

    def _check_graph(self, g: TaskGraph) -> None:
        if self.workers.count != g.num_tasks:
            raise ValueError(f"graph has {g.num_partitions} partitions x {g.replicas} replicas = {g.num_tasks} "
                             f"tasks: workers.count must be {g.num_tasks}, got {self.workers.count}")
        if self.n_min is not None or self.n_max is not None:
            raise ValueError("a job with a task graph is rigid: leave n_min and n_max out")
        bound = self.workers.demand
        for i, pt in enumerate(g.partitions):
            if pt.demand is None:
                continue
            over = [r for r in pt.demand.keys() if pt.demand[r] > bound[r] + 1e-12]
            if over:
                raise ValueError(f"graph.partitions[{i}].demand.{over[0]} = {pt.demand[over[0]]:g} exceeds "
                                 f"workers.demand.{over[0]} = {bound[over[0]]:g}: workers.demand must bound "
                                 "every task's demand")

    # Derived views ----------------------------------------------------
    @property
    def min_workers(self) -> int:
        return self.n_min if self.n_min is not None else self.workers.count

    @property
    def max_workers(self) -> int:
        return self.n_max if self.n_max is not None else self.workers.count

    @property
    def num_ps(self) -> int:
        return self.ps.count if self.ps is not None else 0

    def task_demands(self, n_workers: int | None = None) -> list[Resources]:
        """Per-task demands in placement order: workers first, then parameter servers."""
        n = self.workers.count if n_workers is None else n_workers
        if self.graph is not None and n == self.graph.num_tasks:
            out = self.graph.task_demands(self.workers.demand)
        else:
            out = [self.workers.demand] * n
        if self.ps is not None:
            out += [self.ps.demand] * self.ps.count
        return out

    def total_demand(self, n_workers: int | None = None) -> Resources:
        return Resources.total(self.task_demands(n_workers))

    @property
    def num_gpus(self) -> float:
        return self.total_demand()["gpu"]

    @property
    def absolute_deadline(self) -> float | None:
        return None if self.deadline is None else self.submit_time + self.deadline


def _prime_shared_fields() -> tuple[str, ...]:
    """Put JobSpec's field names, in field order, into the class's shared attribute-key table.

    CPython keeps the attribute names of a class's instances in one key table shared by all of
    them (each instance then stores only its values, 8 bytes per field); pydantic instead gives
    every validated model a dict of its own (~830 bytes for JobSpec's 24 fields). The shared
    table takes new names only while it is young (each new instance shrinks the room left), so
    the names go in here, at import, before any JobSpec exists. On an interpreter without
    shared keys this does nothing and :func:`compact` still returns an equal spec."""
    names = tuple(JobSpec.model_fields)
    probe = object.__new__(JobSpec)
    for name in names:
        object.__setattr__(probe, name, None)
    return names


_FIELD_NAMES = _prime_shared_fields()


def compact(spec: JobSpec) -> JobSpec:
    """An equal, already validated ``spec`` whose fields live in JobSpec's shared key table (about
    300 bytes per spec instead of ~900: 82k Philly jobs take ~25 MB instead of ~75 MB).

    It reads and compares like ``spec`` everywhere (fields, ``==``, ``model_dump``,
    ``model_fields_set``, ``model_copy``, pickling): only its attributes' storage differs. Trace
    loaders compact every spec they build (``sim.traces._common.build``)."""
    d = spec.__dict__
    if type(spec) is not JobSpec or len(d) != len(_FIELD_NAMES):
        return spec
    new = object.__new__(JobSpec)
    put = object.__setattr__
    for name in _FIELD_NAMES:  # the shared table's order: a name out of order would unshare the instance
        put(new, name, d[name])
    put(new, "__pydantic_fields_set__", shared_fields_set(spec.__pydantic_fields_set__))
    put(new, "__pydantic_extra__", spec.__pydantic_extra__)
    put(new, "__pydantic_private__", spec.__pydantic_private__)
    return new


def _name_ok(v: Any, min_len: int = 0) -> bool:
    return type(v) is str and min_len <= len(v) <= MAX_NAME_LEN


#: The fields :func:`derived` may change, each with the check pydantic's field constraints make.
_DERIVABLE: dict[str, Callable[[Any], bool]] = {
    "id": lambda v: _name_ok(v, 1),
    "tenant": _name_ok,
    "model": _name_ok,
    "submit_time": lambda v: type(v) is float and 0.0 <= v <= MAX_TIME_S,  # (NaN and inf fail)
    "iterations": lambda v: type(v) is int and 1 <= v <= MAX_ITERATIONS,
}
#: One set of explicitly set field names per distinct content, shared by the specs that set them
#: (see :func:`shared_fields_set`).
_FIELDS_SETS: dict[frozenset[str], set[str]] = {}


def shared_fields_set(names: Collection[str]) -> set[str]:
    """The one set of explicitly set field names with these contents (a validated model carries
    a set of its own, ~730 bytes for five names: 60 MB over the 82k-job Philly trace). JobSpec is
    frozen, so pydantic never adds to it, and ``model_copy`` copies it before changing it: a
    shared set reads the same everywhere (``model_dump(exclude_unset=True)``, ``model_fields_set``)."""
    key = frozenset(names)
    hit = _FIELDS_SETS.get(key)
    if hit is None:
        hit = _FIELDS_SETS[key] = names if type(names) is set else set(names)  # type: ignore[assignment]
    return hit


def derived(base: JobSpec, **changes: Any) -> JobSpec | None:
    """``base`` with ``changes`` (any of ``id``, ``tenant``, ``model``, ``submit_time``,
    ``iterations``), as :func:`compact` builds it, when every change passes its field's
    constraints exactly as validation would (none of them enters the cross-field checks);
    None otherwise: then build the spec through validation, which raises the field's own error.

    The result equals ``base.model_copy(update=changes)`` validated afresh, explicitly set
    fields included; ~10 times cheaper than validating (trace loaders build specs row by row)."""
    d = base.__dict__
    if type(base) is not JobSpec or len(d) != len(_FIELD_NAMES):
        return None
    for name, v in changes.items():
        ok = _DERIVABLE.get(name)
        if ok is None or not ok(v):
            return None
    fields_set = shared_fields_set(base.__pydantic_fields_set__.union(changes))
    new = object.__new__(JobSpec)
    put = object.__setattr__
    for name in _FIELD_NAMES:
        put(new, name, changes[name] if name in changes else d[name])
    put(new, "__pydantic_fields_set__", fields_set)
    put(new, "__pydantic_extra__", None)
    put(new, "__pydantic_private__", None)
    return new


def simple_job(
    id: str,
    gpus: float,
    *,
    submit_time: float = 0.0,
    model: str = "unknown",
    cpu_per_gpu: float = 4.0,
    mem_gb_per_gpu: float = 16.0,
    **kw: Any,
) -> JobSpec:
    """A GPU job as GPU traces describe it: ``gpus`` GPUs, one worker per GPU.

    Fractional ``gpus`` (< 1) gives one worker sharing a GPU (Alibaba's gpu_milli).
    """
    if not gpus > 0:
        raise ValueError(f"gpus must be > 0, got {gpus!r}")
    if not gpus <= MAX_TASKS:  # also NaN; checked before int(gpus) (inf overflows) and before any per-GPU list
        raise ValueError(f"gpus must be <= {MAX_TASKS}, got {gpus!r}")
    if gpus < 1 or float(gpus) != int(gpus):
        if gpus > 1:
            raise ValueError(f"fractional GPU demand must be < 1, got {gpus!r}")
        n, per = 1, float(gpus)
    else:
        n, per = int(gpus), 1.0
    demand = Resources(gpu=per, cpu=cpu_per_gpu * max(per, 0.5), mem_gb=mem_gb_per_gpu * max(per, 0.5))
    arch: Architecture = "single" if n == 1 else "allreduce"
    return JobSpec(
        id=id, submit_time=submit_time, model=model, architecture=arch,
        workers=TaskGroup(count=n, demand=demand), **kw,
    )


def unknown_demands(spec: JobSpec, known: Collection[str],
                    where: str = "the cluster") -> list[tuple[tuple[str, ...], str]]:
    """Resources ``spec`` demands that no node of a cluster (resource names ``known``) has.

    One ``(location, message)`` per such name, ``location`` being the field path
    (``("workers", "demand", "cpus")``) and the message naming the nearest known
    name, e.g. ``unknown resource 'cpus' (did you mean 'cpu'?); the cluster has: cpu, mem_gb``.
    Such a job could never start; loaders report it at load time instead.
    """
    out: list[tuple[tuple[str, ...], str]] = []
    groups = (("workers", spec.workers), ("ps", spec.ps))
    for role, group in groups:
        if group is None:
            continue
        for name in group.demand.keys():
            if name in known:
                continue
            out.append(((role, "demand", name), f"unknown resource {name!r}{did_you_mean(name, known)}; "
                                                f"{where} has: {', '.join(known) or 'nothing'}"))
    return out
