"""DRF: hand-computed progressive filling, weights, preemption, and random-workload properties."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies import make_policy
from cohabit.policies.drf import DRF, job_usage
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.job import JobSpec, TaskGroup

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)


def job(id: str, tenant: str, demand: Resources, duration: float = 100.0, submit: float = 0.0,
        weight: float = 1.0, workers: int = 1) -> TraceJob:
    spec = JobSpec(id=id, tenant=tenant, weight=weight, submit_time=submit, iterations=int(duration),
                   architecture="single" if workers == 1 else "allreduce",
                   workers=TaskGroup(count=workers, demand=demand))
    return TraceJob(spec, JobTruth(iterations=int(duration), duration=duration, ref_workers=workers))


def started_at(outcome, t: float) -> Counter[str]:
    """Running jobs per tenant right after the decision at time ``t``."""
    tenant = {e.job: e.data["tenant"] for e in outcome.result.record if e.kind == EventKind.SUBMITTED}
    return Counter(tenant[e.job] for e in outcome.result.record
                   if e.kind in (EventKind.STARTED, EventKind.RESUMED) and e.time == t)


def test_textbook_two_user_example() -> None:
    # Ghodsi et al. §4: 9 CPUs, 18 GB; A's tasks <1 CPU, 4 GB> (memory-dominant, 2/9 each),
    # B's <3 CPU, 1 GB> (CPU-dominant, 1/3 each). Progressive filling:
    # A 2/9, B 1/3, A 4/9, B 2/3, A 2/3 -> CPU 9/9 used: A runs 3 tasks, B 2; both at share 2/3.
    cluster = ClusterSpec.homogeneous("textbook", 1, Resources(cpu=9, mem_gb=18))
    jobs = [job(f"{t}{i}", t, d) for i in range(6)
            for t, d in (("A", Resources(cpu=1, mem_gb=4)), ("B", Resources(cpu=3, mem_gb=1)))]
    out = simulate(jobs, cluster, DRF(), config=NO_COST, strict=True)
    assert started_at(out, 0.0) == {"A": 3, "B": 2}
    assert out.result.unfinished == {}


def test_weights_scale_the_dominant_share() -> None:
    # 8 GPUs, identical 1-GPU jobs; weights 3:1 -> weighted shares equalise at A 6 GPUs, B 2.
    cluster = ClusterSpec.homogeneous("w", 2, Resources(gpu=4, cpu=32, mem_gb=128))
    d = Resources(gpu=1, cpu=4, mem_gb=16)
    jobs = [job(f"A{i}", "A", d, weight=3.0) for i in range(10)] + [job(f"B{i}", "B", d) for i in range(10)]
    out = simulate(jobs, cluster, DRF(), config=NO_COST, strict=True)
    assert started_at(out, 0.0) == {"A": 6, "B": 2}


def test_every_resource_counts_not_only_gpus() -> None:
    # B's jobs hold little GPU but most of the memory: its dominant share (memory) is what
    # DRF compares, so A gets the next free slot even though B holds fewer GPUs.
    cluster = ClusterSpec.homogeneous("m", 1, Resources(gpu=4, cpu=16, mem_gb=100))
    jobs = [job("B0", "B", Resources(gpu=1, cpu=1, mem_gb=60), duration=50),
            job("A0", "A", Resources(gpu=1, cpu=1, mem_gb=5), duration=50),
            job("A1", "A", Resources(gpu=1, cpu=1, mem_gb=5), submit=1.0, duration=50),
            job("B1", "B", Resources(gpu=1, cpu=1, mem_gb=5), submit=1.0, duration=50)]
    out = simulate(jobs, cluster, DRF(), config=NO_COST, strict=True)
    # t=1: A holds 1/4 GPU share (dominant), B holds 0.6 memory share: A1 first, then B1 (room left).
    starts = [e.job for e in out.result.record if e.kind == EventKind.STARTED and e.time == 1.0]
    assert starts == ["A1", "B1"]


def test_non_preemptive_by_default_and_preemptive_mode_equalises() -> None:
    # One node, 4 GPUs. A floods it at t=0 with long jobs; B arrives at t=10.
    cluster = ClusterSpec.homogeneous("p", 1, Resources(gpu=4, cpu=32, mem_gb=128))
    d = Resources(gpu=1, cpu=4, mem_gb=16)
    jobs = [job(f"A{i}", "A", d, duration=1000) for i in range(6)] + \
           [job(f"B{i}", "B", d, duration=1000, submit=10.0) for i in range(4)]
    plain = simulate(jobs, cluster, DRF(), config=NO_COST, strict=True)
    assert plain.metrics.preemptions == 0
    assert started_at(plain, 10.0) == {}
    pre = simulate(jobs, cluster, DRF(preemptive=True), config=NO_COST, strict=True)
    # A at share 1, B at 0: pause A's newest while A keeps >= B's share after the swap:
    # 3/4 >= 1/4 ok, 2/4 >= 2/4 ok, 1/4 >= 3/4 no -> 2 and 2.
    assert started_at(pre, 10.0) == {"B": 2}
    paused = [e.job for e in pre.result.record if e.kind == EventKind.PAUSED and e.time == 10.0]
    assert paused == ["A3", "A2"]  # most recently started first
    assert pre.result.unfinished == {}


def test_backfill_lets_a_tenant_skip_its_blocked_head() -> None:
    cluster = ClusterSpec.homogeneous("b", 1, Resources(gpu=4, cpu=32, mem_gb=128))
    small, big = Resources(gpu=1, cpu=1, mem_gb=1), Resources(gpu=1, cpu=1, mem_gb=1)
    jobs = [job("A0", "A", small, duration=100), job("A1", "A", big, workers=4, duration=100),
            job("A2", "A", small, duration=100)]
    strict = simulate(jobs, cluster, DRF(), config=NO_COST, strict=True)
    assert started_at(strict, 0.0) == {"A": 1}
    loose = simulate(jobs, cluster, DRF(backfill=True), config=NO_COST, strict=True)
    assert started_at(loose, 0.0) == {"A": 2}


def test_registry_and_arguments() -> None:
    assert make_policy("drf").name == "drf"
    assert DRF(preemptive=True, backfill=True).name == "drf+preempt+backfill"
    with pytest.raises(ValueError, match="preemptive must be True or False, got 'yes'"):
        DRF(preemptive="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="backfill"):
        DRF(backfill=1)  # type: ignore[arg-type]


SHAPES = [Resources(gpu=1, cpu=2, mem_gb=8), Resources(gpu=2, cpu=4, mem_gb=16),
          Resources(gpu=1, cpu=12, mem_gb=8), Resources(gpu=1, cpu=2, mem_gb=100),
          Resources(gpu=0.5, cpu=1, mem_gb=4)]


@st.composite
def tenant_workloads(draw: st.DrawFn) -> list[TraceJob]:
    out, t = [], 0.0
    for i in range(draw(st.integers(1, 20))):
        t += draw(st.floats(0, 40))
        d = draw(st.sampled_from(SHAPES))
        n = 1 if d["gpu"] < 1 else draw(st.integers(1, 3))
        out.append(job(f"j{i}", draw(st.sampled_from("abc")), d, duration=draw(st.floats(1, 300)), submit=t,
                       weight=draw(st.sampled_from([1.0, 2.0])), workers=n))
    return out


class Checked(DRF):
    """DRF that checks its incrementally kept tenant usage against a recount at every decision."""

    def decide(self, view):  # type: ignore[override]
        shares = self._book.shares(view)
        fresh: dict[str, np.ndarray] = {}
        for j in view.running.values():
            fresh[j.spec.tenant] = fresh.get(j.spec.tenant, 0.0) + job_usage(view, j)
        for t in set(fresh) | set(shares.usage):
            assert np.allclose(shares.usage.get(t, 0.0), fresh.get(t, 0.0)), t
        return super().decide(view)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tenant_workloads(), st.booleans(), st.booleans())
def test_never_over_allocates_and_every_job_ends(jobs, preemptive, backfill) -> None:
    cluster = ClusterSpec.homogeneous("h", 2, Resources(gpu=4, cpu=32, mem_gb=256))
    out = simulate(jobs, cluster, Checked(preemptive=preemptive, backfill=backfill),
                   config=SimConfig(checkpoint_s=2.0, restore_s=3.0), strict=True)
    assert out.result.unfinished == {}
    assert all(j.state in (JobState.FINISHED, JobState.REJECTED) for j in out.result.jobs.values())


class Refused(Checked):
    """Counts a waiting job as started (``expect``) without planning it: a start the scheduler refused."""

    def decide(self, view):  # type: ignore[override]
        plan = super().decide(view)
        for j in view.pending.values():
            self._book.expect(j, job_usage(view, j))
        return plan


def test_a_refused_start_leaves_the_usage_even_when_no_allocation_changed() -> None:
    # t=0 A0 takes the node; B0 (t=1) and C0 (t=2) wait: their rounds change no allocation, so
    # the book may skip its running-set sync, but not after expect() counted a start that never came
    cluster = ClusterSpec.homogeneous("r", 1, Resources(gpu=4, cpu=32, mem_gb=128))
    d = Resources(gpu=4, cpu=4, mem_gb=16)
    jobs = [job("A0", "A", d, duration=100), job("B0", "B", d, submit=1.0), job("C0", "C", d, submit=2.0)]
    out = simulate(jobs, cluster, Refused(), config=NO_COST, strict=True)
    assert out.result.unfinished == {}


class PlainRounds(DRF):
    """DRF by the definition of its round: every tenant ranked and tried (``_decide`` without the tenants whose
    head fits, so without the one-tenant round), the heads read afresh; only the quiet-round skip is kept. At every
    decision it also checks the kept head shapes against fresh ones."""

    def decide(self, view):  # type: ignore[override]
        from cohabit.policies import drf as drf_module
        if not view.pending and not view.paused:
            return []
        fresh = drf_module._heads_that_fit(view)
        assert drf_module._heads_that_fit(view, self._heads) == fresh, view.now
        if self._quiet is not None and (self._quiet.still(view) or not fresh):
            self._book.sync(view)
            self._quiet.planned(view, [])
            return []
        plan = self._decide(view, None)
        if self._quiet is not None:
            self._quiet.planned(view, plan)
        return plan


def _tenant_burst(seed: int) -> list[TraceJob]:
    """120 jobs of three tenants on 2 x 4 GPUs: mostly one GPU with a few larger ones, bursts that fill the queue
    and gaps that drain it (rounds with one fitting tenant that start one job or several, or none)."""
    import random
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(120):
        t += rng.choice([0.0, 0.0, 1.0, 5.0, 60.0])
        d = rng.choice([Resources(gpu=1, cpu=2, mem_gb=8)] * 4 + [Resources(gpu=1, cpu=12, mem_gb=8)])
        n = rng.choice([1, 1, 1, 1, 2, 3])
        out.append(job(f"j{i}", rng.choice("abc"), d, duration=rng.uniform(5, 200), submit=t,
                       weight=rng.choice([1.0, 1.0, 2.0]), workers=n))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_tenant_rounds_and_kept_heads_give_the_rounds_by_definition(seed: int) -> None:
    """The one-tenant round (its jobs in order until one fails, its last start unreserved when the next job cannot
    fit after it) and the kept head shapes give the same record as ranking every tenant with fresh heads."""
    from cohabit.policies import drf as drf_module
    from cohabit.report.fingerprint import fingerprint
    cluster = ClusterSpec.homogeneous("h", 2, Resources(gpu=4, cpu=32, mem_gb=256))
    jobs = _tenant_burst(seed)
    seen = Counter()
    real_one, real_after = DRF._one_tenant, drf_module.Draft.could_fit_after

    def one(self, view, tenant):  # type: ignore[no-untyped-def]
        plan = real_one(self, view, tenant)
        seen[f"plan{min(len(plan), 2)}"] += 1
        return plan

    def after(self, *a):  # type: ignore[no-untyped-def]
        ok = real_after(self, *a)
        seen[f"after_{ok}"] += 1
        return ok

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(DRF, "_one_tenant", one)
        mp.setattr(drf_module.Draft, "could_fit_after", after)
        fast = simulate(jobs, cluster, DRF(), config=NO_COST, strict=True)
    plain = simulate(jobs, cluster, PlainRounds(), config=NO_COST, strict=True)
    assert fingerprint(fast.result.record, fast.metrics) == fingerprint(plain.result.record, plain.metrics)
    def events(out):  # type: ignore[no-untyped-def]
        return [(e.time, str(e.kind), e.job, None if e.kind == EventKind.DECISION else e.data)
                for e in out.result.record]  # (a decision's data is its wall time)
    assert events(fast) == events(plain)
    # the shortcuts were taken: rounds of one start and of several, last starts left unreserved and reserved
    assert seen["plan1"] and seen["plan2"] and seen["after_False"] and seen["after_True"], seen
