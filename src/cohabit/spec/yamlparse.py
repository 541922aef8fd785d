"""Safe YAML for spec files: :class:`SpecError`, parsing with shape checks, and errors mapped to lines.

The plumbing under :mod:`cohabit.spec.yamlio`'s job and cluster loaders (and the
trace formats built on the jobs file): a safe loader that reads YAML 1.2's
exponent floats; checks on the parser's event stream against deep nesting and
alias bombs before anything is composed; refusal of duplicate keys; pydantic
errors turned into :class:`SpecError` s whose line comes from the composed node
tree (the error's ``loc`` is walked down the tree to the node it names) and
whose field is a path such as ``jobs[3].workers.count``. :func:`dump_yaml`
writes text that this loader reads back unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..suggest import did_you_mean
from .errors import SpecError
from .limits import MAX_YAML_ALIAS_NODES, MAX_YAML_DEPTH, decode_utf8

__all__ = ["Loc", "SpecError", "dump_yaml", "parse_yaml"]


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

_FIELD_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: The two ways a job names its tasks, and how errors say so.
_TASK_KEYS = ("gpus", "workers")
_TASKS = "a job gives its tasks as 'gpus: N' or 'workers: {count: N, demand: {...}}'"


# The error, :class:`SpecError`, lives in :mod:`.errors` (a yaml-free module: see there); imported above.


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


def parse_yaml(text: str, file: str = "<string>") -> tuple[yaml.Node | None, Any]:
    """(node tree, plain data) of one safe YAML document; problems raise :class:`SpecError`.

    For other loaders (e.g. trace formats built on the jobs file) that map
    their own errors to lines with the node tree.
    """
    return _parse(text, file)
