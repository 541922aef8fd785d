"""Per-job state a policy keeps must not outlive the job (a long trace would grow without bound)."""

from __future__ import annotations

from cohabit.policies import make_policy
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec import cluster_from_arg


def test_srtf_forgets_finished_jobs():
    jobs = load_trace("philly_82k", "philly", limit=300).jobs
    policy = make_policy("srtf")
    out = simulate(jobs, cluster_from_arg("philly-512"), policy)
    assert out.metrics.jobs_finished == 300
    assert policy._waiting_rem == {} and policy._running_rem == {} and policy._started == {}
