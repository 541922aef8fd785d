"""In which order the task-by-task loop (:mod:`.taskwise`) offers the pending jobs.

Bao et al. (§IV, §V-A) place "the newly arrived jobs one by one" and say nothing of their order;
``arrival`` (the default, what ``drl``, LIF-Line and LIF-Quad did so far) keeps submission order.
``short`` offers first the job with the least estimated run time alone: its declared
``iterations`` (the total the owner gives with the job, §IV) over the speed a profiling run
measured for its model and shape alone (``data/drl/solo.json``, :func:`.online.load_solo`), so
when room is short the shortest job takes it (shortest-job-first among those that fit). Both
read only what the job declares and the shipped profile, never the simulator's truth. A job
whose model or shape was not profiled, or without declared iterations, goes after the estimated
ones, in arrival order.

``area`` (session drl12) offers first the job of least estimated GPU time: that solo estimate
times the GPUs its workers hold (at least 1), so a short wide job no longer passes a slightly
longer narrow one that frees less room for it (smallest resource-time product first, the
multi-resource form of shortest-job-first). It reads the same declared quantities.

One rule, one place: every :class:`.taskwise.TaskwisePolicy` (``drl``, ``lif-line``,
``lif-quad``) takes it as its ``order`` parameter, so a gain from the order is measured on the
baselines too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...engine.job import JobView
from .online import load_solo, solo_key
from .state import PlacementState

ORDERS = ("arrival", "short", "area")


def check_order(order: str) -> str:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    return order


def solo_estimate(job: JobView, solo: dict[str, dict[str, float]]) -> float:
    """Seconds ``job`` would run alone: declared iterations over its profiled solo speed (inf if unknown)."""
    spec = job.spec
    speeds = solo.get(spec.model or "", {})
    speed = speeds.get(solo_key(spec.num_ps == 0, spec.workers.count, spec.num_ps))
    if not speed or spec.iterations is None:
        return math.inf
    return float(spec.iterations) / float(speed)


def gpus(job: JobView) -> float:
    """GPUs ``job``'s workers hold together (at least 1, so a GPU-less job still counts its time)."""
    spec = job.spec
    return max(1.0, spec.workers.count * float(spec.workers.demand.get("gpu", 0.0)))


class PendingOrder:
    """Reorders the new jobs of a placement state (``order`` of the module docstring)."""

    def __init__(self, order: str = "arrival") -> None:
        self.order = check_order(order)
        self._solo: dict[str, dict[str, float]] | None = None

    def apply(self, state: PlacementState, pending: Sequence[JobView]) -> None:
        """Puts ``state``'s new entries in this order (running entries keep their places, first)."""
        if self.order == "arrival":
            return
        if self._solo is None:
            self._solo = load_solo()
        est = {j.id: solo_estimate(j, self._solo) * (gpus(j) if self.order == "area" else 1.0) for j in pending}
        rank = {j.id: i for i, j in enumerate(pending)}  # stable: arrival order breaks ties
        new = sorted((e for e in state.jobs if e.new), key=lambda e: (est[e.key], rank[e.key]))
        state.jobs[:] = [e for e in state.jobs if not e.new] + new
