"""Job files as the API receives them: YAML, or JSON with a fast path.

``POST /v1/jobs`` takes the job file ``cohabit run`` takes. YAML goes through the spec loader
(:func:`cohabit.spec.yamlio.loads_jobs`), which composes a node tree so that every problem names
its line. A body sent as ``Content-Type: application/json`` is first read by :func:`jobs_from_json`:
``json.loads`` and one ``JobSpec.model_validate`` per job, no node tree (the YAML path was about a
quarter of the daemon's CPU per submission). Only the plain, valid case is taken there; anything
else (a duplicate key, ``NaN``, nesting deeper than the loader allows, the ``gpus:`` shorthand, a
field that fails validation, duplicate job ids, malformed JSON) falls back to the YAML loader (JSON
is YAML), so the jobs accepted and the 422 messages (file, line, field) are the loader's own.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from ..spec.job import JobSpec
from ..spec.limits import MAX_YAML_DEPTH
from ..spec.yamlio import loads_jobs


class _Fallback(Exception):
    """The body is not the plain case the JSON fast path takes."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # a duplicate key: the YAML loader names it and its line
        raise _Fallback
    return out


def _constant(name: str) -> Any:  # NaN, Infinity: not JSON, and not numbers to the YAML loader
    raise _Fallback


def _depth_ok(data: Any, limit: int = MAX_YAML_DEPTH) -> bool:
    """True if ``data`` nests at most ``limit`` mappings/lists deep (the YAML loader's bound)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return False
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return True


def jobs_from_json(text: str) -> list[JobSpec] | None:
    """The jobs of a JSON job file (``{"jobs": [...]}`` or a bare list) when every job is a plain,
    valid ``JobSpec`` mapping; None when the YAML loader must read it (see the module docstring)."""
    try:
        data = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except (_Fallback, ValueError, RecursionError):
        return None
    if isinstance(data, dict) and list(data) == ["jobs"]:
        data = data["jobs"]
    if not isinstance(data, list) or not data or not _depth_ok(data, MAX_YAML_DEPTH - 1):
        return None
    jobs: list[JobSpec] = []
    for item in data:
        if not isinstance(item, dict) or "workers" not in item or "gpus" in item:
            return None
        try:
            jobs.append(JobSpec.model_validate(item))
        except (ValidationError, ValueError):
            return None
    if len({j.id for j in jobs}) != len(jobs):
        return None
    return jobs


def is_json(content_type: str | None) -> bool:
    """True for ``application/json`` (parameters such as ``; charset=utf-8`` allowed)."""
    return bool(content_type) and content_type.split(";", 1)[0].strip().lower() == "application/json"


def parse_jobs(text: str, content_type: str | None, file: str) -> list[JobSpec]:
    """The jobs of a submitted job file; problems raise the YAML loader's ``SpecError``."""
    if is_json(content_type):
        fast = jobs_from_json(text)
        if fast is not None:
            return fast
    return loads_jobs(text, file=file)
