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

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..suggest import did_you_mean, nearest
from .cluster import PRESETS, ClusterSpec, NodeSpec, preset
from .job import JobSpec, simple_job
from .limits import MAX_NODES, MAX_YAML_ALIAS_NODES, MAX_YAML_DEPTH, decode_utf8
from .resources import Resources

__all__ = [
    "SpecError", "cluster_from_arg", "dump_cluster", "dump_jobs", "job_from_item", "load_cluster", "load_jobs",
    "loads_cluster", "loads_jobs", "parse_yaml",
]

class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader, with YAML 1.2's exponent floats: ``1e-3`` and ``1.5e3`` are numbers (PyYAML's
    YAML 1.1 rules read an exponent without a decimal point or without a sign as text, so ``lr: 1e-3``
    was refused as not a number)."""


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """The safe dumper, knowing the loader's exponent floats: a string such as ``"6214e9"`` is written
    quoted, so it reads back as the same string and not as a number."""


_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
for _cls in (_Loader, _Dumper):
    _cls.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+.0123456789"))
Loc = tuple[str | int, ...]

#: Most nodes one ``count:`` item may expand to (guards against typos like 1e9).
MAX_NODE_COUNT = 100_000
#: Keys the ``gpus:`` shorthand builds itself, so a job may not also give them.
_SHORTHAND_BUILDS = ("workers", "ps", "architecture")
_FIELD_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: The two ways a job names its tasks, and how errors say so.
_TASK_KEYS = ("gpus", "workers")
_TASKS = "a job gives its tasks as 'gpus: N' or 'workers: {count: N, demand: {...}}'"


# ---------------------------------------------------------------------------
# The error
# ---------------------------------------------------------------------------
class SpecError(ValueError):
    """A bad spec file: ``file:line: field: message``.

    ``line`` is 1-based (None when unknown, e.g. an unreadable file), ``field``
    a path such as ``jobs[3].workers.count`` (None for syntax errors). When a
    file has several problems, the first is this error and the rest are in
    ``others``; ``str()`` shows them all, one per line.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        others: Iterable[SpecError] = (),
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        self.others: tuple[SpecError, ...] = tuple(others)
        super().__init__(str(self))

    def _one(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line) if p is not None)
        parts = [p for p in (where, self.field) if p]
        return ": ".join([*parts, self.message])

    def __str__(self) -> str:
        return "\n".join([self._one(), *(e._one() for e in self.others)])

    def __reduce__(self) -> Any:
        return _rebuild_spec_error, (self.message, self.file, self.line, self.field, self.others)

    @classmethod
    def collect(cls, errors: Sequence[SpecError]) -> SpecError:
        """One error carrying all of ``errors`` (the first, with the rest in ``others``)."""
        first = errors[0]
        return cls(first.message, file=first.file, line=first.line, field=first.field, others=errors[1:])


def _rebuild_spec_error(message: str, file: str | None, line: int | None, field: str | None,
                        others: tuple[SpecError, ...]) -> SpecError:
    return SpecError(message, file=file, line=line, field=field, others=others)


# ---------------------------------------------------------------------------
# YAML: text -> (node tree, data)
# ---------------------------------------------------------------------------
def _read(path: str | Path) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read the file: {exc.strerror or exc}", file=str(path)) from None
    text, line, reason = decode_utf8(data)
    if text is None:
        raise SpecError(f"the file is not UTF-8 text ({reason})", file=str(path), line=line)
    return text


def _check_shape(text: str, file: str) -> None:
    """Refuse deep nesting, recursive aliases and alias bombs before anything is composed.

    Walks the parser's event stream (flat: libyaml's parser keeps its own
    stack, unlike the composer, which recurses once per level and crashes the
    interpreter past a few tens of thousands of levels). Counts the nodes the
    aliases stand for: each anchor remembers the size of its subtree (its own
    aliases expanded) and each alias adds it, so a few hundred bytes that
    expand to billions of nodes are caught after reading them once.
    """
    depth = 0
    expanded = 0                        # nodes that aliases stand for, so far
    open_sizes: list[int] = []          # node counts of the collections being read
    open_anchors: list[str | None] = []
    sizes: dict[str, int] = {}          # anchor -> expanded node count of its subtree
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise SpecError(f"YAML nested more than {MAX_YAML_DEPTH} levels deep", file=file,
                                line=_mark_line(event.start_mark))
            open_sizes.append(1)
            open_anchors.append(event.anchor)
            continue
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
            size = open_sizes.pop()
            anchor = open_anchors.pop()
            if anchor is not None:
                sizes[anchor] = size
            if open_sizes:
                open_sizes[-1] += size
            continue
        elif isinstance(event, yaml.ScalarEvent):
            if open_sizes:
                open_sizes[-1] += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
            continue
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise SpecError(f"recursive YAML alias *{event.anchor} (it refers to a node that contains it)",
                                file=file, line=_mark_line(event.start_mark))
            n = sizes.get(event.anchor, 1)  # an undefined alias is the composer's error
            if open_sizes:
                open_sizes[-1] += n
        else:
            continue
        expanded += n
        if expanded > MAX_YAML_ALIAS_NODES:
            raise SpecError(f"YAML aliases expand to more than {MAX_YAML_ALIAS_NODES:,} nodes (an alias bomb?)",
                            file=file, line=_mark_line(event.start_mark))


def _parse(text: str, file: str) -> tuple[yaml.Node | None, Any]:
    """Compose the node tree and construct plain data from it, safely (see :func:`_check_shape`)."""
    loader = _Loader(text)
    try:
        _check_shape(text, file)
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_duplicate_keys(node, file)
        return node, loader.construct_document(node)
    except yaml.constructor.ConstructorError as exc:
        raise SpecError(f"unsupported YAML: {exc.problem} (spec files take plain YAML only, no Python tags)",
                        file=file, line=_mark_line(exc.problem_mark)) from None
    except yaml.MarkedYAMLError as exc:
        raise SpecError(_syntax_message(exc), file=file,
                        line=_mark_line(exc.problem_mark or exc.context_mark)) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML error: {exc}", file=file) from None
    finally:
        loader.dispose()


def _mark_line(mark: Any) -> int | None:
    return None if mark is None else mark.line + 1


def _syntax_message(exc: yaml.MarkedYAMLError) -> str:
    """``did not find expected ',' or ']' (while parsing a flow sequence started on line 3)``."""
    msg = f"YAML syntax error: {exc.problem or 'invalid YAML'}"
    if exc.context:
        started = f" started on line {exc.context_mark.line + 1}" if exc.context_mark is not None else ""
        msg += f" ({exc.context}{started})"
    return msg


def _check_duplicate_keys(root: yaml.Node, file: str) -> None:
    """PyYAML keeps the last of duplicate keys silently; a spec file must not rely on that."""
    seen_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, Loc]] = [(root, ())]
    while stack:
        node, loc = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: dict[str, int] = {}
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
                    continue
                if key.value in keys:
                    raise SpecError(f"duplicate key {key.value!r} (first given on line {keys[key.value]})",
                                    file=file, line=_line(key), field=_field_path((*loc, key.value)) or None)
                keys[key.value] = _line(key)
                stack.append((value, (*loc, key.value)))
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, (*loc, i)) for i, item in enumerate(node.value)]


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _by_line(err: SpecError) -> int:
    return err.line or 0


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


# ---------------------------------------------------------------------------
# loc -> node -> line
# ---------------------------------------------------------------------------
def _child(node: yaml.Node, part: str | int) -> tuple[yaml.Node, yaml.Node] | None:
    """(node to report, node to descend into) for ``part`` under ``node``, or None."""
    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == part:
                return key, value
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        item = node.value[part]
        return item, item
    return None


def _locate(node: yaml.Node, loc: Loc) -> int:
    """Line of the deepest node on ``loc`` that exists in the file."""
    report = node
    for part in loc:
        found = _child(node, part)
        if found is None:
            break
        report, node = found
    return _line(report)


def _field_path(loc: Loc) -> str:
    """``("jobs", 3, "workers", "count")`` -> ``jobs[3].workers.count``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not isinstance(part, str):  # a YAML key that is not text (null, a number, a date)
            out += f"[{part!r}]"
        elif _FIELD_PART.match(part):
            out += f".{part}" if out else part
        else:  # pydantic's internal step names (union members, validators)
            break
    return out


def _message(err: Any, fields: Sequence[str]) -> str:
    """pydantic's message, without its "Value error, " prefix, naming the bad value or the right fields."""
    msg: str = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    if err["type"] == "extra_forbidden" and len(err["loc"]) == 1 and fields:
        return f"unknown field {err['loc'][0]!r}{did_you_mean(str(err['loc'][0]), fields)}; " \
               f"known fields: {', '.join(fields)}"
    if err["type"] == "missing" and tuple(err["loc"]) == ("workers",):
        return f"missing: {_TASKS}"
    value = err.get("input")
    if err["type"] != "missing" and isinstance(value, (str, int, float, bool, type(None))):
        shown = repr(value)
        return f"{msg}, got {shown if len(shown) <= 80 else shown[:60] + f'... ({len(shown)} characters)'}"
    return msg


def _from_validation(exc: ValidationError, node: yaml.Node, base: Loc, file: str,
                     fields: Sequence[str] = ()) -> list[SpecError]:
    """One SpecError per pydantic error; ``node`` is the YAML node at ``base``.

    ``fields`` (the model's field names) are listed when a key is unknown.
    """
    return [
        SpecError(_message(err, fields), file=file, line=_locate(node, tuple(err["loc"])),
                  field=_field_path(base + tuple(err["loc"])) or None)
        for err in exc.errors()
    ]


def _at(node: yaml.Node, base: Loc, file: str, message: str, sub: Loc = ()) -> SpecError:
    return SpecError(message, file=file, line=_locate(node, sub), field=_field_path(base + sub) or None)


def dump_yaml(data: Any, **options: Any) -> str:
    """YAML that this module's loader reads back as ``data``: the given key order, strings that would
    read as numbers quoted, readable Unicode unless that would not read back (PyYAML writes U+0085
    (NEXT LINE) raw when ``allow_unicode`` is on and then reads it back as a line break, so such
    text is written escaped). ``options`` go to ``yaml.dump`` (e.g. ``default_flow_style``)."""
    options = {"sort_keys": False, **options}
    text = yaml.dump(data, Dumper=_Dumper, allow_unicode=True, **options)
    return text if "\x85" not in text else yaml.dump(data, Dumper=_Dumper, allow_unicode=False, **options)


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


def parse_yaml(text: str, file: str = "<string>") -> tuple[yaml.Node | None, Any]:
    """(node tree, plain data) of one safe YAML document; problems raise :class:`SpecError`.

    For other loaders (e.g. trace formats built on the jobs file) that map
    their own errors to lines with the node tree.
    """
    return _parse(text, file)


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


def cluster_from_arg(text: str) -> ClusterSpec:
    """A ``--cluster`` argument: a preset name (``philly``, ``tiresias``, ...) or a YAML file path.

    Raises :class:`SpecError` for a bad file and ``ValueError`` naming the
    presets when ``text`` is neither.
    """
    name = text.strip()
    if name.lower() in PRESETS:
        return preset(name.lower())
    path = Path(name).expanduser()
    if path.suffix.lower() in (".yaml", ".yml") or path.is_file():
        return load_cluster(path)
    raise ValueError(
        f"unknown cluster {text!r}: give a preset ({', '.join(sorted(PRESETS))}) or the path of a YAML "
        f"cluster file (.yaml/.yml)"
    )
