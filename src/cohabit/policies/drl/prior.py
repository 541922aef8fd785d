"""An interference prior for ``drl``'s actor (ours, session drl15): the actor's log-probabilities
minus ``weight`` x LIF-Line's interference score of each valid action.

LIF-Line (:mod:`cohabit.policies.lif_line`, the paper's baseline §VII-B) scores a task on a server by
the sum of the predicted slowdowns of the jobs there once it is placed (a least-squares model of
profiled samples, ``data/drl/lif.json``: only each job's declared model and placement, nothing from
the simulator). ``drl`` takes ``argmax_a log pi(a | s) - weight x score(a)`` over the valid actions:
a product of the two experts, the actor's distribution tilted away from co-locations that the linear
model predicts to be costly. ``weight = 0`` is the actor alone (the paper's decision rule);
``auto`` (the policy's default) is :data:`AUTO` per cluster size, chosen on validation workloads
("Session drl15" in docs/drl.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..params import per_size
from .state import JobEntry, PlacementState

#: the prior's weight per number of servers under ``prior=auto`` (0: the actor alone)
AUTO: dict[int, float] = {6: 3.0}


def prior_weight(prior: float, m: int) -> float:
    """The weight ``prior`` means on ``m`` servers: itself when >= 0, else (``auto``) :data:`AUTO`'s."""
    return per_size(prior, AUTO, m)


def lif_scores(lif: Any, state: PlacementState, job: JobEntry, mask: np.ndarray) -> np.ndarray:
    """LIF-Line's score (``lif.score``: predicted slowdowns summed on the server) of each valid
    action of ``job``'s next task, ``inf`` where masked. ``lif`` must have seen ``begin`` for this
    decision (it reads each server's cores)."""
    out = np.full(mask.shape, np.inf)
    for a in np.flatnonzero(mask):
        server, is_ps = divmod(int(a), 2)
        side = job.placed_p if is_ps else job.placed_w
        side[server] += 1
        try:
            out[a] = lif.score(state, server)
        finally:
            side[server] -= 1
    return out


def tilted_choice(probs: np.ndarray, scores: np.ndarray, mask: np.ndarray, weight: float) -> int:
    """``argmax log probs - weight x scores`` over the valid actions (first index on ties)."""
    value = np.log(np.maximum(probs, 1e-30)) - weight * np.where(mask, scores, 0.0)
    return int(np.argmax(np.where(mask, value, -np.inf)))
