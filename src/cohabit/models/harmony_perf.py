"""Harmony's performance model of co-located parameter-server jobs (Lee et al., §IV-B1/2).

From profiled subtask times the scheduler predicts a job group's iteration time and its
resource utilisation:

* Eq. 1: ``T_g = max(sum_j T_cpu_j, sum_j T_net_j, max_j T_itr_j)`` with
  ``T_itr_j = T_cpu_j + T_net_j`` (resource-bound and job-bound cases of Fig. 8);
* Eq. 2: ``T_cpu_j = c_j / m_g``: COMP time falls with the group's DoP ``m_g`` (one worker per
  machine), COMM time does not; ``c_j`` is the job's COMP time on one machine;
* Eq. 3: ``U(g) = [sum T_cpu / T_g, sum T_net / T_g]``;
* Eq. 4: ``U = sum_g m_g U(g) / sum_g m_g``.

:func:`score` folds U into one number with CPU weighted above network (CPU drives training
progress, §IV-B2); the preference for fewer jobs per group is applied by the scheduler
(a larger grouping must beat a smaller one by a margin). :class:`ProfileBook` keeps the
per-job moving averages of measured subtask times, normalised to one machine by Eq. 2, and
:class:`PredictionLog` compares predicted group iterations with measured ones.

Also here: :func:`memory_floor`, the fewest machines whose memory holds a group (our
addition: the paper relies on spill/reload alone; the same estimate from the sampled input
and model sizes is what Harmony uses to start alpha).

Pure functions on numbers: no engine or simulator imports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

CPU_WEIGHT = 2.0 / 3.0  # CPU utilisation counts twice as much as network utilisation
EMA_WEIGHT = 0.5  # weight of a new measurement in the moving averages


# --------------------------------------------------------------------------- Eq. 1-4


def group_time(c1: Sequence[float] | np.ndarray, net: Sequence[float] | np.ndarray, m: float) -> float:
    """Eq. 1 with Eq. 2: iteration time of a group of jobs (one-machine COMP ``c1``, COMM
    ``net``) on ``m`` machines."""
    c = np.asarray(c1, dtype=np.float64) / m
    n = np.asarray(net, dtype=np.float64)
    return float(max(c.sum(), n.sum(), (c + n).max()))


def group_util(c1: Sequence[float] | np.ndarray, net: Sequence[float] | np.ndarray, m: float) -> tuple[float, float]:
    """Eq. 3: (CPU, network) utilisation of a group on ``m`` machines."""
    t = group_time(c1, net, m)
    return float(np.sum(c1) / m / t), float(np.sum(net) / t)


def cluster_util(groups: Sequence[tuple[Sequence[float], Sequence[float], int]]) -> tuple[float, float]:
    """Eq. 4: machine-weighted (CPU, network) utilisation of groups ``(c1s, nets, m_g)``."""
    total = sum(m for _, _, m in groups)
    if total == 0:
        return 0.0, 0.0
    u = np.zeros(2)
    for c1, net, m in groups:
        u += m * np.asarray(group_util(c1, net, m))
    return float(u[0] / total), float(u[1] / total)


def score(u_cpu: float, u_net: float) -> float:
    """One number for U: CPU weighted above network."""
    return CPU_WEIGHT * u_cpu + (1.0 - CPU_WEIGHT) * u_net


def groups_eval(c1: np.ndarray, net: np.ndarray, gid: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised Eq. 1 and 3 for many groups: job arrays ``c1``, ``net``, group index ``gid``
    (0..G-1) and machines ``m`` per group -> (T_g, U_cpu_g, U_net_g)."""
    G = m.shape[0]
    mj = m[gid]
    cs = np.bincount(gid, weights=c1, minlength=G) / m
    ns = np.bincount(gid, weights=net, minlength=G)
    itr = np.zeros(G)
    np.maximum.at(itr, gid, c1 / mj + net)
    t = np.maximum(np.maximum(cs, ns), itr)
    return t, cs / t, ns / t


def cluster_eval(c1: np.ndarray, net: np.ndarray, gid: np.ndarray, m: np.ndarray) -> tuple[float, float]:
    """Vectorised Eq. 4."""
    _, uc, un = groups_eval(c1, net, gid, m)
    tot = float(m.sum())
    return float((m * uc).sum() / tot), float((m * un).sum() / tot)


# --------------------------------------------------------------------------- memory


def memory_floor(inputs: Sequence[float], models: Sequence[float], usable_gb: float, *, spill: bool) -> int:
    """Fewest machines whose usable memory holds a group. With spill/reload every input block
    may sit on disk: the server shards and the active job's model copy stay (Harmony's
    alpha = 1). Without it, every job keeps its input, its server shard and its worker's model
    copy in memory."""
    if not len(inputs):
        return 1
    if spill:
        need = float(sum(models)) + float(max(models))
    else:
        need = float(sum(inputs)) + 2.0 * float(sum(models))
    return max(1, math.ceil(need / usable_gb - 1e-9))


# --------------------------------------------------------------------------- profiles


@dataclass
class Profile:
    """Moving averages of one job's measured subtask times (Eq. 2 normalised to one machine)."""

    c1: float  # COMP seconds per iteration on one machine
    net: float  # COMM seconds per iteration
    samples: int = 1

    def t_cpu(self, m: float) -> float:
        return self.c1 / m

    def t_itr(self, m: float) -> float:
        return self.c1 / m + self.net

    def ratio(self, m: float) -> float:
        """Computation-to-communication ratio at DoP ``m``."""
        return self.t_cpu(m) / self.net if self.net > 0 else math.inf


@dataclass
class ProfileBook:
    """Per-job profiles from measured COMP / COMM seconds at a DoP, as moving averages."""

    weight: float = EMA_WEIGHT
    profiles: dict[str, Profile] = field(default_factory=dict)

    def observe(self, job: str, m: int, comp_s: float, comm_s: float) -> Profile:
        c1 = comp_s * m
        p = self.profiles.get(job)
        if p is None:
            p = self.profiles[job] = Profile(c1, comm_s)
        else:
            w = self.weight
            p.c1 = (1 - w) * p.c1 + w * c1
            p.net = (1 - w) * p.net + w * comm_s
            p.samples += 1
        return p

    def get(self, job: str) -> Profile | None:
        return self.profiles.get(job)

    def __contains__(self, job: object) -> bool:
        return job in self.profiles

    def forget(self, job: str) -> None:
        self.profiles.pop(job, None)


@dataclass
class PredictionLog:
    """Predicted group iteration times checked against the measured ones (max of the members'
    measured iteration times once every member has reported after the change)."""

    pending: dict[tuple, tuple[float, float, frozenset[str]]] = field(default_factory=dict)
    errors: list[float] = field(default_factory=list)  # relative |predicted - measured| / measured

    def predict(self, key: tuple, members: Sequence[str], predicted: float, now: float) -> None:
        self.pending[key] = (predicted, now, frozenset(members))

    def measured(self, key: tuple, reports: dict[str, tuple[float, float]]) -> float | None:
        """``reports``: job -> (report time, iteration time). Returns the error once complete."""
        hit = self.pending.get(key)
        if hit is None:
            return None
        predicted, since, members = hit
        times = []
        for j in members:
            r = reports.get(j)
            if r is None or r[0] <= since:
                return None
            times.append(r[1])
        del self.pending[key]
        meas = max(times)
        err = abs(predicted - meas) / meas
        self.errors.append(err)
        return err

    def drop(self, key: tuple) -> None:
        self.pending.pop(key, None)

    def summary(self) -> dict[str, float | int | None]:
        if not self.errors:
            return {"n": 0, "mean": None, "p95": None, "max": None}
        e = np.asarray(self.errors)
        return {"n": int(e.size), "mean": float(e.mean()), "p95": float(np.percentile(e, 95)), "max": float(e.max())}
