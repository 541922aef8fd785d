"""The ``hold`` rule of the task-by-task loop (:mod:`.taskwise`): a job whose tasks would be spread
over more servers than it needs waits, for at most ``hold`` seconds since its submission, for room
to run as compactly as an empty cluster would let it (ours, session drl16; a hand-coded rule).

Why (``docs/drl.md``, "Session drl16"): in the busiest quarter of the Poisson workloads, a 2-GPU
job split over two servers runs 1.9-2.3x its solo time against 1.0x on one server, and such splits
and 3-GPU jobs over three servers are about 40% of drl's run-time excess there. The task-by-task loop
places a job wherever room is when it is offered; with the rule, a placement that spans more
servers than :func:`min_span` is refused (its tasks are taken back, later jobs may take the room)
until the job has waited ``hold`` seconds, then accepted as before. Everything it reads is
observable: the job's declared shape and demands, the servers' capacities, the placement drawn,
the job's submission time and the clock. ``hold = 0`` (the default) is the loop as before.
"""

from __future__ import annotations

import numpy as np

from .state import JobEntry


def span(entry: JobEntry) -> int:
    """Servers ``entry``'s placed tasks occupy."""
    return int(((entry.placed_w + entry.placed_p) > 0).sum())


def min_span(capacity: np.ndarray, entry: JobEntry) -> int:
    """Fewest servers ``entry``'s tasks need on an empty cluster whose servers have ``capacity``
    (M x K, in the state's normalisation): first fit, largest server first, filling one server
    before the next (on identical servers the least possible for these small jobs); a task that
    fits nowhere counts one server more."""
    free = np.array(capacity, dtype=float)
    order = [int(s) for s in np.argsort(-free.sum(axis=1), kind="stable")]
    used: set[int] = set()
    extra = 0
    for demand in [entry.worker_demand] * entry.n_workers + [entry.ps_demand] * entry.n_ps:
        for srv in order:
            if (free[srv] + 1e-9 >= demand).all():
                free[srv] = free[srv] - demand
                used.add(srv)
                break
        else:
            extra += 1
    return len(used) + extra


def held(entry: JobEntry, capacity: np.ndarray, waited_s: float, hold_s: float) -> bool:
    """True when the rule refuses ``entry``'s complete placement: it spans more servers than
    :func:`min_span` and the job has waited less than ``hold_s`` seconds."""
    return hold_s > 0 and waited_s < hold_s and span(entry) > min_span(capacity, entry)
