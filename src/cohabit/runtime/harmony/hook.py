"""How LocalBackend runs Harmony groups: which PS workers get a Harmony gate, and the server's life.

An allocation in a ``pipelined`` group (``Colocate(..., mode="pipelined")``,
``alloc.group[0]``) gets ``subtask_gate: {kind: harmony, ...}`` for every
worker: its subtasks go through the node queues and the synchronizer. A
``naive`` group and an isolated job get no Harmony gate (plain sharing). The
node-queue server (:class:`~.service.HarmonyService`) is started at the first
pipelined launch and stopped by :meth:`HarmonyHook.close`. Each launch of a job
is a new incarnation, so a relaunched job (resume, move, restart) never waits
for workers of its previous life.
"""

from __future__ import annotations

import itertools
from typing import Any

from ...engine.ledger import Allocation
from .service import HarmonyService


class HarmonyHook:
    """Gives pipelined-group workers their gate configuration; owns the node-queue server."""

    def __init__(self, n_nodes: int, env: dict[str, str] | None = None) -> None:
        self.n_nodes = n_nodes
        self.env = env
        self.service: HarmonyService | None = None
        self.last_stats: dict[str, Any] | None = None
        """The node queues' stats, read just before the server stopped (for reports and tests)."""
        self._incarnations = itertools.count()

    def gate_for(self, alloc: Allocation, n_workers: int) -> dict[str, Any] | None:
        """``subtask_gate`` for the workers of this launch, or None when the job is not in a pipelined group."""
        if alloc.group is None or alloc.group[0] != "pipelined":
            return None
        if self.service is None:
            self.service = HarmonyService(self.n_nodes, env=self.env)
        return self.service.gate_config(world=n_workers, incarnation=next(self._incarnations))

    def stats(self) -> dict[str, Any] | None:
        """The node queues' measured busy times and subtask counts (None before any pipelined launch)."""
        return self.service.stats() if self.service is not None else None

    def close(self) -> None:
        if self.service is not None:
            try:
                self.last_stats = self.service.stats()
            except (OSError, RuntimeError):
                self.last_stats = None
            self.service.stop()
            self.service = None
