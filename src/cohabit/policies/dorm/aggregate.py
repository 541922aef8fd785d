"""P2 over classes of identical servers: Dorm's MILP at 1,000 applications x 500 servers.

The per-server model (:func:`.milp.solve`) has one integer column per (application, server)
pair: 470,000 columns at 1,000 x 500, which HiGHS does not close in a minute. Servers of one
capacity are interchangeable for Eq. 6-8 and 10-12, so they become one *class* with a count:

* y_{i,c} ∈ Z₀⁺, the containers of application i on the servers of class c, replaces x_{i,j};
* Eq. 6 becomes Σ_i y_{i,c} d_{i,k} ≤ count_c · c_{c,k} (the class's pooled capacity), and
  y_{i,c} ≤ min(n_max_i, count_c · ⌊c_c / d_i⌋) (containers of d_i that count_c empty servers hold);
* Eq. 13-14 compare y with the previous allocation summed over the class,
  Y^{t−1}_{i,c} = Σ_{j ∈ c} x^{t−1}_{i,j}: r_i = 0 keeps y_i = Y^{t−1}_i, and such an application
  keeps its very containers, x_i = x^{t−1}_i, in the split below.

Everything else (Eq. 7-8, 11-12, 15-16 and the objective) depends on container counts only, so
the aggregated problem is :func:`.milp.solve` on a :class:`.milp.Problem` whose "servers" are the
classes, with the original theoretical shares ŝ and, as total capacity, the same sums.

**Split** (integer per-class counts to servers): applications not adjusted keep x^{t−1}; an
adjusted running application keeps its previous containers on each server of a class up to its
new count there; the remaining containers go best-fit onto the class's servers (the server
they leave fullest), largest dominant demand first. Pooling is a relaxation of packing onto
servers, so a container may find no server (fragmentation): it then takes containers of an
application above its n_min on some server (one the solve adjusts anyway, else one more within
Eq. 16's budget), or is dropped. If the split still meets P2 (every application within
[n_min, n_max], Eq. 15-16) it is kept; otherwise the room the class counted but no server could
use is cut from the class's pooled capacity and the class problem solved again; when no round
gives a split that meets P2 the solution is ``no_solution`` and the caller keeps the current
allocation (Dorm's rule, §IV-B). With no drop the split has the
aggregated objective, which is an upper bound of the per-server optimum: the split is then
optimal for the per-server P2 (up to the MIP gap).

**Solver settings** of the class solve (1,000 x 500, HiGHS' log, one thread): the root LP bound is
within 1.5e-4 of the best integer point, i.e. less than one container's utilization (one 2-CPU,
8-GB container is 4.6e-4 at 500 servers; the objective is integral in steps of 1/96,000), and
proving the default relative gap of 1e-4 took branching without end (one draw: no proof in 60 s,
the bound never moved from the root); HiGHS' symmetry detection (966 generators from identical
applications) took 3.9 of 13 s on another. The class solve therefore skips symmetry detection and, on
the instances the policy aggregates (above :data:`AGGREGATE_ABOVE` pairs), stops once its incumbent
is within one smallest container of the bound (``mip_abs_gap``, :func:`one_container`; the split
loses far more than that against the class bound, see ``docs/speed.md``).
"""

from __future__ import annotations

import time

import numpy as np

from .milp import Problem, Solution, Thresholds, evaluate, solve

__all__ = ["AGGREGATE_ABOVE", "ServerClasses", "aggregate", "one_container", "should_aggregate", "solve_aggregated",
           "split"]

_TOL = 1e-9
#: the policy solves on server classes when the per-server model has more (app, server) pairs than
#: this and classes at least halve the servers (200 x 100 solves per server in 7-10 s; 1,000 x 500 does not)
AGGREGATE_ABOVE = 20_000


def should_aggregate(problem: Problem) -> bool:
    """Whether :func:`solve_aggregated` should replace the per-server solve (see :data:`AGGREGATE_ABOVE`)."""
    n, b = len(problem.apps), problem.capacity.shape[0]
    if n * b <= AGGREGATE_ABOVE:
        return False
    return len(np.unique(np.asarray(problem.capacity), axis=0)) * 2 <= b


class ServerClasses:
    """Servers grouped by identical capacity rows: ``of[j]`` is server j's class, ``capacity[c]``
    one server's capacity in class c, ``count[c]`` how many, ``members[c]`` their indices."""

    def __init__(self, capacity: np.ndarray) -> None:
        cap = np.asarray(capacity, dtype=float)
        rows, of = np.unique(cap, axis=0, return_inverse=True)
        self.of = of.reshape(-1).astype(np.int64)
        self.capacity = rows
        self.count = np.bincount(self.of, minlength=len(rows)).astype(np.int64)
        self.members = [np.flatnonzero(self.of == c) for c in range(len(rows))]

    def __len__(self) -> int:
        return len(self.capacity)

    def sum_columns(self, x: np.ndarray) -> np.ndarray:
        """(apps, servers) -> (apps, classes): containers per class."""
        out = np.zeros((x.shape[0], len(self)), dtype=np.int64)
        np.add.at(out.T, self.of, x.T)
        return out


def aggregate(problem: Problem, classes: ServerClasses, cut: np.ndarray | None = None) -> Problem:
    """The class-level P2 (see the module doc), with ``problem``'s shares and running set; ``cut``
    (classes, resources) is taken from the pooled capacities (room the split found unusable)."""
    assert problem.previous is not None
    prev = classes.sum_columns(problem.previous)
    # column bound: what count_c empty servers hold (count_c x one server's fit), not the pooled
    # capacity's (tighter, still implied by Eq. 6 per server)
    one = Problem(problem.apps, classes.capacity, previous=np.zeros_like(prev), shares=problem.shares)
    n_max = np.array([a.n_max for a in problem.apps], dtype=np.int64)[:, None]
    bounds = np.maximum(np.minimum(one.fit_bounds() * classes.count[None, :], n_max), prev)
    pooled = classes.capacity * classes.count[:, None] - (0.0 if cut is None else cut)
    return Problem(problem.apps, pooled, previous=prev,
                   running=problem.running, shares=problem.shares, bounds=bounds)


def _make_room(problem: Problem, x: np.ndarray, room: np.ndarray, servers: np.ndarray, i: int,
               adjusted: np.ndarray, moved: set[int], budget: int, evicted: dict[int, int]) -> int | None:
    """Room for one container of application i on one of ``servers`` by taking containers of
    another application there (one above its n_min, the most over-served first; an application
    the solve or an earlier repair already adjusts first, else one more within the ``budget`` of
    Eq. 16). Returns the class-local server index, the room taken; None if no donor makes room.
    The donor's containers taken are counted in ``evicted`` (placed again afterwards if they fit)."""
    d = problem.demand
    need = d[i]
    assert problem.shares is not None
    counts = x.sum(axis=1)
    over = counts * problem.delta - problem.shares
    best: tuple[tuple[int, float], int, int, int] | None = None
    for s, j in enumerate(servers):
        for v in np.flatnonzero(x[:, j] > 0):
            if v == i:
                continue
            free_budget = bool(adjusted[v]) or int(v) in moved
            if not free_budget and len(moved) >= budget:
                continue
            spare = min(int(x[v, j]), int(counts[v]) - problem.apps[v].n_min)
            k, r = 0, room[s].copy()
            while k < spare and (r - need < -_TOL).any():
                k += 1
                r += d[v]
            if k == 0 or (r - need < -_TOL).any():
                continue
            key = (0 if free_budget else 1, -float(over[v]))
            if best is None or key < best[0]:
                best = (key, s, int(v), k)
    if best is None:
        return None
    _, s, v, k = best
    x[v, servers[s]] -= k
    room[s] += k * d[v]
    if not adjusted[v]:
        moved.add(v)
    evicted[v] = evicted.get(v, 0) + k
    return s


def split(problem: Problem, classes: ServerClasses, y: np.ndarray, adjusted: np.ndarray,
          budget: int = 0) -> tuple[np.ndarray, int, np.ndarray]:
    """Per-server allocation for class counts ``y`` (module doc); returns (x, containers that found
    no server, stranded room per class). ``adjusted[i]``: application i is (re)placed anew (a new
    or adjusted application: Dorm kills and resumes it anyway); the others keep x^{t−1}_i, which
    their row of ``y`` must equal. A container that finds no server gets room from another
    application's containers on one (:func:`_make_room`; at most ``budget`` running applications
    adjusted beyond the solve's). The stranded room of a class: when a container finds no
    server even so, the class's free room in that container's dominant resource (counted by the pooled
    model, usable by no server for it: e.g. free GPUs on servers whose CPUs are taken)."""
    assert problem.previous is not None
    d = problem.demand
    n, b = problem.previous.shape
    x = np.zeros((n, b), dtype=np.int64)
    keep = ~adjusted
    x[keep] = problem.previous[keep]
    free = problem.capacity - x.T.astype(float) @ d
    total = problem.capacity.sum(axis=0)
    inv = np.where(total > _TOL, 1.0 / np.where(total > _TOL, total, 1.0), 0.0)
    dropped = 0
    moved: set[int] = set()  # running applications the repair adjusted beyond the solve's choice
    stranded = np.zeros_like(classes.capacity)
    order = np.argsort(-problem.delta, kind="stable")  # largest dominant demand first
    for c, servers in enumerate(classes.members):
        room = free[servers]
        evicted: dict[int, int] = {}
        todo = [(int(i), int(y[i, c]), True) for i in order if adjusted[i] and y[i, c] > 0]
        while todo:
            i, many, may_evict = todo.pop(0)
            need = d[i]
            for _ in range(many):
                ok = np.flatnonzero((room - need >= -_TOL).all(axis=1))
                if ok.size:  # best fit: onto the server it leaves fullest (keeps large holes)
                    s = int(ok[int(np.argmin(((room[ok] - need) * inv).sum(axis=1)))])
                else:
                    got = (_make_room(problem, x, room, servers, i, adjusted, moved, budget, evicted)
                           if may_evict else None)
                    if got is None:
                        dropped += 1
                        k = int(np.argmax(need * inv))  # its dominant resource: the class's free room is stranded
                        stranded[c, k] = max(stranded[c, k], float(room[:, k].sum()))
                        continue
                    s = got
                room[s] -= need
                x[i, servers[s]] += 1
            if not todo and evicted:  # the donors' containers: placed again where they fit, else lost
                todo = [(v, k, False) for v, k in sorted(evicted.items(), key=lambda vk: -problem.delta[vk[0]])]
                evicted = {}
        free[servers] = room
    return x, dropped, stranded


def one_container(problem: Problem) -> float | None:
    """The utilization (Eq. 10) of the smallest container any application of ``problem`` has, a hair
    under it: the class solve's absolute gap (module doc, "Solver settings"). None without one."""
    u = problem.util_per_container[problem.util_per_container > _TOL]
    return float(u.min()) * (1.0 - 1e-6) if u.size else None


def solve_aggregated(problem: Problem, thresholds: Thresholds, *, time_limit: float = 10.0,
                     mip_rel_gap: float = 1e-4, threads: int | None = None,
                     start: np.ndarray | None = None, max_rounds: int = 6,
                     container_gap: bool | None = None) -> Solution:
    """P2 on server classes, then split to servers (module doc). When the split drops containers and
    breaks P2, the stranded room is cut from the classes' pooled capacity and the class problem solved again
    (at most ``max_rounds`` solves, all within ``time_limit``). ``size`` carries ``classes``,
    ``rounds`` and ``split_dropped`` (of the last split); the utilization, fairness loss and
    adjustments are the split's, ``aggregated_utilization`` the first class solve's (an upper bound
    of the per-server optimum). ``container_gap``: the class solve stops within one smallest container of
    its bound (module doc, "Solver settings"); None: on above :data:`AGGREGATE_ABOVE` application-server
    pairs, where the policy aggregates (smaller instances are solved to HiGHS' relative gap)."""
    t0 = time.perf_counter()
    if container_gap is None:
        container_gap = len(problem.apps) * problem.capacity.shape[0] > AGGREGATE_ABOVE
    classes = ServerClasses(problem.capacity)
    cut = np.zeros_like(classes.capacity)
    agg_start = None if start is None else classes.sum_columns(start)
    bound: float | None = None
    for rounds in range(1, max_rounds + 1):
        agg = aggregate(problem, classes, cut)
        left = time_limit - (time.perf_counter() - t0)
        sol = solve(agg, thresholds, time_limit=max(left, 0.01), mip_rel_gap=mip_rel_gap, threads=threads,
                    start=agg_start, mip_abs_gap=one_container(agg) if container_gap else None, symmetry=False)
        sol.size = {**sol.size, "classes": len(classes), "servers": int(problem.capacity.shape[0]), "rounds": rounds}
        if sol.x is None:
            break
        bound = sol.utilization if bound is None else bound
        assert problem.running is not None and agg.previous is not None
        adjusted = ~problem.running | (sol.x != agg.previous).any(axis=1)
        budget = sol.adjust_bound - int((adjusted & problem.running).sum())
        x, dropped, stranded = split(problem, classes, sol.x, adjusted, budget)
        sol.size["split_dropped"] = dropped
        util, loss, adj = evaluate(problem, x)
        counts = x.sum(axis=1)
        feasible = (all(a.n_min <= k <= a.n_max for a, k in zip(problem.apps, counts))
                    and loss <= sol.fairness_bound + 1e-9 and len(adj) <= sol.adjust_bound)
        if feasible:  # no drop, or drops that leave P2's constraints intact: keep the split
            sol.x = x
            sol.utilization, sol.fairness_loss, sol.adjusted = util, loss, adj
            sol.size["aggregated_utilization"] = bound  # type: ignore[assignment]
            sol.seconds = time.perf_counter() - t0
            return sol
        if not stranded.any() or time.perf_counter() - t0 >= time_limit:
            break
        cut = cut + stranded
    return Solution("no_solution", None, fairness_bound=sol.fairness_bound, adjust_bound=sol.adjust_bound,
                    seconds=time.perf_counter() - t0, size=sol.size)
