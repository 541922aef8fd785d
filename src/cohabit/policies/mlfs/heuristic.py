"""MLF-H (``mlfs-h``): MLFS's ML-feature-based heuristic scheduler (Wang et al., CoNEXT'20, §3.3).

Each decision (every minute, "the job scheduler runs every minute", §4.1, and on arrivals and
completions):

1. **Overload handling** (§3.3.3): for every overloaded node (a shared resource or its measured
   link above ``h_r``), pick tasks to move out one at a time: the task closest (Euclidean) to the
   ideal virtual task (the maximum utilisation among the node's tasks on each overloaded
   resource, the minimum on the others, zero traffic with the tasks staying) until the node is
   no longer overloaded (a job moved in the last ``cooldown`` seconds, or not yet measured at
   its placement, stays where it is: the paper does not say how to avoid moving the same
   task back and forth; this is our guard); when GPUs there are time-shared past one job, only the lowest-priority
   ``p_s`` share of the tasks on them are candidates. The chosen tasks are moved *virtually*
   and placed first, like queued tasks. The paper sends tasks that find no host back to the
   queue; in cohabit a job runs whole, so that would stop every task of the job: by default
   such tasks stay where they are (``requeue=True``: the job is paused and queued, as the
   paper does). A move is made only when it lowers the job's busiest link's traffic.
2. **Queue** (§3.3.1-3.3.2): waiting tasks ordered by priority (Eq. 2-6, :mod:`.priority`) are
   placed one by one on the ideal virtual host (:meth:`.placement.Scratch.host_for`) until no
   node is underloaded or the queue is empty.

cohabit starts a job when all its tasks are placed (a model-parallel iteration needs every
partition), so the queue holds jobs ordered by their highest task priority (their parameter
server's or first partition's, by Eq. 3), and a job's tasks are placed in their own priority
order; a job that does not fit whole is skipped and the next one tried.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

import numpy as np

from ...engine.actions import Migrate, Pause, Plan
from ...engine.job import JobView
from ...engine.view import ClusterView
from ..base import BasePolicy, launch, waiting_jobs
from ..params import build
from ...spec.graph import cross_node_mb
from .placement import Scratch, task_peers, task_vectors
from .priority import PriorityParams, PriorityTable

__all__ = ["MLFH", "make", "iter_time_fallback"]


def iter_time_fallback(view: ClusterView, model: str) -> float:
    """Sample running time of one iteration for a job that has not reported yet: finished or
    running jobs of the same model, else any running job's, else one second."""
    hist = view.history.mean_iter_time(model)
    if hist:
        return float(hist)
    same = [j.iter_time for j in view.running.values() if j.iter_time and j.spec.model == model]
    if same:
        return float(np.mean(same))
    anyr = [j.iter_time for j in view.running.values() if j.iter_time]
    return float(np.median(anyr)) if anyr else 1.0


class MLFH(BasePolicy):
    """MLF-H with the paper's defaults (α=0.3, γ=0.8, γ_d=γ_r=0.3, γ_w=0.35, h_r=90%, p_s=10%)."""

    tick_interval: float | None = 60.0
    report_interval: float = 60.0

    def __init__(self, alpha: float = 0.3, gamma: float = 0.8, gamma_d: float = 0.3, gamma_r: float = 0.3,
                 gamma_w: float = 0.35, h_r: float = 0.9, p_s: float = 0.1, migrate: bool = True,
                 use_urgency: bool = True, use_deadline: bool = True, bandwidth: bool = True,
                 interval: float = 60.0, cooldown: float = 600.0, requeue: bool = False) -> None:
        self.params = PriorityParams(alpha, gamma, gamma_d, gamma_r, gamma_w, use_urgency, use_deadline)
        if not 0.0 < h_r <= 1.0:
            raise ValueError(f"h_r must be in (0, 1], got {h_r!r}")
        if not 0.0 < p_s <= 1.0:
            raise ValueError(f"p_s must be in (0, 1], got {p_s!r}")
        if not (math.isfinite(interval) and interval >= 0.1):
            raise ValueError(f"interval must be >= 0.1 s, got {interval!r}")
        if not (math.isfinite(cooldown) and cooldown >= 0):
            raise ValueError(f"cooldown must be >= 0 s, got {cooldown!r}")
        self.h_r, self.p_s, self.migrate, self.bandwidth = h_r, p_s, migrate, bandwidth
        self.cooldown = cooldown
        self._moved_at: dict[str, float] = {}
        self._table = PriorityTable(self.params)  # Eq. 2-6 of every known job, vectorised
        self.requeue = requeue
        self._gpus: dict[str, float] = {}
        self._traffic: dict = {}  # per running job: (placement, cross-node MB per node)
        self._last: tuple[tuple[int, ...], float] = ((), -math.inf)
        self.round_ms: list[float] = []  # CPU-side wall time of each full decision round
        self.tick_interval = interval
        self.report_interval = interval
        self.name = "mlfs-h"

    # Priorities -------------------------------------------------------------
    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        self._table.add(job)  # its static structure, once

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._table.remove(job.id)
        self._gpus.pop(job.id, None)
        self._traffic.pop(job.id, None)
        self._moved_at.pop(job.id, None)

    def _fallbacks(self, view: ClusterView, jobs: Iterable[JobView]) -> dict[str, float]:
        return {m: iter_time_fallback(view, m) for m in {j.spec.model for j in jobs}}

    def priorities_of(self, view: ClusterView, jobs: list[JobView]) -> tuple[np.ndarray, list[np.ndarray]]:
        """(highest task priority, task priorities) of each of ``jobs`` (Eq. 2-6, one pass)."""
        return self._table.compute(jobs, view.now, self._fallbacks(view, jobs))

    def priorities(self, view: ClusterView, job: JobView) -> np.ndarray:
        return self.priorities_of(view, [job])[1][0]

    def queue(self, view: ClusterView, jobs: Iterable[JobView]) -> list[tuple[float, JobView, np.ndarray]]:
        """Jobs by descending highest task priority (ties: arrival order)."""
        jobs = list(jobs)
        keys, prs = self.priorities_of(view, jobs)
        seq = np.fromiter((j.seq for j in jobs), dtype=np.int64, count=len(jobs))
        order = np.lexsort((seq, -keys))
        return [(float(keys[i]), jobs[i], prs[i]) for i in order.tolist()]

    # Decision ---------------------------------------------------------------
    def due(self, view: ClusterView) -> bool:
        """A full round is due: a job arrived, started, ended or was paused since the last
        round, or a scheduling interval passed ("the job scheduler runs every minute")."""
        sig = (len(view.jobs), len(view.running), len(view.pending), len(view.paused), len(view.history))
        last_sig, last_t = self._last
        if sig == last_sig and view.now - last_t < self.tick_interval - 1e-9:  # type: ignore[operator]
            return False
        self._last = (sig, view.now)
        return True

    def decide(self, view: ClusterView) -> Plan:
        if not self.due(view):
            return []
        t0 = time.perf_counter()
        plan = self.round(view)
        self.round_ms.append((time.perf_counter() - t0) * 1e3)
        return plan

    def round(self, view: ClusterView) -> Plan:
        """One full MLF-H round (overload handling, then the queue)."""
        scratch = Scratch(view, self.h_r, self._traffic)
        if not self.bandwidth:
            scratch.net_util[:] = 0.0
        plan: Plan = []
        moved: set[str] = set()
        if self.migrate and view.running:
            plan += self._handle_overload(view, scratch, moved)
        waiting = waiting_jobs(view)
        if waiting and self._room(scratch):
            plan += self._place_queue(view, scratch, self.queue(view, waiting))
        return plan

    @staticmethod
    def _room(scratch: Scratch) -> bool:
        """Any node not overloaded with room for one more task (a free GPU where GPUs exist)."""
        under = ~scratch.overloaded()
        if scratch.gpu is not None:
            return bool((under & (scratch.dev.max(axis=1) > 1e-9)).any())
        return bool(under.any())

    def _place_queue(self, view: ClusterView, scratch: Scratch,
                     queue: list[tuple[float, JobView, np.ndarray]]) -> Plan:
        """Place the queue's jobs in order, each whole or not at all.

        No-host memo: a first task that finds no host fails for a demand alone (nothing of its
        job is placed yet, so it has no peers to be near), and the room only shrinks during the
        round, so a later job whose first task asks at least as much of every resource is
        skipped without a search; so is a job with more tasks than :meth:`.Scratch.max_tasks`
        says the cluster could take (an upper bound)."""
        plan: Plan = []
        free_gpus = float(scratch.free[:, scratch.gpu].sum()) if scratch.gpu is not None else math.inf
        no_host: list[np.ndarray] = []
        bounds: dict[bytes, int] = {}  # max_tasks per smallest-task demand, until the next placement
        for _, job, pr in queue:
            need = self._gpus.get(job.id)
            if need is None:
                need = self._gpus[job.id] = job.spec.num_gpus
            if need > free_gpus + 1e-9:
                continue
            order = [int(t) for t in np.argsort(-pr, kind="stable")]
            vecs = task_vectors(view, job)
            first = vecs[order[0]]
            if any((first >= f - 1e-12).all() for f in no_host):
                continue
            d_min = np.min(vecs, axis=0)
            key = d_min.tobytes()
            bound = bounds.get(key)
            if bound is None:
                bound = bounds[key] = scratch.max_tasks(d_min)
            if bound < len(vecs):  # cannot fit whole
                continue
            where = scratch.place_tasks(job, order, bandwidth=self.bandwidth)
            if where is None:
                if scratch.failed_at == 0:
                    no_host.append(first)
                continue
            placement = tuple(where[t] for t in range(len(pr)))
            plan.append(launch(view, job, placement))
            bounds.clear()
            free_gpus -= need
            if not self._room(scratch):
                break
        return plan

    # Overload handling (§3.3.3) -----------------------------------------------
    def _handle_overload(self, view: ClusterView, scratch: Scratch, moved: set[str]) -> Plan:
        over = np.flatnonzero(scratch.overloaded())
        if over.size == 0:
            return []
        # tasks per node: (job, task index)
        on_node: dict[int, list[tuple[JobView, int]]] = {}
        for job in view.running.values():
            if view.now - self._moved_at.get(job.id, -math.inf) < self.cooldown or not job.iter_time:
                continue  # just moved (no thrashing) or not measured yet at its placement
            for t, node in enumerate(job.placement):
                on_node.setdefault(node, []).append((job, t))
        chosen: dict[str, set[int]] = {}
        there = list({job.id: job for node in over for job, _ in on_node.get(int(node), [])}.values())
        prs = self.priorities_of(view, there)[1]  # one pass for every job on an overloaded node
        prio: dict[str, np.ndarray] = {job.id: prs[i] for i, job in enumerate(there)}
        for node in over:
            self._select(view, scratch, int(node), on_node.get(int(node), []), chosen, prio)
        plan: Plan = []
        for jid in sorted(chosen, key=lambda j: -float(prio[j].max())):
            job = view.running[jid]
            tasks = chosen[jid]
            vecs = task_vectors(view, job)
            fixed = {t: n for t, n in enumerate(job.placement) if t not in tasks}
            order = [t for t in np.argsort(-prio[jid], kind="stable").tolist() if t in tasks]
            where = scratch.place_tasks(job, order, fixed=fixed, exclude={t: job.placement[t] for t in tasks},
                                        bandwidth=self.bandwidth)
            moved.add(jid)
            self._moved_at[jid] = view.now
            if where is not None:
                new = tuple(where[t] for t in range(len(vecs)))
                if self._helps(job, new):
                    plan.append(Migrate(jid, new))
                else:  # the move would not cut its traffic: undo it, the job stays
                    for t in tasks:
                        scratch.give(new[t], vecs[t])
                    for t in tasks:
                        scratch.take(job.placement[t], vecs[t])
            elif self.requeue:  # nowhere to go: the job goes back to the queue (§3.3.3)
                for t, n in fixed.items():
                    scratch.give(n, vecs[t])
                plan.append(Pause(jid, "mlfs: moved out of an overloaded node, no host fits"))
            else:  # nowhere to go: the tasks stay (a queued task would stop its whole job here)
                for t in tasks:
                    scratch.take(job.placement[t], vecs[t])
        return plan

    @staticmethod
    def _helps(job: JobView, new: tuple[int, ...]) -> bool:
        """A move is worth its checkpoint and restore when it lowers the job's busiest link's
        traffic, or (jobs without a graph: no volumes known) always."""
        g = job.spec.graph
        if g is None:
            return True
        old_mb = cross_node_mb(g, job.spec.architecture, job.spec.num_ps, tuple(job.placement))
        new_mb = cross_node_mb(g, job.spec.architecture, job.spec.num_ps, new)
        return max(new_mb.values(), default=0.0) < max(old_mb.values(), default=0.0) - 1e-9

    def _select(self, view: ClusterView, scratch: Scratch, node: int, tasks: list[tuple[JobView, int]],
                chosen: dict[str, set[int]], prio: dict[str, np.ndarray]) -> None:
        """Move tasks out of ``node`` (virtually) until it is not overloaded (RIAL-style choice)."""
        cap = scratch.safe_cap[node]
        cands: list[tuple[JobView, int, np.ndarray, float, float]] = []  # job, task, util vec, traffic, prio
        for job, t in tasks:
            if job.id not in prio:
                prio[job.id] = self.priorities(view, job)
            vecs = task_vectors(view, job)
            u = vecs[t] / cap
            peers = task_peers(job, len(vecs))[t]
            local = sum(mb for p, mb in peers if p < len(job.placement) and job.placement[p] == node)
            remote = sum(mb for p, mb in peers if p < len(job.placement) and job.placement[p] != node)
            if scratch.net is not None and job.iter_time and scratch.cap[node, scratch.net] > 0:
                u = u.copy()
                u[scratch.net] = remote * 8e-3 / job.iter_time / scratch.cap[node, scratch.net]
            cands.append((job, t, u, local, float(prio[job.id][t])))
        shared = [c for c in cands if view.sharers(c[0].id)]
        if shared:  # GPUs time-shared past one job: only the lowest-priority p_s share may move
            shared.sort(key=lambda c: c[4])
            cands = shared[: max(1, int(math.ceil(self.p_s * len(shared))))]
        while cands and scratch.overloaded()[node]:
            u_node = scratch.util()[node]
            hot = u_node > self.h_r
            hot[~scratch.shared] = False
            if scratch.net is not None:
                hot[scratch.net] = scratch.net_util[node] > self.h_r
            mat = np.array([c[2] for c in cands])
            ideal = np.where(hot, mat.max(axis=0), mat.min(axis=0))
            local = np.array([c[3] for c in cands])
            top = local.max()
            dist = ((mat - ideal) ** 2).sum(axis=1) + ((local / top) ** 2 if top > 0 else 0.0)
            i = int(np.argmin(dist))
            job, t, u, _, _ = cands.pop(i)
            chosen.setdefault(job.id, set()).add(t)
            alloc = view.allocation_of(job.id)
            devs = alloc.slots[t].devices if alloc is not None and t < len(alloc.slots) else ()
            scratch.give(node, task_vectors(view, job)[t], devs)
            if scratch.net is not None:
                scratch.net_util[node] = max(scratch.net_util[node] - float(u[scratch.net]), 0.0)
                self._forget_traffic(scratch, job, t, node)

    @staticmethod
    def _forget_traffic(scratch: Scratch, job: JobView, t: int, node: int) -> None:
        """A task moved out virtually no longer exchanges data with its peers' nodes from here:
        take its traffic off the peers' links too (so a peer's node is not emptied as well)."""
        if not job.iter_time or scratch.net is None:
            return
        for p, mb in task_peers(job, len(job.placement))[t]:
            if p < len(job.placement) and job.placement[p] != node:
                other = job.placement[p]
                link = scratch.cap[other, scratch.net]
                if link > 0:
                    scratch.net_util[other] = max(scratch.net_util[other] - mb * 8e-3 / job.iter_time / link, 0.0)


def make(oracle: bool = False, **params: object) -> MLFH:
    return build(MLFH, params, policy="mlfs-h")
