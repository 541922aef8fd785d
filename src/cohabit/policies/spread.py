"""Load balancing (spread) and bin packing: FIFO queues that differ only in where tasks go.

* ``lb`` — **least normalized load**, the spreading rule of Kubernetes'
  ``LeastAllocated`` node score (kube-scheduler, NodeResourcesFit plugin) and
  of Mesos frameworks that spread: each task goes to the feasible node whose
  normalized load after taking the task is lowest. A node's load is the mean,
  over the resources the task demands, of ``allocated / capacity``. Tasks of
  one job are placed one at a time, so a job's workers fan out over the
  emptiest nodes (water filling).
* ``binpack`` — **fewest machines**, as Borg's best-fit packing (Verma et al.,
  "Large-scale cluster management at Google with Borg", EuroSys'15, §3.2) and
  Kubernetes' ``MostAllocated`` score: a job that one node can hold goes to the
  most loaded such node; otherwise its tasks fill the most loaded feasible
  nodes first. Nodes already in use fill up before an idle node is touched,
  so idle machines stay idle for large jobs (or could be powered down).

Both keep arrival order; the head of the queue blocks the rest unless
``backfill=True``. Parameter servers (if any) follow the same rule after the
workers. The placement helpers here (:func:`place_with`, :class:`NoFitMemo`)
are shared by the other baseline modules (DRF, Tetris, static, naive).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from itertools import chain

import numpy as np

from ..engine.actions import Placement, Plan, Resume, Start
from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import fill
from .placement import Draft
from .params import build

_add = np.add.reduce  # fits are integer arrays: their sum, as ``fit.sum()`` gives it

#: ``chooser(fit, free, capacity, demand, n) -> node per task`` (or None): picks nodes for
#: ``n`` identical tasks, taking at most ``fit[node]`` on a node.
Chooser = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int], "list[int] | None"]


# --------------------------------------------------------------------------- load
def node_load(free: np.ndarray, capacity: np.ndarray, demand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per node: normalized load now, and the load one task of ``demand`` adds.

    Load = mean over the resources the task demands of allocated / capacity
    (resources a node lacks count as fully loaded there; such nodes cannot fit
    the task anyway)."""
    hit = _LOADS.get((id(capacity), id(demand)))
    if hit is None or hit[0] is not capacity or hit[1] is not demand:
        hit = _load_terms(capacity, demand)
    _, _, cols, cap, has, safe, step = hit
    if cols is None:
        z = np.zeros(free.shape[0])
        return z, z
    used = np.where(has, (cap - free[:, cols]) / safe, 1.0)
    return used.mean(axis=1), step


#: (id(capacity), id(demand row)) -> what :func:`node_load` computes from those two alone (both read-only
#: arrays, kept alive here so their ids stay theirs): the demanded columns, their capacity, where it is
#: positive, the divisor, and the per-node load one task adds
_LOADS: dict[tuple[int, int], tuple] = {}


def _load_terms(capacity: np.ndarray, demand: np.ndarray) -> tuple:
    cols = demand > 1e-12
    if not cols.any():
        out: tuple = (capacity, demand, None, None, None, None, None)
    else:
        cap = capacity[:, cols]
        has = cap > 0
        safe = np.where(has, cap, 1.0)
        step = np.where(has, demand[cols] / safe, 0.0).mean(axis=1)
        step.flags.writeable = False
        out = (capacity, demand, cols, cap, has, safe, step)
    if not capacity.flags.writeable and not demand.flags.writeable:  # (cached arrays: contents never change)
        if len(_LOADS) > 256:
            _LOADS.clear()
        _LOADS[(id(capacity), id(demand))] = out
    return out


def spread_chooser(fit: np.ndarray, free: np.ndarray, capacity: np.ndarray, demand: np.ndarray,
                   n: int) -> list[int] | None:
    """Each task to the node with the least load after taking it (ties: lowest index)."""
    if _add(fit) < n:  # (fit.sum(): the same reduction without the method wrapper)
        return None
    load, step = node_load(free, capacity, demand)
    after = load + step
    ok = np.flatnonzero(fit > 0)
    # The n smallest first-task loads hold every node the greedy can use: a node's
    # later tasks load it more than its first one does.
    if ok.size > n:
        ok = ok[np.argpartition(after[ok], n - 1)[:n]]
    heap = [(float(after[i]), int(i)) for i in ok]
    heapq.heapify(heap)
    left = {int(i): int(fit[i]) for i in ok}
    out: list[int] = []
    while len(out) < n and heap:
        value, node = heapq.heappop(heap)
        out.append(node)
        left[node] -= 1
        if left[node] > 0:
            heapq.heappush(heap, (value + float(step[node]), node))
    return out if len(out) == n else None


def pack_chooser(fit: np.ndarray, free: np.ndarray, capacity: np.ndarray, demand: np.ndarray,
                 n: int) -> list[int] | None:
    """The most loaded node that holds all ``n`` tasks; else fill the most loaded nodes first."""
    if _add(fit) < n:  # (fit.sum(): the same reduction without the method wrapper)
        return None
    load, _ = node_load(free, capacity, demand)
    whole = np.flatnonzero(fit >= n)
    if whole.size:
        return [int(whole[np.argmax(load[whole])])] * n
    return fill(fit, n, np.lexsort((np.arange(load.size), -load)))


def first_fit_chooser(fit: np.ndarray, free: np.ndarray, capacity: np.ndarray, demand: np.ndarray,
                      n: int) -> list[int] | None:
    """The lowest-index node that holds all ``n`` tasks; else fill nodes in index order."""
    if _add(fit) < n:  # (fit.sum(): the same reduction without the method wrapper)
        return None
    whole = np.flatnonzero(fit >= n)
    if whole.size:
        return [int(whole[0])] * n
    return fill(fit, n, np.arange(fit.size))


def most_room_chooser(fit: np.ndarray, free: np.ndarray, capacity: np.ndarray, demand: np.ndarray,
                      n: int) -> list[int] | None:
    """Consolidated first (as ``placement.consolidated_first``): best-fit single node, else most room first."""
    if _add(fit) < n:  # (fit.sum(): the same reduction without the method wrapper)
        return None
    whole = np.flatnonzero(fit >= n)
    if whole.size:
        return [int(whole[np.argmin(fit[whole])])] * n
    return fill(fit, n, np.argsort(-fit, kind="stable"))


def place_with(draft: Draft, job: JobView, chooser: Chooser, *, n_workers: int | None = None,
               mask: np.ndarray | None = None, mask_key: Hashable | None = None,
               reserve: bool = True) -> Placement | None:
    """Choose nodes for ``job``'s workers (then parameter servers) with ``chooser``, only on
    nodes where ``mask`` is true, and reserve them in ``draft``. None if it does not fit.

    A job without parameter servers that does not fit is noted in the draft's memo
    (``Draft.note_failure``; kept in the ledger's free-capacity index while the draft is
    pristine), keyed by everything the attempt depends on besides the free capacity: the chooser,
    the demand row, the worker count and the mask (``mask_key`` names it; a masked call without
    one is not memoised). A later attempt with the same key fails at once while room has not
    grown: rounds that an arrival or a progress report triggers skip every blocked head."""
    view = draft.view
    n = view.target_workers(job) if n_workers is None else n_workers
    w = view.demand_vector(job)
    p = view.ps_demand_vector(job)
    has_ps = p is not None and job.spec.num_ps > 0
    key = None if has_ps or (mask is not None and mask_key is None) else ("place_with", chooser, id(w), n, mask_key)
    if key is not None and draft.failed_before(key):
        return None
    pristine = draft.pristine
    fit = draft.tasks_fit(w)
    if mask is not None:
        fit = np.where(mask, fit, 0)
    free, cap = draft.free_now, view.capacity
    workers = chooser(fit, free, cap, w, n)
    if workers is None:
        if key is not None:
            draft.note_failure(key)
        return None
    placement: Placement = tuple(workers)
    if has_ps:
        assert p is not None
        after = free.copy()
        np.subtract.at(after, list(workers), w)
        need = p > 1e-12
        ps_fit = (np.floor((np.maximum(after[:, need], 0.0) + 1e-9) / p[need]).min(axis=1).astype(np.int64)
                  if need.any() else np.full(after.shape[0], job.spec.num_ps))
        if mask is not None:
            ps_fit = np.where(mask, ps_fit, 0)
        ps = chooser(ps_fit, after, cap, p, job.spec.num_ps)
        if ps is None:
            return None
        placement += tuple(ps)
    if reserve and not draft.reserve(job, placement):
        if key is not None:
            draft.undo_failed_reserve(pristine)
            draft.note_failure(key)
        return None
    return placement


class NoFitMemo:
    """Remembers, within one decision, job shapes that did not fit.

    While a plan only takes room from the draft, a job with the same task
    shapes and at least as many workers as one that failed cannot fit either;
    skipping it keeps a decision over a long queue cheap. Call :meth:`clear`
    after room is given back (preemption)."""

    __slots__ = ("_failed", "_last")

    def __init__(self) -> None:
        self._failed: dict[tuple[object, ...], int] = {}
        self._last: tuple[object, object, tuple[object, ...]] | None = None  # (job, scope, key)

    @staticmethod
    def key(view: ClusterView, job: JobView, scope: object = None) -> tuple[object, ...]:
        p = view.ps_demand_vector(job)
        return (_row_bytes(view.demand_vector(job)), None if p is None else _row_bytes(p), job.spec.num_ps, scope)

    def _key(self, view: ClusterView, job: JobView, scope: object) -> tuple[object, ...]:
        last = self._last  # failed() right after known_to_fail() for the same job: one key
        if last is not None and last[0] is job and last[1] == scope:
            return last[2]
        k = self.key(view, job, scope)
        self._last = (job, scope, k)
        return k

    def known_to_fail(self, view: ClusterView, job: JobView, n: int, scope: object = None) -> bool:
        m = self._failed.get(self._key(view, job, scope))
        return m is not None and n >= m

    def failed(self, view: ClusterView, job: JobView, n: int, scope: object = None) -> None:
        k = self._key(view, job, scope)
        self._failed[k] = min(n, self._failed.get(k, n))

    def clear(self) -> None:
        self._failed.clear()


#: id(demand row) -> (row, its bytes): the view's rows are cached and read-only, so their bytes are too
_BYTES: dict[int, tuple[np.ndarray, bytes]] = {}


def _row_bytes(row: np.ndarray) -> bytes:
    hit = _BYTES.get(id(row))
    if hit is None or hit[0] is not row:
        if row.flags.writeable:  # not a cached row: its contents may change
            return row.tobytes()
        if len(_BYTES) > 4096:
            _BYTES.clear()
        hit = _BYTES[id(row)] = (row, row.tobytes())  # keeps the row alive: its id stays unique
    return hit[1]


class QuietRounds:
    """For a non-preemptive policy that plans only by starting the head of each tenant's queue (DRF and
    static partitions without backfill): tells that a round would plan nothing again, without trying
    the heads. True when the last round planned nothing (so every head failed to fit), no room has been
    given back since (``ClusterView.room_version``: a placement that failed still fails on less room),
    nothing is paused and each tenant's head is the same job (arrivals behind a head change nothing).
    On a contended cluster most rounds are arrivals behind blocked heads."""

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state: tuple[int, tuple[int, int]] | None = None

    @staticmethod
    def _heads(view: ClusterView) -> tuple[int, int]:
        """Stays while every tenant's head stays: no job left the pending queue (new ones go last) and no
        tenant got its first pending job (``ClusterView.pending_removals``)."""
        return view.pending_removals, len(view.pending_by_tenant)

    def still(self, view: ClusterView) -> bool:
        """True if this round would plan nothing, as the last one did."""
        state = self._state
        return (state is not None and not view.paused and state[0] == view.room_version
                and state[1] == self._heads(view))

    def planned(self, view: ClusterView, plan: Plan) -> None:
        """Record the round's outcome (call with every plan a full round made)."""
        self._state = (view.room_version, self._heads(view)) if not plan and not view.paused else None

    def round(self, view: ClusterView, full_round: Callable[[ClusterView], Plan]) -> Plan:
        """``full_round(view)`` unless it would plan nothing again (:meth:`still`), its outcome recorded."""
        if self.still(view):
            return []
        plan = full_round(view)
        self.planned(view, plan)
        return plan


def waiting_in_order(view: ClusterView) -> Iterator[JobView]:
    """Pending and paused jobs in arrival order, lazily: a round that stops at a blocked head of the
    queue costs nothing per waiting job (the queue of a contended cluster holds thousands)."""
    if not view.paused:
        return iter(view.pending.values())
    return iter(sorted(chain(view.pending.values(), view.paused.values()), key=lambda j: j.seq))


def waiting_by_tenant(view: ClusterView) -> dict[str, Iterator[tuple[int, JobView]]]:
    """Per tenant with waiting jobs: its jobs in the order of :func:`waiting_in_order`, lazily, each
    with its rank key in that order (comparable across tenants, so tenants' queues can be merged).

    Without paused jobs this reads the engine's per-tenant index (``view.pending_by_tenant``): no
    work per job a round does not reach. With paused jobs the order is by arrival over both sets,
    grouped here (O(queue), as :func:`waiting_in_order`)."""
    if not view.paused:
        pos = view.pending_position
        return {t: ((pos(jid), j) for jid, j in q.items()) for t, q in view.pending_by_tenant.items()}
    groups: dict[str, list[tuple[int, JobView]]] = {}
    for j in chain(view.pending.values(), view.paused.values()):
        groups.setdefault(j.spec.tenant, []).append((j.seq, j))
    return {t: iter(sorted(g, key=lambda e: e[0])) for t, g in groups.items()}


def start_or_resume(job: JobView, placement: Placement) -> Start | Resume:
    return Resume(job.id, placement) if job.state is JobState.PAUSED else Start(job.id, placement)


# --------------------------------------------------------------------------- policies
class PlacementFIFO(BasePolicy):
    """FIFO whose placement rule is ``chooser``; the base of ``lb`` and ``binpack``."""

    chooser: Chooser = staticmethod(most_room_chooser)
    label = "placement-fifo"

    def __init__(self, backfill: bool = False) -> None:
        if not isinstance(backfill, bool):
            raise ValueError(f"backfill must be True or False, got {backfill!r}")
        self.backfill = backfill
        self.name = f"{self.label}+backfill" if backfill else self.label

    def decide(self, view: ClusterView) -> Plan:
        if not view.pending and not view.paused:
            return []
        draft = Draft(view)
        memo = NoFitMemo()
        plan: Plan = []
        backfill = self.backfill  # (without it the first failure ends the round: the memo is never asked)
        for job in waiting_in_order(view):
            n = view.target_workers(job)
            p = None if backfill and memo.known_to_fail(view, job, n) else place_with(draft, job, type(self).chooser,
                                                                                       n_workers=n)
            if p is None:
                if not backfill:
                    break
                memo.failed(view, job, n)
                continue
            plan.append(start_or_resume(job, p))
        return plan


class LoadBalance(PlacementFIFO):
    """FIFO with least-normalized-load placement (Kubernetes ``LeastAllocated``, Mesos spread)."""

    chooser = staticmethod(spread_chooser)
    label = "lb"


class BinPack(PlacementFIFO):
    """FIFO with fewest-machines placement (Borg best fit, Kubernetes ``MostAllocated``)."""

    chooser = staticmethod(pack_chooser)
    label = "binpack"


def make_lb(oracle: bool = False, **params: object) -> LoadBalance:
    return build(LoadBalance, params, policy="lb")


def make_binpack(oracle: bool = False, **params: object) -> BinPack:
    return build(BinPack, params, policy="binpack")
