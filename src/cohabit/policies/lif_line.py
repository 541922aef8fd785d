"""LIF-Line: least-interference-first placement with a linear interference model (Bao et al.'s
baseline, ToN'22 §VII-B, after Bu et al., HPDC'13).

New jobs are placed task by task (as ``drl``, :mod:`.drl.taskwise`); each task goes to the valid
server with the least *interference score*: the sum, over the jobs with tasks on that server
once the task is there, of their predicted slowdown from the CPU and bandwidth use of the others
on it (:mod:`cohabit.models.interference`, coefficients fitted by least squares to profiled
samples and shipped in ``data/drl/lif.json``). Ties go to the lowest server index. LIF-Quad
(:mod:`.lif_quad`) is the same rule with the quadratic model.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..engine.view import ClusterView
from ..models.interference import KINDS, LIFModel, server_features
from .drl.isolate import check_isolate
from .drl.order import PendingOrder
from .drl.state import JobEntry, PlacementState
from .drl.taskwise import TaskwisePolicy
from .params import build


class LIFPolicy(TaskwisePolicy):
    """Least interference first under a fitted LIF model of kind ``"line"`` or ``"quad"``."""

    def __init__(self, kind: str = "line", model_path: str = "", order: str = "arrival",
                 isolate: str = "never") -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self.kind = kind
        self.model = LIFModel.load(kind, model_path or None)
        self.name = f"lif-{kind}"
        self.pending_order = PendingOrder(order)
        self.isolate = check_isolate(isolate, allow_auto=False)
        self._cores: dict[int, float] = {}

    def begin(self, state: PlacementState, view: ClusterView) -> None:
        c = view.resource_index("cpu")
        self._cores = {i: float(view.capacity[i, c]) if c is not None else 8.0 for i in range(state.m)}

    def score(self, state: PlacementState, server: int, weights: Mapping[str, float] | None = None) -> float:
        """Sum of the predicted slowdowns of the jobs with tasks on ``server``; with ``weights`` (by job key,
        1 for a job not named), each slowdown times its job's weight (drl's ``weigh=left``: the time a
        placement is predicted to cost, :func:`.drl.prior.remaining_intervals`)."""
        here = [j for j in state.jobs if j.placed_w[server] + j.placed_p[server] > 0]
        jobs = []
        for j in here:
            w = {s: int(n) for s, n in enumerate(j.placed_w) if n}
            p = {s: int(n) for s, n in enumerate(j.placed_p) if n}
            jobs.append((j.model, w, p, len(set(w) | set(p)) > 1))
        feats = server_features(jobs, self._cores, self.model)
        if weights is None:
            return sum(self.model.slowdown(j.model, *f[server]) for j, f in zip(here, feats))
        return sum(weights.get(j.key, 1.0) * self.model.slowdown(j.model, *f[server]) for j, f in zip(here, feats))

    def choose(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        best, best_score = -1, np.inf
        for a in np.flatnonzero(mask):
            server, is_ps = divmod(int(a), 2)
            side = job.placed_p if is_ps else job.placed_w
            side[server] += 1
            s = self.score(state, server)
            side[server] -= 1
            if s < best_score - 1e-12:
                best, best_score = int(a), s
        return best


def make(oracle: bool = False, **params: object) -> LIFPolicy:
    return build(LIFPolicy, params, policy="lif-line", fixed={"kind": "line"})
