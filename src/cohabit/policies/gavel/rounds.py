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
  jobs in priority order; a job is taken on the first type where it has a positive priority, can
  run (a worker fits that type's nodes) and fits the GPUs still free of that type.
* **Placement.** A job that keeps its type keeps its GPUs; the others are placed on nodes of
  their type, on one node when one holds them, else over the nodes with most room first. Jobs not
  selected are paused (resumed later from their checkpoint); a job moving type migrates.

Subclasses supply :meth:`allocation`. What the mechanism reads is what a real scheduler knows:
arrivals and ends, its own launches and the times between rounds, the jobs' declared demands and
weights, and the cluster's nodes with their ``gpu_model`` labels.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

import numpy as np

from ...engine.actions import Migrate, Pause, Plan, Resume, Start
from ...engine.job import JobView
from ...engine.view import ClusterView
from ..base import BasePolicy
from ..placement import Draft, fill

#: Gavel's default round length (``--time_per_iteration``), seconds.
ROUND_S = 360.0
#: Gavel's ``minimum_time_between_allocation_resets``, seconds.
MIN_RESET_S = 1920.0

Allocation = dict[str, dict[str, float]]  # job id -> GPU type -> fraction of time


def gpu_types(view: ClusterView) -> dict[str, list[int]]:
    """GPU type (node label ``gpu_model``, lower case; "" when unlabelled) -> indices of its GPU nodes."""
    out: dict[str, list[int]] = {}
    g = view.resource_index("gpu")
    for i, node in enumerate(view.cluster.nodes):
        if g is not None and view.capacity[i, g] <= 0:
            continue
        out.setdefault(str(node.labels.get("gpu_model", "")).lower(), []).append(i)
    return out


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
        self._job_time: dict[str, dict[str, float]] = {}
        self._type_time: dict[str, float] = {}
        self._deficit: dict[str, dict[str, float]] = {}
        self._last_reset = 0.0
        self._changed = False  # a job arrived or ended since the allocation was computed
        self._last_round: dict[str, str] = {}  # job id -> GPU type it ran on in the last round
        self._round_start = 0.0
        self._types: dict[str, list[int]] | None = None

    # ------------------------------------------------------------ subclass API
    def allocation(self, view: ClusterView, jobs: list[JobView], types: Mapping[str, float]) -> Allocation:
        """Time fractions ``job id -> type -> x`` for ``jobs`` (arrival order) on ``types`` (type -> GPUs)."""
        raise NotImplementedError

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
        """Add the last round's run time of each job that ran in it (once per job, Gavel's accounting)."""
        for jid, w in self._last_round.items():
            job = view.jobs[jid]
            end = job.end_time if job.end_time is not None else now
            ran = max(min(end, now) - self._round_start, 0.0)
            self._type_time[w] = self._type_time.get(w, 0.0) + ran
            if jid in self._job_time:
                self._job_time[jid][w] = self._job_time[jid].get(w, 0.0) + ran

    def _sync_jobs(self, active: list[JobView], types: list[str]) -> None:
        ids = {j.id for j in active}
        for jid in [j for j in self._job_time if j not in ids]:
            del self._job_time[jid]
            for w in self._deficit:
                self._deficit[w].pop(jid, None)
            self._alloc.pop(jid, None)
        for j in active:
            if j.id not in self._job_time:
                self._job_time[j.id] = {w: self.round_s / 2.0 for w in types}

    def _reset(self, view: ClusterView, active: list[JobView], types: dict[str, list[int]], now: float) -> None:
        elapsed = now - self._last_reset
        half = self.round_s / 2.0
        for w in types:
            self._type_time[w] = 0.0
            d = self._deficit.setdefault(w, {})
            for jid, got in self._job_time.items():
                should = self._alloc.get(jid, {}).get(w, 0.0) * elapsed
                d[jid] = d.get(jid, 0.0) + should - (got.get(w, 0.0) - half)
                got[w] = half
                self._type_time[w] += half
        self._last_reset = now
        self._alloc = self.allocation(view, active, self._gpus(view, types))
        self._changed = False

    def priorities(self, active: list[JobView], types: list[str]) -> dict[str, dict[str, float]]:
        """type -> job id -> priority (allocation over the fraction of the type's time received)."""
        out: dict[str, dict[str, float]] = {}
        for w in types:
            total = self._type_time.get(w, 0.0)
            pw: dict[str, float] = {}
            for j in active:
                x = self._alloc.get(j.id, {}).get(w, 0.0)
                got = self._job_time.get(j.id, {}).get(w, 0.0)
                frac = got / total if total > 0 else 0.0
                pw[j.id] = 0.0 if x <= 0 else (x / frac if frac > 0 else x * 1e9)
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
        self._sync_jobs(active, names)
        if self._changed and (now - self._last_reset >= self.min_reset_s or self._last_reset == 0.0):
            self._reset(view, active, types, now)
        prio = self.priorities(active, names)
        order = list(names)
        self._rng.shuffle(order)
        left = self._gpus(view, types)
        chosen: dict[str, str] = {}
        for w in order:
            ranked = sorted(active, key=lambda j: (prio[w][j.id], self._deficit.get(w, {}).get(j.id, 0.0),
                                                   self._alloc.get(j.id, {}).get(w, 0.0)), reverse=True)
            for j in ranked:
                if left[w] <= 0:
                    break
                n = self._gpus_of(view, j)
                if (j.id in chosen or n > left[w] + 1e-9 or not self.runnable(j, w, prio[w][j.id])
                        or not self._fits_type(view, j, types[w])):
                    continue
                chosen[j.id] = w
                left[w] -= n
        plan = self._plan(view, chosen, types)
        self._last_round = {jid: w for jid, w in chosen.items()}
        self._round_start = now
        return plan

    def _plan(self, view: ClusterView, chosen: dict[str, str], types: dict[str, list[int]]) -> Plan:
        """Actions that carry out ``chosen`` (job id -> GPU type), valid in the order the loop applies them:
        pauses, then moves to another type (a move waits until the job holding its target GPUs has moved
        away; a ring of moves is broken by pausing one member and resuming it after), then launches."""
        node_type = {i: w for w, nodes in types.items() for i in nodes}
        final, now_ = Draft(view), Draft(view)  # room after the round's changes / room as actions apply
        plan: Plan = []
        movers: list[JobView] = []
        for j in view.running.values():
            alloc = view.allocation_of(j.id)
            here = {node_type.get(s.node) for s in alloc.slots} if alloc is not None else set()
            if j.id not in chosen:
                plan.append(Pause(j.id))
                final.give_back(j)
                now_.give_back(j)
            elif here != {chosen[j.id]}:
                movers.append(j)
                final.give_back(j)
        target: dict[str, tuple[int, ...]] = {}
        for jid, w in chosen.items():
            j = view.jobs[jid]
            if jid in view.running and j not in movers:
                continue
            p = self._place(final, j, types[w])
            if p is not None:
                target[jid] = p
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
            if jid in view.running:
                continue
            plan.append(Resume(jid, p) if jid in view.paused else Start(jid, p))
        return plan

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
