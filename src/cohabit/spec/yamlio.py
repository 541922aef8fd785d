"""YAML files of jobs and clusters, with errors that name the file, line and field.

Jobs file — a top-level ``jobs:`` list, or a bare list; each item is a
:class:`~cohabit.spec.job.JobSpec` mapping, or the GPU shorthand ``gpus: N``
(one worker per GPU, as :func:`~cohabit.spec.job.simple_job` builds)::

    jobs:
      - id: resnet
        gpus: 4
        criteria: accuracy >= 0.95 within 3600s
      - id: lda
        architecture: ps
        workers: {count: 4, demand: {cpu: 4, mem_gb: 8}}
        ps: {count: 1, demand: {cpu: 2, mem_gb: 8}}

Cluster file — a ``name`` and a ``nodes`` list; an item with ``count: N``
expands to N identical nodes named ``<name>-<i>`` (``name`` defaults to the
cluster's)::

    name: lab
    nodes:
      - {name: big, capacity: {gpu: 8, cpu: 64, mem_gb: 512}}
      - {count: 4, capacity: {gpu: 4, cpu: 32, mem_gb: 256}, labels: {gpu_model: T4}}

Every problem raises :class:`SpecError`, e.g.
``jobs.yaml:12: jobs[3].workers.count: Input should be greater than or equal to 0``.
Line numbers come from the composed YAML node tree: pydantic's error ``loc``
is walked down the tree to the node it names. Loading is safe (no Python tags).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..suggest import did_you_mean, nearest
from .cluster import ClusterSpec, NodeSpec, cluster_from_arg
from .job import JobSpec, simple_job
from .limits import MAX_NODES
from .resources import Resources
from .yamlparse import (
    _TASK_KEYS, _TASKS, Loc, SpecError, _at, _by_line, _child, _from_validation, _kind, _line, _parse, _read,
    dump_yaml, parse_yaml,
)

__all__ = [
    "SpecError", "cluster_from_arg", "dump_cluster", "dump_jobs", "job_from_item", "load_cluster", "load_jobs",
    "loads_cluster", "loads_jobs", "parse_yaml",
]

#: Most nodes one ``count:`` item may expand to (guards against typos like 1e9).
MAX_NODE_COUNT = 100_000
#: Keys the ``gpus:`` shorthand builds itself, so a job may not also give them.
_SHORTHAND_BUILDS = ("workers", "ps", "architecture")


# ---------------------------------------------------------------------------
# Jobs
# ---------------------------------------------------------------------------
class _GpuShorthand(BaseModel):
    """The ``gpus: N`` form; every other key goes on to JobSpec."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    gpus: float = Field(gt=0)
    cpu_per_gpu: float = Field(default=4.0, ge=0)
    mem_gb_per_gpu: float = Field(default=16.0, ge=0)


_SHORTHAND_FIELDS: tuple[str, ...] = (
    *_GpuShorthand.model_fields, *(f for f in JobSpec.model_fields if f not in (*_SHORTHAND_BUILDS, "id")),
)


def _shorthand_job(item: dict[str, Any], node: yaml.Node, base: Loc, file: str) -> JobSpec:
    clash = [k for k in _SHORTHAND_BUILDS if k in item]
    if clash:
        raise _at(node, base, file, f"'gpus' builds {clash[0]!r} itself; drop 'gpus' to give "
                  f"{', '.join(repr(k) for k in _SHORTHAND_BUILDS)} yourself", (clash[0],))
    try:
        short = _GpuShorthand.model_validate(item)
    except ValidationError as exc:
        raise SpecError.collect(_from_validation(exc, node, base, file)) from None
    try:
        return simple_job(short.id, short.gpus, cpu_per_gpu=short.cpu_per_gpu,
                          mem_gb_per_gpu=short.mem_gb_per_gpu, **(short.model_extra or {}))
    except ValidationError as exc:
        raise SpecError.collect(_from_validation(exc, node, base, file, _SHORTHAND_FIELDS)) from None
    except ValueError as exc:  # simple_job's own checks concern ``gpus``
        raise _at(node, base, file, str(exc), ("gpus",)) from None


def _one_job(item: Any, node: yaml.Node, base: Loc, file: str) -> JobSpec:
    if not isinstance(item, dict):
        raise _at(node, base, file, f"a job must be a mapping of fields (id, workers, ...), got {_kind(item)}")
    odd = [k for k in item if not isinstance(k, str)]
    if odd:
        raise _at(node, base, file, f"field names must be text, got {odd[0]!r}")
    if "gpus" in item:
        return _shorthand_job(item, node, base, file)
    if "workers" not in item:  # a misspelt ``gpus``/``workers`` is the problem, not the missing field
        for key in item:
            if key not in JobSpec.model_fields and nearest(key, _TASK_KEYS) is not None:
                raise _at(node, base, file, f"unknown field {key!r}{did_you_mean(key, _TASK_KEYS)}; {_TASKS}",
                          (key,))
    try:
        return JobSpec.model_validate(item)
    except ValidationError as exc:
        raise SpecError.collect(_from_validation(exc, node, base, file, tuple(JobSpec.model_fields))) from None


def job_from_item(item: Any, node: yaml.Node, base: Loc, file: str = "<string>") -> JobSpec:
    """One job from its YAML mapping ``item`` whose node is ``node``; ``base`` is its path, e.g. ``("jobs", 3)``.

    Accepts the full JobSpec form and the ``gpus: N`` shorthand; problems raise
    :class:`SpecError` naming ``file``, the line and the field under ``base``.
    """
    return _one_job(item, node, base, file)


def _job_list(root: yaml.Node | None, data: Any, file: str) -> tuple[yaml.SequenceNode, list[Any]]:
    """The node and data of the list of jobs, from ``jobs: [...]`` or a bare list."""
    expected = "expected a top-level 'jobs:' list (or a bare list of jobs)"
    if root is None:
        raise SpecError(f"the file is empty; {expected}", file=file, line=1)
    if isinstance(data, dict):
        extra = [k for k in data if k != "jobs"]
        if extra:
            raise _at(root, (), file, f"unknown top-level key {extra[0]!r}; {expected}", (extra[0],))
        if "jobs" not in data:
            raise SpecError(f"missing 'jobs'; {expected}", file=file, line=_line(root))
        found = _child(root, "jobs")
        assert found is not None
        root, data = found[1], data["jobs"]
        if data is None:  # ``jobs:`` with nothing under it
            return yaml.SequenceNode("tag:yaml.org,2002:seq", [], root.start_mark, root.end_mark), []
    if not isinstance(data, list) or not isinstance(root, yaml.SequenceNode):
        raise SpecError(f"{expected}, got {_kind(data)}", file=file, line=_line(root), field="jobs")
    return root, data


#: A check run on each job as it is loaded: ``(field path under the job, message)`` per problem.
JobCheck = Callable[[JobSpec], Iterable[tuple[Loc, str]]]


def loads_jobs(text: str, file: str = "<string>", *, check: JobCheck | None = None) -> list[JobSpec]:
    """Jobs from YAML text; ``file`` names it in errors. See the module docstring for the format.

    ``check`` (e.g. resource names against a cluster, workload options) reports each problem
    of a well-formed job at the line of the field it names, like a malformed field.
    """
    root, data = _parse(text, file)
    seq, items = _job_list(root, data, file)
    jobs: list[JobSpec] = []
    errors: list[SpecError] = []
    first_line: dict[str, tuple[int, int]] = {}
    for i, (node, item) in enumerate(zip(seq.value, items, strict=True)):
        base: Loc = ("jobs", i)
        try:
            job = _one_job(item, node, base, file)
        except SpecError as exc:
            errors += [exc, *exc.others]
            continue
        if job.id in first_line:
            j, line = first_line[job.id]
            errors.append(_at(node, base, file, f"duplicate job id {job.id!r} (first used by jobs[{j}] on line "
                                                f"{line}); job ids must be unique", ("id",)))
            continue
        first_line[job.id] = (i, _line(node))
        if check is not None:
            errors += [_at(node, base, file, msg, sub) for sub, msg in check(job)]
        jobs.append(job)
    if errors:
        raise SpecError.collect(sorted(errors, key=_by_line))
    return jobs


def load_jobs(path: str | Path, *, check: JobCheck | None = None) -> list[JobSpec]:
    """Jobs from a YAML file; every problem raises :class:`SpecError` naming file, line and field.

    ``check``: see :func:`loads_jobs`."""
    return loads_jobs(_read(path), str(path), check=check)


def dump_jobs(jobs: Iterable[JobSpec], path: str | Path | None = None) -> str:
    """YAML text (``jobs:`` list, defaults left out) that :func:`loads_jobs` reads back to equal jobs.

    Writes it to ``path`` too when one is given.
    """
    text = dump_yaml({"jobs": [j.model_dump(mode="json", exclude_defaults=True) for j in jobs]})
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


# ---------------------------------------------------------------------------
# Clusters
# ---------------------------------------------------------------------------
class _NodeGroup(BaseModel):
    """The ``count: N`` form: N identical nodes named ``<name>-<i>``."""

    model_config = ConfigDict(extra="forbid")

    count: int = Field(ge=1, le=MAX_NODE_COUNT)
    name: str | None = Field(default=None, min_length=1)
    capacity: Resources
    labels: dict[str, str] = Field(default_factory=dict)


def _expand_group(group: _NodeGroup, prefix: str, next_index: dict[str, int]) -> list[NodeSpec]:
    """Name the group's nodes ``<prefix>-<i>``, continuing the numbering of earlier groups with the same prefix."""
    start = next_index.get(prefix, 0)
    next_index[prefix] = start + group.count
    return [
        NodeSpec(name=f"{prefix}-{k}", capacity=group.capacity, labels=dict(group.labels))
        for k in range(start, start + group.count)
    ]


def _node_items(item: Any, node: yaml.Node, base: Loc, file: str, prefix: str,
                next_index: dict[str, int]) -> list[NodeSpec]:
    if not isinstance(item, dict):
        raise _at(node, base, file, f"a node must be a mapping with name and capacity (or count and capacity), "
                  f"got {_kind(item)}")
    try:
        if "count" in item:
            group = _NodeGroup.model_validate(item)
            return _expand_group(group, group.name or prefix, next_index)
        return [NodeSpec.model_validate(item)]
    except ValidationError as exc:
        fields = _NodeGroup.model_fields if "count" in item else NodeSpec.model_fields
        raise SpecError.collect(_from_validation(exc, node, base, file, tuple(fields))) from None


def _cluster_nodes(root: yaml.Node, data: dict[str, Any], file: str, prefix: str) -> list[NodeSpec]:
    found = _child(root, "nodes")
    if found is None:
        raise SpecError("missing 'nodes': give a list of {name, capacity} or {count, capacity} items",
                        file=file, line=_line(root), field="nodes")
    key, seq = found
    if not isinstance(data["nodes"], list) or not isinstance(seq, yaml.SequenceNode):
        raise SpecError(f"'nodes' must be a list, got {_kind(data['nodes'])}", file=file, line=_line(key),
                        field="nodes")
    nodes: list[NodeSpec] = []
    errors: list[SpecError] = []
    owner: dict[str, tuple[int, int]] = {}
    next_index: dict[str, int] = {}
    for i, (node, item) in enumerate(zip(seq.value, data["nodes"], strict=True)):
        base: Loc = ("nodes", i)
        try:
            expanded = _node_items(item, node, base, file, prefix, next_index)
        except SpecError as exc:
            errors += [exc, *exc.others]
            continue
        for n in expanded:
            if n.name in owner:
                j, line = owner[n.name]
                errors.append(_at(node, base, file, f"duplicate node name {n.name!r} (first given by nodes[{j}] on "
                                                    f"line {line}); node names must be unique", ("name",)))
                break
            owner[n.name] = (i, _line(node))
        nodes += expanded
        if len(nodes) > MAX_NODES:
            errors.append(_at(node, base, file, f"the cluster has more than {MAX_NODES:,} nodes", ("count",)))
            break
    if errors:
        raise SpecError.collect(sorted(errors, key=_by_line))
    return nodes


def loads_cluster(text: str, file: str = "<string>") -> ClusterSpec:
    """A cluster from YAML text; ``file`` names it in errors. See the module docstring for the format."""
    root, data = _parse(text, file)
    if root is None or not isinstance(data, dict):
        raise SpecError(f"expected a mapping with 'name' and 'nodes', got {_kind(data)}", file=file,
                        line=1 if root is None else _line(root))
    extra = [k for k in data if k not in ("name", "nodes")]
    if extra:
        raise _at(root, (), file, f"unknown top-level key {extra[0]!r}; a cluster file has 'name' and 'nodes'",
                  (extra[0],))
    name = data.get("name", "cluster")
    prefix = name if isinstance(name, str) and name else "node"
    nodes = _cluster_nodes(root, data, file, prefix)
    try:
        return ClusterSpec.model_validate({"name": name, "nodes": tuple(nodes)})
    except ValidationError as exc:
        raise SpecError.collect(_from_validation(exc, root, (), file)) from None


def load_cluster(path: str | Path) -> ClusterSpec:
    """A cluster from a YAML file; every problem raises :class:`SpecError` naming file, line and field."""
    return loads_cluster(_read(path), str(path))


def dump_cluster(cluster: ClusterSpec, path: str | Path | None = None) -> str:
    """YAML text that :func:`loads_cluster` reads back to an equal cluster (one item per node)."""
    nodes = []
    for n in cluster.nodes:
        item: dict[str, Any] = {"name": n.name, "capacity": n.capacity.as_dict()}
        if n.labels:
            item["labels"] = dict(n.labels)
        nodes.append(item)
    text = dump_yaml({"name": cluster.name, "nodes": nodes})
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
