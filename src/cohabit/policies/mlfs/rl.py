"""MLF-RL (``mlfs-rl``): MLFS's learned task scheduler (Wang et al., CoNEXT'20, §3.4).

A small policy network scores each waiting job from the state the paper lists (§3.4: the
task's job, demand, waiting and running time; the job's algorithm, urgency, deadline,
iterations done of the maximum, loss reductions, graph; the servers' utilisation) —
:func:`job_features`, all observed, nothing from the simulator's truth. The scores order the
queue (a softmax over them is the policy π(s, a) of which job is scheduled first); the tasks of
each job are placed as MLF-H places them (ideal virtual host) and overloaded nodes are handled
as MLF-H does (the paper's network also chooses tasks to move out; here that stays the
heuristic's, a simplification).

Training (``cohabit train mlfs-rl``, :mod:`cohabit.learn.mlfs_rl`): imitation of MLF-H's queue order on
simulated workloads first, then policy gradient (REINFORCE) with the Eq. 7 reward (β = 0.5,
0.55, 0.25, 0.15, 0.15; η = 0.95). The network is a 2-layer MLP; its weights ship as JSON
(``data/mlfs_rl/weights.json``, with the command, seed and workload that produced them) and
inference runs in numpy (no torch at decision time).

Switch criterion (§3.4, "only after the RL model is well trained (i.e., converged)"): the
trainer marks the weights ``converged`` when the mean episode reward of the last
``window`` policy-gradient epochs changed by less than ``tol`` (relative) from the window
before; :func:`converged` reads that flag, and ``mlfs`` switches to MLF-RL only when, besides, the
converged network scores at least MLF-H's on the trainer's held-out workloads (:func:`switch_ready`).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ...engine.job import JobView
from ...engine.view import ClusterView
from ..params import build
from .heuristic import MLFH, iter_time_fallback
from .priority import PriorityParams, PriorityTable

N_FEATURES = 14
ALGOS = ("alexnet", "resnet", "mlp", "lstm", "svm")


def static_features(job: JobView) -> np.ndarray:
    """The job's features that never change: urgency, GPUs, total iterations, deadline (nan:
    none), partitions, traffic per exchange, PS architecture."""
    spec = job.spec
    g = spec.graph
    dl = spec.absolute_deadline
    return np.array([spec.urgency / 10.0, math.log2(max(spec.num_gpus, 1.0)) / 5.0, float(spec.iterations or 0),
                     dl if dl is not None else math.nan, (g.num_partitions / 8.0) if g is not None else 0.125,
                     ((g.activation_mb + g.exchange_mb) / 200.0) if g is not None else 0.0,
                     1.0 if spec.architecture == "ps" else 0.0])


def queue_features(table: PriorityTable, view: ClusterView, jobs: list[JobView], fallback: dict[str, float],
                   free_gpu_share: float, static: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The state of each waiting job as the network sees it (all observed; scaled to ~[0, 1]),
    one row per job, computed for the whole queue at once; ``static`` caches
    :func:`static_features` by job id."""
    now = view.now
    done, lrs, rem, wait = table.observed(jobs, now, fallback)
    if static is None:
        static = {}
    rows = []
    for j in jobs:
        row = static.get(j.id)
        if row is None:
            row = static[j.id] = static_features(j)
        rows.append(row)
    st = np.array(rows).reshape(len(jobs), 7)
    total, dl = st[:, 2], st[:, 3]
    fin = np.isfinite(rem)
    with np.errstate(invalid="ignore", divide="ignore"):
        slack = np.where(np.isnan(dl), 48.0, (dl - now - np.where(fin, rem, 0.0)) / 3600.0)
        f = np.empty((len(jobs), N_FEATURES))
        f[:, 0] = st[:, 0]
        f[:, 1] = 1.0 / (done + 1.0)
        f[:, 2] = lrs
        f[:, 3] = st[:, 1]
        f[:, 4] = np.tanh(slack / 12.0)
        f[:, 5] = np.where(fin, np.log1p(np.where(fin, rem, 0.0) / 3600.0) / 5.0, 1.0)
        f[:, 6] = np.log1p(wait / 3600.0) / 3.0
        f[:, 7] = np.fromiter((j.id in view.paused for j in jobs), dtype=float, count=len(jobs))
        f[:, 8] = np.where(total > 0, done / np.where(total > 0, total, 1.0), 0.0)
        f[:, 9:12] = st[:, 4:7]
    f[:, 12] = free_gpu_share
    f[:, 13] = 1.0
    return f


def job_features(view: ClusterView, job: JobView, free_gpu_share: float) -> np.ndarray:
    """:func:`queue_features` of one job (the iteration time of a job not yet measured: the
    sample running time of its model, :func:`.heuristic.iter_time_fallback`)."""
    return queue_features(PriorityTable(PriorityParams()), view, [job],
                          {job.spec.model: iter_time_fallback(view, job.spec.model)}, free_gpu_share)[0]


class Net:
    """2-layer MLP score(x) = w2 · tanh(W1 x + b1) + b2, in numpy."""

    def __init__(self, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: float) -> None:
        if w1.shape[1] != N_FEATURES or w1.shape[0] != b1.shape[0] or w2.shape[0] != w1.shape[0]:
            raise ValueError(f"weights do not fit {N_FEATURES} features: W1 {w1.shape}, b1 {b1.shape}, w2 {w2.shape}")
        self.w1, self.b1, self.w2, self.b2 = w1, b1, w2, float(b2)

    def scores(self, x: np.ndarray) -> np.ndarray:
        return np.tanh(x @ self.w1.T + self.b1) @ self.w2 + self.b2

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Net:
        try:
            return cls(np.asarray(data["w1"], float), np.asarray(data["b1"], float), np.asarray(data["w2"], float),
                       float(data["b2"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"bad MLF-RL weights: {e}") from None

    def to_json(self) -> dict[str, Any]:
        return {"w1": self.w1.tolist(), "b1": self.b1.tolist(), "w2": self.w2.tolist(), "b2": self.b2}


def _shipped() -> Any:
    return resources.files("cohabit.data").joinpath("mlfs_rl")


@lru_cache(maxsize=4)
def load_weights(path: str | None = None) -> tuple[Net, dict[str, Any]]:
    """The network and its metadata (the shipped weights unless ``path`` is given)."""
    if path is None:
        text = _shipped().joinpath("weights.json").read_text(encoding="utf-8")
        meta_text = _shipped().joinpath("weights.meta.json").read_text(encoding="utf-8")
    else:
        p = Path(path)
        text = p.read_text(encoding="utf-8")
        meta_p = p.with_name(p.stem + ".meta.json")
        meta_text = meta_p.read_text(encoding="utf-8") if meta_p.exists() else "{}"
    return Net.from_json(json.loads(text)), json.loads(meta_text)


def converged(path: str | None = None) -> bool:
    """Whether the (shipped) weights' training converged (the criterion in the module docstring)."""
    try:
        return bool(load_weights(path)[1].get("converged", False))
    except (OSError, ValueError):
        return False


def switch_ready(path: str | None = None) -> bool:
    """Whether ``mlfs`` switches to these weights: their training converged AND the converged policy
    scores at least MLF-H's mean Eq. 7 reward on the trainer's held-out workloads (the last of
    ``held_out_scores`` against ``held_out_score_mlfh``). The paper switches once MLF-RL is "well
    trained"; a converged network that is worse than the heuristic it learned from is not, so MLFS
    keeps MLF-H then. Weights without held-out scores switch on convergence alone."""
    if not converged(path):
        return False
    meta = load_weights(path)[1]
    scores, heuristic = meta.get("held_out_scores"), meta.get("held_out_score_mlfh")
    if not scores or heuristic is None:
        return True
    return float(scores[-1]) >= float(heuristic)


class MLFRL(MLFH):
    """MLF-H's machinery with the queue ordered by the learned network."""

    def __init__(self, weights: str = "", interval: float = 60.0, explore: bool = False, seed: int = 0,
                 net: Net | None = None, **kw: Any) -> None:
        super().__init__(interval=interval, **kw)
        self.net = net if net is not None else load_weights(weights or None)[0]
        self.name = "mlfs-rl"
        self.explore = explore
        self.rng = np.random.default_rng(seed)
        self.trajectory: list[tuple[np.ndarray, int, float]] = []  # (features, chosen index, time): training
        self._static: dict[str, np.ndarray] = {}  # static_features by job id

    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        super().on_arrival(job, view)
        self._static[job.id] = static_features(job)

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        super().on_finish(job, view)
        self._static.pop(job.id, None)

    def queue(self, view: ClusterView, jobs):  # type: ignore[no-untyped-def, override]
        jobs = list(jobs)
        if not jobs:
            return []
        gcol = view.gpu_col
        free = float(np.asarray(view.free)[:, gcol].sum() / max(np.asarray(view.capacity)[:, gcol].sum(), 1e-9)) \
            if gcol is not None else 1.0
        x = queue_features(self._table, view, jobs, self._fallbacks(view, jobs), free, self._static)
        s = self.net.scores(x)
        order = list(np.argsort(-s, kind="stable"))
        if self.explore and len(jobs) > 1:  # sample the first job from the softmax (training)
            p = np.exp(s - s.max())
            p /= p.sum()
            first = int(self.rng.choice(len(jobs), p=p))
            order.remove(first)
            order.insert(0, first)
            self.trajectory.append((x, first, view.now))
        prs = self.priorities_of(view, jobs)[1]
        return [(float(s[i]), jobs[i], prs[i]) for i in order]


def make(oracle: bool = False, **params: object) -> MLFRL:
    return build(MLFRL, params, policy="mlfs-rl")
