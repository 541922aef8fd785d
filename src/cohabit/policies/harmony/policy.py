"""The Harmony policy (Lee et al.): profile, group, allocate machines, regroup.

Decisions, in the order :meth:`Harmony.decide` takes them:

1. **Bootstrap / full scheduling** (Algorithm 1 over every profiled job and every machine):
   once the jobs being profiled have all reported, and whenever nothing runs while profiled
   jobs wait. Before the first one, pending jobs are profiled in small groups over the free
   machines (``profile_group_jobs`` jobs each).
2. **Completion** (§IV-B4 (2)): the finished job's slot goes to a waiting job within 5% of it
   (iteration time and comp/comm ratio at the group's DoP), else to a bunch of waiting jobs
   with equivalent sums, else the scheduler regroups incrementally — the finished job's group
   plus the smallest groups, one more each time — keeping the decision with the fewest moved
   jobs unless a larger one gains over 5%, and nothing if the gain is under 5%.
3. **Arrival** (§IV-B4 (1)): a new job is profiled in the group with the fewest machines (or
   one already profiling a new job). Once profiled, it waits if other profiled jobs wait;
   otherwise it joins the group that maximises U, or waits if no group improves U.
4. Free machines with profiled jobs waiting: an incremental regroup over the free machines
   and the smallest groups, under the same 5% rules.

The performance model is :mod:`cohabit.models.harmony_perf` (Eq. 1-4); groups run as
``Colocate(mode="pipelined")``; moves happen at iteration boundaries (the engine
checkpoints a moving job and restores it in its new group). Memory: a group gets at least
the machines whose memory holds its jobs (:func:`~cohabit.models.harmony_perf.memory_floor`,
our addition), with spill/reload when ``spill`` (the runtime's alpha) or without.

``stats`` counts decisions and moves; ``log`` holds the model's prediction errors. Jobs that
ask for GPUs are left alone (pending): Harmony's groups hold CPU machines.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...engine.actions import Plan
from ...engine.job import JobView
from ...engine.view import ClusterView
from ...models.harmony_perf import PredictionLog, ProfileBook, cluster_eval, group_time, memory_floor, score
from ..base import BasePolicy
from ..params import build
from .algorithm import Grouping, JobStat, Params, exhaustive, schedule
from .plan import current_groups, emit
from .regroup import Option, assign_nodes, choose, similar_bunch, similar_job

MODE = "pipelined"
ORDERS = ("queue", "srpt", "lrpt")


@dataclass
class _Group:
    nodes: tuple[int, ...]
    jobs: list[str]


@dataclass
class Stats:
    full_schedules: int = 0
    replaced_similar: int = 0
    replaced_bunch: int = 0
    regroups: int = 0
    regroups_skipped: int = 0
    arrivals_placed: int = 0
    arrivals_waiting: int = 0
    profiled: int = 0
    schedule_calls: int = 0
    schedule_ms: list[float] = field(default_factory=list)


class Harmony(BasePolicy):
    """Harmony's scheduler (see module doc)."""

    def __init__(self, *, spill: bool = True, reserved_gb: float = 4.0, tolerance: float = 0.05,
                 profile_group_jobs: int = 4, max_scope: int = 4, search: str = "alg1",
                 params: Params | None = None, order: str = "queue", name: str = "harmony") -> None:
        if search not in ("alg1", "exhaustive"):
            raise ValueError(f"search must be 'alg1' or 'exhaustive', got {search!r}")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
        self.order = order
        self.name = name
        self.spill = spill
        self.reserved_gb = reserved_gb
        self.tol = tolerance
        self.profile_group_jobs = profile_group_jobs
        self.max_scope = max_scope
        self.search = search
        self.params = params
        self.book = ProfileBook()
        self.log = PredictionLog()
        self.stats = Stats()
        self._reports: dict[str, tuple[float, float]] = {}
        self._group_of: dict[str, tuple[int, ...]] = {}
        self._finished: list[tuple[str, tuple[int, ...] | None]] = []
        self._new: list[str] = []  # profiled since the last decision (arrivals)
        self._scheduled_once = False
        self._usable: float | None = None

    # ------------------------------------------------------------------ hooks
    def on_progress(self, job: JobView, view: ClusterView) -> None:
        if job.comp_time is None or job.comm_time is None or job.iter_time is None or not job.n_workers:
            return
        first = job.id not in self.book
        self.book.observe(job.id, job.n_workers, job.comp_time, job.comm_time)
        if first:
            self._new.append(job.id)
            self.stats.profiled += 1
        self._reports[job.id] = (view.now, job.iter_time)
        key = self._group_of.get(job.id)
        if key is not None:
            self.log.measured(key, self._reports)

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._finished.append((job.id, self._group_of.pop(job.id, None)))
        self._reports.pop(job.id, None)

    # --------------------------------------------------------------- helpers
    def _stat(self, job: JobView) -> JobStat:
        p = self.book.get(job.id)
        assert p is not None
        w = job.spec.workload or {}
        inp, mod = float(w.get("input_gb", 0.0)), float(w.get("model_gb", 0.0))
        if self.spill:
            return JobStat(job.id, p.c1, p.net, mem_gb=mod, mem_peak_gb=mod)
        return JobStat(job.id, p.c1, p.net, mem_gb=inp + 2.0 * mod, mem_peak_gb=0.0)

    def _floor(self, view: ClusterView, jobs: Sequence[str]) -> int:
        ws = [view.jobs[j].spec.workload or {} for j in jobs]
        return memory_floor([float(w.get("input_gb", 0.0)) for w in ws], [float(w.get("model_gb", 0.0)) for w in ws],
                            self._usable_gb(view), spill=self.spill)

    def _usable_gb(self, view: ClusterView) -> float:
        if self._usable is None:
            i = view.resource_index("mem_gb")
            mem = float(view.capacity[:, i].min()) if i is not None else math.inf
            self._usable = max(mem - self.reserved_gb, 1e-9)
        return self._usable

    def _ranked(self, view: ClusterView, jobs: Sequence[str]) -> list[str]:
        """Waiting jobs in the order Algorithm 1 considers them and repairs take them.

        ``queue`` (default; the paper names no order, we read it as the queue): paused and
        pending jobs by submission. ``srpt`` (our option, not the paper's): shortest remaining
        processing time first, estimated from what is observable only: the declared iterations
        (``spec.iterations``) minus those reported, times the profiled iteration time (Eq. 2) at
        the mean DoP of the current groups; ``lrpt`` (our option, for measuring the long-job
        tail): longest remaining first, same estimate. Jobs without declared iterations come last,
        in queue order."""
        by_seq = sorted(jobs, key=lambda j: view.jobs[j].seq)
        if self.order == "queue":
            return by_seq
        cur = current_groups(view, MODE)
        m = view.capacity.shape[0] / max(1, len(cur))

        def remaining(jid: str) -> float:
            job, prof = view.jobs[jid], self.book.get(jid)
            if job.spec.iterations is None or prof is None:
                return math.inf
            return max(job.spec.iterations - job.iterations_done(view.now), 0.0) * prof.t_itr(m)

        sign = 1.0 if self.order == "srpt" else -1.0
        rem = {j: remaining(j) for j in by_seq}
        # stable: ties stay in queue order; undeclared (inf) last either way
        return sorted(by_seq, key=lambda j: (math.isinf(rem[j]), sign * rem[j] if not math.isinf(rem[j]) else 0.0))

    def _schedule(self, stats: list[JobStat], machines: int) -> Grouping:
        t0 = time.perf_counter()
        p = self.params or Params(usable_gb=self._usable if self._usable is not None else 28.0)
        g = exhaustive(stats, machines, p.usable_gb) if self.search == "exhaustive" else schedule(stats, machines, p)
        self.stats.schedule_calls += 1
        self.stats.schedule_ms.append((time.perf_counter() - t0) * 1e3)
        return g

    def _score(self, groups: Sequence[_Group], stats: dict[str, JobStat], total_machines: int) -> float:
        """Eq. 4 over ``groups``, idle machines counted as unused (denominator: all machines)."""
        gs = [g for g in groups if g.jobs and all(j in stats for j in g.jobs)]
        if not gs or total_machines <= 0:
            return 0.0
        c1 = np.array([stats[j].c1 for g in gs for j in g.jobs])
        net = np.array([stats[j].net for g in gs for j in g.jobs])
        gid = np.repeat(np.arange(len(gs)), [len(g.jobs) for g in gs])
        m = np.array([len(g.nodes) for g in gs], dtype=np.float64)
        uc, un = cluster_eval(c1, net, gid, m)
        used = float(m.sum()) / total_machines
        return score(uc * used, un * used)

    # ------------------------------------------------------------------ decide
    def decide(self, view: ClusterView) -> Plan:
        self._usable_gb(view)
        cur = current_groups(view, MODE)
        self._group_of = {j: k for k, js in cur.items() for j in js}
        groups = [_Group(k, list(js)) for k, js in cur.items()]
        n_nodes = view.capacity.shape[0]
        held = {n for g in groups for n in g.nodes}
        busy = {n for j in view.running for n in view.running[j].placement}
        free = [n for n in range(n_nodes) if n not in held and n not in busy]
        waiting = [j for j in sorted(view.paused.values(), key=lambda j: j.seq) if j.id in self.book]
        waiting += [j for j in view.pending.values() if j.id in self.book]
        if self.order != "queue":
            waiting = [view.jobs[j] for j in self._ranked(view, [j.id for j in waiting])]
        profiling = [j for j in view.running if j not in self.book]
        unprofiled = sorted((j for j in list(view.pending.values()) + list(view.paused.values())
                             if j.id not in self.book and cpu_job(view, j)), key=lambda j: j.seq)
        stats = {j.id: self._stat(j) for j in list(view.running.values()) + waiting if j.id in self.book}
        before = [(_Group(g.nodes, list(g.jobs))) for g in groups]

        finished, self._finished = self._finished, []
        new, self._new = [j for j in self._new if j in view.running], []
        if (not self._scheduled_once or not view.running) and stats and not profiling:
            groups = self._full(view, groups, free, waiting, stats)
            self._scheduled_once = True
            free = self._free_after(groups, n_nodes, busy_outside=busy - held)
            waiting_ids = {j.id for j in waiting} - {j for g in groups for j in g.jobs}
        else:
            waiting_ids = {j.id for j in waiting}
            if self._scheduled_once:
                for jid, key in finished:
                    groups, free = self._repair(view, groups, free, waiting_ids, stats, key, jid)
                for jid in new:
                    groups = self._arrived(view, groups, jid, waiting_ids, stats)
                if free and waiting_ids:
                    groups, free = self._regroup(view, groups, free, waiting_ids, stats, None)
        groups, free = self._profile(view, groups, free, unprofiled)
        target = [(g.jobs, g.nodes) for g in groups if g.jobs]
        plan = emit(view, target, MODE)
        self._predict(view, before, groups, stats)
        return plan

    def _free_after(self, groups: Sequence[_Group], n_nodes: int, busy_outside: set[int]) -> list[int]:
        held = {n for g in groups for n in g.nodes}
        return [n for n in range(n_nodes) if n not in held and n not in busy_outside]

    # ------------------------------------------------------------ full schedule
    def _full(self, view: ClusterView, groups: list[_Group], free: list[int], waiting: list[JobView],
              stats: dict[str, JobStat]) -> list[_Group]:
        self.stats.full_schedules += 1
        running = sorted((view.running[j] for g in groups for j in g.jobs if j in stats), key=lambda j: j.seq)
        order = [stats[j.id] for j in running] + [stats[j.id] for j in waiting]
        pool = sorted({n for g in groups for n in g.nodes} | set(free))
        got = self._schedule(order, len(pool))
        nodes = assign_nodes(list(zip(got.groups, got.machines)), [(g.nodes, g.jobs) for g in groups], pool)
        if nodes is None:
            return groups
        new = [_Group(ns, list(js)) for js, ns in zip(got.groups, nodes)]
        self._carry_profiling(groups, new, stats)
        return new

    @staticmethod
    def _carry_profiling(old: Sequence[_Group], new: list[_Group], stats: dict[str, JobStat]) -> None:
        """Jobs still being profiled (no stats yet) in regrouped groups keep running: in the new
        group on the same machines if there is one, else in the new group with fewest machines."""
        if not new:
            return
        for g in old:
            for j in g.jobs:
                if j in stats:
                    continue
                home = next((x for x in new if x.nodes == g.nodes), None)
                if home is None:
                    home = min(new, key=lambda x: (len(x.nodes), x.nodes))
                home.jobs.append(j)

    # --------------------------------------------------------------- completion
    def _repair(self, view: ClusterView, groups: list[_Group], free: list[int], waiting: set[str],
                stats: dict[str, JobStat], key: tuple[int, ...] | None,
                jid: str) -> tuple[list[_Group], list[int]]:
        if key is None:
            return groups, free
        g = next((x for x in groups if x.nodes == key), None)
        m = len(key)
        # the finished job's profile (kept in the book) describes the slot to fill
        fin = self._stat(view.jobs[jid]) if jid in self.book else None
        cands = [stats[j] for j in self._ranked(view, list(waiting)) if j in stats]
        if fin is not None and cands:
            members = g.jobs if g is not None else []
            w = similar_job(fin, cands, m, self.tol)
            bunch = [w] if w is not None else similar_bunch(fin, cands, m, self.tol)
            if bunch and self._floor(view, members + [b.id for b in bunch]) <= m:
                if g is None:
                    g = _Group(key, [])
                    groups.append(g)
                    free = [n for n in free if n not in key]
                g.jobs.extend(b.id for b in bunch)
                for b in bunch:
                    waiting.discard(b.id)
                if w is not None:
                    self.stats.replaced_similar += 1
                else:
                    self.stats.replaced_bunch += 1
                return groups, free
        return self._regroup(view, groups, free, waiting, stats, key)

    def _regroup(self, view: ClusterView, groups: list[_Group], free: list[int], waiting: set[str],
                 stats: dict[str, JobStat], key: tuple[int, ...] | None) -> tuple[list[_Group], list[int]]:
        """Incremental regrouping: scopes of growing size, fewest moves unless >5% better, skip under 5%."""
        total = view.capacity.shape[0]
        now_score = self._score(groups, stats, total)
        base = [g for g in groups if g.nodes == key]
        others = sorted((g for g in groups if g.nodes != key), key=lambda g: (len(g.jobs), len(g.nodes), g.nodes))
        wait = [stats[j] for j in self._ranked(view, list(waiting)) if j in stats]
        options: list[Option] = []
        for extra in range(0, min(self.max_scope, len(others)) + 1):
            scope = base + others[:extra]
            if not scope and not free:
                continue
            if extra == 0 and not base and extra < len(others) and not free:
                continue
            pool = sorted({n for g in scope for n in g.nodes} | set(free))
            if not pool:
                continue
            running = sorted((view.jobs[j] for g in scope for j in g.jobs if j in stats), key=lambda j: j.seq)
            order = [stats[j.id] for j in running] + wait
            if not order:
                continue
            got = self._schedule(order, len(pool))
            nodes = assign_nodes(list(zip(got.groups, got.machines)), [(g.nodes, g.jobs) for g in scope], pool)
            if nodes is None:
                continue
            new = [_Group(ns, list(js)) for js, ns in zip(got.groups, nodes)]
            self._carry_profiling(scope, new, stats)
            rest = [g for g in groups if g not in scope]
            cand = rest + new
            old_at = {j: g.nodes for g in scope for j in g.jobs}
            moved = sum(1 for g in new for j in g.jobs if j in old_at and old_at[j] != g.nodes)
            moved += sum(1 for j in old_at if j not in {x for g in new for x in g.jobs})
            options.append(Option(self._score(cand, stats, total), moved, (cand, pool)))
        pick = choose(now_score, options, self.tol)
        if pick is None:
            self.stats.regroups_skipped += 1
            return groups, free
        self.stats.regroups += 1
        cand, pool = pick.payload  # type: ignore[misc]
        for g in cand:
            for j in g.jobs:
                waiting.discard(j)
        used = {n for g in cand for n in g.nodes}
        return cand, [n for n in sorted(set(free) | set(pool)) if n not in used]

    # ------------------------------------------------------------------ arrival
    def _arrived(self, view: ClusterView, groups: list[_Group], jid: str, waiting: set[str],
                 stats: dict[str, JobStat]) -> list[_Group]:
        if jid not in stats:
            return groups
        home = next((g for g in groups if jid in g.jobs), None)
        if waiting - {jid}:  # others already wait: this one waits its turn
            if home is not None:
                home.jobs.remove(jid)
            waiting.add(jid)
            self.stats.arrivals_waiting += 1
            return groups
        total = view.capacity.shape[0]
        without = [_Group(g.nodes, [j for j in g.jobs if j != jid]) for g in groups]
        best, best_s = None, self._score(without, stats, total)
        for i, g in enumerate(without):
            if not g.jobs or self._floor(view, g.jobs + [jid]) > len(g.nodes):
                continue
            trial = [_Group(x.nodes, x.jobs + [jid]) if k == i else x for k, x in enumerate(without)]
            s = self._score(trial, stats, total)
            if s > best_s + 1e-12 or (home is not None and g.nodes == home.nodes and s >= best_s - 1e-12):
                best, best_s = i, s
        if best is None:
            waiting.add(jid)
            self.stats.arrivals_waiting += 1
            return [g for g in without]
        without[best].jobs.append(jid)
        self.stats.arrivals_placed += 1
        return without

    # ---------------------------------------------------------------- profiling
    def _profile(self, view: ClusterView, groups: list[_Group], free: list[int],
                 unprofiled: list[JobView]) -> tuple[list[_Group], list[int]]:
        """New jobs run in the group with the fewest machines, or one already profiling; with no
        group at all, small profiling groups are made on the free machines."""
        todo = list(unprofiled)
        if not todo:
            return groups, free
        live = [g for g in groups if g.jobs]
        if not live and free:
            k = max(1, min(len(free), math.ceil(len(todo) / self.profile_group_jobs)))
            chunks = np.array_split(np.array(sorted(free)), k)
            for c, jobs in zip(chunks, _split(todo, k)):
                nodes = tuple(int(n) for n in c)
                take = []
                for j in jobs:
                    if self._floor(view, take + [j.id]) <= len(nodes) and _dop_ok(j, len(nodes)):
                        take.append(j.id)
                if take:
                    groups.append(_Group(nodes, take))
                    free = [n for n in free if n not in nodes]
            return groups, free
        profiling = [g for g in live if any(j not in self.book for j in g.jobs)]
        for job in todo:
            choices = profiling + sorted((g for g in live if g not in profiling), key=lambda g: (len(g.nodes), g.nodes))
            for g in choices:
                if self._floor(view, g.jobs + [job.id]) <= len(g.nodes) and _dop_ok(job, len(g.nodes)):
                    g.jobs.append(job.id)
                    if g not in profiling:
                        profiling.append(g)
                    break
        return groups, free

    # -------------------------------------------------------------- predictions
    def _predict(self, view: ClusterView, before: list[_Group], after: list[_Group], stats: dict[str, JobStat]) -> None:
        old = {g.nodes: sorted(g.jobs) for g in before}
        for g in after:
            if not g.jobs or old.get(g.nodes) == sorted(g.jobs):
                continue
            if not all(j in stats for j in g.jobs):
                self.log.drop(g.nodes)
                continue
            t = group_time([stats[j].c1 for j in g.jobs], [stats[j].net for j in g.jobs], len(g.nodes))
            self.log.predict(g.nodes, g.jobs, t, view.now)


def cpu_job(view: ClusterView, job: JobView) -> bool:
    """Groups hold CPU machines: jobs asking for GPUs are not Harmony's (they stay pending)."""
    g = view.gpu_col
    return g is None or float(view.demand_vector(job)[g]) <= 0.0


def _dop_ok(job: JobView, m: int) -> bool:
    return job.spec.min_workers <= m <= job.spec.max_workers


def _split(items: list[JobView], k: int) -> list[list[JobView]]:
    out: list[list[JobView]] = [[] for _ in range(k)]
    for i, j in enumerate(items):
        out[i % k].append(j)
    return out


def make(oracle: bool = False, **params: object) -> Harmony:
    """``harmony[:KEY=VALUE...]``, e.g. ``harmony:order=srpt`` (see :class:`Harmony`)."""
    return build(Harmony, params, policy="harmony", fixed={"params": None})  # Alg. 1's Params: Python API only
