"""Harmony-DRL's state and action space (Bao et al., ToN'22, §V-A), and task-by-task placement.

**State** (one token per concurrent job ``n``): ``s_n = (x_n, r_n, w_n, p_n, v, d_n, u_n)``:

* ``x_n``: one-hot of the job's model over :data:`MODELS` (``L`` = 8 known models + 1 "other");
* ``r_n``: ``2(1 + K)`` numbers: requested workers, a worker's demand of the ``K`` = 3
  resources (GPU, CPU, memory), requested parameter servers and a server's demand; all-reduce
  jobs have zeros in the parameter-server half;
* ``w_n``, ``p_n``: workers and parameter servers placed so far (``p_n = 0`` for all-reduce);
* ``v``: the ``M x K`` matrix of free resources per server (the same in every token);
* ``d_n``: ``M x 2``: workers and parameter servers of the job on each server;
* ``u_n``: 1 for a job that arrived since the last decision (to be placed), 0 for a placed one.

Counts are divided by :data:`COUNT_SCALE` and resources by the servers' capacity.

**Actions**: ``2M``: ``2m`` = a worker of the current job on server ``m``, ``2m + 1`` = a
parameter server on ``m`` (the paper's ``(0, m)`` and ``(1, m)``). Invalid ones are masked:
no room on ``m``, no worker (server) left to place, and never a parameter server for an
all-reduce job. One inference places one task; the state is updated before the next one. Only
new jobs are placed; placed jobs never move.

This module is numpy only: the policy, the LIF baselines and the trainers share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: models of DL2's profile (the paper's Table I plus DSSM and Inception-BN); others share slot L-1
MODELS: tuple[str, ...] = ("cnn-text-classification", "dssm", "inception-bn", "resnet-50", "resnext-110",
                           "seq2seq", "vgg-16", "wlm")
L = len(MODELS) + 1
RESOURCES: tuple[str, ...] = ("gpu", "cpu", "mem_gb")
K = len(RESOURCES)
COUNT_SCALE = 4.0
_INDEX = {m: i for i, m in enumerate(MODELS)}


def canonical_model(name: str) -> str:
    """Lower case without punctuation, so ``ResNet_50`` matches ``resnet-50``."""
    return "".join(c for c in name.lower() if c.isalnum())


_CANON = {canonical_model(m): i for i, m in enumerate(MODELS)}


def model_index(name: str) -> int:
    """Index of ``name`` in the one-hot (``L - 1`` for a model outside :data:`MODELS`)."""
    return _CANON.get(canonical_model(name), L - 1)


def job_dim(m: int) -> int:
    """Size of one job token for ``m`` servers."""
    return L + 2 * (1 + K) + 2 + m * K + 2 * m + 1


def decision_dim(m: int) -> int:
    """Size of one previous-decision token: the action one-hot and the deciding job's model."""
    return 2 * m + L


@dataclass
class JobEntry:
    """One concurrent job as the state sees it."""

    key: str
    model: str
    allreduce: bool
    n_workers: int  # requested
    n_ps: int  # requested (0 for all-reduce)
    worker_demand: np.ndarray  # K, normalised by server capacity
    ps_demand: np.ndarray  # K
    placed_w: np.ndarray  # M ints
    placed_p: np.ndarray  # M ints
    new: bool

    @property
    def w_left(self) -> int:
        return self.n_workers - int(self.placed_w.sum())

    @property
    def p_left(self) -> int:
        return self.n_ps - int(self.placed_p.sum())

    @property
    def complete(self) -> bool:
        return self.w_left <= 0 and self.p_left <= 0


@dataclass
class PlacementState:
    """Free resources per server (normalised), the concurrent jobs, and the decisions so far."""

    free: np.ndarray  # M x K, fraction of a server's capacity
    jobs: list[JobEntry]
    decisions: list[tuple[int, int]] = field(default_factory=list)  # (action, model index) this interval

    @property
    def m(self) -> int:
        return int(self.free.shape[0])

    def token(self, job: JobEntry) -> np.ndarray:
        x = np.zeros(L)
        x[model_index(job.model)] = 1.0
        r = np.concatenate(([job.n_workers / COUNT_SCALE], job.worker_demand,
                            [job.n_ps / COUNT_SCALE], job.ps_demand if not job.allreduce else np.zeros(K)))
        d = np.stack([job.placed_w, job.placed_p], axis=1).reshape(-1) / COUNT_SCALE
        return np.concatenate((x, r, [job.placed_w.sum() / COUNT_SCALE, job.placed_p.sum() / COUNT_SCALE],
                               self.free.reshape(-1), d, [1.0 if job.new else 0.0])).astype(np.float32)

    def tokens(self) -> np.ndarray:
        """``N x job_dim(M)``: every concurrent job's token."""
        return np.stack([self.token(j) for j in self.jobs]) if self.jobs else np.zeros((0, job_dim(self.m)),
                                                                                      np.float32)

    def decision_tokens(self) -> np.ndarray:
        out = np.zeros((len(self.decisions), decision_dim(self.m)), np.float32)
        for i, (a, model) in enumerate(self.decisions):
            out[i, a] = 1.0
            out[i, 2 * self.m + model] = 1.0
        return out

    def mask(self, job: JobEntry) -> np.ndarray:
        """``2M`` booleans: the valid actions for ``job`` now."""
        eps = 1e-9
        out = np.zeros(2 * self.m, dtype=bool)
        if job.w_left > 0:
            out[0::2] = (self.free + eps >= job.worker_demand).all(axis=1)
        if job.p_left > 0 and not job.allreduce:
            out[1::2] = (self.free + eps >= job.ps_demand).all(axis=1)
        return out

    def room_in_total(self, job: JobEntry) -> bool:
        """Whether the cluster's free resources, summed over servers, cover ``job``'s unplaced tasks:
        a necessary condition for placing it whole (placing a task only takes room away)."""
        need = job.w_left * job.worker_demand + (0 if job.allreduce else job.p_left) * job.ps_demand
        return bool((need <= self.free.sum(axis=0) + 1e-6).all())

    def apply(self, job: JobEntry, action: int) -> None:
        """Place one task of ``job`` as ``action`` says and record the decision."""
        server, is_ps = divmod(action, 2)
        if is_ps:
            job.placed_p[server] += 1
            self.free[server] -= job.ps_demand
        else:
            job.placed_w[server] += 1
            self.free[server] -= job.worker_demand
        self.decisions.append((action, model_index(job.model)))

    def undo(self, job: JobEntry) -> None:
        """Take back every task of ``job`` (it could not be placed whole) and its decisions."""
        self.free += np.outer(job.placed_w, job.worker_demand) + np.outer(job.placed_p, job.ps_demand)
        n = int(job.placed_w.sum() + job.placed_p.sum())
        job.placed_w[:] = 0
        job.placed_p[:] = 0
        if n:
            del self.decisions[-n:]

    def placement(self, job: JobEntry) -> tuple[int, ...]:
        """Server per task, workers first then parameter servers (cohabit's ``Placement``)."""
        workers = [s for s in range(self.m) for _ in range(int(job.placed_w[s]))]
        ps = [s for s in range(self.m) for _ in range(int(job.placed_p[s]))]
        return tuple(workers + ps)


def new_entry(key: str, model: str, allreduce: bool, n_workers: int, n_ps: int, worker_demand: np.ndarray,
              ps_demand: np.ndarray, m: int, *, placed: Sequence[int] = (), new: bool = True) -> JobEntry:
    """A job entry; ``placed`` is a cohabit placement (server per task, workers first)."""
    pw, pp = np.zeros(m, np.int64), np.zeros(m, np.int64)
    for i, s in enumerate(placed):
        (pw if i < n_workers else pp)[s] += 1
    return JobEntry(key, model, allreduce, n_workers, 0 if allreduce else n_ps, worker_demand, ps_demand, pw, pp, new)


# ---------------------------------------------------------------- heuristics (job-aware exploration)
def heuristic_action(state: PlacementState, job: JobEntry, mask: np.ndarray, rule: str) -> int:
    """The action bin packing (``"bp"``: the feasible server with the least capacity left) or load
    balancing (``"lb"``: the least loaded server) takes for ``job``'s next task (workers first)."""
    if not mask.any():
        raise ValueError("no valid action")
    kind = 0 if mask[0::2].any() else 1
    servers = np.flatnonzero(mask[kind::2])
    left = state.free[servers].sum(axis=1)
    pick = servers[int(np.argmin(left))] if rule == "bp" else servers[int(np.argmax(left))]
    return int(2 * pick + kind)


def reward_token(model: str, allreduce: bool, n_workers: int, n_ps: int, placed_w: Sequence[int],
                 placed_p: Sequence[int]) -> np.ndarray:
    """One job of the reward model's input (§VI): ``(x_n, w_n, p_n, d_n)`` and an all-reduce flag."""
    x = np.zeros(L)
    x[model_index(model)] = 1.0
    d = np.stack([np.asarray(placed_w, float), np.asarray(placed_p, float)], axis=1).reshape(-1) / COUNT_SCALE
    return np.concatenate((x, [n_workers / COUNT_SCALE, n_ps / COUNT_SCALE], d,
                           [1.0 if allreduce else 0.0])).astype(np.float32)
