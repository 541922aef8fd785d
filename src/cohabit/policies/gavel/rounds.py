"""Gavel's round-based mechanism (Narayanan et al., OSDI'20, §5): a policy's time fractions, enforced in rounds.

A Gavel policy computes an *allocation*: for each active job ``j`` and GPU type ``w`` the fraction
of time ``X[j][w]`` the job should run on ``w`` (§3, the heterogeneity-agnostic variants spread a
job's share over the types in proportion to their GPU counts). The mechanism turns it into
rounds of ``round_s`` seconds (Gavel's ``time_per_iteration``, 360 s; the scheduler loop calls
:meth:`decide` only at round boundaries because the policy sets ``decision_period``):

* **Time received.** Since the last *reset*, each job has a time received per type (every job
  starts a reset period with half a round, as Gavel's scheduler seeds it) and each type a total;
  a job's *fraction* of a type is its time over the type's total. A job that ran in the last round
  adds the seconds it ran (to the round's end, or to its own end if it finished) once, whatever its
  GPU count.
* **Priorities.** ``X[j][w] / fraction[w][j]`` (``X x 1e9`` for a job with no time yet): the job
  that received the smallest share of what it should have gets the type first (§5, Algorithm 1);
  ties go to the larger *deficit* (time it should have had minus time it had, summed over earlier
  reset periods), then the larger allocation, then arrival order.
* **Resets.** When a job arrived or ended since the allocation was computed, and at least
  ``min_reset_s`` (Gavel's ``minimum_time_between_allocation_resets``, 1,920 s) passed since the
  last reset (or none happened after t=0), the deficits absorb the period, times received restart
  and the policy computes a new allocation. Between resets new jobs have no allocation and wait,
  and GPUs a finished job left stay idle: Gavel's behaviour, which its JCTs include.
* **Selection.** Each round the GPU types are visited in a random order (seeded); for each, its
  jobs in priority order; a job is taken on the first type where the policy lets it run (Gavel's
  FIFO: positive priority), it can run (a worker fits that type's nodes) and it fits the GPUs still
  free of that type. A job that arrived after the allocation was computed takes its GPUs in this
  count but does not run (Gavel assigns workers only to jobs in the allocation): they stay idle.
* **Placement.** A job that keeps its type keeps its GPUs; the others are placed on nodes of
  their type, on one node when one holds them, else over the nodes with most room first. Jobs not
  selected are paused (resumed later from their checkpoint); a job moving type migrates.

**Units.** What the mechanism schedules are *units*: a job (its id), or, for Gavel's packing policies
(``gandiva``), a pair of jobs of the same GPU count sharing the same GPUs (a tuple of two ids, the
earlier arrival first). :meth:`units` lists them (every job, by default); everything above applies
per unit: its allocation, time received (a pair's starts at 0 and counts the round once, as Gavel's
``_populate_job_combination_metadata`` and ``_done_callback`` do), deficit and priority. A unit is
not taken when one of its jobs already was this round, or when :meth:`unit_runs` says it cannot run
on the type (Gavel: no measured pair throughput there). A pair runs as its first placed job
(*lead*, placed as above) and the other time-sharing exactly the lead's GPUs
(``Colocate(on_hosts=True)``); a pair already sharing its GPUs on the type keeps them, and any other
job that shares GPUs is paused before it is placed anew (a job never time-shares with one outside
its unit).

Subclasses supply :meth:`allocation`. What the mechanism reads is what a real scheduler knows:
arrivals and ends, its own launches and the times between rounds, the jobs' declared demands and
weights, and the cluster's nodes with their ``gpu_model`` labels.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

import numpy as np

from ...engine.actions import Colocate, Migrate, Pause, Plan, Resume, Start
from ...engine.job import JobView
from ...engine.view import ClusterView
from ..base import BasePolicy
from ..placement import Draft, fill
from ..type_speeds import gpu_types

#: Gavel's default round length (``--time_per_iteration``), seconds.
ROUND_S = 360.0
#: Gavel's ``minimum_time_between_allocation_resets``, seconds.
MIN_RESET_S = 1920.0

#: What the rounds schedule: a job id, or a pair of job ids sharing GPUs (earlier arrival first).
Unit = str | tuple[str, str]
Allocation = dict[Unit, dict[str, float]]  # unit -> GPU type -> fraction of time


def members(unit: Unit) -> tuple[str, ...]:
    """The job ids of ``unit``."""
    return (unit,) if isinstance(unit, str) else unit


class GavelRounds(BasePolicy):
    """Gavel's round mechanism around :meth:`allocation` (see the module docstring)."""

    name = "gavel-rounds"
    first_round = 0.0  # Gavel's first round starts at t=0

    def __init__(self, round_s: float = ROUND_S, min_reset_s: float = MIN_RESET_S, seed: int = 0) -> None:
        if not 0 < round_s < float("inf"):
            raise ValueError(f"round_s must be a finite number of seconds > 0, got {round_s!r}")
        if not 0 <= min_reset_s < float("inf"):
            raise ValueError(f"min_reset_s must be a finite number of seconds >= 0, got {min_reset_s!r}")
        self.round_s = float(round_s)
        self.decision_period = self.round_s  # the scheduler loop decides only at round boundaries
        self.min_reset_s = float(min_reset_s)
        # idle rounds the loop waits before it gives up: a new allocation may be up to a reset interval away
        self.idle_decisions = int(math.ceil(self.min_reset_s / self.round_s)) + 3
        self._rng = random.Random(seed)
        self._alloc: Allocation = {}
        self._job_time: dict[Unit, dict[str, float]] = {}
        self._type_time: dict[str, float] = {}
        self._deficit: dict[str, dict[Unit, float]] = {}
        self._last_reset = 0.0
        self._changed = False  # a job arrived or ended since the allocation was computed
        self._last_round: dict[Unit, str] = {}  # unit -> GPU type it ran on in the last round
        self._round_start = 0.0
        self._types: dict[str, list[int]] | None = None

    # ------------------------------------------------------------ subclass API
    def allocation(self, view: ClusterView, jobs: list[JobView], types: Mapping[str, float]) -> Allocation:
        """Time fractions ``unit -> type -> x`` for ``jobs`` (arrival order) on ``types`` (type -> GPUs)."""
        raise NotImplementedError

    def units(self, view: ClusterView, jobs: list[JobView]) -> list[Unit]:
        """The units to schedule among ``jobs`` (arrival order), in Gavel's order (ties keep it): each job."""
        return [j.id for j in jobs]

    def unit_runs(self, view: ClusterView, unit: tuple[str, str], gpu_type: str) -> bool:
        """Whether the pair ``unit`` can run sharing GPUs of ``gpu_type`` (its jobs each fit the type)."""
        return True

    def type_order(self, names: list[str]) -> list[str]:
        """The order GPU types are filled in this round: a seeded shuffle (Gavel's agnostic policies)."""
        order = list(names)
        self._rng.shuffle(order)
        return order

    def runnable(self, job: JobView, gpu_type: str, priority: float) -> bool:
        """Whether ``job`` may be selected on ``gpu_type`` with ``priority`` (Gavel's FIFO: only allocated jobs)."""
        return True

    # ------------------------------------------------------------------- hooks
    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        self._changed = True

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._changed = True

    # ---------------------------------------------------------------- mechanism
    def _account(self, view: ClusterView, now: float) -> None:
        """Add the last round's run time of each unit that ran in it (once per unit, Gavel's accounting:
        a pair counts the longer of its jobs' runs)."""
        for unit, w in self._last_round.items():
            ends = [view.jobs[jid].end_time for jid in members(unit)]
            end = now if any(e is None for e in ends) else max(e for e in ends if e is not None)
            ran = max(min(end, now) - self._round_start, 0.0)
            self._type_time[w] = self._type_time.get(w, 0.0) + ran
            if unit in self._job_time:
                self._job_time[unit][w] = self._job_time[unit].get(w, 0.0) + ran

    def _sync_units(self, units: list[Unit], types: list[str]) -> None:
        keep = set(units)
        for u in [u for u in self._job_time if u not in keep]:
            del self._job_time[u]
            for w in self._deficit:
                self._deficit[w].pop(u, None)
            self._alloc.pop(u, None)
        for u in units:
            if u not in self._job_time:  # a job starts with half a round, a pair with none (Gavel)
                self._job_time[u] = {w: (self.round_s / 2.0 if isinstance(u, str) else 0.0) for w in types}

    def _reset(self, view: ClusterView, active: list[JobView], types: dict[str, list[int]], now: float) -> None:
        elapsed = now - self._last_reset
        half = self.round_s / 2.0
        for w in types:
            self._type_time[w] = 0.0
            d = self._deficit.setdefault(w, {})
            for u, got in self._job_time.items():
                should = self._alloc.get(u, {}).get(w, 0.0) * elapsed
                d[u] = d.get(u, 0.0) + should - (got.get(w, 0.0) - half)
                got[w] = half
                self._type_time[w] += half
        self._last_reset = now
        self._alloc = self.allocation(view, active, self._gpus(view, types))
        self._changed = False

    def priorities(self, units: list[Unit], types: list[str]) -> dict[str, dict[Unit, float]]:
        """type -> unit -> priority (allocation over the fraction of the type's time received)."""
        out: dict[str, dict[Unit, float]] = {}
        for w in types:
            total = self._type_time.get(w, 0.0)
            pw: dict[Unit, float] = {}
            for u in units:
                x = self._alloc.get(u, {}).get(w, 0.0)
                got = self._job_time.get(u, {}).get(w, 0.0)
                frac = got / total if total > 0 else 0.0
                pw[u] = 0.0 if x <= 0 else (x / frac if frac > 0 else x * 1e9)
            out[w] = pw
        return out

    @staticmethod
    def _gpus(view: ClusterView, types: Mapping[str, list[int]]) -> dict[str, float]:
        """GPUs of each type (nodes, on a cluster without GPUs)."""
        g = view.gpu_col
        return {w: float(sum(view.capacity[i, g] for i in nodes)) if g is not None else float(len(nodes))
                for w, nodes in types.items()}

    @staticmethod
    def _gpus_of(view: ClusterView, job: JobView) -> float:
        """GPUs ``job``'s workers take (Gavel's scale factor for one-GPU workers)."""
        g = view.gpu_col
        return view.target_workers(job) * float(view.demand_vector(job)[g]) if g is not None else 0.0

    def _fits_type(self, view: ClusterView, job: JobView, nodes: list[int]) -> bool:
        w = view.demand_vector(job)
        return any(bool((view.capacity[i] >= w - 1e-9).all()) for i in nodes)

    def decide(self, view: ClusterView) -> Plan:
        now = view.now
        if self._types is None:
            self._types = gpu_types(view)
        types = self._types
        names = sorted(types)
        self._account(view, now)
        active = sorted([*view.running.values(), *view.paused.values(), *view.pending.values()], key=lambda j: j.seq)
        units = self.units(view, active)
        self._sync_units(units, names)
        if self._changed and (now - self._last_reset >= self.min_reset_s or self._last_reset == 0.0):
            self._reset(view, active, types, now)
        prio = self.priorities(units, names)
        order = self.type_order(names)
        left = self._gpus(view, types)
        chosen: dict[Unit, str] = {}
        taken: set[str] = set()  # jobs of the units taken this round (chosen or holding GPUs idle)
        for w in order:
            ranked = sorted(units, key=lambda u: (prio[w][u], self._deficit.get(w, {}).get(u, 0.0),
                                                  self._alloc.get(u, {}).get(w, 0.0)), reverse=True)
            for u in ranked:
                if left[w] <= 0:
                    break
                jobs = [view.jobs[jid] for jid in members(u)]
                n = self._gpus_of(view, jobs[0])
                if (any(j.id in taken for j in jobs) or n > left[w] + 1e-9
                        or not all(self.runnable(j, w, prio[w][u]) and self._fits_type(view, j, types[w]) for j in jobs)
                        or (not isinstance(u, str) and not self.unit_runs(view, u, w))):
                    continue
                left[w] -= n
                taken.update(j.id for j in jobs)
                if u in self._alloc:
                    chosen[u] = w
                # else: it arrived since the allocation: it holds its GPUs this round but gets none (Gavel)
        plan, placed = self._plan(view, chosen, types)
        self._last_round = {u: w for u, w in chosen.items() if u in placed}
        self._round_start = now
        return plan

    @staticmethod
    def _give_back(draft: Draft, view: ClusterView, job: JobView) -> None:
        """Return what running ``job`` holds to ``draft``: a time-sharing guest (no GPU share of its own)
        holds only its other resources."""
        alloc = view.allocation_of(job.id)
        if alloc is None:
            return
        g = view.gpu_col
        if g is None or GavelRounds._owns_gpus(view, job.id):
            draft.give_back(job)
            return
        rest = view.demand_vector(job).copy()
        rest[g] = 0.0
        for slot in alloc.slots:
            draft.free[slot.node] += rest

    @staticmethod
    def _sharers(view: ClusterView) -> dict[str, set[str]]:
        """Running job -> the other running jobs time-sharing one of its GPUs (absent: none)."""
        by_dev: dict[tuple[int, int], list[str]] = {}
        for jid in view.running:
            alloc = view.allocation_of(jid)
            for dev in (alloc.devices if alloc is not None else ()):
                by_dev.setdefault(dev, []).append(jid)
        out: dict[str, set[str]] = {}
        for jobs in by_dev.values():
            if len(jobs) > 1:
                for jid in jobs:
                    out.setdefault(jid, set()).update(o for o in jobs if o != jid)
        return out

    def _plan(self, view: ClusterView, chosen: dict[Unit, str],
              types: dict[str, list[int]]) -> tuple[Plan, set[Unit]]:
        """Actions that carry out ``chosen`` (unit -> GPU type), valid in the order the loop applies them:
        pauses, then moves to another type (a move waits until the job holding its target GPUs has moved
        away; a ring of moves is broken by pausing one member and resuming it after), then launches, then
        the pairs' second jobs onto their lead's GPUs; and the chosen units that run this round."""
        node_type = {i: w for w, nodes in types.items() for i in nodes}
        final, now_ = Draft(view), Draft(view)  # room after the round's changes / room as actions apply
        plan: Plan = []
        staying = {jid for u in chosen for jid in members(u)}
        # jobs sharing GPUs with a job that also runs this round (or a guest whose host may leave) are placed anew
        sharers = {jid: others for jid, others in self._sharers(view).items()
                   if others & staying or not self._owns_gpus(view, jid)}
        leads: dict[str, str] = {}  # job placed owning its GPUs -> type
        guests: dict[str, str] = {}  # second job of a pair -> its lead
        kept_pairs: set[str] = set()  # jobs of pairs that keep sharing their GPUs
        for u, w in chosen.items():
            m = members(u)
            if len(m) == 1:
                leads[m[0]] = w
                continue
            a, b = m
            if sharers.get(a) == {b} and sharers.get(b) == {a} and self._on_type(view, a, node_type) == w:
                kept_pairs.update(m)
                continue
            # the lead: a member running alone on the type keeps its GPUs, the other joins it
            solo = [x for x in m if x in view.running and x not in sharers and self._on_type(view, x, node_type) == w]
            lead = solo[0] if solo else a
            leads[lead] = w
            guests[b if lead == a else a] = lead
        movers: list[JobView] = []
        for j in view.running.values():
            if j.id in kept_pairs:
                continue
            w = leads.get(j.id)
            if w is None or j.id in sharers:  # not placed as a lead, or sharing GPUs outside its unit
                plan.append(Pause(j.id))
                self._give_back(final, view, j)
                self._give_back(now_, view, j)
            elif self._on_type(view, j.id, node_type) != w:
                movers.append(j)
                self._give_back(final, view, j)
        paused_now = {a.job for a in plan if isinstance(a, Pause)}
        target: dict[str, tuple[int, ...]] = {}
        for jid, w in leads.items():
            j = view.jobs[jid]
            if jid in view.running and jid not in paused_now and j not in movers:
                continue
            p = self._place(final, j, types[w])
            if p is not None:
                target[jid] = p
        moving_ids = {j.id for j in movers}
        for j in [j for j in movers if j.id not in target]:  # no room on its new type: it sits this round out
            plan.append(Pause(j.id))
            now_.give_back(j)
        movers = [j for j in movers if j.id in target]
        parked: list[JobView] = []
        while movers:
            ready = next((j for j in movers if self._fits(now_, j, target[j.id])), None)
            if ready is None:  # a ring: park one, it resumes once the others have moved
                ready = movers[0]
                plan.append(Pause(ready.id))
                now_.give_back(ready)
                parked.append(ready)
                movers.remove(ready)
                continue
            plan.append(Migrate(ready.id, target[ready.id]))
            now_.give_back(ready)
            now_.reserve(ready, target[ready.id])
            movers.remove(ready)
        for j in parked:
            plan.append(Resume(j.id, target[j.id]))
        for jid, p in target.items():
            if jid in view.running and jid not in paused_now:
                continue
            plan.append(Resume(jid, p) if jid in view.paused or jid in paused_now else Start(jid, p))
        running_leads = {jid for jid in leads if jid in view.running and jid not in paused_now
                         and jid not in moving_ids} | set(target)
        for guest, lead in guests.items():
            nodes = target.get(lead)
            if nodes is None and lead in running_leads:
                alloc = view.allocation_of(lead)
                nodes = tuple(s.node for s in alloc.slots) if alloc is not None else None
            if nodes is None or not self._reserve_rest(final, view, view.jobs[guest], nodes):
                continue  # its lead does not run (or no room for its other resources): it waits
            plan.append(Colocate((guest, lead), nodes, on_hosts=True))
        placed: set[Unit] = set()
        for u in chosen:
            m = members(u)
            if m[0] in kept_pairs or any(x in running_leads for x in m):
                placed.add(u)
        return plan, placed

    @staticmethod
    def _owns_gpus(view: ClusterView, jid: str) -> bool:
        """Whether running ``jid`` holds a share of its GPUs (a time-sharing guest holds none)."""
        alloc = view.allocation_of(jid)
        return alloc is not None and any(share > 0 for s in alloc.slots for _, share in s.devices)

    @staticmethod
    def _on_type(view: ClusterView, jid: str, node_type: dict[int, str]) -> str | None:
        """The GPU type running job ``jid``'s workers are on (None: not running, or on several)."""
        alloc = view.allocation_of(jid)
        here = {node_type.get(s.node) for s in alloc.slots} if alloc is not None else set()
        return next(iter(here)) if len(here) == 1 else None

    @staticmethod
    def _reserve_rest(draft: Draft, view: ClusterView, job: JobView, nodes: tuple[int, ...]) -> bool:
        """Take ``job``'s resources other than GPUs on ``nodes`` (one per worker) in ``draft``; False if short."""
        rest = view.demand_vector(job).copy()
        if view.gpu_col is not None:
            rest[view.gpu_col] = 0.0
        free = draft.free
        need: dict[int, int] = {}
        for n in nodes:
            need[n] = need.get(n, 0) + 1
        if any(((free[n] - rest * c) < -1e-9).any() for n, c in need.items()):
            return False
        for n, c in need.items():
            free[n] -= rest * c
        return True

    @staticmethod
    def _fits(draft: Draft, job: JobView, placement: tuple[int, ...]) -> bool:
        """Whether ``placement`` fits ``draft`` now (nothing reserved)."""
        saved = draft.save()
        ok = draft.reserve(job, placement)
        draft.restore(saved)
        return ok

    @staticmethod
    def _place(draft: Draft, job: JobView, nodes: list[int]) -> tuple[int, ...] | None:
        """On ``nodes`` only: one node if one holds the job (least room left), else most room first
        (jobs with parameter servers: anywhere, consolidated first)."""
        if job.spec.num_ps:
            return draft.place(job)
        n = draft.view.target_workers(job)
        fit = draft.tasks_fit(draft.view.demand_vector(job))
        mask = np.zeros(len(fit), dtype=bool)
        mask[nodes] = True
        fit = np.where(mask, fit, 0)
        whole = np.flatnonzero(fit >= n)
        if whole.size:
            workers = [int(whole[np.argmin(fit[whole])])] * n
        else:
            got = fill(fit, n, np.argsort(-fit, kind="stable"))
            if got is None:
                return None
            workers = got
        p = tuple(workers)
        return p if draft.reserve(job, p) else None
