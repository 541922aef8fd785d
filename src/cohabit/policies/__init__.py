"""Scheduling policies. Adding one = one module + one line in :data:`REGISTRY`.

Each registry entry maps a name to a factory taking ``oracle: bool``; policies
that can read true job lengths use it, others ignore it.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import BasePolicy, Policy
from .fifo import FIFO
from .srtf import SRTF

REGISTRY: dict[str, Callable[[bool], Policy]] = {
    "fifo": lambda oracle: FIFO(),
    "fifo-backfill": lambda oracle: FIFO(backfill=True),
    "srtf": lambda oracle: SRTF(use_oracle=oracle),
}


def make_policy(name: str, *, oracle: bool = False) -> Policy:
    """Build the policy registered as ``name``; unknown names list the known ones."""
    try:
        factory = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(sorted(REGISTRY))}") from None
    return factory(oracle)


__all__ = ["REGISTRY", "BasePolicy", "FIFO", "Policy", "SRTF", "make_policy"]
