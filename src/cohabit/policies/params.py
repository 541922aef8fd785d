"""Policy parameters on the command line: ``NAME[:KEY=VALUE[:KEY=VALUE...]]``.

``srtf:preempt_margin=1`` builds SRTF with a 1-second preemption margin (names are
case-insensitive: ``SRTF`` is ``srtf``);
``tiresias:starve_limit=4:gittins=true`` sets two. Keys are the keyword
arguments of the policy class's constructor; values are read as YAML scalars
(``1``, ``0.5``, ``true``, ``none``, ``abc``) and converted to the type of the
argument's default. An unknown key or a value of the wrong type is an error
that names the key, the policy and what was expected.

A factory in :data:`cohabit.policies.REGISTRY` accepts parameters by taking
``**params`` and building its class with :func:`build`, which also sets the
policy's ``parameters`` attribute (settable names and defaults) that
``cohabit policies`` lists.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, TypeVar


T = TypeVar("T")

#: Shortest tick a policy built from the command line may ask for (seconds): a tick of
#: nanoseconds (``gandiva:slice_length=1e-9``) would make a run of hours take forever.
MIN_TICK_S = 0.1
#: Largest magnitude of a numeric parameter.
MAX_PARAM = 1e12


class PolicyParamError(ValueError):
    """A policy name or parameter on the command line is not understood."""


def parse_policy_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split ``"srtf:preempt_margin=1"`` into ``("srtf", {"preempt_margin": 1})``."""
    name, *pairs = [p.strip() for p in spec.strip().split(":")]
    name = name.lower()  # policy names are case-insensitive: "SRTF" is "srtf"
    if not name:
        raise PolicyParamError(f"policy {spec!r}: expected NAME[:KEY=VALUE...], the name is empty")
    params: dict[str, Any] = {}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise PolicyParamError(f"policy {spec!r}: expected KEY=VALUE after ':', got {pair!r}")
        if key in params:
            raise PolicyParamError(f"policy {spec!r}: parameter {key!r} given twice")
        import yaml  # (imported here: a policy named without parameters reads no YAML)

        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, str) and any(c.isdigit() for c in value):
            try:  # YAML 1.1 reads "1e-05" as a string
                value = float(value)
            except ValueError:
                pass
        params[key] = value
    return name, params


def _convert(policy: str, key: str, value: Any, default: Any) -> Any:
    """Bring ``value`` to the type of ``default`` (bool, int, float) or leave it as read."""
    if value is None or default is inspect.Parameter.empty or default is None:
        return value
    kind = type(default)
    ok = (
        (kind is bool and isinstance(value, bool))
        or (kind is int and isinstance(value, int) and not isinstance(value, bool))
        or (kind is float and isinstance(value, (int, float)) and not isinstance(value, bool))
        or (kind is str and isinstance(value, str))
        or kind not in (bool, int, float, str)
    )
    if not ok:
        raise PolicyParamError(f"policy {policy!r}: parameter {key!r} expects a {kind.__name__} "
                               f"(default {default!r}), got {value!r}")
    if kind in (int, float) and not abs(value) <= MAX_PARAM:  # also NaN
        raise PolicyParamError(f"policy {policy!r}: parameter {key!r} expects a finite number of magnitude "
                               f"<= {MAX_PARAM:g}, got {value!r}")
    return float(value) if kind is float else value


def accepted(cls: type) -> dict[str, Any]:
    """Keyword arguments of ``cls``'s constructor with their defaults (``inspect.Parameter.empty`` if none)."""
    sig = inspect.signature(cls.__init__)  # type: ignore[misc]
    return {n: p.default for n, p in sig.parameters.items()
            if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def build(cls: type[T], params: dict[str, Any], *, policy: str, fixed: dict[str, Any] | None = None) -> T:
    """``cls(**fixed, **params)`` after checking every key of ``params`` against the constructor.

    ``fixed`` are the arguments the registry entry itself sets (e.g. ``gittins=True`` for
    ``tiresias-gittins``); users may not override them.
    """
    fixed = dict(fixed or {})
    known = accepted(cls)
    settable = sorted(k for k in known if k not in fixed and k not in ("use_oracle", "name"))
    for key in params:
        if key not in settable:
            raise PolicyParamError(f"policy {policy!r}: unknown parameter {key!r}; it accepts: "
                                   f"{', '.join(settable) or 'no parameters'}")
    values = {k: _convert(policy, k, v, known[k]) for k, v in params.items()}
    try:
        obj = cls(**fixed, **values)
    except (TypeError, ValueError) as exc:
        raise PolicyParamError(f"policy {policy!r}: {exc}") from None
    tick = getattr(obj, "tick_interval", None) or getattr(obj, "wake_interval", None)  # (ticks it may ask for)
    if tick is not None and not (math.isfinite(tick) and tick >= MIN_TICK_S) and params:
        raise PolicyParamError(f"policy {policy!r}: these parameters make it decide every {tick:g} s; "
                               f"the shortest interval allowed is {MIN_TICK_S:g} s")
    obj.parameters = {k: known[k] for k in settable}  # type: ignore[attr-defined]  # for `cohabit policies`
    return obj


def per_size(value: float, auto: dict[int, float], size: int) -> float:
    """A numeric parameter whose negative value means ``auto``: ``value`` itself when >= 0, else the
    value ``auto`` gives for this ``size`` (e.g. the number of servers; 0 when it names none).
    ``drl``'s ``prior``, ``hold`` and ``starve`` are read this way."""
    return value if value >= 0 else auto.get(size, 0.0)


def check_choice(name: str, value: str, choices: tuple[str, ...], allow_auto: bool = False) -> str:
    """``value`` if it is one of ``choices`` (or ``auto`` where allowed), else a ``ValueError`` naming the
    parameter ``name`` and what it may be. ``drl``'s ``isolate``, ``layout`` and ``weigh`` are checked this way."""
    allowed = choices + (("auto",) if allow_auto else ())
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def choice_per_size(value: str, auto: dict[int, str], size: int, default: str) -> str:
    """A named choice whose value ``auto`` means the one ``auto`` gives for this ``size`` (``default`` when it
    names none), as :func:`per_size` for numbers; ``drl``'s ``layout`` and ``weigh`` are read this way."""
    return auto.get(size, default) if value == "auto" else value
