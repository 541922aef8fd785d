"""Scheduling policies. Adding one = one module + one line in :data:`REGISTRY`.

Each registry line maps a policy name to ``"module:factory"``; the factory
takes ``oracle: bool`` (policies that can read true job lengths use it, the
others ignore it) and returns a policy. Modules are imported on first use.
"""

from __future__ import annotations

from importlib import import_module

from .base import BasePolicy, Policy
from .fifo import FIFO
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


def make_policy(name: str, *, oracle: bool = False) -> Policy:
    """Build the policy registered as ``name``; unknown names list the known ones."""
    try:
        target = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(sorted(REGISTRY))}") from None
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)(oracle)


__all__ = ["REGISTRY", "BasePolicy", "FIFO", "Policy", "SRTF", "make_policy"]
