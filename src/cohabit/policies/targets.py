"""From per-job values or target worker counts to a plan, shared by the learning-curve policies
(Optimus, SLAQ, Themis, Optimus+Oracle, Pollux): :func:`greedy_by_value` hands out units in
decreasing marginal value while they fit the aggregate free capacity (Optimus, Peng et al.
EuroSys'18, Sec. 4.2), :func:`admit_in_order` admits jobs in order, the placers put a job's workers
and parameter servers on nodes (:func:`balanced_placement`: Optimus' balanced PS/worker spread;
:func:`consolidated_placer`), and :func:`apply_targets` turns target worker counts into Start,
Resume, Resize and Pause actions that each fit when applied."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from itertools import chain

import numpy as np

from ..engine.actions import Pause, Placement, Plan, Resize, Resume, Start
from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from .placement import Draft, consolidated_first
from .tetris_room import reserve_fits

EPS = 1e-9
ADMIT_SCAN = 512  # rows admit_in_order back-fills from past the first that does not fit
GREEDY_SCAN = 512  # entries greedy_by_value back-fills from past its longest prefix that fits
SHORT = 64  # below this many rows numpy's reduction over a short axis is as fast as a column at a time (row_max)
Placer = Callable[[Draft, JobView, int], "Placement | None"]


def _by_column(a: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
    """``ufunc`` folded over the columns of ``a`` left to right, one call per column (a copy)."""
    out = a[:, 0].copy()
    for k in range(1, a.shape[1]):
        ufunc(out, a[:, k], out=out)
    return out


def row_max(a: np.ndarray) -> np.ndarray:
    """``a.max(axis=1)`` of a 2-D array with a few columns (resources, units), one ``np.maximum`` per column:
    the same maxima (NaN propagated alike), without numpy's slow reduction over a short inner axis (a
    queue of 1,000 rows of 3 resources: ~40 -> ~4 µs; issue 18, twelfth session); below ``SHORT`` rows, the
    reduction itself (as fast there)."""
    if a.shape[1] <= 1 or a.shape[0] < SHORT:
        return a.max(axis=1)
    return _by_column(a, np.maximum)


def row_min(a: np.ndarray) -> np.ndarray:
    """``a.min(axis=1)`` as :func:`row_max` computes the maximum."""
    if a.shape[1] <= 1 or a.shape[0] < SHORT:
        return a.min(axis=1)
    return _by_column(a, np.minimum)


def col_min(a: np.ndarray) -> list[float]:
    """``a.min(axis=0).tolist()`` of a 2-D array of a few columns (resources), one reduction per column: the
    same minima (a minimum is exact in any order; NaN propagated alike), without numpy's slow reduction
    over the long axis of a short-rowed array (a queue of 1,000 rows of 3 resources: ~85 -> ~17 us; issue 18,
    eighteenth session); below ``SHORT`` rows, the reduction itself."""
    if a.shape[0] < SHORT:
        return a.min(axis=0).tolist()
    return [float(a[:, k].min()) for k in range(a.shape[1])]


def rows_within(a: np.ndarray, room: np.ndarray) -> np.ndarray:
    """``(a <= room + EPS).all(axis=1)``: which rows of ``a`` fit ``room`` in every resource, one comparison
    per column (the same comparisons; see :func:`row_max`)."""
    if a.shape[1] <= 1 or a.shape[0] < SHORT:
        return (a <= room + EPS).all(axis=1)
    lim = (room + EPS).tolist()
    out = a[:, 0] <= lim[0]
    for k in range(1, a.shape[1]):
        out &= a[:, k] <= lim[k]
    return out


def running_min(values: np.ndarray) -> np.ndarray:
    """``np.minimum.accumulate(values, axis=1)`` one column at a time (a copy; the same minima)."""
    out = values.copy()
    for k in range(1, out.shape[1]):
        np.minimum(out[:, k - 1], out[:, k], out=out[:, k])
    return out


def greedy_by_value(values: np.ndarray, first_cost: np.ndarray, unit_cost: np.ndarray, free: np.ndarray,
                    *, floor: float = 0.0, scan: int = GREEDY_SCAN) -> tuple[np.ndarray, np.ndarray]:
    """Give units to jobs in decreasing order of value while they fit the aggregate ``free``.

    ``values[j, i]``: value of job ``j``'s unit ``i`` (-inf where it has none); unit 0 costs
    ``first_cost[j]``, later units ``unit_cost[j]``. Rows are made non-increasing (running
    minimum), so a job's units go in order. Units worth ``<= floor`` are never given. A job
    whose next unit does not fit gets no more, and the others carry on (back-filling).

    This is the one-unit-at-a-time greedy of Optimus §4.1 / SLAQ §3.3 (a max-heap on the
    next unit's value): with non-increasing rows the heap pops units in globally sorted
    order, so we sort once and take the longest prefix whose cumulative demand fits, then
    scan up to ``scan`` further units for back-filling. Ties go to the lower row.
    Returns (units per job, capacity left).
    """
    n_jobs = values.shape[0]
    counts = np.zeros(n_jobs, dtype=np.int64)
    rem = free.astype(np.float64).copy()
    if values.size == 0:
        return counts, rem
    vals = running_min(values)
    jj, ii = np.nonzero(vals > floor)
    if jj.size == 0:
        return counts, rem
    order = np.argsort(-vals[jj, ii], kind="stable")
    jj, ii = jj[order], ii[order]
    cost = np.where((ii == 0)[:, None], first_cost[jj], unit_cost[jj])
    cum = np.cumsum(cost, axis=0)
    ok = rows_within(cum, rem)
    cut = int(jj.size if ok.all() else np.argmin(ok))
    if cut:
        counts += np.bincount(jj[:cut], minlength=n_jobs)
        rem -= cum[cut - 1]
    end = min(jj.size, cut + scan)
    if cut < end:
        rem = _backfill_fitting(jj[cut:end], ii[cut:end], cost[cut:end], counts, rem, first_cost, unit_cost)
    return counts, rem


def _backfill_fitting(jj: np.ndarray, ii: np.ndarray, cost: np.ndarray, counts: np.ndarray, rem: np.ndarray,
                      first_cost: np.ndarray, unit_cost: np.ndarray) -> np.ndarray:
    """:func:`_backfill` of the entries whose ``cost`` fits the capacity left now (``rem``), found in one
    numpy pass: the capacity only shrinks during the scan (each step subtracts a cost >= 0), so an entry
    that does not fit now never fits, and leaving it out changes nothing: its job gets no unit from it,
    and the job's later units (higher ``ii``, later in the scan) then fail the scan's order check as they
    would have after it (``tests/test_policy_rows_cached.py`` compares with the scan of every entry).
    A long queue behind a full cluster then costs one numpy pass, not a Python step per entry."""
    fit = rows_within(cost, rem)
    if not fit.any():
        return rem
    keep = np.flatnonzero(fit)
    smallest = (col_min(first_cost) if unit_cost is first_cost
                else np.minimum(col_min(first_cost), col_min(unit_cost)).tolist())
    return _backfill(jj[keep].tolist(), ii[keep].tolist(), cost[keep].tolist(), counts, rem, smallest)


def _fits(cost: list[float], rem: list[float]) -> bool:
    """``(cost <= rem + EPS).all()`` on plain floats."""
    for c, r in zip(cost, rem):
        if not c <= r + EPS:
            return False
    return True


def _backfill(jj: list[int], ii: list[int], cost: list[list[float]], counts: np.ndarray, rem: np.ndarray,
              smallest: list[float]) -> np.ndarray:
    """:func:`greedy_by_value`'s back-filling scan past the sorted prefix: entry ``e`` is unit ``ii[e]`` of
    job ``jj[e]`` at ``cost[e]``; a job whose next unit does not fit (or comes out of order) gets no more;
    the scan stops once not even the ``smallest`` unit fits. On Python floats (a few resources: one float
    comparison each instead of a numpy call per entry; the same IEEE-754 arithmetic, so the same result).
    Updates ``counts``; returns the capacity left."""
    r = rem.tolist()
    got = dict.fromkeys(jj, 0)  # units taken in this scan, per job
    base = counts[list(got)].tolist()
    start = dict(zip(got, base))
    blocked: set[int] = set()
    for j, i, c in zip(jj, ii, cost):
        if not _fits(smallest, r):
            break
        if j in blocked:
            continue
        if i != start[j] + got[j]:
            blocked.add(j)
            continue
        if _fits(c, r):
            r = [x - y for x, y in zip(r, c)]
            got[j] += 1
        else:
            blocked.add(j)
    for j, g in got.items():
        if g:
            counts[j] += g
    return np.array(r, dtype=np.float64)


def admit_in_order(cost: np.ndarray, free: np.ndarray, scan: int = ADMIT_SCAN) -> tuple[np.ndarray, np.ndarray]:
    """Admit jobs in row order while their ``cost`` fits ``free`` (skipping those that do not, among the
    ``scan`` rows past the first that does not fit). This is :func:`greedy_by_value` of one unit per row
    valued in decreasing row order, whose sort is the identity: the longest prefix whose cumulative cost
    fits, then the back-filling scan, without the sort (``tests/test_policy_rows_cached.py`` compares
    the two)."""
    n = cost.shape[0]
    ok = np.zeros(n, dtype=bool)
    rem = free.astype(np.float64).copy()
    if n == 0:
        return ok, rem
    cum = np.cumsum(cost, axis=0)
    fit = rows_within(cum, rem)
    cut = n if fit.all() else int(np.argmin(fit))
    if cut:
        ok[:cut] = True
        rem -= cum[cut - 1]
    end = min(n, cut + scan)
    if cut < end:
        counts = np.zeros(n, dtype=np.int64)
        rows = np.arange(cut, end)
        rem = _backfill_fitting(rows, np.zeros(end - cut, dtype=np.int64), cost[cut:end], counts, rem, cost, cost)
        ok |= counts > 0
    return ok, rem


def is_rigid(job: JobView) -> bool:
    return job.spec.min_workers == job.spec.max_workers


def waiting_jobs(view: ClusterView) -> list[JobView]:
    """Paused then pending jobs, each in the engine's order (pause order, arrival order)."""
    return list(chain(view.paused.values(), view.pending.values()))


def any_waiting(view: ClusterView) -> bool:
    """Whether a job is paused or pending (without listing them: asked on every report)."""
    return bool(view.paused) or bool(view.pending)


def room_for_none(view: ClusterView) -> bool:
    """Whether the aggregate free capacity is below :attr:`ClusterView.task_floor` in some resource
    (with :func:`greedy_by_value`'s ``EPS``): then no waiting job's first unit (``n_min >= 1`` workers
    plus its parameter servers) fits it, and a round over the free room alone admits nobody."""
    return below_floor(view.free_total, view.task_floor)  # (free.sum(axis=0), kept by the ledger)


def below_floor(free: np.ndarray, floor: np.ndarray) -> bool:
    """``bool((free + EPS < floor).any())`` for rows of a few resources, on Python floats (the same
    additions and comparisons, without three numpy calls: asked at every round, issue 18's seventeenth session)."""
    return any(f + EPS < t for f, t in zip(free.tolist(), floor.tolist()))


# ----------------------------------------------------------------------------- placement
def balanced_placement(draft: Draft, job: JobView, n_workers: int, max_tries: int = 16) -> Placement | None:
    """Optimus's placement (§4.2): the fewest servers ``k`` that each take an even share of the
    ``n_workers`` workers and ``p`` parameter servers, servers with most room first.
    Reserves the placement in ``draft``; falls back to consolidated-first, else None."""

    def fallback() -> Placement | None:
        q = consolidated_first(draft, job, n_workers)
        return q if q is not None and draft.reserve(job, q) else None

    return _balanced(draft.view, job, n_workers, draft.tasks_fit, draft.free_now,
                     lambda placement: draft.reserve(job, placement), fallback, max_tries)


def balanced_start(view: ClusterView, job: JobView, n_workers: int) -> Plan:
    """``apply_targets(view, {job.id: n_workers}, [job], balanced_placement, reason=..., shrink=())`` for one
    waiting job without parameter servers at ``n_workers == n_min`` (a round of rigid jobs that admits one,
    issue 18, sixteenth session): the same plan, found on the ledger's room without a scratch draft.

    Why the same: that plan is :func:`balanced_placement` on a pristine draft at ``n_min`` (``_place_down``
    tries no smaller size, none being allowed), and nothing reads the draft after it. A pristine draft's fits
    and free rows are the ledger's (:meth:`ClusterView.fit_now`, ``view.free``), and whether it would reserve
    a placement is :func:`~.tetris_room.reserve_fits` (the same float operations, nothing written). Only the
    consolidated-first fallback makes a draft (``tests/test_optimus_rigid.py`` compares both ways)."""
    assert job.spec.num_ps == 0 and n_workers == job.spec.min_workers
    w = view.demand_vector(job)

    def fallback() -> Placement | None:
        draft = Draft(view)
        q = consolidated_first(draft, job, n_workers)
        return q if q is not None and draft.reserve(job, q) else None

    p = _balanced(view, job, n_workers, view.fit_now, view.free,
                  lambda placement: reserve_fits(view, w, placement), fallback)
    if p is None:
        return []
    return [Resume(job.id, p) if job.state is JobState.PAUSED else Start(job.id, p)]


def _balanced(view: ClusterView, job: JobView, n_workers: int, tasks_fit: Callable[[np.ndarray], np.ndarray],
              free: np.ndarray, take: Callable[[Placement], bool], fallback: Callable[[], Placement | None],
              max_tries: int = 16) -> Placement | None:
    """:func:`balanced_placement` on a room given by its per-node fits (``tasks_fit``), free rows (``free``, read
    only) and a reservation (``take``: all or nothing), with ``fallback`` when no even spread is taken."""
    wv = view.demand_vector(job)
    pv = view.ps_demand_vector(job)
    p = job.spec.num_ps if pv is not None else 0
    wfit = tasks_fit(wv)
    fits = wfit.tolist()  # (the sum, maximum and one-node choice below on Python ints: the same numbers)
    if sum(fits) < n_workers:
        return None
    if max(fits) >= n_workers:  # (one node takes them all: the first running sum of the sorted fits reaches n)
        k_min = 1
    else:
        order = np.argsort(-wfit, kind="stable")
        k_min = int(np.searchsorted(np.cumsum(wfit[order]), n_workers)) + 1
    n_nodes = free.shape[0]
    for k in range(max(k_min, 1), min(n_nodes, max(n_workers, p, 1), k_min + max_tries) + 1):
        a, b = -(-n_workers // k), -(-p // k)
        need = wv * a + (pv * b if pv is not None else 0.0)
        if k == 1:  # (most starts: one node, found without numpy passes over every node)
            node = _one_node(fits, free, (need - EPS).tolist(), a)
            if node is None:
                continue
            chosen: list[int] | np.ndarray = [node]
        else:
            ok = (wfit >= a) & (free >= need - EPS).all(axis=1)
            cand = np.flatnonzero(ok)
            if cand.size < k:
                continue
            chosen = cand[np.argsort(wfit[cand], kind="stable")[:k]]
        workers = _spread(n_workers, chosen)
        placement = tuple(workers + _spread(p, chosen))
        if take(placement):
            return placement
    return fallback()


def _one_node(fits: list[int], free: np.ndarray, floor: list[float], a: int) -> int | None:
    """The node :func:`_balanced` chooses for ``k = 1``: among the nodes that fit ``a`` tasks (``fits[i] >= a``)
    and whose free row is at least ``floor`` (``need - EPS``) in every resource, the one that fits fewest,
    the first on ties (``argsort(kind="stable")[0]`` of the candidates' fits); None if there is none. The
    same comparisons as the numpy pass, read in node order (a node is kept only when it fits strictly fewer)."""
    best: int | None = None
    least = 0
    for i, f in enumerate(fits):
        if f >= a and (best is None or f < least):
            if all(x >= y for x, y in zip(free[i].tolist(), floor)):
                best, least = i, f
    return best


def _spread(n: int, nodes: np.ndarray | list[int]) -> list[int]:
    """``n`` tasks over ``nodes`` as evenly as possible (the first ones take the remainder)."""
    k = len(nodes)
    if n == 0 or k == 0:
        return []
    base, extra = divmod(n, k)
    out: list[int] = []
    for i, node in enumerate(nodes):
        out.extend([int(node)] * (base + (1 if i < extra else 0)))
    return out


def consolidated_placer(draft: Draft, job: JobView, n: int) -> Placement | None:
    return draft.place(job, n)


def shrink_placement(job: JobView, n: int) -> Placement:
    """``job``'s placement with ``n`` workers: drop workers from the nodes holding fewest of them."""
    nw = job.n_workers
    workers, ps = job.placement[:nw], job.placement[nw:]
    counts = Counter(workers)
    drop = nw - n
    for node, c in sorted(counts.items(), key=lambda x: (x[1], x[0])):
        if drop <= 0:
            break
        take = min(c, drop)
        counts[node] -= take
        drop -= take
    kept = [node for node in sorted(counts) for _ in range(counts[node])]
    return tuple(kept) + tuple(ps)


def changed_rows(state: np.ndarray, cur: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of a round's rows (job state 0 pending, 1 running, 2 paused; ``cur`` workers held; ``n`` the target):
    the running ones set lower (shrunk or paused) and those set higher (grown, started, resumed), as row
    indices in row order: the only jobs :func:`apply_targets` acts on."""
    return np.flatnonzero((state == 1) & (n < cur)), np.flatnonzero(n > cur)


def apply_targets(view: ClusterView, targets: Mapping[str, int], order: Iterable[JobView], place: Placer,
                  *, reason: str, shrink: Iterable[JobView] | None = None) -> Plan:
    """Turn target worker counts into a plan the scheduler will accept.

    ``targets``: job id -> workers wanted, 0 = not running; jobs absent keep what they have.
    Running jobs set to 0 are paused and those set lower are shrunk in place first (their
    room is given back); then, in ``order``, running jobs set higher are resized and waiting
    jobs started or resumed. A job that cannot be placed at its target takes the largest
    size (at least ``n_min``, or more than it has when growing) that can, else keeps what it
    has. Every step is reserved in a :class:`Draft`, in plan order, so the plan never
    over-allocates. ``shrink``: the running jobs set lower, in ``view.running``'s order, if the
    caller knows them (:func:`changed_rows`; None: found by a pass over every running job); ``order``
    may likewise hold only the jobs set higher: the others are passed over anyway.
    """
    draft = Draft(view)
    plan: Plan = []
    for job in (view.running.values() if shrink is None else shrink):
        t = targets.get(job.id)
        if t is None or t >= job.n_workers:
            continue
        draft.give_back(job)
        if t <= 0:
            plan.append(Pause(job.id, reason=reason))
        else:
            p = shrink_placement(job, t)
            ok = draft.reserve(job, p)
            assert ok, "a subset of a job's own placement always fits the room it gave back"
            plan.append(Resize(job.id, p))
    for job in order:
        t = targets.get(job.id, 0)
        if t <= 0:
            continue
        if job.state is JobState.RUNNING:
            cur = job.n_workers
            if t <= cur:
                continue
            saved = draft.save()
            draft.give_back(job)
            p = _place_down(draft, job, t, cur + 1, place)
            if p is None:
                draft.restore(saved)
                continue
            plan.append(Resize(job.id, p))
        elif job.state in (JobState.PENDING, JobState.PAUSED):
            p = _place_down(draft, job, t, job.spec.min_workers, place)
            if p is not None:
                plan.append(Resume(job.id, p) if job.state is JobState.PAUSED else Start(job.id, p))
    return plan


def _place_down(draft: Draft, job: JobView, hi: int, lo: int, place: Placer) -> Placement | None:
    """Place ``job`` with the largest worker count in ``[lo, hi]`` that fits (a few tries)."""
    if hi < lo:
        return None
    p = place(draft, job, hi)
    if p is not None:
        return p
    room = int(draft.tasks_fit(draft.view.demand_vector(job)).sum())
    n = min(hi - 1, room)
    tries = 0
    while n >= lo and tries < 8:
        p = place(draft, job, n)
        if p is not None:
            return p
        n -= 1
        tries += 1
    return None
