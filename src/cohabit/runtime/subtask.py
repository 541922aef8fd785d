"""Subtask gates: where a parameter-server worker asks before running a COMP or COMM subtask.

Harmony (Lee et al., Sec. 4.1) splits every iteration of a parameter-server job
into subtasks: PULL (fetch the model partitions from the servers), COMP (compute
the update on the local input) and PUSH (send the update back). A real PS worker
(:mod:`cohabit.runtime.ps`) wraps each of them in ``with gate.subtask(kind):`` and
leaves (de)serialisation outside the block, as the paper does.

* :class:`NullGate` runs every subtask at once (isolated or naively co-located
  jobs: no coordination).
* The Harmony gate (``cohabit.runtime.harmony.gate``) asks its node's queues: one
  CPU queue running one COMP subtask at a time, one network queue with a primary
  and a secondary COMM subtask, and a synchronizer that releases a job's next
  subtask only when every worker of the job finished the previous one.

The gate a worker uses comes from its configuration (``make_gate``); a worker
never imports a gate implementation directly.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, Protocol


class SubtaskKind(StrEnum):
    PULL = "pull"
    COMP = "comp"
    PUSH = "push"

    @property
    def is_comm(self) -> bool:
        return self is not SubtaskKind.COMP


class SubtaskGate(Protocol):
    spent: dict[SubtaskKind, float]
    """Seconds spent inside subtask bodies per kind, from admission to the end (queueing excluded)."""

    def subtask(self, kind: SubtaskKind) -> Any:
        """Context manager: block until ``kind`` may run, run the body, then release."""

    def close(self) -> None:
        """Leave the node's queues (the worker stops, pauses or moves)."""


class NullGate:
    """No coordination: every subtask runs as soon as it is asked for.

    Keeps the time spent inside each kind of subtask (``spent``) so that a worker
    can report its compute and communication time per iteration.
    """

    def __init__(self) -> None:
        self.spent: dict[SubtaskKind, float] = {k: 0.0 for k in SubtaskKind}

    @contextmanager
    def subtask(self, kind: SubtaskKind) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[kind] += time.perf_counter() - t0

    def close(self) -> None:
        return None


class GateConfigError(ValueError):
    """The ``subtask_gate`` entry of a worker's configuration is not understood."""


GATES: dict[str, str] = {
    "none": "cohabit.runtime.subtask:NullGate",
    "harmony": "cohabit.runtime.harmony.gate:HarmonyGate",
}
"""Gate kind -> ``module:factory``; the factory takes the config's other keys plus
``job``, ``rank``, ``node`` and ``link_rate`` as keyword arguments."""


def make_gate(cfg: dict[str, Any] | None, *, job: str, rank: int, node: int,
              link_rate: float | None = None) -> SubtaskGate:
    """Build the gate a worker's configuration names (``{"kind": "none"}`` when absent).

    ``link_rate``: the node's bandwidth in bytes/s (None: unlimited), for gates that
    meter a node's link (``throttle``); :class:`NullGate` meters nothing."""
    import importlib

    cfg = dict(cfg or {"kind": "none"})
    kind = cfg.pop("kind", "none")
    if kind not in GATES:
        raise GateConfigError(f"subtask_gate.kind: expected one of {sorted(GATES)}, got {kind!r}")
    if kind == "none":
        if cfg:
            raise GateConfigError(f"subtask_gate: kind 'none' takes no options, got {sorted(cfg)}")
        return NullGate()
    module, _, name = GATES[kind].partition(":")
    factory = getattr(importlib.import_module(module), name)
    return factory(job=job, rank=rank, node=node, link_rate=link_rate, **cfg)
