"""Harmony's baselines for parameter-server jobs (Lee et al., §V-A).

* :class:`Isolated` (``harmony-isolated``): every job on its own machines (Optimus/SLAQ-style
  dedicated allocation). Its DoP keeps the CPU busy: the largest ``m`` whose CPU utilisation
  ``(c/m) / (c/m + T_net)`` stays at least ``u_target`` (the paper: "we try to maximize the
  CPU utilization rates ... by reducing the network overheads"), and at least the machines
  whose memory holds the job (no spilling) within ``mem_fraction`` of the usable memory (0.7:
  clear of garbage-collection pressure). Jobs start in arrival order; later jobs backfill
  free machines.
* :class:`NaiveGroups` (``harmony-naive``): machines shared by up to ``jobs_per_group`` jobs
  without subtask coordination (``Colocate(mode="naive")``, Gandiva-like packing with no
  performance model): a waiting job joins the first group (arrival order, or a seeded random
  choice to sample the "best and worst" groupings of the paper) with room and memory for it,
  else opens a group at its own isolated DoP. Nobody is ever moved.
  With ``mode="pipelined"`` the same groups run Harmony's subtasks: the "subtasks only"
  ablation. Jobs asking for GPUs are left pending (groups hold CPU machines).

Why not ``static`` / ``naive``: the colleagues' ``static`` (by job) sizes a job by its
requested worker count and ``naive`` time-shares GPUs; neither knows a PS job's
computation/communication balance or shares CPU machines. They are unchanged.

The DoP comes from the job's declared profile (``spec.workload["profile"]``: COMP and COMM
seconds at a DoP, measured earlier, as Fig. 9 of the paper) or, failing that, from the
job's own reported telemetry; with neither, its requested worker count.
"""

from __future__ import annotations

import math
import random

from ...engine.actions import Plan, Resume, Start
from ...engine.job import JobView
from ...engine.view import ClusterView
from ...models.harmony_perf import memory_floor
from ..base import BasePolicy
from .plan import current_groups, emit


def declared(job: JobView) -> tuple[float, float] | None:
    """(one-machine COMP seconds, COMM seconds) per iteration from the spec or the telemetry."""
    prof = (job.spec.workload or {}).get("profile")
    if prof:
        return float(prof["compute_s"]) * float(prof["dop"]), float(prof["comm_s"])
    if job.comp_time is not None and job.comm_time is not None and job.n_workers:
        return job.comp_time * job.n_workers, job.comm_time
    return None


def sizes(job: JobView) -> tuple[float, float]:
    w = job.spec.workload or {}
    return float(w.get("input_gb", 0.0)), float(w.get("model_gb", 0.0))


def usable_gb(view: ClusterView, reserved_gb: float) -> float:
    i = view.resource_index("mem_gb")
    return (float(view.capacity[:, i].min()) if i is not None else math.inf) - reserved_gb


def isolated_dop(job: JobView, view: ClusterView, u_target: float, reserved_gb: float, mem_fraction: float = 0.7) -> int:
    """The DoP of :class:`Isolated` (see module doc), within the job's bounds and the cluster."""
    n = view.capacity.shape[0]
    prof = declared(job)
    inp, mod = sizes(job)
    floor = memory_floor([inp], [mod], usable_gb(view, reserved_gb) * mem_fraction, spill=False)
    if prof is None:
        m = view.target_workers(job)
    else:
        c1, net = prof
        m = int(math.floor(c1 * (1 - u_target) / (u_target * net) + 1e-9))
    m = max(m, floor, job.spec.min_workers, 1)
    return min(m, job.spec.max_workers, n)


def _waiting(view: ClusterView) -> list[JobView]:
    return sorted(list(view.paused.values()) + list(view.pending.values()), key=lambda j: j.seq)


def _free_nodes(view: ClusterView) -> list[int]:
    empty = (view.free >= view.capacity - 1e-9).all(axis=1)
    return [int(i) for i in empty.nonzero()[0]]


class Isolated(BasePolicy):
    """Dedicated machines per job at a CPU-utilisation-keeping DoP (see module doc)."""

    def __init__(self, u_target: float = 0.7, reserved_gb: float = 4.0, backfill: bool = True,
                 mem_fraction: float = 0.7, name: str = "harmony-isolated") -> None:
        if not 0 < u_target < 1:
            raise ValueError(f"u_target must lie in (0, 1), got {u_target!r}")
        if not 0 < mem_fraction <= 1:
            raise ValueError(f"mem_fraction must lie in (0, 1], got {mem_fraction!r}")
        self.mem_fraction = mem_fraction
        self.u_target = u_target
        self.reserved_gb = reserved_gb
        self.backfill = backfill
        self.name = name

    def decide(self, view: ClusterView) -> Plan:
        free = _free_nodes(view)
        plan: Plan = []
        for job in _waiting(view):
            m = isolated_dop(job, view, self.u_target, self.reserved_gb, self.mem_fraction)
            if len(free) >= m:
                nodes, free = tuple(free[:m]), free[m:]
                placement = nodes + tuple(nodes[i % m] for i in range(job.spec.num_ps))
                plan.append(Resume(job.id, placement) if job.id in view.paused else Start(job.id, placement))
            elif not self.backfill:
                break
        return plan


class NaiveGroups(BasePolicy):
    """Machines shared by a few jobs, no coordination, no model (see module doc)."""

    def __init__(self, jobs_per_group: int = 2, mode: str = "naive", u_target: float = 0.7,
                 reserved_gb: float = 4.0, mem_fraction: float = 0.7, seed: int | None = None,
                 name: str = "harmony-naive") -> None:
        if jobs_per_group < 1:
            raise ValueError(f"jobs_per_group must be >= 1, got {jobs_per_group!r}")
        if mode not in ("naive", "pipelined"):
            raise ValueError(f"mode must be 'naive' or 'pipelined', got {mode!r}")
        self.jobs_per_group = jobs_per_group
        self.mem_fraction = mem_fraction
        self.mode = mode
        self.u_target = u_target
        self.reserved_gb = reserved_gb
        self._rng = random.Random(seed) if seed is not None else None
        self.name = name

    def decide(self, view: ClusterView) -> Plan:
        g = view.gpu_col
        waiting = [j for j in _waiting(view) if g is None or float(view.demand_vector(j)[g]) <= 0.0]
        if not waiting:
            return []
        groups = {k: list(v) for k, v in current_groups(view, self.mode).items()}
        free = _free_nodes(view)
        usable = usable_gb(view, self.reserved_gb) * self.mem_fraction
        changed = False
        for job in waiting:
            room = []
            for nodes, members in groups.items():
                if len(members) >= self.jobs_per_group or not job.spec.min_workers <= len(nodes) <= job.spec.max_workers:
                    continue
                ins, mods = zip(*(sizes(view.jobs[j]) for j in members + [job.id]))
                if memory_floor(list(ins), list(mods), usable, spill=False) <= len(nodes):
                    room.append(nodes)
            if room:
                pick = self._rng.choice(room) if self._rng is not None else room[0]
                groups[pick].append(job.id)
                changed = True
                continue
            m = isolated_dop(job, view, self.u_target, self.reserved_gb, self.mem_fraction)
            if len(free) >= m:
                nodes, free = tuple(free[:m]), free[m:]
                groups[nodes] = [job.id]
                changed = True
        if not changed:
            return []
        return emit(view, [(members, nodes) for nodes, members in groups.items()], self.mode)


def make_isolated(oracle: bool = False) -> Isolated:
    return Isolated()


def make_naive(oracle: bool = False) -> NaiveGroups:
    return NaiveGroups()
