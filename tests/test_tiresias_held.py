"""Tiresias' victims' GPUs per queue kept through a round's preemptions (issue 18, speed21a).

A round that preempts sums its victims' GPUs per queue while it makes their list (``round_victims``) and,
after each preemption, takes the paused victims' GPUs off those sums where every job's GPUs are whole numbers
(exact in any order) instead of summing the rest again. Checked against the sums made afresh from the
policy's running tables at every such moment, on contended Philly jobs, and against the path that sums again."""

from __future__ import annotations

from typing import Any

import pytest

import cohabit.policies.tiresias as tiresias_module
from cohabit.policies import make_policy
from cohabit.policies.tiresias_preempt import held_gpus, lower_gpus, lower_of, round_victims
from cohabit.policies.tiresias_queues import TIME_EPS
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec import cluster_from_arg


def _run(name: str, monkeypatch: pytest.MonkeyPatch, *, whole: bool) -> tuple[dict[str, Any], int]:
    """Simulate 2,500 contended Philly jobs; every sum the round keeps after a preemption is compared with the
    victims' sums made afresh (the eligible running jobs of ``Q_2`` and below, now). Returns the run's
    fingerprint and the number of checks."""
    policy = make_policy(name)  # (a spec string: name[:param=value])
    if not whole:
        policy._whole_gpus = False  # (never set back: the path that sums again)
    checks = [0]

    def checked_lower_of(held: list[float]) -> list[float]:
        # (decide calls lower_of by this name only after a preemption; lower_gpus calls its own module's)
        victims, fresh = round_victims(policy._run, policy._decided_at, policy.min_run_time, TIME_EPS)
        assert held == fresh == held_gpus(len(held), victims), (policy._decided_at, held, fresh)
        checks[0] += 1
        got = lower_of(held)
        assert got == lower_gpus(len(held), [], victims)
        return got

    monkeypatch.setattr(tiresias_module, "lower_of", checked_lower_of)
    jobs = load_trace("philly_82k", "philly", limit=2500).jobs
    out = simulate(jobs, cluster_from_arg("philly-512"), policy)
    monkeypatch.undo()
    return fingerprint(out.result.record, out.metrics), checks[0]


@pytest.mark.parametrize("name", ["tiresias", "tiresias-gittins", "tiresias:min_run_time=600"])
def test_kept_sums_equal_fresh_sums_after_every_preemption(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kept, n_kept = _run(name, monkeypatch, whole=True)
    summed, n_summed = _run(name, monkeypatch, whole=False)
    assert n_kept > 100 and n_kept == n_summed
    assert kept == summed


def test_a_fractional_job_turns_the_kept_sums_off() -> None:
    """Whole numbers add exactly in any order; a job with a fraction of a GPU (or an enormous count) does not."""
    from conftest import small_cluster, trace_job

    for gpus, whole in ((1, True), (0.5, False)):
        policy = make_policy("tiresias")
        simulate([trace_job("a", gpus, 100.0, submit=0.0)], small_cluster(), policy)
        assert policy._whole_gpus is whole
