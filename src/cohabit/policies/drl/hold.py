"""The ``hold`` rule of the task-by-task loop (:mod:`.taskwise`): a job runs on as few servers as
an empty cluster would give it, or waits for that room, for at most ``hold`` seconds since its
submission (ours, session drl16; a hand-coded rule, not learned).

Why (``docs/drl.md``, "Session drl16"): in the busiest quarter of the Poisson workloads, a 2-GPU
job split over two servers runs 1.8-2.3x its solo time against 1.0x on one server; such spread
jobs carry most of drl's run-time excess there, and they hold their GPUs that much longer. With
the rule, when the tasks the chooser drew span more servers than :func:`min_span`:

* if the job fits now on :func:`min_span` servers (:func:`compact_servers`), it is placed again,
  the chooser drawing every task among those servers only (first fit there if its draws do not
  complete the job);
* otherwise its tasks are taken back and it waits (later jobs may take the room) until it has
  waited ``hold`` seconds; from then on the chooser's spread placement is accepted as before.

On an empty cluster every job fits on its minimum, so no job waits for nothing. Everything it reads
is observable: the job's declared shape and demands, the servers' capacities and free room, the
placement drawn, the job's submission time and the clock. ``hold = 0`` (the default) is the loop
as before; ``drl``'s default ``hold = auto`` is :data:`AUTO` per cluster size: unbounded on 6
servers (chosen on the selection workloads of "Session drl16") and on the 30-server rack (session
drl17a, chosen on the load-matched selection workloads 20000-20011), where jobs have up to 10
tasks, so the server sets are searched greedily above :data:`EXHAUSTIVE` of them. ``starve = k``
bounds the wait (:func:`due`): a held job may run spread after k times its estimated solo time
(off by default: it did not pay on the selection workloads, ``docs/drl.md``, "Session drl17a").
"""

from __future__ import annotations

import math

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ..params import per_size
from .state import JobEntry, PlacementState


#: the hold per number of servers under ``hold=auto`` (seconds; 0: off)
AUTO: dict[int, float] = {6: math.inf, 30: math.inf}


#: the starvation bound (:func:`due`) per number of servers under ``starve=auto`` (0: none)
STARVE_AUTO: dict[int, float] = {}


def hold_seconds(hold: float, m: int) -> float:
    """The hold ``hold`` means on ``m`` servers: itself when >= 0, else (``auto``) :data:`AUTO`'s."""
    return per_size(hold, AUTO, m)


def starve_factor(starve: float, m: int) -> float:
    """The starvation bound ``starve`` means on ``m`` servers: itself when >= 0, else :data:`STARVE_AUTO`'s."""
    return per_size(starve, STARVE_AUTO, m)


def span(entry: JobEntry) -> int:
    """Servers ``entry``'s placed tasks occupy."""
    return int(((entry.placed_w + entry.placed_p) > 0).sum())


def _tasks(entry: JobEntry) -> list[tuple[bool, np.ndarray]]:
    """(is a parameter server, demand) of each of ``entry``'s tasks, workers first."""
    return [(False, entry.worker_demand)] * entry.n_workers + [(True, entry.ps_demand)] * entry.n_ps


def first_fit(free: np.ndarray, entry: JobEntry, servers: Sequence[int]) -> list[int] | None:
    """Actions (``2 x server + is_ps``) placing all of ``entry``'s tasks on ``servers`` given ``free``
    room (M x K), each task on the first of them where it fits; None if some task fits nowhere."""
    room = np.array(free, dtype=float)
    out: list[int] = []
    for is_ps, demand in _tasks(entry):
        for srv in servers:
            if (room[srv] + 1e-9 >= demand).all():
                room[srv] -= demand
                out.append(2 * srv + int(is_ps))
                break
        else:
            return None
    return out


#: at most this many server sets are searched exhaustively (C(6, 3) = 20 on the testbed); above it
#: (C(30, 5) = 142,506 for a 10-worker job on the rack) :func:`compact_servers` packs greedily
EXHAUSTIVE = 256


def min_span(capacity: np.ndarray, entry: JobEntry) -> int:
    """Fewest servers ``entry``'s tasks need on an empty cluster whose servers have ``capacity``
    (M x K, in the state's normalisation): the least k for which some k servers hold all of them
    (first fit); M + 1 if none do. When every server has the same capacity any k of them are
    alike, so one set per k is tried (exact, and cheap on the 30-server rack)."""
    m = capacity.shape[0]
    alike = bool((capacity == capacity[0]).all())
    for k in range(1, min(m, len(_tasks(entry))) + 1):
        sets = [tuple(range(k))] if alike else combinations(range(m), k)
        if any(first_fit(capacity, entry, c) is not None for c in sets):
            return k
    return m + 1


def compact_servers(state: PlacementState, entry: JobEntry, k: int) -> tuple[list[int], list[int]] | None:
    """``k`` servers on which all of ``entry``'s tasks fit in the room free before they were placed,
    those where other jobs hold the fewest tasks first (ties: lower index), and the first-fit
    actions there; None if no ``k`` servers hold the job now. Exhaustive over the C(M, k) sets up to
    :data:`EXHAUSTIVE` of them; above, greedy (:func:`_packed`): may miss a set that exists."""
    free = state.free + np.outer(entry.placed_w, entry.worker_demand) + np.outer(entry.placed_p, entry.ps_demand)
    others = np.zeros(state.m)
    for j in state.jobs:
        if j is not entry:
            others += j.placed_w + j.placed_p
    if math.comb(state.m, k) > EXHAUSTIVE:
        return _packed(free, others, entry, k)
    best: tuple[float, list[int], list[int]] | None = None
    for c in combinations(range(state.m), k):
        plan = first_fit(free, entry, c)
        if plan is not None and (best is None or others[list(c)].sum() < best[0]):
            best = (float(others[list(c)].sum()), list(c), plan)
    return None if best is None else (best[1], best[2])


def _packed(free: np.ndarray, others: np.ndarray, entry: JobEntry, k: int) -> tuple[list[int], list[int]] | None:
    """The cheap form of :func:`compact_servers` for many servers: first fit over the servers in
    order of fewest other jobs' tasks (ties: most free room, then lower index), and if that spans
    more than ``k`` servers, in order of most free room; the first that spans at most ``k``.
    O(M x tasks) per order instead of C(M, k) first fits."""
    room = free.sum(axis=1)
    idx = np.arange(free.shape[0])
    for order in (np.lexsort((idx, -room, others)), np.lexsort((idx, -room))):
        plan = first_fit(free, entry, [int(s) for s in order])
        if plan is not None and len(used := sorted({a // 2 for a in plan})) <= k:
            return used, plan
    return None


def due(submit: float, hold_s: float, starve: float, solo_s: float) -> float:
    """When a job submitted at ``submit`` may run spread: after ``hold_s`` seconds, or, the
    starvation bound, after ``starve`` times its estimated solo run time ``solo_s`` (declared
    iterations over the profiled solo speed, :func:`.order.solo_estimate`; observable) if that is
    sooner. ``starve <= 0`` or an unknown estimate (inf): no bound beyond ``hold_s``."""
    if starve > 0 and math.isfinite(solo_s):
        return submit + min(hold_s, starve * solo_s)
    return submit + hold_s


@dataclass
class HoldRule:
    """The rule for one decision: the servers' capacities and whether a job may now run spread
    (it has waited ``hold`` seconds; the policy notes when the others may)."""

    capacity: np.ndarray
    may_spread: Callable[[JobEntry], bool]


Chooser = Callable[[PlacementState, JobEntry, np.ndarray], int]


def enforce(state: PlacementState, entry: JobEntry, choose: Chooser, rule: HoldRule) -> bool:
    """Apply the rule to ``entry``, whose tasks are all placed: True when it may start as it now
    stands (unspread, placed again on :func:`min_span` servers, or allowed to spread), False when it
    must wait (its tasks are still in the state; the caller takes them back)."""
    k = min_span(rule.capacity, entry)
    if span(entry) <= k:
        return True
    found = compact_servers(state, entry, k)
    if found is None:
        return rule.may_spread(entry)
    servers, plan = found
    state.undo(entry)
    allowed = np.zeros(2 * state.m, dtype=bool)
    for s in servers:
        allowed[2 * s: 2 * s + 2] = True
    while not entry.complete:
        mask = state.mask(entry) & allowed
        if not mask.any():
            break
        action = choose(state, entry, mask)
        if not mask[action]:
            raise RuntimeError(f"hold: chose masked action {action} for job {entry.key!r}")
        state.apply(entry, action)
    if not entry.complete:  # the draws left no room for the rest: the first-fit plan (it fits)
        state.undo(entry)
        for action in plan:
            state.apply(entry, action)
    return True
