"""FIFO with backfill reads the pending jobs per shape (``ClusterView.pending_by_shape``) merged by queue
position, dropping a shape once one of its jobs does not fit (issue 18): the same plans as visiting
every waiting job in queue order, on mixed shapes, parameter-server jobs and evictions' paused jobs."""

from __future__ import annotations

import random

from cohabit.engine.actions import Plan, Resume, Start
from cohabit.engine.view import ClusterView
from cohabit.policies.fifo import FIFO
from cohabit.policies.placement import Draft
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.truth import TraceJob
from cohabit.spec.job import TaskGroup
from cohabit.spec.resources import Resources

from conftest import small_cluster, trace_job


class _ScanFIFO(FIFO):
    """FIFO with backfill as before: every waiting job visited in queue order."""

    def __init__(self) -> None:
        super().__init__(backfill=True)
        self.rounds_with_shapes = 0

    def decide(self, view: ClusterView) -> Plan:
        draft = Draft(view)
        plan: Plan = []
        for job in [*view.paused.values(), *view.pending.values()]:
            p = draft.place(job)
            if p is None:
                if draft.exhausted():
                    break
                continue
            plan.append(Resume(job.id, p) if job.id in view.paused else Start(job.id, p))
        return plan


class _CountingFIFO(FIFO):
    def __init__(self) -> None:
        super().__init__(backfill=True)
        self.rounds_with_shapes = 0

    def decide(self, view: ClusterView) -> Plan:
        if len(view.pending_by_shape) > 2:
            self.rounds_with_shapes += 1
        return super().decide(view)


def _workload(seed: int) -> list[TraceJob]:
    rng = random.Random(seed)
    jobs = []
    groups: dict[float, TaskGroup] = {}
    t = 0.0
    for i in range(160):
        t += rng.choice([0.0, 0.0, 0.0, 5.0, 40.0])  # bursts: a queue builds up
        gpus = rng.choice([0.5, 1, 2, 3, 4, 8])
        tj = trace_job(f"j{i:03d}", gpus, duration=rng.uniform(50, 900), submit=t)
        if rng.random() < 0.15 and gpus >= 1:  # a parameter-server job: its failure says nothing of its shape
            ps = TaskGroup(count=rng.choice([1, 2]), demand=Resources(cpu=rng.choice([6, 12]), mem_gb=40))
            tj = TraceJob(tj.spec.model_copy(update={"ps": ps, "architecture": "ps"}), tj.truth)
        if rng.random() < 0.5:  # half the jobs share their task group with others of their size (as trace
            # loaders do): shapes are grouped by content, not by object
            shared = groups.setdefault(gpus, tj.spec.workers)
            tj = TraceJob(tj.spec.model_copy(update={"workers": shared}), tj.truth)
        jobs.append(tj)
    return jobs


def test_per_shape_backfill_plans_what_the_full_scan_plans() -> None:
    for seed in (1, 2, 3):
        jobs = _workload(seed)
        cluster = small_cluster(2, 8)
        fast = _CountingFIFO()
        a = simulate(jobs, cluster, fast, strict=True)
        b = simulate(jobs, cluster, _ScanFIFO(), strict=True)
        assert fast.rounds_with_shapes > 20  # the per-shape path ran with several shapes waiting
        assert not a.result.unfinished and not b.result.unfinished
        assert fingerprint(a.result.record, a.metrics) == fingerprint(b.result.record, b.metrics), seed
