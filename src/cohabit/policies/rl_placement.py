"""``rl-placement``: device placement learned by reinforcement (Mirhoseini et al., ICML'17),
MLFS's "RL" baseline (§4.1: it aims at JCT, uses data parallelism and cuts models into parts).

Mirhoseini et al. learn, by REINFORCE on measured run times, a policy that maps a model's
operations to devices. Here the learned choice is how many nodes a job's tasks are spread
over: for each model name a softmax policy over ``spread`` in {1, 2, 4, 8, 16} nodes (the
fewest that hold the job, capped by the choice) is sampled when the job starts; the reward is
the negative measured seconds per iteration (the job's first progress report at that
placement), with a running-mean baseline; the logits move by ``lr`` x advantage x
∇log π. Jobs are taken in arrival order (FIFO with backfilling); nothing is preempted.
"""

from __future__ import annotations

import math

import numpy as np

from ..engine.actions import Placement, Plan
from ..engine.job import JobView
from ..engine.view import ClusterView
from .base import BasePolicy, place_in_order, waiting_jobs
from .params import build
from .placement import Draft, fill

CHOICES = (1, 2, 4, 8, 16)


class RLPlacement(BasePolicy):
    report_interval = 60.0

    def __init__(self, lr: float = 0.5, seed: int = 0) -> None:
        if not (math.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be > 0, got {lr!r}")
        self.lr = lr
        self.rng = np.random.default_rng(seed)
        self.logits: dict[str, np.ndarray] = {}
        self.baseline: dict[str, float] = {}
        self.pending_reward: dict[str, tuple[str, int]] = {}  # job -> (model, choice index)
        self.name = "rl-placement"

    def _choose(self, model: str) -> int:
        z = self.logits.setdefault(model, np.zeros(len(CHOICES)))
        p = np.exp(z - z.max())
        p /= p.sum()
        return int(self.rng.choice(len(CHOICES), p=p))

    def on_progress(self, job: JobView, view: ClusterView) -> None:
        hit = self.pending_reward.pop(job.id, None)
        if hit is None or not job.iter_time:
            return
        model, a = hit
        r = -job.iter_time
        b = self.baseline.get(model, r)
        self.baseline[model] = 0.9 * b + 0.1 * r
        z = self.logits[model]
        p = np.exp(z - z.max())
        p /= p.sum()
        grad = -p
        grad[a] += 1.0
        z += self.lr * (r - b) / max(abs(b), 1e-9) * grad

    def _place(self, draft: Draft, job: JobView, spread: int) -> tuple[int, ...] | None:
        n = draft.view.target_workers(job)
        fit = draft.tasks_fit(draft.view.demand_vector(job))
        order = np.argsort(-fit, kind="stable")[: max(spread, math.ceil(n / max(int(fit.max()), 1)))]
        workers = fill(fit, n, order)
        if workers is None:
            return None
        p = draft.view.ps_demand_vector(job)
        ps = [int(order[0])] * job.spec.num_ps if p is not None else []
        placement = tuple(workers + ps)
        return placement if draft.reserve(job, placement) else None

    def decide(self, view: ClusterView) -> Plan:
        waiting = waiting_jobs(view)
        if not waiting:
            return []
        draft = Draft(view)

        def place(job: JobView) -> Placement | None:
            a = self._choose(job.spec.model)
            p = self._place(draft, job, CHOICES[a])
            if p is not None:
                self.pending_reward[job.id] = (job.spec.model, a)
            return p
        return place_in_order(view, waiting, place)


def make(oracle: bool = False, **params: object) -> RLPlacement:
    return build(RLPlacement, params, policy="rl-placement")
