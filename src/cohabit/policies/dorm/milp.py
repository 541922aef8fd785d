"""Dorm's utilization-fairness optimizer: problem P2 (Sun et al., §IV-B, Eq. 10-18) solved with HiGHS.

Variables (one decision at time t):

* x_{i,j} ∈ Z₀⁺ — containers of application i on server j (Eq. 9);
* l_i ∈ R₀⁺ — application i's fairness loss (Eq. 17);
* r_i ∈ {0, 1} — application i is adjusted (killed, resized, resumed), for the
  applications running at both t−1 and t (Eq. 18).

P2::

    max  Σ_k Σ_i Σ_j x_{i,j} d_{i,k} / Σ_h c_{h,k}                 (10) utilization
    s.t. l_i ≥ s_i − ŝ_i,  l_i ≥ ŝ_i − s_i                          (11), (12)
         M r_i ≥ x^{t−1}_{i,j} − x_{i,j},  M r_i ≥ x_{i,j} − x^{t−1}_{i,j}   (13), (14)
         Σ_i l_i ≤ ⌈θ1 · 2m⌉                                         (15)
         Σ_i r_i ≤ ⌈θ2 · |A^t ∩ A^{t−1}|⌉                            (16)
         Σ_i x_{i,j} d_{i,k} ≤ c_{j,k}   ∀ j, k                      (6)
         n_min_i ≤ Σ_j x_{i,j} ≤ n_max_i                              (7), (8)

with s_i = max_k d_{i,k} Σ_j x_{i,j} / Σ_h c_{h,k} (Eq. 2), which is linear
because an application's dominant resource does not depend on its container
count: s_i = δ_i Σ_j x_{i,j} with δ_i the dominant share of one container.
ŝ_i are the weighted-DRF theoretical shares (:mod:`.shares`) and m the number
of resource types the cluster has (positive total capacity).

Modelling choices, none of which changes the feasible set of (x, r):

* the big-M of Eq. 13-14 is per row, the smallest valid one: x^{t−1}_{i,j} in
  Eq. 13 (x_{i,j} ≥ 0) and u_{i,j} − x^{t−1}_{i,j} in Eq. 14 (x_{i,j} ≤ u_{i,j},
  the column bound below). Any larger M gives the same integer solutions and a
  weaker LP relaxation (with one M = max n_max, 50 x 20 instances took up to 3 s);
* rows of Eq. 13 where x^{t−1}_{i,j} = 0 and of Eq. 14 where x^{t−1}_{i,j} = u_{i,j}
  are left out (they read M r_i ≥ −x_{i,j} or M r_i ≥ x_{i,j} − u_{i,j}: always true);
* two valid inequalities per running application are added, the sums of Eq. 13
  and 14 over servers with their smallest M: n^{t−1}_i − (n^{t−1}_i − n_min_i) r_i
  ≤ Σ_j x_{i,j} ≤ n^{t−1}_i + (n_max_i − n^{t−1}_i) r_i. Every solution of Eq. 13-14
  satisfies them; they only cut fractional points of the LP relaxation;
* compact form (default): Eq. 14 is kept only where x^{t−1}_{i,j} > 0. With Eq. 13
  and the upper valid inequality, r_i = 0 already forces Σ_j x_{i,j} ≤ n^{t−1}_i and
  x_{i,j} ≥ x^{t−1}_{i,j}, hence x_i = x^{t−1}_i, so the integer solutions are the same;
  the model shrinks from O(apps x servers) rows to O(containers) and solves faster
  (200 x 100: optimal in 8-18 s instead of a 20 s time limit). ``compact=False`` keeps
  every row of Eq. 14;
* x_{i,j} gets the upper bound min(n_max_i, containers of d_i that fit an
  empty server j) (implied by Eq. 6-7); pairs where it is 0 have no column.

A time limit returns the best incumbent found (status ``time_limit``);
with no incumbent, or when P2 is infeasible, the caller keeps the current
allocation (§IV-B, last paragraph).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import highspy
import numpy as np
from scipy import sparse

from .quiet import quiet_highs
from .shares import AppDemand, container_share, inverse_capacity, theoretical_shares

_TOL = 1e-9
INF = highspy.kHighsInf
#: ``solve(compact=None)`` drops the Eq. 14 rows of empty (app, server) pairs when running
#: applications have more columns than this (see the module doc); 0: always.
COMPACT_ABOVE = 0


@dataclass(frozen=True, slots=True)
class Thresholds:
    """θ1 (fairness loss) and θ2 (adjustment overhead), both in [0, 1] (Eq. 15-16)."""

    theta1: float
    theta2: float

    def __post_init__(self) -> None:
        for name in ("theta1", "theta2"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {v!r}")

    def fairness_bound(self, m: int) -> int:
        """Right-hand side of Eq. 15: ⌈θ1 · 2m⌉."""
        return _ceil(self.theta1 * 2 * m)

    def adjust_bound(self, running: int) -> int:
        """Right-hand side of Eq. 16: ⌈θ2 · |A^t ∩ A^{t−1}|⌉."""
        return _ceil(self.theta2 * running)


#: The paper's three settings (§V-A-2, as its text pins them down: Dorm-1 and Dorm-3 share
#: θ2 and differ in θ1 = 0.2 / 0.1; Dorm-2 and Dorm-3 share θ1 and differ in θ2 = 0.2 / 0.1).
PAPER_SETTINGS: dict[str, Thresholds] = {
    "dorm-1": Thresholds(0.2, 0.1),
    "dorm-2": Thresholds(0.1, 0.2),
    "dorm-3": Thresholds(0.1, 0.1),
}


def _ceil(x: float) -> int:
    return int(math.ceil(x - 1e-9))


@dataclass
class Problem:
    """One instance of P2.

    ``capacity``: (servers, resources) c_{j,k}; ``previous``: (apps, servers) x^{t−1}
    (zero rows for applications not running); ``running``: which applications are in
    A^t ∩ A^{t−1} (default: those with a non-zero previous row); ``shares``: ŝ_i
    (default: weighted DRF, :func:`.shares.theoretical_shares`); ``bounds``: column upper bounds
    (default :meth:`fit_bounds`' own; :mod:`.aggregate` gives its class-level ones)."""

    apps: Sequence[AppDemand]
    capacity: np.ndarray
    previous: np.ndarray | None = None
    running: np.ndarray | None = None
    shares: np.ndarray | None = None
    bounds: np.ndarray | None = None  # (apps, servers) column upper bounds; None: :meth:`fit_bounds` derives them

    def __post_init__(self) -> None:
        self.capacity = np.asarray(self.capacity, dtype=float)
        n, b = len(self.apps), self.capacity.shape[0]
        prev = np.zeros((n, b), dtype=np.int64) if self.previous is None else np.asarray(self.previous)
        if prev.shape != (n, b):
            raise ValueError(f"previous allocation has shape {prev.shape}, expected {(n, b)}")
        self.previous = np.rint(prev).astype(np.int64)
        self.running = (self.previous.sum(axis=1) > 0) if self.running is None else np.asarray(self.running, bool)
        if self.shares is None:
            hat = theoretical_shares(self.apps, self.capacity)
            self.shares = np.array([hat[a.id] for a in self.apps], dtype=float)
        self.demand = np.array([np.asarray(a.demand, dtype=float) for a in self.apps]).reshape(n, -1)
        inv = inverse_capacity(self.capacity)
        self.delta = np.array([container_share(d, inv) for d in self.demand])
        self.util_per_container = (self.demand * inv).sum(axis=1) if n else np.zeros(0)

    @property
    def m(self) -> int:
        """Resource types the cluster has (positive total capacity): the m of Eq. 15."""
        return int((self.capacity.sum(axis=0) > _TOL).sum())

    def fit_bounds(self) -> np.ndarray:
        """(apps, servers): containers of d_i an empty server j holds, capped at n_max_i (or ``bounds``)."""
        if self.bounds is not None:
            return np.asarray(self.bounds, dtype=np.int64)
        n, b = len(self.apps), self.capacity.shape[0]
        ub = np.zeros((n, b), dtype=np.int64)
        for i, a in enumerate(self.apps):
            d = self.demand[i]
            need = d > _TOL
            per = (np.floor((self.capacity[:, need] + 1e-9) / d[need]).min(axis=1) if need.any()
                   else np.full(b, a.n_max))
            ub[i] = np.minimum(per, a.n_max)
        assert self.previous is not None
        return np.maximum(ub, self.previous)


@dataclass
class Solution:
    """Outcome of one solve. ``x`` is None unless ``status`` is optimal or time_limit."""

    status: str  # "optimal" | "time_limit" | "infeasible" | "no_solution"
    x: np.ndarray | None
    utilization: float = 0.0
    fairness_loss: float = 0.0
    adjusted: tuple[int, ...] = ()
    fairness_bound: float = 0.0
    adjust_bound: int = 0
    gap: float | None = None
    seconds: float = 0.0
    size: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.x is not None


def evaluate(problem: Problem, x: np.ndarray) -> tuple[float, float, tuple[int, ...]]:
    """(utilization Eq. 1, fairness loss Eq. 2, adjusted running applications Eq. 3) of ``x``."""
    assert problem.previous is not None and problem.running is not None and problem.shares is not None
    n_i = x.sum(axis=1)
    util = float((n_i * problem.util_per_container).sum())
    loss = float(np.abs(n_i * problem.delta - problem.shares).sum())
    changed = (x != problem.previous).any(axis=1) & problem.running
    return util, loss, tuple(int(i) for i in np.flatnonzero(changed))


def keep_and_fill(problem: Problem, adjust_bound: int | None = None) -> np.ndarray:
    """A starting point for the solver: running applications keep x^{t−1}, and each new one
    gets n_min containers first-fit into free room; where there is none, containers are taken
    from the running application furthest above its theoretical share on a server where that
    makes room, at most ``adjust_bound`` applications being touched (Eq. 16). The point may
    still break Eq. 8 or 15; HiGHS ignores an infeasible start."""
    assert problem.previous is not None and problem.running is not None and problem.shares is not None
    x = problem.previous.copy()
    d = problem.demand
    free = problem.capacity - x.T.astype(float) @ d if len(problem.apps) else problem.capacity.copy()
    left = len(problem.apps) if adjust_bound is None else adjust_bound
    touched: set[int] = set()
    for i in np.flatnonzero(~problem.running):
        a = problem.apps[i]
        x[i] = 0
        while x[i].sum() < a.n_min:
            fits = np.flatnonzero((free - d[i] >= -1e-9).all(axis=1))
            if fits.size:
                x[i, fits[0]] += 1
                free[fits[0]] -= d[i]
                continue
            over = x.sum(axis=1) * problem.delta - problem.shares
            donors = [v for v in np.argsort(-over) if problem.running[v] and x[v].sum() > problem.apps[v].n_min
                      and (v in touched or len(touched) < left)]
            moved = False
            for v in donors:
                for j in np.flatnonzero(x[v] > 0):
                    spare = x[v].sum() - problem.apps[v].n_min
                    k = 0
                    room = free[j].copy()
                    while k < min(x[v, j], spare) and (room - d[i] < -1e-9).any():
                        k += 1
                        room += d[v]
                    if (room - d[i] >= -1e-9).all():
                        x[v, j] -= k
                        free[j] = room - d[i]
                        x[i, j] += 1
                        touched.add(int(v))
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                return x  # no room to make: give up (the start is infeasible)
    return x


def solve(problem: Problem, thresholds: Thresholds, *, time_limit: float = 10.0, mip_rel_gap: float = 1e-4,
          threads: int | None = None, start: np.ndarray | None = None, compact: bool | None = None,
          mip_abs_gap: float | None = None, symmetry: bool = True) -> Solution:
    """Build P2 for ``problem`` and solve it with HiGHS (see module doc). ``start`` (apps x servers)
    is offered to HiGHS as a first incumbent (e.g. :func:`keep_and_fill`); it is used only if feasible.
    ``mip_abs_gap``: also stop when the incumbent is within this utilization of the bound (HiGHS'
    default otherwise); ``symmetry=False`` skips HiGHS' symmetry detection (:mod:`.aggregate` uses both)."""
    t0 = time.perf_counter()
    assert problem.previous is not None and problem.running is not None and problem.shares is not None
    apps, cap, prev = problem.apps, problem.capacity, problem.previous
    n, b = len(apps), cap.shape[0]
    fair_rhs = float(thresholds.fairness_bound(problem.m))
    run_idx = np.flatnonzero(problem.running)
    adj_rhs = thresholds.adjust_bound(len(run_idx))
    if n == 0:
        return Solution("optimal", np.zeros((0, b), dtype=np.int64), fairness_bound=fair_rhs, adjust_bound=adj_rhs,
                        gap=0.0, seconds=time.perf_counter() - t0)

    ub = problem.fit_bounds()
    xi, xj = np.nonzero(ub > 0)
    if compact is None:
        compact = int(problem.running[xi].sum()) > COMPACT_ABOVE  # one column per (app, server) pair that can hold a container
    nx = xi.size
    col_l = nx + np.arange(n)  # l_i
    col_r = nx + n + np.arange(len(run_idx))  # r_i, running apps only
    ncol = nx + n + len(run_idx)

    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    lo: list[np.ndarray] = []
    hi: list[np.ndarray] = []
    nrow = 0

    def add(r: np.ndarray, c: np.ndarray, v: np.ndarray, rl: np.ndarray, ru: np.ndarray) -> None:
        nonlocal nrow
        rows.append(r + nrow)
        cols.append(c)
        vals.append(v)
        lo.append(rl)
        hi.append(ru)
        nrow += rl.size

    # (6) capacity of server j in resource k, for resources some application demands
    ks = np.flatnonzero((problem.demand > _TOL).any(axis=0))
    for kk, k in enumerate(ks):
        d = problem.demand[xi, k]
        keep = d > _TOL
        add(xj[keep], np.flatnonzero(keep), d[keep], np.full(b, -INF), cap[:, k].copy())
    # (7), (8) n_min_i <= Σ_j x_ij <= n_max_i, one ranged row per application
    add(xi, np.arange(nx), np.ones(nx), np.array([a.n_min for a in apps], float),
        np.array([a.n_max for a in apps], float))
    # (11) l_i − δ_i Σ_j x_ij >= −ŝ_i ; (12) l_i + δ_i Σ_j x_ij >= ŝ_i
    hat = problem.shares
    for sign, rl in ((-1.0, -hat), (1.0, hat)):
        add(np.concatenate([xi, np.arange(n)]), np.concatenate([np.arange(nx), col_l]),
            np.concatenate([sign * problem.delta[xi], np.ones(n)]), rl.astype(float), np.full(n, INF))
    # (13), (14) big-M adjustment indicator for running apps
    if len(run_idx):
        pos = np.full(n, -1)
        pos[run_idx] = np.arange(len(run_idx))
        colmap = -np.ones((n, b), dtype=np.int64)
        colmap[xi, xj] = np.arange(nx)
        # (13) M r_i + x_ij >= x^{t-1}_ij where x^{t-1}_ij > 0
        pi, pj = np.nonzero(prev[run_idx] > 0)
        pi = run_idx[pi]
        k13 = pi.size
        add(np.concatenate([np.arange(k13), np.arange(k13)]), np.concatenate([col_r[pos[pi]], colmap[pi, pj]]),
            np.concatenate([prev[pi, pj].astype(float), np.ones(k13)]), prev[pi, pj].astype(float),
            np.full(k13, INF))
        # (14) M r_i − x_ij >= −x^{t-1}_ij for every column of a running app (compact: only where
        # x^{t-1}_ij > 0; with (13) and the upper valid cut below, r_i = 0 still pins x_i = x^{t-1}_i)
        sel = np.flatnonzero(problem.running[xi] & (ub[xi, xj] > prev[xi, xj])
                             & ((prev[xi, xj] > 0) if compact else True))
        k14 = sel.size
        m14 = (ub[xi[sel], xj[sel]] - prev[xi[sel], xj[sel]]).astype(float)
        add(np.concatenate([np.arange(k14), np.arange(k14)]), np.concatenate([col_r[pos[xi[sel]]], sel]),
            np.concatenate([m14, -np.ones(k14)]), -prev[xi[sel], xj[sel]].astype(float),
            np.full(k14, INF))
        # valid cuts (sums of 13/14 over j, tightened): n^{t-1}_i − (n^{t-1}_i − n_min_i) r_i <= Σ_j x_ij
        # <= n^{t-1}_i + (n_max_i − n^{t-1}_i) r_i
        n_prev = prev[run_idx].sum(axis=1).astype(float)
        n_lo = np.array([apps[i].n_min for i in run_idx], float)
        n_hi = np.array([apps[i].n_max for i in run_idx], float)
        in_run = np.flatnonzero(problem.running[xi])
        row_of = pos[xi[in_run]]
        for sign, m_r in ((1.0, n_prev - n_lo), (-1.0, n_hi - n_prev)):
            add(np.concatenate([row_of, np.arange(len(run_idx))]), np.concatenate([in_run, col_r]),
                np.concatenate([sign * np.ones(in_run.size), m_r]), sign * n_prev, np.full(len(run_idx), INF))
        # (16) Σ r_i <= ⌈θ2 |A^t ∩ A^{t-1}|⌉
        add(np.zeros(len(run_idx), dtype=np.int64), col_r, np.ones(len(run_idx)), np.array([-INF]),
            np.array([float(adj_rhs)]))
    # (15) Σ l_i <= ⌈θ1 · 2m⌉
    add(np.zeros(n, dtype=np.int64), col_l, np.ones(n), np.array([-INF]), np.array([fair_rhs]))

    a = sparse.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(nrow, ncol)).tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = ncol, nrow
    cost = np.zeros(ncol)
    cost[:nx] = problem.util_per_container[xi]  # (10)
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(ncol)
    upper = np.concatenate([ub[xi, xj].astype(float), np.full(n, INF), np.ones(len(run_idx))])
    lp.col_upper_ = upper
    lp.row_lower_ = np.concatenate(lo).astype(float)
    lp.row_upper_ = np.concatenate(hi).astype(float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a.indices.astype(np.int32)
    lp.a_matrix_.value_ = a.data.astype(float)
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = ncol, nrow
    integer, continuous = highspy.HighsVarType.kInteger, highspy.HighsVarType.kContinuous
    lp.integrality_ = [integer] * nx + [continuous] * n + [integer] * len(run_idx)
    lp.sense_ = highspy.ObjSense.kMaximize

    h = quiet_highs()
    h.setOptionValue("time_limit", float(max(time_limit, 0.01)))
    h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    if threads is not None:
        h.setOptionValue("threads", int(threads))
    if mip_abs_gap is not None:
        h.setOptionValue("mip_abs_gap", float(mip_abs_gap))
    if not symmetry:
        h.setOptionValue("mip_detect_symmetry", False)
    h.passModel(lp)
    if start is not None:
        n_i = start.sum(axis=1)
        point = np.concatenate([start[xi, xj].astype(float), np.abs(n_i * problem.delta - hat),
                                (start[run_idx] != prev[run_idx]).any(axis=1).astype(float)])
        sol0 = highspy.HighsSolution()
        sol0.col_value = point.tolist()
        sol0.value_valid = True
        h.setSolution(sol0)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    size = {"columns": ncol, "rows": nrow, "integer": nx + len(run_idx), "nonzeros": int(a.nnz)}
    S = highspy.HighsModelStatus
    has_point = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    if status == S.kOptimal:
        label = "optimal"
    elif status in (S.kInfeasible, S.kUnboundedOrInfeasible):
        label = "infeasible"
    else:
        label = "time_limit" if has_point else "no_solution"
    out = Solution(label, None, fairness_bound=fair_rhs, adjust_bound=adj_rhs, seconds=time.perf_counter() - t0,
                   size=size)
    if label in ("optimal", "time_limit"):
        value = np.asarray(h.getSolution().col_value)
        x = np.zeros((n, b), dtype=np.int64)
        x[xi, xj] = np.rint(value[:nx]).astype(np.int64)
        out.x = x
        out.utilization, out.fairness_loss, out.adjusted = evaluate(problem, x)
        out.gap = float(info.mip_gap) if label == "time_limit" else 0.0
    return out
