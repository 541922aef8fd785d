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


def weighted_scores(lif: Any, state: PlacementState, job: JobEntry, mask: np.ndarray, weights: dict[str, float],
                    cores: dict[int, float]) -> np.ndarray:
    """Like :func:`lif_scores`, but each job's predicted slowdown on the server weighted by its estimated run
    time left (``weights``, :func:`remaining_intervals`): the time the placement is predicted to cost, so a
    long job is not put beside, or joined by, what slows it (ours, session drl19a). ``inf`` where masked."""
    from ...models.interference import server_features

    out = np.full(mask.shape, np.inf)
    for a in np.flatnonzero(mask):
        server, is_ps = divmod(int(a), 2)
        side = job.placed_p if is_ps else job.placed_w
        side[server] += 1
        try:
            here = [j for j in state.jobs if j.placed_w[server] + j.placed_p[server] > 0]
            shapes = []
            for j in here:
                w = {s: int(n) for s, n in enumerate(j.placed_w) if n}
                p = {s: int(n) for s, n in enumerate(j.placed_p) if n}
                shapes.append((j.model, w, p, len(set(w) | set(p)) > 1))
            feats = server_features(shapes, cores, lif.model)
            out[a] = sum(weights.get(j.key, 1.0) * lif.model.slowdown(j.model, *f[server]) for j, f in zip(here, feats))
        finally:
            side[server] -= 1
    return out



def reward_scores(net: Any, state: PlacementState, job: JobEntry, mask: np.ndarray,
                  weights: dict[str, float]) -> np.ndarray:
    """Per valid action of ``job``'s next task, the learned reward model's (§VI) predicted slowdown
    ``1 - speed`` of every placed job once the task is there, each weighted by its estimated run time
    left (``weights``, :func:`remaining_intervals`), summed; one batch. ``inf`` where masked."""
    import torch

    from .state import reward_token

    acts = np.flatnonzero(mask)
    out = np.full(mask.shape, np.inf)
    if acts.size == 0:
        return out
    others = [j for j in state.jobs if j is not job and (j.placed_w.sum() + j.placed_p.sum()) > 0]
    base = [reward_token(j.model, j.allreduce, j.n_workers, j.n_ps, j.placed_w, j.placed_p) for j in others]
    w = np.array([weights.get(j.key, 1.0) for j in others] + [weights.get(job.key, 1.0)])
    rows = []
    for a in acts:
        server, is_ps = divmod(int(a), 2)
        pw, pp = job.placed_w.copy(), job.placed_p.copy()
        (pp if is_ps else pw)[server] += 1
        rows.append(np.stack(base + [reward_token(job.model, job.allreduce, job.n_workers, job.n_ps, pw, pp)]))
    x = torch.from_numpy(np.stack(rows).astype(np.float32))
    with torch.no_grad():
        pred = net(x, torch.zeros(x.shape[:2], dtype=torch.bool)).numpy()
    out[acts] = ((1.0 - pred) * w).sum(1)
    return out
