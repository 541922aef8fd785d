"""cohabit's own trace format: a YAML list of jobs, each with its simulation truth.

A jobs file as :mod:`cohabit.spec.yamlio` reads it (a ``jobs:`` list or a
bare list; each item a :class:`~cohabit.spec.job.JobSpec` mapping or the
``gpus: N`` shorthand), where every job also carries a ``truth:`` mapping
for the simulator, and an optional top-level ``cluster:`` naming the preset
the trace is meant for (default ``tiresias``)::

    cluster: tiresias
    jobs:
      - id: resnet-a
        gpus: 4
        submit_time: 30
        model: resnet50
        iterations: 2000
        truth: {iterations: 2000, duration: 1860}
      - id: cifar
        architecture: allreduce
        workers: {count: 2, demand: {gpu: 1, cpu: 4, mem_gb: 16}}
        n_min: 1
        n_max: 8
        truth: {iterations: 39063, app: cifar10}

``truth`` keys: ``iterations`` (default ``ceil(duration)``, i.e. nominal
one-second iterations), ``duration`` (seconds at ``ref_workers``
consolidated workers), ``ref_workers`` (default: the job's worker count) and
``app`` (a profile key) and ``used`` (resource -> the fraction of its allocation
the job really uses, e.g. ``used: {cpu: 0.25, mem_gb: 0.5}``: the *used* share the
reports show next to the allocated one; each name must be a resource the job
demands), ``accuracy`` (validation accuracy after each epoch, reported at epoch ends
so that completion criteria can be evaluated) and ``heldout_accuracy`` (the same
epochs on held-out data: false attainment), ``compute_s`` (a task-graph job's computation
seconds per iteration; the simulator adds the graph's cross-node traffic). At least one of ``iterations`` and ``duration`` is required. Errors name the file, the line and the field
(``jobs.yaml:12: field 'jobs[3].truth.duration': ...``); with
``skip_bad_rows`` a bad job is skipped and reported, while a YAML syntax error
or a bad top level still raises.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ...spec import yamlio
from ...spec.cluster import PRESETS
from ..truth import JobTruth, TraceJob
from ._common import Sink, Source
from .errors import TraceRowError

DEFAULT_CLUSTER = "tiresias"
TRUTH_KEYS = ("iterations", "duration", "ref_workers", "app", "used", "accuracy", "heldout_accuracy", "compute_s")
_TOP_KEYS = ("jobs", "cluster")


def _err(e: yamlio.SpecError) -> TraceRowError:
    return TraceRowError(e.file or "<string>", e.line or 1, e.field, e.message, what="field")


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _key_node(node: yaml.Node, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return k, v
    return None


def _used(raw: Any, node: yaml.Node, bad: Any, demanded: set[str]) -> dict[str, float] | None:
    """Validate ``truth.used``: resource -> fraction >= 0 of the allocation, for demanded resources."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise bad("used", f"expected a mapping of resource -> fraction of its allocation, got {type(raw).__name__}")
    out: dict[str, float] = {}
    for name, frac in raw.items():
        if name not in demanded:
            raise bad("used", f"{name!r}: not a resource the job demands "
                              f"(it demands: {', '.join(sorted(demanded)) or 'nothing'})")
        if not (isinstance(frac, int | float) and not isinstance(frac, bool) and math.isfinite(frac) and frac >= 0):
            raise bad("used", f"{name!r}: expected a fraction >= 0 of its allocation, got {frac!r}")
        out[str(name)] = float(frac)
    return out


def _truth(raw: Any, node: yaml.Node, field: str, file: str, workers: int, demanded: set[str]) -> JobTruth:
    """Validate one ``truth:`` mapping (``node`` is its YAML node)."""

    def bad(key: str | None, message: str) -> TraceRowError:
        found = _key_node(node, key) if key else None
        line = _line(found[0]) if found else _line(node)
        return TraceRowError(file, line, f"{field}.{key}" if key else field, message, what="field")

    if not isinstance(raw, dict):
        raise bad(None, f"expected a mapping with {', '.join(TRUTH_KEYS)}, got {type(raw).__name__}")
    unknown = [k for k in raw if k not in TRUTH_KEYS]
    if unknown:
        raise bad(str(unknown[0]), f"unknown key; truth keys are {', '.join(TRUTH_KEYS)}")

    def number(key: str, *, integer: bool) -> Any:
        v = raw.get(key)
        if v is None:
            return None
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if integer:
            ok = ok and float(v).is_integer() and v >= 1
        else:
            ok = ok and v > 0
        if not ok:
            raise bad(key, f"expected {'an integer >= 1' if integer else 'a number > 0'}, got {v!r}")
        return int(v) if integer else float(v)

    iterations = number("iterations", integer=True)
    duration = number("duration", integer=False)
    ref_workers = number("ref_workers", integer=True)
    app = raw.get("app")
    if app is not None and (not isinstance(app, str) or not app):
        raise bad("app", f"expected a profile name, got {app!r}")
    if iterations is None and duration is None:
        raise bad(None, "give iterations, duration or both")
    if iterations is None:
        iterations = max(1, math.ceil(duration))
    used = _used(raw.get("used"), node, bad, demanded)
    curves = {key: _curve(raw.get(key), key, bad) for key in ("accuracy", "heldout_accuracy")}
    if curves["heldout_accuracy"] is not None and (curves["accuracy"] is None
                                                   or len(curves["heldout_accuracy"]) != len(curves["accuracy"])):
        raise bad("heldout_accuracy", "needs an accuracy list of the same length (one value per epoch)")
    compute_s = number("compute_s", integer=False)
    return JobTruth(iterations=iterations, duration=duration,
                    ref_workers=workers if ref_workers is None else ref_workers, app=app, used=used,
                    compute_s=compute_s, **curves)


def _curve(v: Any, key: str, bad: Any) -> tuple[float, ...] | None:
    """Validate ``truth.accuracy`` / ``truth.heldout_accuracy``: a list of numbers, one per epoch."""
    if v is None:
        return None
    if not isinstance(v, list) or not v or not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in v):
        raise bad(key, f"expected a non-empty list of numbers (one per epoch), got {v!r}")
    return tuple(float(x) for x in v)


def _job(item: Any, node: yaml.Node, index: int, file: str) -> TraceJob:
    field = f"jobs[{index}]"
    if not isinstance(item, dict):
        raise TraceRowError(file, _line(node), field, "a job must be a mapping of fields (id, workers, ..., truth)",
                            what="field")
    item = dict(item)
    raw_truth = item.pop("truth", None)
    try:
        spec = yamlio.job_from_item(item, node, ("jobs", index), file)
    except yamlio.SpecError as e:
        raise _err(e) from None
    found = _key_node(node, "truth")
    if found is None or raw_truth is None:
        raise TraceRowError(
            file, _line(node), f"{field}.truth",
            "missing: give truth: {iterations: N, duration: S} (the simulator's ground truth)", what="field",
        )
    return TraceJob(spec, _truth(raw_truth, found[1], f"{field}.truth", file, spec.workers.count,
                                 set(spec.total_demand())))


def _top(root: yaml.Node | None, data: Any, file: str, sink: Sink) -> tuple[yaml.SequenceNode, list[Any]]:
    """The jobs list (node and data); sets the default cluster when ``cluster:`` is given."""
    expected = "expected a top-level 'jobs:' list (with an optional 'cluster:') or a bare list of jobs"
    if root is None:
        raise TraceRowError(file, 1, None, f"the file is empty; {expected}", what="field")
    if isinstance(data, dict):
        for key in data:
            if key not in _TOP_KEYS:
                found = _key_node(root, str(key))
                raise TraceRowError(file, _line(found[0]) if found else _line(root), str(key),
                                    f"unknown top-level key; {expected}", what="field")
        if "cluster" in data:
            name = data["cluster"]
            found = _key_node(root, "cluster")
            if not isinstance(name, str) or name not in PRESETS:
                raise TraceRowError(file, _line(found[1]) if found else _line(root), "cluster",
                                    f"expected a cluster preset ({', '.join(sorted(PRESETS))}), got {name!r}",
                                    what="field")
            sink.default_cluster = name
        found = _key_node(root, "jobs")
        if found is None:
            raise TraceRowError(file, _line(root), "jobs", f"missing; {expected}", what="field")
        root, data = found[1], data["jobs"]
        if data is None:
            return yaml.SequenceNode("tag:yaml.org,2002:seq", [], root.start_mark, root.end_mark), []
    if not isinstance(data, list) or not isinstance(root, yaml.SequenceNode):
        raise TraceRowError(file, _line(root), "jobs", f"{expected}, got {type(data).__name__}", what="field")
    return root, data


def load(src: Source, sink: Sink) -> None:
    """Read every job of ``src`` into ``sink``."""
    try:
        with src.open_text() as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise TraceRowError(src.name, 1, None, f"not UTF-8 text ({e.reason})") from None
    try:
        root, data = yamlio.parse_yaml(text, src.name)
    except yamlio.SpecError as e:
        raise _err(e) from None
    seq, items = _top(root, data, src.name, sink)
    for index, (node, item) in enumerate(zip(seq.value, items, strict=True)):
        try:
            job = _job(item, node, index, src.name)
        except TraceRowError as e:
            sink.bad(e)
            continue
        sink.add(src.name, _line(node), job, id_column=f"jobs[{index}].id", what="field")


def dump(jobs: Iterable[TraceJob], path: str | Path | None = None, *, cluster: str | None = None) -> str:
    """YAML text of ``jobs`` in this format (defaults left out); written to ``path`` if given.

    ``load_trace(path, "cohabit")`` reads it back to equal jobs.
    """
    items = []
    for job in jobs:
        item = job.spec.model_dump(mode="json", exclude_defaults=True)
        t = job.truth
        truth: dict[str, Any] = {"iterations": t.iterations, "ref_workers": t.ref_workers}
        if t.duration is not None:
            truth["duration"] = t.duration
        if t.app is not None:
            truth["app"] = t.app
        if t.used is not None:
            truth["used"] = dict(t.used)
        for key in ("accuracy", "heldout_accuracy"):
            if getattr(t, key) is not None:
                truth[key] = list(getattr(t, key))
        if t.compute_s is not None:
            truth["compute_s"] = t.compute_s
        item["truth"] = truth
        items.append(item)
    data: dict[str, Any] = {}
    if cluster is not None:
        if cluster not in PRESETS:
            raise ValueError(f"unknown cluster preset {cluster!r}; known presets: {', '.join(sorted(PRESETS))}")
        data["cluster"] = cluster
    data["jobs"] = items
    text = yamlio.dump_yaml(data)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
