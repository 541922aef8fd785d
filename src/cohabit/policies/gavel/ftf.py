"""Gavel's finish-time fairness (``finish_time_fairness``, heterogeneity-agnostic) on Gavel's rounds (:mod:`.rounds`).

Themis's rho (Mahajan et al., NSDI'20) as Gavel states it (Narayanan et al., OSDI'20, §4.2): for
job j with ``R_j`` seconds of work left at its V100 speed alone, ``t_j`` seconds since it arrived,
``c_j`` seconds of isolated time its progress so far is worth and ``x_iso_j`` its isolated share
(the cluster split equally among the active jobs, at most all of one job's time),

    rho_j(X) = (t_j + R_j / X_j) / (c_j + R_j / x_iso_j),

and the allocation minimizes ``max_j rho_j`` subject to ``sum_j s_j X_j <= N`` GPUs and
``X_j <= 1``. The agnostic variant takes every GPU type at the job's V100 speed, so the types pool;
a job's time is split over them in proportion to their GPU counts (as :mod:`.las`). ``rho_j(X) <= r``
is ``X_j >= R_j / (r c_j + r R_j / x_iso_j - t_j)``, increasing as ``r`` falls, so the optimum is
found by bisection on ``r``; at it the GPUs (or some job's whole time) are exhausted and each
job gets the least time that keeps its rho at ``r``. ``c_j`` accumulates, at each allocation, the
work done since the previous one over the isolated speed then (Gavel's ``_cumulative_isolated_time``).

Remaining work: the declared iterations minus those reported done, at the job's V100 speed:
with ``--oracle`` the trace's (Gavel's simulator reads its measured throughputs), else the
fastest speed observed for the job so far (a job not yet observed gets its isolated share).
"""

from __future__ import annotations

from collections.abc import Mapping

from ...engine.job import JobView
from ...engine.oracle import Oracle
from ...engine.view import ClusterView
from ..params import build
from .rounds import Allocation, GavelRounds


def min_max_rho(left: list[float], since: list[float], past: list[float], iso: list[float], scale: list[float],
                gpus: float, iters: int = 100) -> tuple[float, list[float]]:
    """(rho, X): least ``max_j rho_j`` and the time fractions reaching it (see the module docstring).

    ``left``: seconds of work left alone (``R_j``), ``since``: ``t_j``, ``past``: ``c_j``, ``iso``: ``x_iso_j``."""
    n = len(left)

    def need(r: float) -> list[float] | None:
        out = []
        for j in range(n):
            if left[j] <= 0:
                out.append(0.0)
                continue
            room = r * (past[j] + left[j] / iso[j]) - since[j]
            if room <= 0:
                return None
            x = left[j] / room
            if x > 1 + 1e-12:
                return None
            out.append(min(x, 1.0))
        return out if sum(s * x for s, x in zip(scale, out)) <= gpus * (1 + 1e-12) else None

    lo, hi = 0.0, 1.0
    while need(hi) is None:
        hi *= 2.0
        if hi > 1e12:
            raise ValueError("finish-time fairness: no feasible allocation")
    for _ in range(iters):
        mid = (lo + hi) / 2.0
        if need(mid) is None:
            lo = mid
        else:
            hi = mid
    x = need(hi)
    assert x is not None
    return hi, x


class GavelFTF(GavelRounds):
    """Finish-time fair time fractions (:func:`min_max_rho`) enforced in Gavel's rounds."""

    name = "gavel-ftf"

    def __init__(self, round_s: float = 360.0, min_reset_s: float = 1920.0, seed: int = 0,
                 use_oracle: bool = False) -> None:
        super().__init__(round_s=round_s, min_reset_s=min_reset_s, seed=seed)
        self.uses_oracle = use_oracle
        self._oracle: Oracle | None = None
        self._past: dict[str, float] = {}  # c_j: isolated seconds the work done so far is worth
        self._prev: dict[str, tuple[float, float]] = {}  # job -> (work left, isolated speed) at the last allocation
        self._fastest: dict[str, float] = {}  # job -> fastest observed iterations per second

    def bind_oracle(self, oracle: Oracle) -> None:
        self._oracle = oracle

    def _speed(self, job: JobView) -> float | None:
        """Iterations per second alone on a V100 (oracle) or the fastest observed."""
        if self._oracle is not None:
            d = self._oracle.duration(job.id)
            if d:
                return self._oracle.total_iterations(job.id) / d
        if job.iter_time:
            self._fastest[job.id] = max(self._fastest.get(job.id, 0.0), 1.0 / job.iter_time)
        return self._fastest.get(job.id)

    def allocation(self, view: ClusterView, jobs: list[JobView], types: Mapping[str, float]) -> Allocation:
        total = sum(types.values())
        if not jobs or total <= 0:
            return {}
        now = view.now
        scale = [max(self._gpus_of(view, j), 1.0) for j in jobs]
        iso = [min(1.0, total / len(jobs) / s) for s in scale]
        known: list[int] = []
        left, since, past = [], [], []
        for k, j in enumerate(jobs):
            speed = self._speed(j)
            declared = self._oracle.total_iterations(j.id) if self._oracle is not None else j.spec.iterations
            if speed is None or not declared:
                continue
            remaining = max(float(declared) - j.iterations_done(now), 0.0)
            if j.id in self._prev:
                prev_left, prev_iso = self._prev[j.id]
                self._past[j.id] = self._past.get(j.id, 0.0) + (prev_left - remaining) / prev_iso
            self._prev[j.id] = (remaining, speed * iso[k])
            known.append(k)
            left.append(remaining / speed)
            since.append(now - j.spec.submit_time)
            past.append(self._past.get(j.id, 0.0))
        x = list(iso)  # jobs with no speed yet: their isolated share
        unknown = set(range(len(jobs))) - set(known)
        spare = total - sum(scale[k] * iso[k] for k in unknown)
        if known and spare > 0:
            _, xs = min_max_rho(left, since, past, [iso[k] for k in known], [scale[k] for k in known], spare)
            for k, v in zip(known, xs):
                x[k] = v
        ids = {j.id for j in jobs}
        for gone in [g for g in self._prev if g not in ids]:
            self._prev.pop(gone, None)
            self._past.pop(gone, None)
        return {j.id: {t: x[k] * n / total for t, n in types.items()} for k, j in enumerate(jobs)}


def make(oracle: bool = False, **params: object) -> GavelFTF:
    return build(GavelFTF, params, policy="gavel-ftf", fixed={"use_oracle": oracle})
