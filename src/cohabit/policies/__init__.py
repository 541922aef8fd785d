"""Scheduling policies. Adding one = one module + one line in :data:`REGISTRY`.

Each registry line maps a policy name to ``"module:factory"``; the factory
takes ``oracle: bool`` (policies that can read true job lengths use it, the
others ignore it) and returns a policy; a factory that also takes ``**params``
lets users set its constructor's arguments (``srtf:preempt_margin=1``, see
:mod:`.params`). Modules are imported on first use.
"""

from __future__ import annotations

import inspect
from importlib import import_module

from ..suggest import did_you_mean
from .base import BasePolicy, Policy
from .fifo import FIFO
from .params import PolicyParamError, parse_policy_spec
from .srtf import SRTF

REGISTRY: dict[str, str] = {
    "fifo": "cohabit.policies.fifo:make",
    "fifo-backfill": "cohabit.policies.fifo:make_backfill",
    "srtf": "cohabit.policies.srtf:make",
    "optimus": "cohabit.policies.optimus:make",
    "slaq": "cohabit.policies.slaq:make",
    "themis": "cohabit.policies.themis:make",
    "tiresias": "cohabit.policies.tiresias:make",
    "tiresias-gittins": "cohabit.policies.tiresias:make_gittins",
    "gandiva": "cohabit.policies.gandiva:make",
    "drf": "cohabit.policies.drf:make",
    "tetris": "cohabit.policies.tetris:make",
    "lb": "cohabit.policies.spread:make_lb",
    "binpack": "cohabit.policies.spread:make_binpack",
    "static": "cohabit.policies.static:make",
    "dorm": "cohabit.policies.dorm.policy:make",
    "dorm-1": "cohabit.policies.dorm.policy:make_1",
    "dorm-2": "cohabit.policies.dorm.policy:make_2",
    "dorm-3": "cohabit.policies.dorm.policy:make_3",
    "naive": "cohabit.policies.naive:make",
    "harmony": "cohabit.policies.harmony.policy:make",
    "harmony-isolated": "cohabit.policies.harmony.baselines:make_isolated",
    "harmony-naive": "cohabit.policies.harmony.baselines:make_naive",
    "pack": "cohabit.policies.pack:make",
}


def make_policy(spec: str, *, oracle: bool = False) -> Policy:
    """Build the policy ``spec`` names: a registry name, optionally with parameters
    (``srtf:preempt_margin=1``, see :mod:`.params`). Unknown names list the known ones."""
    name, params = parse_policy_spec(spec)
    try:
        target = REGISTRY[name]
    except KeyError:
        raise PolicyParamError(_unknown(name)) from None
    module, _, attr = target.partition(":")
    factory = getattr(import_module(module), attr)
    if not params:
        return factory(oracle)
    takes = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(factory).parameters.values())
    if not takes:
        raise PolicyParamError(f"policy {name!r} takes no parameters, got {', '.join(sorted(params))}")
    policy = factory(oracle, **params)
    # one name: the registry name the user typed (with the [oracle] tag), then the parameters as given
    tag = "[oracle]" if policy.name.endswith("[oracle]") else ""
    policy.name = f"{name}{tag}:" + ":".join(f"{k}={v}" for k, v in params.items())
    return policy


def _unknown(name: str) -> str:
    """The error for an unknown policy name: the nearest known name, and what an ``[oracle]`` tag means."""
    msg = f"unknown policy {name!r}"
    base = name.removesuffix("[oracle]")
    if base != name and base in REGISTRY:
        msg += f" (the [oracle] tag in results names a run with --oracle: use --policy {base} --oracle)"
    else:
        msg += did_you_mean(base, REGISTRY)
    return f"{msg}; known policies: {', '.join(sorted(REGISTRY))}"


def policy_list(text: str) -> list[str]:
    """Split a comma-separated ``--policy`` value and check that every entry builds.

    Raises :class:`PolicyParamError` (a ``ValueError``) naming the first unknown policy or bad parameter.
    """
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise PolicyParamError(f"no policy given; known policies: {', '.join(sorted(REGISTRY))}")
    for n in names:
        make_policy(n)
    return names


def settable_params(name: str) -> dict[str, object]:
    """Parameters users may set on registry entry ``name``, with their defaults (empty if none)."""
    module, _, attr = REGISTRY[name].partition(":")
    return dict(getattr(getattr(import_module(module), attr)(False), "parameters", {}))


__all__ = ["REGISTRY", "BasePolicy", "FIFO", "Policy", "SRTF", "PolicyParamError", "make_policy", "policy_list", "settable_params"]
