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
from collections.abc import Iterable

import numpy as np

from ..engine.actions import Pause, Plan
from ..engine.job import JobView
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft
from .spread import NoFitMemo, most_room_chooser, place_with, start_or_resume, waiting_in_order

_TOL = 1e-12


def job_usage(view: ClusterView, job: JobView, n_workers: int | None = None) -> np.ndarray:
    """What ``job`` demands in total with ``n_workers`` workers (default: its current count
    if running, else the count it would start with)."""
    if n_workers is None:
        n_workers = job.n_workers if job.placement else view.target_workers(job)
    u = view.demand_vector(job) * n_workers
    p = view.ps_demand_vector(job)
    if p is not None and job.spec.num_ps:
        u = u + p * job.spec.num_ps
    return u


class TenantShares:
    """Usage and weighted dominant share of every tenant seen in a view.

    ``share(t) = max_r usage[t, r] / capacity[r] / weight[t]`` over resources with
    positive cluster capacity."""

    def __init__(self, view: ClusterView, jobs: Iterable[JobView] | None = None) -> None:
        total = view.capacity.sum(axis=0)
        self._cols = total > _TOL
        self._inv = np.zeros_like(total)
        self._inv[self._cols] = 1.0 / total[self._cols]
        self.usage: dict[str, np.ndarray] = {}
        self.weight: dict[str, float] = {}
        self.order: dict[str, int] = {}  # first seen (arrival order of its earliest job here)
        for job in view.running.values():
            self.add(job.spec.tenant, job_usage(view, job))
            self._see(job)
        for job in (chain_waiting(view) if jobs is None else jobs):
            self._see(job)

    def _see(self, job: JobView) -> None:
        t = job.spec.tenant
        self.weight[t] = max(self.weight.get(t, 0.0), job.spec.weight)
        self.order[t] = min(self.order.get(t, job.seq), job.seq)
        if t not in self.usage:
            self.usage[t] = np.zeros_like(self._inv)

    def add(self, tenant: str, amount: np.ndarray) -> None:
        u = self.usage.get(tenant)
        self.usage[tenant] = amount.copy() if u is None else u + amount

    def dominant(self, amount: np.ndarray) -> float:
        """Unweighted dominant share of ``amount``."""
        return float((amount * self._inv).max(initial=0.0))

    def share(self, tenant: str) -> float:
        return self.dominant(self.usage[tenant]) / self.weight.get(tenant, 1.0)


def chain_waiting(view: ClusterView) -> Iterable[JobView]:
    yield from view.pending.values()
    yield from view.paused.values()


class DRF(BasePolicy):
    """Weighted DRF over tenants, progressive filling; optionally preemptive (see module doc)."""

    def __init__(self, preemptive: bool = False, backfill: bool = False) -> None:
        for name, v in (("preemptive", preemptive), ("backfill", backfill)):
            if not isinstance(v, bool):
                raise ValueError(f"{name} must be True or False, got {v!r}")
        self.preemptive = preemptive
        self.backfill = backfill
        self.name = "drf" + ("+preempt" if preemptive else "") + ("+backfill" if backfill else "")

    def decide(self, view: ClusterView) -> Plan:
        waiting = waiting_in_order(view)
        if not waiting:
            return []
        shares = TenantShares(view, waiting)
        queues: dict[str, list[JobView]] = {}
        for job in waiting:
            queues.setdefault(job.spec.tenant, []).append(job)
        heads = {t: 0 for t in queues}
        heap = [(shares.share(t), shares.order[t], t) for t in queues]
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
            while heads[tenant] < len(queue):
                job = queue[heads[tenant]]
                n = view.target_workers(job)
                p = None if memo.known_to_fail(view, job, n) else place_with(draft, job, most_room_chooser,
                                                                              n_workers=n)
                if p is None and self.preemptive:
                    if victims is None:
                        victims = _Victims(view)
                    p = self._preempt_for(job, n, view, draft, shares, victims, plan)
                    if p is not None:
                        memo.clear()
                        stale = True  # victims' shares dropped: re-rank the tenants still queued
                if p is not None:
                    plan.append(start_or_resume(job, p))
                    shares.add(tenant, job_usage(view, job, n))
                    if victims is not None:
                        victims.started.add(job.id)
                    heads[tenant] += 1
                    placed = True
                    break
                memo.failed(view, job, n)
                if not self.backfill:
                    break
                heads[tenant] += 1
            if placed and heads[tenant] < len(queue):
                heapq.heappush(heap, (shares.share(tenant), order, tenant))
            if stale:
                heap = [(shares.share(t), o, t) for _, o, t in heap]
                heapq.heapify(heap)
                stale = False
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


class _Victims:
    """Running jobs per tenant, most recently started last (paused first)."""

    def __init__(self, view: ClusterView) -> None:
        self.by_tenant: dict[str, list[JobView]] = {}
        for job in sorted(view.running.values(), key=lambda j: (j.first_start or 0.0, j.seq)):
            self.by_tenant.setdefault(job.spec.tenant, []).append(job)
        self.gone: set[str] = set()
        self.started: set[str] = set()


def make(oracle: bool = False) -> DRF:
    return DRF()
