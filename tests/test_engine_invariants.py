"""Invariants on random workloads: no over-allocation, no lost job, no lost progress."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine import actions as A
from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies import FIFO, SRTF
from cohabit.policies.placement import Draft
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.engine.loop import Scheduler
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster

GPU_SIZES = [0.25, 0.5, 1, 1, 1, 2, 4, 8]


@st.composite
def workloads(draw: st.DrawFn) -> list[TraceJob]:
    n = draw(st.integers(1, 25))
    out = []
    t = 0.0
    for i in range(n):
        t += draw(st.floats(0, 50))
        g = draw(st.sampled_from(GPU_SIZES))
        dur = draw(st.floats(1, 500))
        iters = draw(st.integers(1, 1000))
        spec = simple_job(f"j{i}", g, submit_time=t, model=draw(st.sampled_from(["resnet50", "vgg16", "bert"])),
                          iterations=iters, n_min=1 if g >= 1 else None, n_max=int(g) if g >= 1 else None)
        out.append(TraceJob(spec, JobTruth(iterations=iters, duration=dur, ref_workers=max(int(g), 1))))
    return out


class Chaos(FIFO):
    """FIFO plus random preemptions, resumes, migrations, resizes and some invalid actions."""

    def __init__(self, seed: int) -> None:
        super().__init__(backfill=True)
        self.rng = random.Random(seed)

    def decide(self, view):  # type: ignore[override]
        plan = super().decide(view)
        rng = self.rng
        draft = Draft(view)
        for a in plan:
            job = view.jobs[a.job]
            draft.reserve(job, a.placement)
        for job in list(view.running.values()):
            r = rng.random()
            if r < 0.15:
                plan.append(A.Pause(job.id))
            elif r < 0.25:
                p = draft.place(job, job.n_workers)
                if p is not None:
                    plan.append(A.Migrate(job.id, p))
            elif r < 0.35 and job.spec.max_workers > 1:
                n = rng.randint(job.spec.min_workers, job.spec.max_workers)
                p = draft.place(job, n)
                if p is not None:
                    plan.append(A.Resize(job.id, p))
        started = {a.job for a in plan if isinstance(a, A.Start)}
        for job in list(view.paused.values()):
            p = draft.place(job)
            if p is not None and rng.random() < 0.7:
                plan.append(A.Resume(job.id, p))
                started.add(job.id)
        hosts = list(view.running.values())
        for job in list(view.pending.values()) + list(view.paused.values()):
            if job.id not in started and hosts and rng.random() < 0.3:
                host = rng.choice(hosts)  # time-share the host's GPUs (may be refused: that is fine)
                nodes = (host.placement * job.spec.workers.count)[: job.spec.workers.count]
                plan.append(A.Colocate((job.id, host.id), nodes))
                started.add(job.id)
        if rng.random() < 0.1:  # nonsense the scheduler must refuse and survive
            plan.append(A.Start("no-such-job", (0,)))
            if view.running:
                j = next(iter(view.running.values()))
                plan.append(A.Start(j.id, j.placement))
                plan.append(A.Migrate(j.id, (10_000,) * len(j.placement)))
        return plan


class Audited(Scheduler):
    """Checks the ledger after every applied action and the progress of every resumed job."""

    saved: dict[str, float]

    def _apply(self, action):  # type: ignore[override]
        backend: SimBackend = self.backend  # type: ignore[assignment]
        before_ledger = ledger_state(self.ledger)
        try:
            if isinstance(action, A.Resume) and action.job in self.paused:
                before = backend.progress(action.job, self.now)
                super()._apply(action)
                assert backend._runs[action.job].done >= before - 1e-6  # resumes from its checkpoint
            else:
                super()._apply(action)
        except Exception:
            # a refused action changes nothing: same allocations, same free capacity, same GPU shares
            assert ledger_state(self.ledger) == before_ledger, f"refused {action} changed the ledger"
            raise
        self.ledger.check()


def ledger_state(led) -> tuple:
    """Everything a refused action must leave as it was, in comparable form."""
    return (
        {j: (a.nodes, a.total.as_dict()) for j, a in led.allocations.items()},
        led.free.round(9).tolist(), led.device_free.round(9).tolist(),
        {k: dict(v) for k, v in led.dev_shares.items()},
    )


def run(jobs: list[TraceJob], policy, nodes: int = 2, gpus: int = 4):
    cluster = small_cluster(nodes, gpus)
    backend = SimBackend(jobs, SimConfig(checkpoint_s=3, restore_s=4, gpus_per_node=gpus))
    sched = Audited(cluster, policy, backend, oracle=backend.oracle() if policy.uses_oracle else None)
    return sched.run([j.spec for j in jobs]), backend


def assert_no_lost_job(result, jobs: list[TraceJob]) -> None:
    assert set(result.jobs) == {j.spec.id for j in jobs}
    for job in result.jobs.values():
        assert job.state.terminal or job.reason, f"{job.id} ended {job.state} without a reason"
    ends = {e.job for e in result.record if e.kind in (EventKind.FINISHED, EventKind.REJECTED)}
    assert ends | set(result.unfinished) == set(result.jobs)


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(workloads(), st.integers(0, 10_000))
def test_chaos_policy_never_over_allocates_nor_loses_jobs_or_progress(jobs, seed) -> None:
    result, backend = run(jobs, Chaos(seed))
    assert_no_lost_job(result, jobs)
    for job in result.jobs.values():
        if job.state is JobState.FINISHED:
            assert backend.progress(job.id, result.end_time) >= jobs[int(job.id[1:])].truth.iterations - 1e-6


@SETTINGS
@given(workloads())
def test_fifo_and_srtf_finish_every_job_that_fits(jobs) -> None:
    for policy in (FIFO(), SRTF(use_oracle=True), SRTF()):
        result, _ = run(jobs, policy)
        assert_no_lost_job(result, jobs)
        assert result.unfinished == {}, result.unfinished
        finished = sum(j.state is JobState.FINISHED for j in result.jobs.values())
        rejected = sum(j.state is JobState.REJECTED for j in result.jobs.values())
        assert finished + rejected == len(jobs)


def test_record_is_time_ordered_and_allocations_balance() -> None:
    jobs = [TraceJob(simple_job(f"j{i}", 1, submit_time=i), JobTruth(iterations=10, duration=30.0))
            for i in range(10)]
    result, _ = run(jobs, Chaos(1), nodes=1, gpus=2)
    times = [e.time for e in result.record]
    assert times == sorted(times)
    holding: dict[str, float] = {}
    for e in result.record:
        if e.kind in (EventKind.STARTED, EventKind.RESUMED, EventKind.MIGRATED, EventKind.RESIZED):
            holding[e.job] = e.data["alloc"].get("gpu", 0.0)
        elif e.kind in (EventKind.PAUSED, EventKind.FINISHED, EventKind.STOPPED):
            holding.pop(e.job, None)
        assert sum(holding.values()) <= 2 + 1e-9
