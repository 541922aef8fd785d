"""Real trainable workloads and the registry that turns a job's ``workload:`` mapping into one.

A job names what to run in its spec::

    workload: {name: mlr, data: sample, lr: 0.1}            # a built-in workload
    workload: {name: torch-cnn, seed: 3, channels: 8}
    workload: {entry: "mypkg.train:make", hidden: 128}       # your own

Reserved keys: ``name`` (a built-in, see :data:`BUILTINS`), ``entry``
(``module:callable``), ``seed`` (default 0). Every other key is a keyword
argument of the factory, which is called as ``factory(ctx, **params)`` with a
:class:`WorkloadContext`. The job's ``iterations`` or ``epochs`` say how
long it trains; ``batch_size`` is the default mini-batch size.

A user factory returns an object with ``step() -> dict``, ``state_dict()``
and ``load_state_dict(state)`` (see :mod:`.base`); if it has no
``iteration``/``total_iterations``/``done`` counters they are added by
:class:`Counted`.

Built-ins:

==============  ============================================================
``mlr``         numpy multinomial logistic regression (abridged MNIST sample, or synthetic)
``lasso``       numpy Lasso by proximal gradient (the authors' sample, or synthetic)
``torch-mlp``   PyTorch MLP on generated Gaussian-cluster data
``torch-cnn``   PyTorch small CNN on generated images
``torch-pipeline``  a PyTorch MLP cut into pipeline stages, one process per task (model parallel)
``tpch-query``  a progressive TPC-H query on DuckDB (``kind: query``; one iteration = one batch)
``ps-mlr``      parameter-server MLR (``architecture: ps``; see :mod:`cohabit.runtime.ps`)
``ps-lasso``    parameter-server Lasso
``ps-nmf``      parameter-server NMF (the authors' sample, or synthetic)
``ps-lda``      parameter-server LDA (abridged NYTimes sample, or synthetic)
==============  ============================================================
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...suggest import did_you_mean
from .base import Communicator, Counted, Trainable, Workload, WorkloadContext, WorkloadError

#: Built-in workload name -> "module:callable" (imported only when used).
BUILTINS: dict[str, str] = {
    "mlr": "cohabit.runtime.workloads.numpy_models:MultinomialLogisticRegression",
    "lasso": "cohabit.runtime.workloads.numpy_models:Lasso",
    "torch-mlp": "cohabit.runtime.workloads.torch_models:TorchMLP",
    "torch-cnn": "cohabit.runtime.workloads.torch_models:TorchCNN",
    "torch-pipeline": "cohabit.runtime.workloads.torch_pipeline:TorchPipeline",  # model-parallel stages
    "tpch-query": "cohabit.runtime.workloads.query:TPCHQuery",  # a progressive TPC-H query (kind: query)
    # parameter-server workloads (cohabit.runtime.ps.launch.PS_WORKLOADS; architecture: ps)
    "ps-mlr": "cohabit.runtime.ps.models:PSMultinomialLogisticRegression",
    "ps-lasso": "cohabit.runtime.ps.models:PSLasso",
    "ps-nmf": "cohabit.runtime.ps.models:PSNMF",
    "ps-lda": "cohabit.runtime.ps.models:PSLDA",
}
RESERVED = ("name", "entry", "seed")


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """A job's ``workload:`` mapping, resolved: what to import, with which seed and parameters."""

    target: str  # "module:callable"
    label: str  # the built-in name, or the entry string
    seed: int
    params: dict[str, Any]

    @property
    def uses_torch(self) -> bool:
        return self.target.startswith(("cohabit.runtime.workloads.torch_models:",
                                       "cohabit.runtime.workloads.torch_pipeline:"))


def parse_config(job: str, workload: dict[str, Any] | None) -> WorkloadConfig:
    """Check a job's ``workload:`` mapping without importing anything heavy; WorkloadError names the key."""
    if not workload:
        raise WorkloadError(
            f"job {job!r}: no workload: real execution needs 'workload: {{name: ...}}' "
            f"(built-ins: {', '.join(BUILTINS)}) or 'workload: {{entry: \"module:callable\"}}'"
        )
    name, entry = workload.get("name"), workload.get("entry")
    if (name is None) == (entry is None):
        raise WorkloadError(f"job {job!r}: workload needs exactly one of 'name' (a built-in: "
                            f"{', '.join(BUILTINS)}) or 'entry' (\"module:callable\"), got keys {sorted(workload)}")
    if name is not None:
        if name not in BUILTINS:
            raise WorkloadError(f"job {job!r}: workload.name {name!r} is not a built-in; choose one of "
                                f"{', '.join(BUILTINS)} or give 'entry: \"module:callable\"'")
        target, label = BUILTINS[name], str(name)
    else:
        if not isinstance(entry, str) or entry.count(":") != 1 or not all(entry.split(":")):
            raise WorkloadError(f"job {job!r}: workload.entry must look like 'package.module:callable', got {entry!r}")
        mod = entry.split(":")[0]
        try:
            found = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise WorkloadError(f"job {job!r}: workload.entry {entry!r}: module {mod!r} is not importable "
                                f"(is it on PYTHONPATH / installed?)")
        target, label = entry, entry
    seed = workload.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise WorkloadError(f"job {job!r}: workload.seed must be a non-negative integer, got {seed!r}")
    params = {k: v for k, v in workload.items() if k not in RESERVED}
    if name is not None:
        factory = resolve(target)
        _check_params(job, name, factory, params)
        check = getattr(factory, "check_params", None)  # values a type annotation cannot express
        if callable(check):
            check(job, params)
    return WorkloadConfig(target, label, seed, params)


def resolve(target: str) -> Callable[..., Any]:
    """Import ``module:callable``; WorkloadError if it is missing or not callable."""
    mod_name, _, attr = target.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise WorkloadError(f"workload {target!r}: cannot import {mod_name!r}: {exc}") from None
    obj = mod
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise WorkloadError(f"workload {target!r}: module {mod_name!r} has no {attr!r}")
    if not callable(obj):
        raise WorkloadError(f"workload {target!r}: {attr!r} is not callable")
    return obj


def _check_params(job: str, label: str, factory: Callable[..., Any], params: dict[str, Any]) -> None:
    """Every key of ``params`` is a keyword of ``factory`` and every value fits its annotation.

    Checked before anything runs, so that ``data: sampel`` is reported when the jobs file
    is loaded, not when the task starts. Annotations checked: ``Literal[...]`` choices,
    ``int``, ``float``, ``bool``, ``str`` and unions of them with ``None``; others are left
    to the workload itself.
    """
    kw = _keyword_params(factory)
    if kw is None:
        return
    for key, value in params.items():
        if key not in kw:
            raise WorkloadError(f"job {job!r}: workload.{key} is not a parameter of {label!r}"
                                f"{did_you_mean(key, kw)}; "
                                f"known: {', '.join(list(kw) + list(RESERVED))}", field=key)
        expected = _mismatch(value, kw[key].annotation)
        if expected is not None:
            note = ""
            if isinstance(value, str) and "number" in expected and _is_number(value):
                note = " (it was given as text: write the number without quotes, e.g. 1e-3)"
            raise WorkloadError(f"job {job!r}: workload.{key} must be {expected}; got {value!r}{note}", field=key)


@functools.lru_cache(maxsize=256)
def _keyword_params(factory: Callable[..., Any]) -> dict[str, inspect.Parameter] | None:
    """``factory``'s keyword-only parameters by name (None if it takes ``**kwargs``); cached, as
    evaluating the annotations costs more than the rest of a job's check (a service checks every
    submission)."""
    try:
        sig = inspect.signature(factory, eval_str=True)
    except Exception:  # noqa: BLE001 - a user's annotations that do not evaluate: check names only
        sig = inspect.signature(factory)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return {p.name: p for p in list(sig.parameters.values())[1:] if p.kind is p.KEYWORD_ONLY}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_SCALARS: dict[Any, str] = {int: "an integer", float: "a number", bool: "true or false", str: "text",
                            type(None): "none"}


def _mismatch(value: Any, annotation: Any) -> str | None:
    """What ``annotation`` expects, when ``value`` (as read from YAML) does not fit it; None if it fits."""
    if typing.get_origin(annotation) is typing.Literal:
        choices = typing.get_args(annotation)
        if value in choices:
            return None
        return f"one of {', '.join(str(c) for c in choices)}{did_you_mean(str(value), map(str, choices))}"
    if isinstance(annotation, (types.UnionType,)) or typing.get_origin(annotation) is typing.Union:
        members = typing.get_args(annotation)
    else:
        members = (annotation,)
    if not all(m in _SCALARS or typing.get_origin(m) is typing.Literal for m in members):
        return None  # not a simple annotation: the workload checks the value itself
    for m in members:
        if typing.get_origin(m) is typing.Literal:
            if _mismatch(value, m) is None:
                return None
        elif m is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
        elif m is int and isinstance(value, int) and not isinstance(value, bool):
            return None
        elif m is bool and isinstance(value, bool):
            return None
        elif m in (str, type(None)) and isinstance(value, m):
            return None
    return " or ".join(_SCALARS.get(m) or str(typing.get_args(m)) for m in members)


def build(config: WorkloadConfig, ctx: WorkloadContext) -> Trainable:
    """Import and build the workload; wraps user objects without counters in :class:`Counted`."""
    factory = resolve(config.target)
    try:
        obj = factory(ctx, **config.params)
    except TypeError as exc:
        raise WorkloadError(f"job {ctx.job!r}: workload {config.label!r} rejected its parameters: {exc}") from None
    if all(hasattr(obj, a) for a in ("iteration", "total_iterations", "done")):
        return obj  # type: ignore[no-any-return]
    return Counted(obj, ctx)


__all__ = [
    "BUILTINS", "Communicator", "Counted", "RESERVED", "Trainable", "Workload", "WorkloadConfig",
    "WorkloadContext", "WorkloadError", "build", "parse_config", "resolve",
]
