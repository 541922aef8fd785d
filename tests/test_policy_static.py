"""Static partitions: slices sized by weight, jobs only inside their slice, isolated machines per job."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies import make_policy
from cohabit.policies.static import StaticPartition, apportion
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)


def job(id: str, tenant: str, gpus: float, duration: float = 100.0, submit: float = 0.0,
        weight: float = 1.0) -> TraceJob:
    spec = simple_job(id, gpus, submit_time=submit, tenant=tenant, weight=weight, iterations=int(duration))
    return TraceJob(spec, JobTruth(iterations=int(duration), duration=duration, ref_workers=max(int(gpus), 1)))


def placements(outcome) -> list[tuple[float, str, str, list[int]]]:
    tenant = {e.job: e.data["tenant"] for e in outcome.result.record if e.kind == EventKind.SUBMITTED}
    return [(e.time, e.job, tenant[e.job], e.data["nodes"]) for e in outcome.result.record
            if e.kind in (EventKind.STARTED, EventKind.RESUMED)]


def test_apportion_by_largest_remainder_with_one_node_each() -> None:
    assert apportion(16, [1, 1, 1]) == [6, 5, 5]   # 1 each, then 13 split 4.33 each: +1 to the first
    assert apportion(10, [3, 1]) == [7, 3]         # 1 each, then 8 split 6 / 2
    assert apportion(4, [3, 1]) == [3, 1]
    assert apportion(2, [1, 1, 1]) == [1, 1, 0]    # fewer nodes than tenants: the last waits
    assert apportion(5, []) == []


def test_jobs_run_only_inside_their_tenant_slice() -> None:
    policy = StaticPartition(slices={"a": 3, "b": 1})
    jobs = [job(f"b{i}", "b", 2, submit=float(i)) for i in range(6)] + \
           [job(f"a{i}", "a", 1, submit=10.0 + i) for i in range(3)]
    out = simulate(jobs, small_cluster(4, 4), policy, config=NO_COST, strict=True)
    assert policy.slices() == {"a": (0, 1, 2), "b": (3,)}
    for _, _, tenant, nodes in placements(out):
        assert set(nodes) <= set(policy.slices()[tenant])
    # b's six 2-GPU jobs share one 4-GPU node: at most two at a time, although nodes 0-2 are idle
    starts = [t for t, j, tenant, _ in placements(out) if tenant == "b"]
    assert starts == [0.0, 1.0, 100.0, 101.0, 200.0, 201.0]
    assert out.result.unfinished == {}


def test_catch_all_slice_and_unlisted_tenants() -> None:
    jobs = [job("x", "x", 1), job("y", "y", 1), job("a", "a", 1)]
    shared = StaticPartition(slices={"a": 1, "*": 1})
    out = simulate(jobs, small_cluster(2, 4), shared, config=NO_COST, strict=True)
    where = {j: nodes for _, j, _, nodes in placements(out)}
    assert where == {"x": [1], "y": [1], "a": [0]}
    alone = simulate(jobs, small_cluster(2, 4), StaticPartition(slices={"a": 1}), config=NO_COST, strict=True)
    assert set(alone.result.unfinished) == {"x", "y"}  # no slice for them: they never run


def test_learned_slices_never_share_a_node_between_tenants() -> None:
    # a alone at first: the whole cluster is its slice. b arrives: 2 nodes each; a's jobs still on
    # b's new nodes keep running, and b only starts on a node once a's jobs have left it.
    policy = StaticPartition()
    jobs = [job(f"a{i}", "a", 4, duration=100.0) for i in range(4)] + [job("b0", "b", 4, submit=10.0)]
    out = simulate(jobs, small_cluster(4, 4), policy, config=NO_COST, strict=True)
    assert policy.slices() == {"a": (0, 1), "b": (2, 3)}
    starts = {j: (t, nodes) for t, j, _, nodes in placements(out)}
    assert starts["b0"] == (100.0, [2, 2, 2, 2])
    assert all(starts[f"a{i}"][0] == 0.0 for i in range(4))


def test_isolated_mode_gives_each_job_whole_machines() -> None:
    jobs = [job(f"j{i}", "t", g, d, submit=float(i)) for i, (g, d) in enumerate([(1, 100), (1, 50), (2, 80), (1, 10)])]
    out = simulate(jobs, small_cluster(3, 4), StaticPartition(by="job"), config=NO_COST, strict=True)
    holder: dict[int, str] = {}
    for e in out.result.record:
        if e.kind == EventKind.STARTED:
            for n in set(e.data["nodes"]):
                assert n not in holder, f"{e.job} shares node {n} with {holder.get(n)}"
                holder[n] = e.job
        elif e.kind == EventKind.FINISHED:
            holder = {n: j for n, j in holder.items() if j != e.job}
    # three nodes: j0, j1, j2 alone on one each; j3 waits for the first to free (j1 at 51)
    assert [(t, j) for t, j, _, _ in placements(out)] == [(0.0, "j0"), (1.0, "j1"), (2.0, "j2"), (51.0, "j3")]


def test_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="by must be one of tenant, job, got 'team'"):
        StaticPartition(by="team")
    with pytest.raises(ValueError, match=r"slices\['a'\] must be a finite weight > 0, got 0"):
        StaticPartition(slices={"a": 0})
    with pytest.raises(ValueError, match="slices only apply to by='tenant'"):
        StaticPartition(by="job", slices={"a": 1})
    with pytest.raises(ValueError, match="non-empty mapping"):
        StaticPartition(slices={})
    assert make_policy("static").name == "static"
    assert StaticPartition(by="job", backfill=True).name == "static-job+backfill"


@st.composite
def workloads(draw: st.DrawFn) -> list[TraceJob]:
    out, t = [], 0.0
    for i in range(draw(st.integers(1, 20))):
        t += draw(st.floats(0, 40))
        out.append(job(f"j{i}", draw(st.sampled_from("ab")), draw(st.sampled_from([0.25, 0.5, 1, 2, 4])),
                       duration=draw(st.floats(1, 300)), submit=t, weight=draw(st.sampled_from([1.0, 2.0]))))
    return out


class Checked(StaticPartition):
    """Asserts every decision: starts only inside the job's slice, on nodes no other slice uses."""

    def decide(self, view):  # type: ignore[override]
        plan = super().decide(view)
        if self.by == "tenant":
            slices = self.slices()
            others = {n for j in view.running.values() for n in j.placement
                      if self.slice_name(j.spec.tenant) is not None}
            for a in plan:
                name = self.slice_name(view.jobs[a.job].spec.tenant)
                assert set(a.placement) <= set(slices[name])
                mine = {n for j in view.running.values() if self.slice_name(j.spec.tenant) == name
                        for n in j.placement}
                assert not (set(a.placement) & (others - mine))
        return plan


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(["tenant", "job"]), st.booleans())
def test_never_over_allocates_and_every_job_ends(jobs, by, backfill) -> None:
    out = simulate(jobs, small_cluster(4, 4), Checked(by=by, backfill=backfill), strict=True)
    assert out.result.unfinished == {}
    assert all(j.state in (JobState.FINISHED, JobState.REJECTED) for j in out.result.jobs.values())


class _NoBlockedMemo(StaticPartition):
    """Static slices that try every slice's first job by placement in every round (no memo across rounds)."""

    def _sync_blocked(self, view):  # type: ignore[no-untyped-def]
        self._mark = None
        return False


def test_the_blocked_slice_memo_changes_no_result() -> None:
    """The memo that keeps a slice blocked until a job leaves its nodes gives the same records as trying
    every slice each round: on small contended runs with jobs that arrive together and jobs that end
    before the next round (their departure must reopen the slice), fractional GPUs and two tenants."""
    from cohabit.report.fingerprint import fingerprint

    for seed in range(40):
        rng = random.Random(seed)
        jobs, t = [], 0.0
        for i in range(rng.randint(4, 20)):
            t += rng.choice([0.0, 0.0, 1.0, rng.uniform(0, 40)])
            jobs.append(job(f"j{i}", rng.choice("ab"), rng.choice([0.25, 0.5, 1, 2, 4]),
                            duration=rng.choice([1.0, 300.0, rng.uniform(1, 300)]), submit=t,
                            weight=rng.choice([1.0, 2.0])))
        fast = simulate(jobs, small_cluster(4, 4), StaticPartition(), strict=True)
        slow = simulate(jobs, small_cluster(4, 4), _NoBlockedMemo(), strict=True)
        assert fingerprint(fast.result.record, fast.metrics) == fingerprint(slow.result.record, slow.metrics), seed
