"""Pack: FIFO that trains similar pending jobs jointly on one device (Liu, ch. 2).

Jobs are taken in arrival order. A *packable* job (one task; a built-in torch
workload or a trace job without one) goes, in this order:

1. into a running pack of its family whose first member is within
   ``threshold`` of it and whose device memory still holds it (a new model is
   *loaded* into the pack, §2.2.3);
2. onto a wholly free device, as the centroid of a new pack that takes the
   nearest pending jobs of its family within ``threshold``, nearest first,
   until the device memory is full or ``max_pack`` members (pack_opt's kNN
   heuristic, §2.4.2, with the job queue as the sampled configurations and
   the FIFO head as the centroid).

A job alone on a device also runs as a pack (of one), so that similar jobs
arriving later can join it. Other jobs start alone on the first nodes with
room. When the head of the queue fits nowhere the queue waits (FIFO).

*Family* (what may share a pack, Table 2.2: same model, same data shape): the
same ``model`` and the same workload apart from its hyper-parameters
(``lr``, ``momentum``, ``weight_decay``, ``batch_size``) and ``seed``.
*Distance* between two jobs of a family is pack_opt's index distance
(``cohabit.pack.pack_opt.index_distance``) on the job's hyper-parameters:
batch-size steps of 5 (Table 2.3's grid), learning-rate decades, and 1 for any
other hyper-parameter that differs. Memory comes from the jobs' declared
demands (``gpu_mem_gb``; ``mem_gb`` on a CPU device) and is checked on a draft
of the scheduler's own ledger, so every Pack this policy emits is one the
scheduler accepts. Only job specs and the ledger are read: no simulator truth.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..engine.actions import Pack, Plan, Start
from ..engine.job import JobView
from ..engine.ledger import AllocationError, Ledger
from ..engine.view import ClusterView
from ..spec.job import JobSpec
from .base import BasePolicy
from .placement import Draft, fill

HYPER_PARAMETERS = ("lr", "momentum", "weight_decay", "batch_size", "seed")
"""Workload keys that may differ inside a pack (the tuned hyper-parameters and the data seed)."""

PACKABLE_WORKLOADS = frozenset({"torch-mlp", "torch-cnn"})
"""Built-in workloads the real backend can pack in one process."""

BATCH_STEP = 5
"""Batch-size grid step of Table 2.3 (20, 25, ..., 70): one index of pack_opt's distance."""


def family(spec: JobSpec) -> tuple[Any, ...] | None:
    """What ``spec`` may share a pack with (None: it never packs)."""
    if spec.num_ps or spec.max_workers != 1:
        return None
    wl = spec.workload or {}
    if wl and wl.get("name") not in PACKABLE_WORKLOADS:
        return None
    rest = tuple(sorted((k, repr(v)) for k, v in wl.items() if k not in HYPER_PARAMETERS))
    return (spec.model, rest)


def _hyper(spec: JobSpec) -> dict[str, Any]:
    wl = spec.workload or {}
    out = {k: wl[k] for k in HYPER_PARAMETERS if k in wl and k not in ("seed", "batch_size")}
    out["batch_size"] = wl.get("batch_size", spec.batch_size)
    return out


def distance(a: JobSpec, b: JobSpec) -> float:
    """pack_opt's index distance (§2.4.2) between two jobs' hyper-parameters."""
    ha, hb = _hyper(a), _hyper(b)
    d = 0.0
    for k in sorted(set(ha) | set(hb)):
        x, y = ha.get(k), hb.get(k)
        if x == y:
            continue
        if k == "batch_size" and x is not None and y is not None:
            d += abs(float(x) - float(y)) / BATCH_STEP
        elif k == "lr" and isinstance(x, (int, float)) and isinstance(y, (int, float)) and x > 0 and y > 0:
            d += abs(math.log10(float(x) / float(y)))
        else:
            d += 1.0
    return d


class PackPolicy(BasePolicy):
    """FIFO with packing of similar jobs (see the module docstring)."""

    def __init__(self, threshold: float = 6.0, max_pack: int = 4) -> None:
        if not threshold >= 0:
            raise ValueError(f"threshold must be >= 0 (an index distance), got {threshold!r}")
        if max_pack < 1:
            raise ValueError(f"max_pack must be >= 1 job, got {max_pack!r}")
        self.threshold = threshold
        self.max_pack = max_pack
        self.name = "pack"

    def decide(self, view: ClusterView) -> Plan:
        if not view.pending:
            return []
        draft = Draft(view).ledger()
        plan: Plan = []
        queue = list(view.pending.values())
        taken: set[str] = set()
        for job in queue:
            if job.id in taken:
                continue
            fam = family(job.spec)
            if fam is None:
                placement = self._place_alone(draft, view, job)
                if placement is None:
                    break
                plan.append(Start(job.id, placement))
                taken.add(job.id)
                continue
            d = view.demand_vector(job)
            device = self._join(draft, view, job, fam, d)
            if device is not None:
                plan.append(Pack((job.id,), device))
                taken.add(job.id)
                continue
            device = self._free_device(draft, job.id, d)
            if device is None:
                break  # FIFO: the head of the queue waits
            group = [job.id]
            near = sorted((distance(job.spec, o.spec), k, o) for k, o in enumerate(queue)
                          if o.id not in taken and o is not job and family(o.spec) == fam)
            for dist, _, other in near:
                if dist > self.threshold or len(group) >= self.max_pack:
                    break
                try:
                    draft.allocate_pack(other.id, device, view.demand_vector(other))
                except AllocationError:
                    break  # "until the device runs out of memory"
                group.append(other.id)
            plan.append(Pack(tuple(group), device))
            taken.update(group)
        return plan

    def _join(self, draft: Ledger, view: ClusterView, job: JobView, fam: tuple[Any, ...],
              d: np.ndarray) -> tuple[int, int] | None:
        """The running pack nearest to ``job`` (by its first member) that holds it, if any."""
        best: tuple[float, tuple[int, int]] | None = None
        for device, members in draft.packs.items():
            head = view.jobs.get(members[0])
            if head is None or family(head.spec) != fam or len(members) >= self.max_pack:
                continue
            dist = distance(job.spec, head.spec)
            if dist <= self.threshold and (best is None or dist < best[0]) \
                    and draft.pack_blocked(device, [(job.id, d)]) is None:
                best = (dist, device)
        if best is None:
            return None
        draft.allocate_pack(job.id, best[1], d)
        return best[1]

    @staticmethod
    def _free_device(draft: Ledger, job: str, d: np.ndarray) -> tuple[int, int] | None:
        """The first wholly free device (a GPU, or the CPU of a node without GPUs) that holds ``job``."""
        gpu = draft.gpu_col
        for node in range(draft.n_nodes):
            n_gpus = int(round(draft.capacity[node, gpu])) if gpu is not None else 0
            for device in ((node, i) for i in range(max(n_gpus, 1))):
                if device in draft.packs or (n_gpus and draft.device_free[device] < 1.0 - 1e-9):
                    continue
                if draft.pack_blocked(device, [(job, d)]) is None:
                    draft.allocate_pack(job, device, d)
                    return device
        return None

    @staticmethod
    def _place_alone(draft: Ledger, view: ClusterView, job: JobView) -> tuple[int, ...] | None:
        """Workers on the nodes with most room first, then parameter servers; reserved in ``draft``."""
        n = view.target_workers(job)
        w = view.demand_vector(job)
        fit = draft.tasks_fit(w)
        workers = fill(fit, n, np.argsort(-fit, kind="stable"))
        if workers is None:
            return None
        vecs = [w] * n
        placement = list(workers)
        p = view.ps_demand_vector(job)
        if p is not None and job.spec.num_ps:
            fit_ps = draft.tasks_fit(p)  # before the workers: allocate() below checks them together
            ps = fill(fit_ps, job.spec.num_ps, np.argsort(-fit_ps, kind="stable"))
            if ps is None:
                return None
            placement += ps
            vecs += [p] * job.spec.num_ps
        try:
            draft.allocate(job.id, placement, vecs)
        except AllocationError:
            return None
        return tuple(placement)


def make(oracle: bool = False) -> PackPolicy:
    return PackPolicy()
