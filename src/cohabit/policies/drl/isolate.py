"""The ``isolate`` rule of the task-by-task loop (:mod:`.taskwise`): keep a new job off servers
other jobs use when it can be placed without them (ours, drl11; a hand-coded rule, not learned).

Bao et al. (§V-A) mask only the actions that do not fit. ``isolate`` narrows the mask further,
once per job, from what the scheduler observes (the placement state):

* ``never``: the paper's masks only.
* ``idle``: when every task of the job fits (first fit, emptiest server first) on servers where no
  other job has tasks, its actions are limited to those servers; otherwise (the job must share a
  server whatever the choices) every valid action stays open.
* ``compact``: ``idle``, and each task goes beside the job's own earlier tasks where one fits
  (the job is spread over no more servers than the choices so far need), also when the job must
  share a server.

LIF-Line and LIF-Quad take the same parameter (their interference score already prefers an
unshared server, so ``idle`` leaves them unchanged; ``bench/drl.py`` shows the rows), and ``drl``'s
default ``auto`` is ``compact`` on the 30-server rack and ``never`` on 6 servers (chosen on the
validation seeds 900-905, ``docs/drl.md``).
"""

from __future__ import annotations

import numpy as np

from ..params import check_choice
from .state import JobEntry, PlacementState

ISOLATE = ("never", "idle", "compact")


def check_isolate(value: str, allow_auto: bool = False) -> str:
    return check_choice("isolate", value, ISOLATE, allow_auto)


def unshared_room(state: PlacementState, entry: JobEntry) -> np.ndarray | None:
    """M booleans: the servers where no other job of ``state`` has tasks, if all of ``entry``'s
    tasks still to place fit on them (first fit, emptiest server first); else None."""
    others = np.zeros(state.m, dtype=bool)
    for j in state.jobs:
        if j is not entry:
            others |= (j.placed_w + j.placed_p) > 0
    free = np.where(others[:, None], 0.0, state.free)
    order = [int(s) for s in np.argsort(-free.sum(axis=1), kind="stable") if not others[s]]
    for demand in [entry.worker_demand] * entry.w_left + [entry.ps_demand] * entry.p_left:
        for srv in order:
            if (free[srv] + 1e-9 >= demand).all():
                free[srv] = free[srv] - demand
                break
        else:
            return None
    return ~others


def narrow(mask: np.ndarray, entry: JobEntry, alone: np.ndarray | None, mode: str) -> np.ndarray:
    """``mask`` (2M valid actions for ``entry``'s next task) narrowed by the rule ``mode``, given
    ``alone`` (:func:`unshared_room` at the job's first task); never narrowed to nothing."""
    if mode == "never":
        return mask
    out = mask & np.repeat(alone, 2) if alone is not None else mask
    if not out.any():
        out = mask
    if mode == "compact":
        own = out & np.repeat((entry.placed_w + entry.placed_p) > 0, 2)
        if own.any():
            return own
    return out
