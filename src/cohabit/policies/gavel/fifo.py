"""Gavel's FIFO (``fifo``, heterogeneity-agnostic) on Gavel's round mechanism (:mod:`.rounds`).

The allocation gives a job all of one GPU type's time (``X = 1``) or nothing. Jobs keep the type
they were given until they end; at each allocation (Gavel recomputes it only at a reset, see
:mod:`.rounds`) the types the ended jobs held go to the oldest waiting jobs, then the oldest
waiting jobs take, in arrival order, a type with enough GPUs left, picked at random (seeded)
among those; the first job that fits no type stops the scan (first come, first served: no job
overtakes it). Only jobs with an allocation run.

``pick="gavel-code"`` reproduces what Gavel's code does (``FIFOPolicy.get_allocation``):
(1) it draws a random type but then uses the loop variable left from scanning the types, so a job
gets the last type in name order that still has a GPU free, even one with fewer free GPUs than the
job needs; a job that cannot run on that type is skipped for this allocation, and the type dropped
from the list when one runs out is the randomly drawn one; (2) an ended job's type goes to the
oldest waiting job while the held jobs are still being counted one by one, so the GPUs of held jobs
later in arrival order still look free. Both can give a type more jobs than GPUs; they then take
turns by the mechanism's priorities (Gavel's FIFO "preemptions"). It is the setting that
reproduces Gavel's FIFO numbers (docs/fidelity.md).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Literal

from ...engine.job import JobView
from ...engine.view import ClusterView
from ..params import build
from .rounds import Allocation, GavelRounds


class GavelFIFO(GavelRounds):
    name = "gavel-fifo"

    def __init__(self, round_s: float = 360.0, min_reset_s: float = 1920.0, seed: int = 0,
                 pick: Literal["random", "gavel-code"] = "random") -> None:
        super().__init__(round_s=round_s, min_reset_s=min_reset_s, seed=seed)
        if pick not in ("random", "gavel-code"):
            raise ValueError(f"pick must be 'random' or 'gavel-code', got {pick!r}")
        self.pick = pick
        self._held: dict[str, str] = {}  # job id -> GPU type it was given
        self._pick = random.Random(seed)

    def runnable(self, job: JobView, gpu_type: str, priority: float) -> bool:
        return priority > 0.0

    def allocation(self, view: ClusterView, jobs: list[JobView], types: Mapping[str, float]) -> Allocation:
        active = {j.id for j in jobs}
        free = dict(types)
        nodes = self._types or {}
        waiting = [j for j in jobs if j.id not in self._held]
        # held jobs in arrival order; an ended one hands its type to the oldest waiting job if it fits
        # the GPUs counted free so far (Gavel's code counts the held jobs one by one in this scan, so
        # "free" can still include GPUs of held jobs later in the order: the type is then oversubscribed)
        for jid in sorted(self._held, key=lambda i: view.jobs[i].seq):
            t = self._held[jid]
            if jid in active:
                free[t] -= self._gpus_of(view, view.jobs[jid])
                continue
            del self._held[jid]
            if self.pick == "gavel-code" and waiting:
                head = waiting[0]
                need = self._gpus_of(view, head)
                if need <= free[t] + 1e-9 and self._fits_type(view, head, nodes.get(t, [])):
                    self._held[head.id] = t
                    free[t] -= need
                    waiting.pop(0)
        listed = [t for t in sorted(free) if free[t] > 0]
        for j in waiting:
            need = self._gpus_of(view, j)
            if self.pick == "random":
                room = [t for t in listed if free[t] >= need - 1e-9 and self._fits_type(view, j, nodes.get(t, []))]
                if not room:
                    break
                t = drawn = room[self._pick.randrange(len(room))]
            else:
                room = [t for t in listed if free[t] >= need - 1e-9]
                if not room:
                    break
                drawn, t = room[self._pick.randrange(len(room))], listed[-1]
                if not self._fits_type(view, j, nodes.get(t, [])):
                    continue  # Gavel's code: no allocation this time, the next job is tried
            self._held[j.id] = t
            free[t] -= need
            if self.pick == "random" and free[t] <= 1e-9:
                listed.remove(t)
            elif self.pick == "gavel-code" and abs(free[t]) <= 1e-9:
                listed.remove(drawn)
        return {j.id: {t: (1.0 if self._held.get(j.id) == t else 0.0) for t in types} for j in jobs}


def make(oracle: bool = False, **params: object) -> GavelFIFO:
    return build(GavelFIFO, params, policy="gavel-fifo")
