"""No silent loss under adversarial specs and a policy that asks for more than exists (issue 12).

* Specs: submit times up to the largest allowed (far past any horizon), one-iteration
  jobs of a microsecond, jobs too big for the cluster, duplicate ids, a finite horizon.
* Policy ``Greedy``: starts every pending job and resumes every paused one on node 0,
  whether or not it fits, colocates past ``max_share``, and pauses at random. The ledger
  must refuse what does not fit: :class:`Audited` checks it after every action, so
  removing the ledger's capacity check (``Ledger.allocate``) fails these tests.
* Every job given to the scheduler ends in exactly one reported state with a reason.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine import actions as A
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies import FIFO
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import JobSpec, Resources, TaskGroup, simple_job
from cohabit.spec.limits import MAX_TIME_S

from conftest import small_cluster
from test_engine_invariants import ledger_state

NODES, GPUS = 2, 4


@st.composite
def adversarial(draw: st.DrawFn) -> list[TraceJob]:
    n = draw(st.integers(1, 20))
    out = []
    for i in range(n):
        t = draw(st.one_of(st.floats(0, 100), st.sampled_from([0.0, 1e6, MAX_TIME_S])))
        kind = draw(st.sampled_from(["gpu", "gpu", "cpu", "huge", "tiny"]))
        if kind == "cpu":  # CPU-only job: only cpu/mem capacity limits it (no GPU device check)
            cpu = draw(st.sampled_from([1.0, 8.0, 30.0, 32.0]))
            spec = JobSpec(id=f"j{i}", submit_time=t, workers=TaskGroup(count=1, demand=Resources(cpu=cpu, mem_gb=4)),
                           iterations=10)
        else:
            g = {"gpu": draw(st.sampled_from([0.5, 1, 2, 4])), "huge": 16, "tiny": 1}[kind]
            spec = simple_job(f"j{i}", g, submit_time=t, iterations=1 if kind == "tiny" else 50)
        dur = 1e-6 if kind == "tiny" else draw(st.floats(1, 200))
        out.append(TraceJob(spec, JobTruth(iterations=spec.iterations or 1, duration=dur,
                                           ref_workers=spec.workers.count)))
    if n > 1 and draw(st.booleans()):  # a duplicate id: the first is kept, the second recorded as rejected
        out.append(TraceJob(out[0].spec.model_copy(update={"submit_time": 5.0}), out[0].truth))
    return out


class Greedy(FIFO):
    """Asks for more than exists: everything on node 0, colocations past max_share, random pauses."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.rng = random.Random(seed)

    def decide(self, view):  # type: ignore[override]
        plan: list[A.Action] = []
        for job in view.pending.values():
            plan.append(A.Start(job.id, (0,) * job.spec.workers.count))
        for job in view.paused.values():
            plan.append(A.Resume(job.id, (0,) * job.n_workers if job.n_workers else (0,)))
        hosts = list(view.running.values())
        for job in view.pending.values():
            if hosts and self.rng.random() < 0.5:
                plan.append(A.Colocate((job.id, self.rng.choice(hosts).id), (0,) * job.spec.workers.count))
        for job in hosts:
            if self.rng.random() < 0.2:
                plan.append(A.Pause(job.id))
        return plan


class Audited(Scheduler):
    """After every action: the ledger is within capacity; a refused action left it exactly as it was."""

    def _apply(self, action):  # type: ignore[override]
        before, n = ledger_state(self.ledger), len(self.record)
        super()._apply(action)
        if any(e.kind == EventKind.ACTION_REJECTED for e in list(self.record)[n:]):
            assert ledger_state(self.ledger) == before, f"refused {action} changed the ledger"
        self.ledger.check()


def run(jobs: list[TraceJob], policy, horizon: float):
    cluster = small_cluster(NODES, GPUS)
    backend = SimBackend(jobs, SimConfig(checkpoint_s=1, restore_s=1, gpus_per_node=GPUS))
    sched = Audited(cluster, policy, backend, horizon=horizon)
    return sched.run([j.spec for j in jobs])


def assert_every_job_reported_once(result, jobs: list[TraceJob]) -> None:
    ids = {j.spec.id for j in jobs}
    assert set(result.jobs) == ids, f"lost: {ids - set(result.jobs)}"
    for job in result.jobs.values():
        ended = job.state.terminal
        assert ended != (job.id in result.unfinished), f"{job.id}: {job.state}, unfinished={job.id in result.unfinished}"
        assert ended or job.reason, f"{job.id} ended {job.state} without a reason"
    ends = [e.job for e in result.record if e.kind in (EventKind.FINISHED, EventKind.REJECTED) and e.job in ids]
    first_ids = {j.spec.id for j in jobs}
    dup = len(jobs) - len(first_ids)
    assert len(ends) == sum(j.state.terminal for j in result.jobs.values()) + dup  # each ends once (+ dup rejects)


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(adversarial(), st.integers(0, 10_000), st.sampled_from([float("inf"), 500.0]))
def test_greedy_policy_is_refused_and_no_job_is_lost(jobs, seed, horizon) -> None:
    result = run(jobs, Greedy(seed), horizon)
    assert_every_job_reported_once(result, jobs)


def test_greedy_policy_is_refused_on_cpu_capacity() -> None:
    """Two 30-core jobs on one 32-core node: the second start must be refused, not overbooked."""
    jobs = [TraceJob(JobSpec(id=f"c{i}", workers=TaskGroup(count=1, demand=Resources(cpu=30)), iterations=5),
                     JobTruth(iterations=5, duration=10.0)) for i in range(2)]
    result = run(jobs, Greedy(0), float("inf"))
    refused = [e for e in result.record if e.kind == EventKind.ACTION_REJECTED]
    assert refused and all(j.state.terminal for j in result.jobs.values())


def test_job_after_the_horizon_is_reported_not_dropped() -> None:
    jobs = [TraceJob(simple_job("early", 1, iterations=5), JobTruth(iterations=5, duration=5.0)),
            TraceJob(simple_job("late", 1, submit_time=1e9, iterations=5), JobTruth(iterations=5, duration=5.0))]
    result = run(jobs, FIFO(), 100.0)
    assert set(result.jobs) == {"early", "late"}
    assert "never submitted" in result.unfinished["late"]


@pytest.mark.parametrize("t", [MAX_TIME_S, 1e6])
def test_far_future_submit_time_is_run_not_lost(t: float) -> None:
    jobs = [TraceJob(simple_job("far", 1, submit_time=t, iterations=5), JobTruth(iterations=5, duration=5.0))]
    result = run(jobs, FIFO(), float("inf"))
    assert result.jobs["far"].state.terminal and result.unfinished == {}
