"""An interference prior for ``drl``'s actor (ours, session drl15): the actor's log-probabilities
minus ``weight`` x LIF-Line's interference score of each valid action.

LIF-Line (:mod:`cohabit.policies.lif_line`, the paper's baseline §VII-B) scores a task on a server by
the sum of the predicted slowdowns of the jobs there once it is placed (a least-squares model of
profiled samples, ``data/drl/lif.json``: only each job's declared model and placement, nothing from
the simulator). ``drl`` takes ``argmax_a log pi(a | s) - weight x score(a)`` over the valid actions:
a product of the two experts, the actor's distribution tilted away from co-locations that the linear
model predicts to be costly. ``weight = 0`` is the actor alone (the paper's decision rule);
``auto`` (the policy's default) is :data:`AUTO` per cluster size: 3 on 6 servers from drl15 ("Session drl15"
in docs/drl.md) to drl19a, 1000 since (with ``weigh=left``, below: LIF-Line's weighted choice, the actor breaking its
ties; chosen on the selection workloads of "Session drl19a").

``weigh=left`` (ours, session drl19a, :func:`lif_scores` with ``weights``): each job's predicted slowdown in the score
is weighted by its estimated run time left (:func:`remaining_intervals`: declared iterations not yet
reported done over the profiled solo speed), so the score is the time a placement is predicted to cost:
a task is kept off a long job's servers, and a long job off busy ones, more than a short one. LIF-Line
sums the slowdowns alike. ``weigh=none`` is drl15's score; ``weigh=auto`` is :data:`WEIGH_AUTO`: ``left`` on 6
servers, ``none`` elsewhere (where the prior is off).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..params import check_choice, choice_per_size, per_size
from .state import JobEntry, PlacementState

#: the prior's weight per number of servers under ``prior=auto`` (0: the actor alone)
AUTO: dict[int, float] = {6: 1000.0}

WEIGHS = ("none", "left")

#: ``weigh=auto`` per number of servers (a size not named: ``none``; session drl19a)
WEIGH_AUTO: dict[int, str] = {6: "left"}


def check_weigh(value: str, allow_auto: bool = False) -> str:
    return check_choice("weigh", value, WEIGHS, allow_auto)


def weigh_for(value: str, m: int) -> str:
    """The weighting ``value`` means on ``m`` servers (``auto``: :data:`WEIGH_AUTO`'s, else ``none``)."""
    return choice_per_size(value, WEIGH_AUTO, m, "none")


def prior_weight(prior: float, m: int) -> float:
    """The weight ``prior`` means on ``m`` servers: itself when >= 0, else (``auto``) :data:`AUTO`'s."""
    return per_size(prior, AUTO, m)


def lif_scores(lif: Any, state: PlacementState, job: JobEntry, mask: np.ndarray,
               weights: Mapping[str, float] | None = None) -> np.ndarray:
    """LIF-Line's score (``lif.score``: predicted slowdowns summed on the server) of each valid
    action of ``job``'s next task, ``inf`` where masked. ``lif`` must have seen ``begin`` for this
    decision (it reads each server's cores). ``weights`` (``weigh=left``, :func:`remaining_intervals`):
    each job's slowdown times its estimated run time left, so a long job is not put beside, or joined by,
    what slows it (ours, session drl19a)."""
    out = np.full(mask.shape, np.inf)
    for a in np.flatnonzero(mask):
        server, is_ps = divmod(int(a), 2)
        side = job.placed_p if is_ps else job.placed_w
        side[server] += 1
        try:
            out[a] = lif.score(state, server, weights)
        finally:
            side[server] -= 1
    return out


def tilted_choice(probs: np.ndarray, scores: np.ndarray, mask: np.ndarray, weight: float) -> int:
    """``argmax log probs - weight x scores`` over the valid actions (first index on ties)."""
    value = np.log(np.maximum(probs, 1e-30)) - weight * np.where(mask, scores, 0.0)
    return int(np.argmax(np.where(mask, value, -np.inf)))


def remaining_intervals(view: Any, solo: dict[str, dict[str, float]], interval_s: float = 1200.0) -> dict[str, float]:
    """Per job of ``view`` (running and pending), its estimated run time left alone, in intervals: declared
    iterations not yet reported done (:meth:`~cohabit.engine.job.JobView.iterations_done`) over the profiled
    solo speed of its model and shape (:func:`.order.solo_estimate`'s profile). Unknown: 1 interval."""
    from .online import solo_key

    out: dict[str, float] = {}
    for jobs in (view.running, view.pending):
        for key, job in jobs.items():
            spec = job.spec
            speed = solo.get(spec.model or "", {}).get(solo_key(spec.num_ps == 0, spec.workers.count, spec.num_ps))
            if not speed or spec.iterations is None:
                out[key] = 1.0
                continue
            done = job.iterations_done(view.now) if key in view.running else 0.0
            out[key] = max(float(spec.iterations) - float(done), 0.0) / float(speed) / interval_s
    return out
