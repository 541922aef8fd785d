"""Weighted Dominant Resource Fairness (Ghodsi et al., "Dominant Resource Fairness: Fair
Allocation of Multiple Resource Types", NSDI'11).

A tenant's *dominant share* is the largest, over every resource the cluster
has (GPU, CPU, memory, network, ... — every column of the capacity matrix
with positive total), of the fraction of the cluster's total it holds. DRF
equalises dominant shares by *progressive filling* (§4 of the paper): the
next task goes to the tenant with the smallest dominant share; a tenant whose
next task does not fit is saturated and the others go on. Weighted DRF (§4.3)
divides the dominant share by the tenant's weight, so a tenant of weight 2
gets twice the dominant share of a tenant of weight 1.

Here a *task* is a whole job (its gang of workers and parameter servers):

* tenants are ``spec.tenant``; a tenant's weight is the largest
  ``spec.weight`` among its jobs in the system (jobs of one tenant normally
  agree);
* usage counts what the tenant's running jobs demand (the scheduler's view of
  their allocation), shares are against the whole cluster's capacity;
* a tenant's waiting jobs (pending and paused) are offered in arrival order.
  By default the tenant is saturated when its first waiting job does not fit;
  with ``backfill=True`` its later jobs may go instead.

Non-preemptive by default, as in the paper's progressive filling (which
allocates free resources only). With ``preemptive=True`` a saturated tenant
with the lowest weighted share may pause running jobs of the tenants with the
highest shares (their most recently started jobs first), but only while the
victim tenant's share stays at least the beneficiary's share after the swap,
so preemption never inverts the order it corrects and cannot ping-pong.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

import numpy as np

from ..engine.actions import Pause, Plan
from ..engine.job import JobView
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft
from .tetris_room import reserve_fits
from .spread import NoFitMemo, QuietRounds, most_room_chooser, place_with, start_or_resume, waiting_by_tenant
from .params import build

_TOL = 1e-12


def job_usage(view: ClusterView, job: JobView, n_workers: int | None = None) -> np.ndarray:
    """What ``job`` demands in total with ``n_workers`` workers (default: its current count
    if running, else the count it would start with). Read-only; shared by jobs of one shape."""
    if n_workers is None:
        n_workers = job.n_workers if job.placement else view.target_workers(job)
    w = view.demand_vector(job)
    p = view.ps_demand_vector(job)
    n_ps = job.spec.num_ps if p is not None else 0
    key = (id(w), n_workers, id(p), n_ps)
    hit = _USAGE.get(key)
    if hit is None or hit[0] is not w or hit[1] is not p:
        u = w * n_workers + (p * n_ps if p is not None and n_ps else 0.0)
        u.flags.writeable = False
        if len(_USAGE) > 4096:
            _USAGE.clear()
        hit = _USAGE[key] = (w, p, u)
    return hit[2]


# (id(worker row), workers, id(ps row), ps) -> (worker row, ps row, total): the rows are the
# ledger's cached read-only vectors, kept alive here so that their ids stay unique
_USAGE: dict[tuple[int, int, int, int], tuple[np.ndarray, np.ndarray | None, np.ndarray]] = {}


class TenantShares:
    """Usage and weighted dominant share of every tenant, for one decision.

    ``share(t) = max_r usage[t, r] / capacity[r] / weight[t]`` over resources with
    positive cluster capacity."""

    def __init__(self, inv_capacity: np.ndarray, usage: dict[str, np.ndarray], weight: dict[str, float],
                 order: dict[str, int], memo: dict[str, tuple[np.ndarray, float]] | None = None) -> None:
        self._inv = inv_capacity
        self.usage = usage
        self.weight = weight
        self.order = order  # tenant -> arrival number of its first job (ties in share)
        # tenant -> (usage row, its dominant share): a usage row is replaced, never changed, on every update
        self._memo: dict[str, tuple[np.ndarray, float]] = {} if memo is None else memo

    def add(self, tenant: str, amount: np.ndarray) -> None:
        u = self.usage.get(tenant)
        self.usage[tenant] = amount.copy() if u is None else u + amount

    def dominant(self, amount: np.ndarray) -> float:
        """Unweighted dominant share of ``amount``."""
        return float((amount * self._inv).max(initial=0.0))

    def share(self, tenant: str) -> float:
        u = self.usage.get(tenant)
        if u is None:
            return 0.0
        hit = self._memo.get(tenant)
        if hit is None or hit[0] is not u:
            hit = self._memo[tenant] = (u, self.dominant(u))
        return hit[1] / self.weight.get(tenant, 1.0)


class TenantBook:
    """Per-tenant weight, first arrival and running usage, kept across decisions.

    Usage is updated incrementally from the difference between the running
    set at this decision and the last one (a running job's demand does not
    change while it runs, except by a resize this book's policies never
    make), and recomputed from scratch every ``RESYNC`` decisions against
    floating-point drift. Weight = the largest ``spec.weight`` seen for the
    tenant (hook ``see`` on arrival; jobs shown to :meth:`shares` also count)."""

    RESYNC = 500

    def __init__(self) -> None:
        self._view: ClusterView | None = None
        self.weight: dict[str, float] = {}
        self.order: dict[str, int] = {}
        self._usage: dict[str, np.ndarray] = {}
        self._running: dict[str, tuple[str, np.ndarray]] = {}
        self._inv = np.zeros(0)
        self._syncs = 0
        self._synced_at: int | None = None  # the view's allocation_version at the last sync
        self._expected: list[str] = []  # jobs expect() counted since the last sync
        self._mark: int | None = None  # the view's running_mark at the last sync
        self._dominant: dict[str, tuple[np.ndarray, float]] = {}  # TenantShares' memo, kept across decisions

    def see(self, job: JobView, view: ClusterView) -> None:
        if view is not self._view:
            self._reset(view)
        t = job.spec.tenant
        w = self.weight.get(t)
        if w is None or job.spec.weight > w:
            self.weight[t] = job.spec.weight
        if t not in self.order:
            self.order[t] = job.seq

    def _reset(self, view: ClusterView) -> None:
        """Start over for a new run (a new view): forget tenants and usage."""
        self._view = view
        self.weight = {}
        self.order = {}
        self._resync(view)

    def _resync(self, view: ClusterView) -> None:
        total = view.capacity.sum(axis=0)
        self._inv = np.where(total > _TOL, 1.0 / np.where(total > _TOL, total, 1.0), 0.0)
        self._usage = {}
        self._running = {}
        self._syncs = 0
        self._synced_at = None
        self._expected = []
        self._mark = None

    def sync(self, view: ClusterView) -> None:
        if view is not self._view:
            self._reset(view)
        self._syncs += 1
        version = view.allocation_version
        if self._syncs % self.RESYNC == 0:
            self._resync(view)
        elif version == self._synced_at and not self._expected:
            return  # no allocation changed since the last sync: neither did the running set
        running = view.running
        # the jobs that may differ between the book and the running set: those that entered or left it
        # since the last sync (the view's journal) and those expect() counted; else compare the sets
        changed = view.running_changes(self._mark) if self._synced_at is not None else None
        self._synced_at, self._mark = version, view.running_mark
        if changed is None:
            gone: Iterable[str] = self._running.keys() - running.keys()
            new: Iterable[str] = running.keys() - self._running.keys()
        else:
            ids = dict.fromkeys(changed)
            ids.update(dict.fromkeys(self._expected))
            gone = [j for j in ids if j in self._running and j not in running]
            new = [j for j in ids if j in running and j not in self._running]
        self._expected = []
        for jid in gone:
            tenant, u = self._running.pop(jid)
            self._usage[tenant] = self._usage[tenant] - u
        for jid in new:
            job = running[jid]
            tenant, u = job.spec.tenant, job_usage(view, job)
            self._running[jid] = (tenant, u)
            self._usage[tenant] = self._usage[tenant] + u if tenant in self._usage else u.copy()
            if tenant not in self.weight:
                self.see(job, view)

    def expect(self, job: JobView, usage: np.ndarray) -> None:
        """Count a job this decision starts as running from now (the next :meth:`sync` drops it
        again if the scheduler refused the start)."""
        if job.id not in self._running:
            self._expected.append(job.id)
            t = job.spec.tenant
            self._running[job.id] = (t, usage)
            self._usage[t] = self._usage[t] + usage if t in self._usage else usage.copy()

    def shares(self, view: ClusterView, waiting: Iterable[JobView] = ()) -> TenantShares:
        """A snapshot for one decision (``waiting`` jobs of unseen tenants are seen first)."""
        self.sync(view)
        for job in waiting:
            if job.spec.tenant not in self.order:
                self.see(job, view)
        # a shallow copy: every update of a usage row replaces it (no in-place arithmetic anywhere)
        return TenantShares(self._inv, dict(self._usage), self.weight, self.order, self._dominant)


class DRF(BasePolicy):
    """Weighted DRF over tenants, progressive filling; optionally preemptive (see module doc)."""

    def __init__(self, preemptive: bool = False, backfill: bool = False) -> None:
        for name, v in (("preemptive", preemptive), ("backfill", backfill)):
            if not isinstance(v, bool):
                raise ValueError(f"{name} must be True or False, got {v!r}")
        self.preemptive = preemptive
        self.backfill = backfill
        self.name = "drf" + ("+preempt" if preemptive else "") + ("+backfill" if backfill else "")
        self._book = TenantBook()
        # without preemption or backfill a round only tries each tenant's head: skip it when it would
        # plan nothing again (its book still syncs, so its re-sync count, and float drift, are the same)
        self._quiet = QuietRounds() if not (preemptive or backfill) else None
        self._heads = HeadShapes()  # each tenant's first pending job and its shape, kept across rounds

    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        self._book.see(job, view)

    def decide(self, view: ClusterView) -> Plan:
        if not view.pending and not view.paused:
            return []
        quiet = self._quiet
        fitting: set[str] | None = None
        if quiet is not None and (quiet.still(view) or not (fitting := _heads_that_fit(view, self._heads))):
            self._book.sync(view)
            quiet.planned(view, [])
            return []
        plan = self._decide(view, fitting)
        if quiet is not None:
            quiet.planned(view, plan)
        return plan

    def _decide(self, view: ClusterView, fitting: set[str] | None = None) -> Plan:
        """One round. ``fitting`` (without preemption or backfill): the tenants whose head fits the free
        capacity now; the others' heads fail whenever their turn comes (room only shrinks within the
        round, and a failed head ends its tenant's round), so they are left out of the ranking: their
        queues are not read at all (:meth:`_fitting_queues`), and a round with one such tenant starts its
        jobs in order until one fails (:meth:`_one_tenant`)."""
        if fitting is not None and len(fitting) == 1:
            return self._one_tenant(view, next(iter(fitting)))
        # each tenant's queue, read from its head only as far as this round goes
        if fitting is None:
            queues = waiting_by_tenant(view)
            head: dict[str, JobView | None] = {t: next(q)[1] for t, q in queues.items()}
            shares = self._book.shares(view, (j for j in head.values() if j is not None))
        else:
            queues, head = self._fitting_queues(view, fitting)
            shares = self._book.shares(view, self._unseen_heads(view))
        heap = [(shares.share(t), shares.order[t], t) for t in queues if fitting is None or t in fitting]
        heapq.heapify(heap)
        draft = Draft(view)
        memo = NoFitMemo()
        plan: Plan = []
        victims: _Victims | None = None
        stale = False
        while heap:
            _, order, tenant = heapq.heappop(heap)
            queue = queues[tenant]
            placed = False
            while (job := head[tenant]) is not None:
                n = view.target_workers(job)
                scope = tenant if self.preemptive else None  # what preemption may free depends on the tenant
                known = memo.known_to_fail(view, job, n, scope)
                p = None if known else place_with(draft, job, most_room_chooser, n_workers=n)
                if p is None and self.preemptive and not known:
                    if victims is None:
                        victims = _Victims(view)
                    p = self._preempt_for(job, n, view, draft, shares, victims, plan)
                    if p is not None:
                        memo.clear()
                        stale = True  # victims' shares dropped: re-rank the tenants still queued
                if p is not None:
                    plan.append(start_or_resume(job, p))
                    u = job_usage(view, job, n)
                    shares.add(tenant, u)
                    self._book.expect(job, u)
                    if victims is not None:
                        victims.started.add(job.id)
                    head[tenant] = _next(queue)
                    placed = True
                    break
                memo.failed(view, job, n, scope)
                if not self.backfill:
                    break
                head[tenant] = _next(queue)
            if placed and head[tenant] is not None:
                heapq.heappush(heap, (shares.share(tenant), order, tenant))
            if stale:
                heap = [(shares.share(t), o, t) for _, o, t in heap]
                heapq.heapify(heap)
                stale = False
        return plan

    def _fitting_queues(self, view: ClusterView, fitting: set[str]) -> tuple[
            dict[str, Iterator[tuple[int, JobView]]], dict[str, JobView | None]]:
        """The queues and heads of the ``fitting`` tenants only (nothing is paused): what
        :func:`~.spread.waiting_by_tenant` gives for them (the round reads no other tenant's queue)."""
        by_tenant = view.pending_by_tenant
        queues: dict[str, Iterator[tuple[int, JobView]]] = {}
        head: dict[str, JobView | None] = {}
        for t in fitting:
            q = queues[t] = iter(by_tenant[t].items())
            head[t] = next(q)[1]
        return queues, head

    def _unseen_heads(self, view: ClusterView) -> Iterator[JobView]:
        """The heads of the tenants with pending jobs that the book has not seen (read after its sync, as
        :meth:`TenantBook.shares` reads them; every tenant is seen at its first arrival, so normally none)."""
        book = self._book
        for t, queue in view.pending_by_tenant.items():
            if t not in book.order:
                yield next(iter(queue.values()))

    def _one_tenant(self, view: ClusterView, tenant: str) -> Plan:
        """:meth:`_decide` when one tenant's head fits (no preemption, no backfill, nothing paused): the ranking
        holds that tenant alone, so the round starts its jobs in queue order until one does not fit, the same
        placements on the same draft. Its shares are not computed (they would only order it against nobody);
        the book syncs and counts the starts as the round's :meth:`TenantBook.shares` and ``expect`` do.

        The round's first start is not reserved in the draft when the round ends after it: when no job follows,
        or when the next job's tasks would exceed the free total left after it (``Draft.could_fit_after``: the
        test ``place_with``'s attempt on the reserved draft fails on, via ``Draft.could_fit``). Its placement is
        then checked as the reservation would check it (``tetris_room.reserve_fits``: the same float operations
        on the ledger's rows); if that says no, ``place_with`` reserves as before (and fails as before)."""
        book = self._book
        book.sync(view)
        for job in self._unseen_heads(view):  # (TenantBook.shares' see, after the sync)
            book.see(job, view)
        draft = Draft(view)
        plan: Plan = []
        queue = iter(view.pending_by_tenant[tenant].values())
        job: JobView | None = next(queue)
        while job is not None:
            n = view.target_workers(job)
            # (after a start, a job whose tasks exceed the draft's free total in some resource fails to place:
            # ``Draft.could_fit``, a few float comparisons, says so before the per-node fits)
            if plan and not draft.could_fit(job, n):
                break
            nxt = next(queue, None)
            last = False  # this start ends the round, unreserved
            if not plan and job.spec.num_ps == 0:
                w = view.demand_vector(job)
                if nxt is None or not draft.could_fit_after(w, n, nxt, view.target_workers(nxt)):
                    p = place_with(draft, job, most_room_chooser, n_workers=n, reserve=False)
                    if p is None:
                        break
                    last = reserve_fits(view, w, p)  # (if not, place_with below reserves it, as before, and fails)
            if not last:
                p = place_with(draft, job, most_room_chooser, n_workers=n)
                if p is None:
                    break
            plan.append(start_or_resume(job, p))
            book.expect(job, job_usage(view, job, n))
            if last:
                break  # (the next job would not fit: the round ends here)
            job = nxt
        return plan

    def _preempt_for(self, job: JobView, n: int, view: ClusterView, draft: Draft, shares: TenantShares,
                     victims: _Victims, plan: Plan) -> tuple[int, ...] | None:
        """Pause jobs of the most-served tenants until ``job`` fits, never letting a victim
        tenant's share drop below the beneficiary's; undo everything if it never fits."""
        me = job.spec.tenant
        need = shares.dominant(job_usage(view, job, n)) / shares.weight.get(me, 1.0)
        mine_after = shares.share(me) + need
        saved = draft.save()
        saved_usage = {t: u.copy() for t, u in shares.usage.items()}
        chosen: list[JobView] = []
        tried: set[str] = set()
        while True:
            best: tuple[float, JobView] | None = None
            for t, stack in victims.by_tenant.items():
                if t == me or shares.share(t) <= mine_after + _TOL:
                    continue
                for v in reversed(stack):
                    if v.id in tried or v.id in victims.gone or v.id in victims.started:
                        continue
                    lose = shares.dominant(job_usage(view, v)) / shares.weight.get(t, 1.0)
                    # the victim tenant keeps at least the beneficiary's share after the swap
                    after = shares.dominant(shares.usage[t] - job_usage(view, v)) / shares.weight.get(t, 1.0)
                    if lose > 0 and after + _TOL >= mine_after:
                        s = shares.share(t)
                        if best is None or s > best[0]:
                            best = (s, v)
                        break
                    tried.add(v.id)
            if best is None:
                break
            v = best[1]
            tried.add(v.id)
            draft.give_back(v)
            shares.usage[v.spec.tenant] = shares.usage[v.spec.tenant] - job_usage(view, v)
            chosen.append(v)
            p = place_with(draft, job, most_room_chooser, n_workers=n)
            if p is not None:
                for c in chosen:
                    plan.append(Pause(c.id, reason=f"drf: tenant {me!r} is below its fair share"))
                    victims.gone.add(c.id)
                return p
        draft.restore(saved)
        shares.usage.clear()
        shares.usage.update(saved_usage)
        return None


class HeadShapes:
    """Each tenant's first pending job with what :func:`_heads_that_fit` reads of it, kept across rounds: per
    tenant its head, worker row, worker count and parameter-server row (None without servers), made afresh only
    when the tenant's head changed (a job's shape is fixed by its spec); and the heads without servers by worker
    row, sorted by worker count, kept while every tenant's head stays (``QuietRounds._heads``: no job left the
    pending queue and no tenant got its first pending job)."""

    __slots__ = ("_view", "_heads", "_key", "_table")

    def __init__(self) -> None:
        self._view: ClusterView | None = None
        self._heads: dict[str, tuple[str, JobView, np.ndarray, int, np.ndarray | None]] = {}
        self._key: tuple[int, int] | None = None
        self._table: tuple[list[tuple[np.ndarray, list[tuple[int, str]]]],
                           list[tuple[str, JobView, np.ndarray, int, np.ndarray]]] = ([], [])

    def of(self, view: ClusterView) -> Iterator[tuple[str, JobView, np.ndarray, int, np.ndarray | None]]:
        """Per tenant with pending jobs, in the view's order: (tenant, its head, worker row, workers, ps row or
        None when it has no parameter servers)."""
        if view is not self._view:
            self._view, self._heads, self._key = view, {}, None
        heads = self._heads
        for tenant, queue in view.pending_by_tenant.items():
            jid = next(iter(queue))
            hit = heads.get(tenant)
            if hit is None or hit[0] != jid:
                job = queue[jid]
                w, n = view.shape(job)
                p = view.ps_demand_vector(job)
                hit = heads[tenant] = (jid, job, w, n, p if p is not None and job.spec.num_ps > 0 else None)
            yield tenant, hit[1], hit[2], hit[3], hit[4]

    def table(self, view: ClusterView) -> tuple[list[tuple[np.ndarray, list[tuple[int, str]]]],
                                                list[tuple[str, JobView, np.ndarray, int, np.ndarray]]]:
        """The heads without parameter servers as (worker row, [(workers, tenant), ...] by workers) per distinct
        row, and the heads with servers as :meth:`of` gives them."""
        key = (view.pending_removals, len(view.pending_by_tenant))
        if view is self._view and key == self._key:
            return self._table
        rows: dict[int, tuple[np.ndarray, list[tuple[int, str]]]] = {}
        with_ps = []
        for tenant, job, w, n, p in self.of(view):
            if p is None:
                rows.setdefault(id(w), (w, []))[1].append((n, tenant))
            else:
                with_ps.append((tenant, job, w, n, p))
        for _, ns in rows.values():
            ns.sort()
        self._key, self._table = key, (list(rows.values()), with_ps)
        return self._table


def _heads_that_fit(view: ClusterView, heads: HeadShapes | None = None) -> set[str] | None:
    """The tenants whose head fits the free capacity as it is now, None if something is paused (then
    the order is over both sets: not worked out here). A round of DRF without preemption or backfill
    tries each head on at most this much room, so when this is empty the round plans nothing,
    whatever the tenants' order (after room was given back, most rounds on a contended cluster still
    fit nobody). A head without parameter servers fits iff its worker count is at most the tasks of
    its demand row that fit over all nodes (``most_room_chooser`` fills any such count): one sum per
    distinct row (the ledger's fit index), and the heads of that row read by worker count up to the
    first that does not fit; heads with parameter servers are tried by placement (once per distinct
    shape). ``heads``: the policy's kept head shapes (None: read afresh)."""
    if view.paused:
        return None
    rows, with_ps = (heads or HeadShapes()).table(view)
    out: set[str] = set()
    for w, ns in rows:
        r = int(np.add.reduce(view.fit_now(w)))  # (.sum() without the wrapper)
        for n, tenant in ns:
            if n > r:
                break
            out.add(tenant)
    draft: Draft | None = None
    tried: dict[tuple[int, int, int, int], bool] = {}
    for tenant, job, w, n, p in with_ps:
        key = (id(w), n, id(p), job.spec.num_ps)
        ok = tried.get(key)
        if ok is None:
            if draft is None:
                draft = Draft(view)
            ok = tried[key] = place_with(draft, job, most_room_chooser, n_workers=n, reserve=False) is not None
        if ok:
            out.add(tenant)
    return out


def _next(queue: Iterator[tuple[int, JobView]]) -> JobView | None:
    entry = next(queue, None)
    return None if entry is None else entry[1]


class _Victims:
    """Running jobs per tenant, most recently started last (paused first)."""

    def __init__(self, view: ClusterView) -> None:
        self.by_tenant: dict[str, list[JobView]] = {}
        for job in sorted(view.running.values(), key=lambda j: (j.first_start or 0.0, j.seq)):
            self.by_tenant.setdefault(job.spec.tenant, []).append(job)
        self.gone: set[str] = set()
        self.started: set[str] = set()


def make(oracle: bool = False, **params: object) -> DRF:
    return build(DRF, params, policy="drf")
