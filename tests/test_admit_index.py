"""Optimus' admission read by shape group (``policies.admit_index``, issue 18's twelfth session) is the
row-by-row admission over the whole queue: the same jobs and the same floats left, at every round of a
queue that changes between rounds (arrivals, starts, pauses, groups that empty and come back), with the
index kept from round to round. Fails when the kept index goes stale (a job's ``n_min`` not checked into its
group), when the back-filling window is cut one row off, or when the prefix or the scan adds its rows
otherwise than one at a time."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine import actions as A
from cohabit.engine.loop import Scheduler
from cohabit.policies.admit_index import AdmitIndex
from cohabit.policies.base import BasePolicy
from cohabit.policies.job_models import JobModels
from cohabit.policies.targets import EPS, admit_in_order, balanced_placement, waiting_jobs
from cohabit.policies.placement import Draft
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import JobSpec, Resources, TaskGroup

from conftest import small_cluster

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)
# a few worker rows, fractional so that running sums round (the index must add them as the row-by-row read)
DEMANDS = [Resources(gpu=1, cpu=4, mem_gb=16), Resources(gpu=1, cpu=1.3, mem_gb=3.7),
           Resources(gpu=2, cpu=0.7, mem_gb=11.1), Resources(gpu=0, cpu=2.9, mem_gb=0.3)]
PS = Resources(gpu=0, cpu=1.1, mem_gb=2.2)


def _jobs(rng: random.Random, n: int, mixed: bool) -> list[TraceJob]:
    """``n`` jobs of a few shapes arriving over 2,000 s; with ``mixed``, jobs of one shape may differ in
    ``n_min`` (elastic jobs)."""
    out = []
    for i in range(n):
        count = rng.choice([1, 1, 2, 3, 4])
        lo = rng.randint(1, count) if mixed and rng.random() < 0.3 else count
        ps = rng.random() < 0.2
        spec = JobSpec(id=f"j{i}", submit_time=rng.uniform(0, 2000), architecture="ps" if ps else "allreduce",
                       workers=TaskGroup(count=count, demand=rng.choice(DEMANDS)), n_min=lo, n_max=count,
                       ps=TaskGroup(count=rng.randint(1, 2), demand=PS) if ps else None)
        iters = rng.randint(50, 900)
        out.append(TraceJob(spec, JobTruth(iterations=iters, duration=float(iters), ref_workers=count)))
    return out


class _Churn(BasePolicy):
    """At each decision, compares the admission read by group (one :class:`AdmitIndex` kept across the
    decisions, and ``JobModels.admit_waiting``'s own) with ``admit_in_order`` over every waiting job's
    minimum, for a few random rooms and scans; then starts a random few pending jobs that fit and
    sometimes pauses a running one, so the queue changes between decisions."""

    name = "churn"

    def __init__(self, seed: int, pause: bool) -> None:
        self.rng = random.Random(seed)
        self.pause = pause
        self.index = AdmitIndex()
        self.models = JobModels()
        self.answered = self.refused = self.backfilled = 0

    def decide(self, view):  # type: ignore[override]
        rng, models = self.rng, self.models
        cap = view.capacity.sum(axis=0)
        waiting = waiting_jobs(view)
        for _ in range(3):
            free = cap * rng.choice([0.0, 0.02, 0.05, 0.1, 0.3, 1.0, 3.0]) * rng.uniform(0.9, 1.1)
            scan = rng.choice([1, 2, 3, 5, 8, 512])
            cost = models._first_cost(view, [j.id for j in waiting])
            ok, rem = admit_in_order(cost, free, scan)
            want = [waiting[i].id for i in np.flatnonzero(ok).tolist()]
            got = self.index.admit(view, free, scan, models._first_cost)
            if got is None:
                self.refused += 1
            else:
                self.answered += 1
                assert [j.id for j in got[0]] == want
                assert got[1].dtype == np.float64 and got[1].tobytes() == rem.tobytes()
                fit = (np.cumsum(cost, axis=0) <= free + EPS).all(axis=1)
                cut = len(fit) if fit.all() else int(np.argmin(fit))
                self.backfilled += bool(ok[cut:].any())
            jobs, left = models.admit_waiting(view, None, free, scan)
            assert [j.id for j in jobs] == want and np.array_equal(left, rem)
        draft, plan = Draft(view), []
        for job in waiting:
            if rng.random() < 0.3 and job.id in view.pending:
                p = balanced_placement(draft, job, job.spec.min_workers)
                if p is not None:
                    plan.append(A.Start(job.id, p))
        if self.pause and view.running and rng.random() < 0.2:
            plan.append(A.Pause(rng.choice(list(view.running))))
        return plan


def _run(seed: int, *, mixed: bool, pause: bool, n: int = 120) -> _Churn:
    rng = random.Random(seed)
    jobs = _jobs(rng, n, mixed)
    policy = _Churn(seed, pause)
    sched = Scheduler(small_cluster(rng.randint(1, 3), 4), policy, SimBackend(jobs, NO_COST), horizon=4000.0,
                      strict=True)
    sched.run([j.spec for j in jobs])
    return policy


@pytest.mark.parametrize("seed", range(4))
def test_the_admission_by_group_is_the_admission_of_every_row(seed: int) -> None:
    """Rigid jobs only, nothing paused: the index answers every time, the same as the row-by-row read."""
    p = _run(seed, mixed=False, pause=False)
    assert p.refused == 0 and p.answered > 50
    assert p.backfilled > 0  # the back-filling scan admitted jobs past the prefix


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31), st.booleans(), st.booleans())
def test_property_the_admission_by_group_is_the_admission_of_every_row(seed: int, mixed: bool, pause: bool) -> None:
    """Random queues, elastic jobs of one shape with different ``n_min`` and paused jobs included: where
    the index answers, it answers as the row-by-row read (and ``admit_waiting`` always does)."""
    _run(seed, mixed=mixed, pause=pause, n=60)


def test_a_group_whose_members_differ_in_n_min_is_not_read_by_group() -> None:
    """Elastic jobs of one shape with different ``n_min``: the index refuses (the caller reads every row)."""
    p = _run(3, mixed=True, pause=False)
    assert p.refused > 0 and p.answered > 0
