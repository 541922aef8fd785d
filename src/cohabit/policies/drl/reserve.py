"""The ``reserve`` rule of the task-by-task loop (:mod:`.taskwise`): a reservation for the job that
has waited longest, EASY-backfill style (ours, session drl18a; a hand-coded rule, not learned).

Why (``docs/drl.md``, "Session drl18a"): under the :mod:`.hold` rule a job that does not fit on its
fewest servers waits, and later, shorter jobs may take the room it waits for, so a wide job can
wait long. With ``reserve = S`` seconds, at each decision the pending job that has waited longest
among those left waiting by an earlier decision, once it has waited ``S`` seconds since its
submission, gets a reservation (:func:`plan`): the servers on which its tasks fit on
:func:`.hold.min_span` of them soonest, given the room free now and the room each running job
frees at its estimated end (:func:`estimated_end`), and that time. Other jobs of the decision may
use those servers only when their estimated run time alone ends before it (:func:`blocked`); the
job itself is placed as before in its turn.

Everything it reads is observable: the jobs' declared shapes, demands and iterations, the profiled
solo speeds (:func:`.order.solo_estimate`), the running jobs' reported progress and measured time
per iteration, the servers' capacities and free room, the clock. ``reserve < 0`` is ``auto``
(:data:`AUTO` per cluster size; a size it does not name: off); ``inf`` is off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...engine.job import JobView
from .hold import compact_in, min_span
from .order import solo_estimate
from .state import JobEntry, PlacementState

#: the wait (seconds since submission) after which a job gets a reservation, per number of servers
#: under ``reserve=auto`` (a size not named: off)
AUTO: dict[int, float] = {}


def reserve_seconds(reserve: float, m: int) -> float:
    """The threshold ``reserve`` means on ``m`` servers: itself when >= 0, else :data:`AUTO`'s (inf: off)."""
    return reserve if reserve >= 0 else AUTO.get(m, math.inf)


def estimated_end(job: JobView, now: float, solo: Mapping[str, Mapping[str, float]]) -> float:
    """When running ``job`` should end: its declared iterations left at its measured time per
    iteration; before its first report, its estimated solo time (:func:`.order.solo_estimate`)
    after its start; inf if neither is known."""
    spec = job.spec
    if spec.iterations is not None and job.iter_time:
        return now + max(float(spec.iterations) - job.iterations_done(now), 0.0) * job.iter_time
    est = solo_estimate(job, solo)  # type: ignore[arg-type]
    if math.isfinite(est) and job.first_start is not None:
        return max(now, job.first_start + est)
    return math.inf


@dataclass
class Reservation:
    """Servers kept for job ``key`` (M booleans) from ``start`` (seconds on the clock) on."""

    key: str
    servers: np.ndarray
    start: float


def plan(state: PlacementState, entry: JobEntry, capacity: np.ndarray,
         ends: Sequence[tuple[float, JobEntry]], now: float) -> Reservation | None:
    """The reservation for unplaced ``entry``: the first time (now, or a running job's estimated end
    in ``ends``) at which its tasks fit on :func:`.hold.min_span` servers, given the room free now
    and each running job's room freed at its end, and those servers (:func:`.hold.compact_in`:
    fewest other jobs' tasks first); None if that never happens (an end unknown)."""
    k = min_span(capacity, entry)
    free = state.free.copy()
    others = np.zeros(state.m)
    for j in state.jobs:
        if j is not entry:
            others += j.placed_w + j.placed_p
    t = now
    for end, job in sorted(ends, key=lambda x: x[0]) + [(math.inf, None)]:  # type: ignore[list-item]
        found = compact_in(free, others, entry, k)
        if found is not None:
            mask = np.zeros(state.m, dtype=bool)
            mask[found[0]] = True
            return Reservation(entry.key, mask, t)
        if job is None or not math.isfinite(end):
            return None
        free = free + np.outer(job.placed_w, job.worker_demand) + np.outer(job.placed_p, job.ps_demand)
        others = others - job.placed_w - job.placed_p
        t = max(t, end)
    return None


def blocked(res: Reservation | None, entry: JobEntry, end: float) -> np.ndarray | None:
    """Servers ``entry``, which would end at ``end`` (estimated), may not use under ``res``: the
    reserved ones, unless it is the reserved job or ends before the reservation starts."""
    if res is None or entry.key == res.key or end <= res.start:
        return None
    return res.servers


def candidate(pending: Sequence[JobView], waiting_since: Mapping[str, float], now: float,
              threshold: float) -> JobView | None:
    """The job a reservation is for: among ``pending`` jobs left waiting by an earlier decision
    (``waiting_since``), the one submitted first, if it has waited ``threshold`` seconds."""
    left = [j for j in pending if j.id in waiting_since and now - j.spec.submit_time >= threshold]
    return min(left, key=lambda j: (j.spec.submit_time, j.seq)) if left else None
