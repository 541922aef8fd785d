"""Rotary-AQP and its baselines (edf, lcaf, relaqs; rr is shared with Rotary-DLT) on query jobs in
the simulator, whose costs and accuracy come from the packaged per-batch profiles of the queries."""

from __future__ import annotations

import json
from importlib.resources import files

import pytest

from cohabit.aqp.workload import simulated, table31_jobs
from cohabit.engine.state import JobState
from cohabit.policies import make_policy
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.job import JobSpec, TaskGroup

PROFILE = json.loads(files("cohabit.data").joinpath("profiles/aqp_tpch_sf0.1_b20.json").read_text())
AQP_POLICIES = ["rotary-aqp", "edf", "rr", "lcaf", "relaqs"]


def cores(n: int, mem_gb: float = 8.0) -> ClusterSpec:
    return ClusterSpec.homogeneous("cpu", n, Resources(cpu=1, mem_gb=mem_gb))


def qjob(id: str, query: str, *, submit: float = 0.0, criteria: str = "accuracy >= 0.95 within 600s",
         epochs: int = 4, mem_gb: float = 0.5) -> JobSpec:
    return JobSpec(id=id, kind="query", submit_time=submit, iterations=20, epochs=epochs, criteria=criteria,
                   workers=TaskGroup(count=1, demand=Resources(cpu=1, mem_gb=mem_gb)),
                   workload={"name": "tpch-query", "query": query, "scale": 0.1})


def run(policy: str, jobs: list[JobSpec], cluster: ClusterSpec | None = None):
    return simulate(simulated(jobs, PROFILE, startup_s=0.2), cluster or cores(1), make_policy(policy), strict=True)


@pytest.mark.parametrize("policy", AQP_POLICIES)
def test_aqp_policies_end_every_table31_job_by_its_criterion(policy):
    jobs = table31_jobs(n=12, seed=3, scale=0.1, batches=20, epochs=4, time_scale=0.005)
    out = run(policy, jobs, cores(2))
    att = out.metrics.attainment
    assert att is not None and att.jobs_with_criteria == 12
    states = {j.state for j in out.result.jobs.values()}
    assert states <= {JobState.FINISHED, JobState.STOPPED_EARLY}
    assert att.attained == sum(j.state is JobState.FINISHED for j in out.result.jobs.values())


def test_edf_runs_the_earliest_deadline_first():
    jobs = [qjob("late", "q9", criteria="accuracy >= 0.999 within 900s"),
            qjob("soon", "q9", criteria="accuracy >= 0.999 within 100s")]
    out = run("edf", jobs)
    assert out.result.jobs["soon"].first_start < out.result.jobs["late"].first_start


def test_lcaf_gives_the_next_epoch_to_the_least_accurate_query():
    # q13's estimate rises slowly, q1's at once: after their first epochs q13 keeps the core
    jobs = [qjob("q1", "q1", criteria="accuracy >= 0.999 within 900s"),
            qjob("q13", "q13", criteria="accuracy >= 0.999 within 900s", submit=0.01)]
    out = run("lcaf", jobs)
    assert out.result.jobs["q13"].end_time < out.result.jobs["q1"].end_time


def test_rotary_aqp_skips_a_query_whose_memory_estimate_exceeds_the_node(tmp_path, monkeypatch):
    # a prior of 256 MB (heavy, no data to EXPLAIN in an empty cache) on a 0.1 GB node never fits
    monkeypatch.setenv("COHABIT_TPCH_DIR", str(tmp_path))
    jobs = [qjob("heavy", "q9", criteria="accuracy >= 0.99 within 50s", mem_gb=0.05),
            qjob("light", "q6", criteria="accuracy >= 0.99 within 50s", mem_gb=0.05, submit=0.01)]
    out = run("rotary-aqp", jobs, ClusterSpec.homogeneous("cpu", 1, Resources(cpu=1, mem_gb=0.1)))
    assert out.result.jobs["heavy"].first_start is None and out.result.jobs["heavy"].state is JobState.STOPPED_EARLY
    assert out.result.jobs["light"].first_start is not None


def test_rotary_aqp_epoch_span_follows_the_memory_estimate():
    pol = make_policy("rotary-aqp")
    pol._m_hat = {"a": 100.0, "b": 300.0}
    a = type("J", (), {"id": "a"})()
    b = type("J", (), {"id": "b"})()
    assert pol.epoch_span(a) == pytest.approx(0.5) and pol.epoch_span(b) == pytest.approx(1.5)


def test_ratchet_switch_cost_keeps_a_nearly_done_query_running():
    long = TraceJob(qjob("long", "q1", epochs=20, criteria="accuracy >= 0.999 within 900s"),
                    JobTruth(iterations=20, duration=20.0, accuracy=tuple([0.5] * 20)))
    other = TraceJob(qjob("other", "q1", epochs=20, submit=17.5, criteria="accuracy >= 0.999 within 900s"),
                     JobTruth(iterations=20, duration=20.0, accuracy=tuple([0.5] * 20)))
    plain = simulate([long, other], cores(1), make_policy("rr"), strict=True).result.jobs["long"]
    kept = simulate([long, other], cores(1), make_policy("edf:switch_cost_s=5"), strict=True).result.jobs["long"]
    assert plain.preemptions >= 1  # round robin pauses it 2.5 s before its end
    assert kept.preemptions == 0 and kept.end_time == pytest.approx(20.0, abs=0.5)


def node(cores_n: int, mem_gb: float = 8.0) -> ClusterSpec:
    return ClusterSpec.homogeneous("cpu", 1, Resources(cpu=cores_n, mem_gb=mem_gb))


def test_rotary_aqp_deals_spare_cores_as_extra_cores_and_queries_finish_sooner():
    # Alg. 4: one query on a 4-core node gets 1 core, then the 3 spare ones as extra cores
    jobs = [qjob("a", "q9", criteria="accuracy >= 0.999 within 900s")]
    fast = run("rotary-aqp", jobs, node(4))
    slow = run("rotary-aqp:extra_cores=false", jobs, node(4))
    shares = [e.data["alloc"]["cpu"] for e in fast.result.record
              if e.kind == "reallocated" and e.job == "a"]
    assert shares and shares[0] == 4
    assert not [e for e in slow.result.record if e.kind == "reallocated"]
    assert fast.result.jobs["a"].end_time < 0.5 * slow.result.jobs["a"].end_time  # Amdahl 0.9 on 4 cores: 3.1x


def test_rotary_aqp_takes_extra_cores_back_for_a_new_query_and_deals_them_round_the_queue():
    jobs = [qjob("a", "q9", criteria="accuracy >= 0.999 within 900s"),
            qjob("b", "q9", criteria="accuracy >= 0.999 within 900s", submit=0.05)]
    out = run("rotary-aqp", jobs, node(3))
    cpu = {}
    seen = []
    for e in out.result.record:
        if e.kind in ("started", "resumed", "reallocated") and e.job in ("a", "b"):
            cpu[e.job] = e.data["alloc"]["cpu"]
        elif e.kind in ("paused", "finished", "stopped") and e.job in cpu:
            cpu.pop(e.job)
        assert sum(cpu.values()) <= 3  # never more cores than the node has
        seen.append(dict(cpu))
    assert {"a": 3.0} in seen  # alone: all three cores
    assert any(s.get("b") and s.get("a") and s["a"] + s["b"] == 3 for s in seen)  # shared: 2 + 1


def test_set_share_that_does_not_fit_is_rejected_and_changes_nothing():
    from cohabit.engine.actions import SetShare, Start

    class Greedy:
        name = "greedy"

        def decide(self, view):
            plan = [Start(j.id, (0,)) for j in view.pending.values()]
            return plan + [SetShare("a", Resources(cpu=9))] if "a" in view.pending else plan

    out = simulate(simulated([qjob("a", "q6")], PROFILE), node(4), Greedy())
    rej = [e for e in out.result.record if e.kind == "action_rejected"]
    assert rej and "cpu" in rej[0].data["reason"]
    assert out.result.jobs["a"].state is JobState.FINISHED


def test_rotary_aqp_judges_an_unmeasured_query_infeasible_by_its_querys_past_speed():
    # "a" teaches the policy q9's seconds per batch; "b" (q9) then cannot reach 0.99 in 0.3 s, so the
    # core goes to "c" although "b"'s deadline is the earliest
    jobs = [qjob("a", "q9", criteria="accuracy >= 0.999 within 900s"),
            qjob("b", "q9", submit=100.0, criteria="accuracy >= 0.99 within 0.3s"),
            qjob("c", "q6", submit=100.0, criteria="accuracy >= 0.99 within 600s")]
    pol = make_policy("rotary-aqp")
    out = simulate(simulated(jobs, PROFILE, startup_s=0.2), cores(1), pol, strict=True)
    assert pol.batch_s(out.result.jobs["b"]) is not None
    assert out.result.jobs["c"].first_start == pytest.approx(100.0)
    b, c = out.result.jobs["b"], out.result.jobs["c"]
    assert b.first_start is None or b.first_start >= c.end_time - 1e-9
