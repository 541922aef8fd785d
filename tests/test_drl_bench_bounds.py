"""bench/drl_bounds.py: the headroom values printed beside bench/drl.py's table."""

from __future__ import annotations

import pytest

from cohabit.sim.drl_workload import INTERVAL_S, drl_cluster, drl_job
from cohabit.sim.runner import simulate
from cohabit.policies import make_policy
from conftest import load_bench


def _two_jobs_on_one_server():
    # CTC (CPU-hungry) and ResNeXt-110 (CPU-sensitive), one worker + one PS each: both fit one server
    a = drl_job("a", "cnn-text-classification", False, 1, 1, 2 * INTERVAL_S, 0.0)
    b = drl_job("b", "resnext-110", False, 1, 1, 1 * INTERVAL_S, 0.0)
    return [a, b]


def test_no_interference_world_runs_co_located_jobs_at_their_solo_speed():
    mod = load_bench("drl_bounds")
    jobs = _two_jobs_on_one_server()
    one = drl_cluster(1)
    # with the real world the pair slows down (the bound would be no bound otherwise)
    slowed = simulate(jobs, one, make_policy("fifo")).metrics.avg_jct / INTERVAL_S
    got = mod.bounds(jobs, one)
    assert got["solo_no_queue"] == pytest.approx(1.5, rel=1e-3)
    assert got["no_interference_fifo"] == pytest.approx(1.5, rel=1e-3)
    assert got["no_interference_backfill"] == pytest.approx(1.5, rel=1e-3)
    assert slowed > 1.6


def test_queueing_shows_in_the_fifo_bound_only():
    mod = load_bench("drl_bounds")
    # three 2-worker all-reduce jobs at once on one server of 2 GPUs: they run one after another
    jobs = [drl_job(f"j{i}", "resnet-50", True, 2, 0, INTERVAL_S, 0.0) for i in range(3)]
    got = mod.bounds(jobs, drl_cluster(1))
    assert got["solo_no_queue"] == pytest.approx(1.0, rel=1e-3)
    assert got["no_interference_fifo"] == pytest.approx(2.0, rel=1e-3)  # (1 + 2 + 3) / 3


def test_diag_splits_jct_into_wait_plus_solo_times_slowdown():
    """bench/drl_diag.py: three 2-GPU jobs at once on one 2-GPU server run one after another,
    alone: waits 0, 1, 2 intervals, no slowdown; a co-located pair shows its slowdown instead."""
    mod = load_bench("drl_diag")
    jobs = [drl_job(f"j{i}", "resnet-50", True, 2, 0, INTERVAL_S, 0.0) for i in range(3)]
    res = simulate(jobs, drl_cluster(1), make_policy("fifo"))
    got = mod.split(jobs, res)
    assert got["wait"] == pytest.approx(1.0, rel=1e-3) and got["wait_gpus_2"] == pytest.approx(1.0, rel=1e-3)
    assert got["solo"] == pytest.approx(1.0, rel=1e-3) and got["slowdown"] == pytest.approx(1.0, rel=1e-3)
    assert got["avg_jct"] == pytest.approx(res.metrics.avg_jct / INTERVAL_S, rel=1e-6) == pytest.approx(2.0, rel=1e-3)
    assert got["started_at_once"] == pytest.approx(1 / 3)
    pair = _two_jobs_on_one_server()
    res = simulate(pair, drl_cluster(1), make_policy("fifo"))
    got = mod.split(pair, res)
    assert got["wait"] == 0.0 and got["slowdown"] > 1.05
    assert got["avg_jct"] == pytest.approx(got["wait"] + got["solo"] * got["slowdown"], rel=1e-9)
    assert got["avg_jct"] == pytest.approx(res.metrics.avg_jct / INTERVAL_S, rel=1e-6)


def test_diag_attribution_sums_to_the_excess_over_solo_and_marks_who_shared():
    """bench/drl_diag.py --attribute: jobs run one after another on one server are alone
    throughout (their excess is their waiting); a pair started in the same plan on one server
    shares it (each is joined by the other), and the parts add up to avg JCT - mean solo."""
    mod = load_bench("drl_diag")
    jobs = [drl_job(f"j{i}", "resnet-50", True, 2, 0, INTERVAL_S, 0.0) for i in range(3)]
    rec = mod.Starts(make_policy("fifo"))
    got = mod.attribute(jobs, simulate(jobs, drl_cluster(1), rec.policy), rec.log)
    assert got["alone throughout"]["jobs"] == 3 and got["excess"] == pytest.approx(1.0, rel=1e-3)
    assert got["alone throughout"]["excess"] == pytest.approx(got["excess_wait"], rel=1e-9)
    pair = _two_jobs_on_one_server()
    rec = mod.Starts(make_policy("fifo"))
    res = simulate(pair, drl_cluster(1), rec.policy)
    got = mod.attribute(pair, res, rec.log)
    split = mod.split(pair, res)
    assert got["excess"] == pytest.approx(split["avg_jct"] - split["solo"], rel=1e-9) and got["excess"] > 0.05
    parts = ("beside only", "joined only", "beside and joined", "alone throughout")
    assert sum(got[k]["excess"] for k in parts) == pytest.approx(got["excess"], rel=1e-9)
    assert sum(got[k]["jobs"] for k in parts) == 2 and got["alone throughout"]["jobs"] == 0
    assert {r["job"]: r["joined"] for r in got["top"]} == {"a": True, "b": True}


def test_excess_split_adds_up_to_the_jct_and_tells_held_queued_and_co_location_apart():
    """bench/drl_excess.py: a co-located pair's excess is co-location (no wait, no layout); jobs run one after
    another on one server only queue; a 2-GPU job the hold rule keeps from spreading over two half-used
    servers is held; in every case solo + held + queued + layout + co-location is the average JCT."""
    mod = load_bench("drl_excess")

    def run(jobs, cluster, policy, hold=0.0):
        pol = make_policy(policy)
        pol.hold_s = hold
        rec = mod.Recorder(pol)
        try:
            res = simulate(jobs, cluster, rec.policy)
        finally:
            rec.close()
        got = mod.summary(mod.excess(jobs, res, rec.starts, rec.held, cluster))
        assert got["jct"] == pytest.approx(res.metrics.avg_jct / INTERVAL_S, rel=1e-9)
        return got

    pair = run(_two_jobs_on_one_server(), drl_cluster(1), "fifo")
    assert pair["held"] == pair["queued"] == 0.0 and pair["coloc"] > 0.05
    assert pair["layout"] == pytest.approx(0.0, abs=1e-9)
    seq = run([drl_job(f"j{i}", "resnet-50", True, 2, 0, INTERVAL_S, 0.0) for i in range(3)], drl_cluster(1), "fifo")
    assert seq["queued"] == pytest.approx(1.0, rel=1e-3) and seq["coloc"] == pytest.approx(0.0, abs=1e-6)
    jobs = [drl_job("a", "resnet-50", True, 1, 0, 2 * INTERVAL_S, 0.0), drl_job("b", "resnet-50", True, 1, 0, INTERVAL_S, 0.0),
            drl_job("c", "resnet-50", True, 2, 0, INTERVAL_S, 10.0)]
    two = drl_cluster(2)
    held = run(jobs, two, "lif-line", hold=float("inf"))
    assert held["held"] > 0.2 and held["spread_jobs"] == 0.0
    spread = run(jobs, two, "lif-line")
    assert spread["held"] == 0.0 and spread["spread_jobs"] > 0.0
    assert spread["layout"] > 0.01 > abs(held["layout"])  # spread over two servers: slower even alone there


def test_bench_latency_view_serves_the_default_drl_begin():
    """bench/drl.py times drl's choice with a stand-in view (``_EightCores``): the default ``drl`` reads the
    jobs' time left from it (session drl19a), so it must carry running and pending jobs and a clock."""
    import numpy as np

    from cohabit.policies.drl.state import PlacementState, new_entry

    mod = load_bench("drl")
    pol = make_policy("drl")
    jobs = [new_entry(f"j{i}", "vgg-16", False, 2, 2, np.array([0.5, 0.25, 0.25]), np.array([0.0, 0.125, 0.125]), 6,
                      new=(i == 2)) for i in range(3)]
    st = PlacementState(np.full((6, 3), 0.5), jobs)
    pol.begin(st, mod._EightCores())
    assert pol.weigh_now == "left" and 0 <= pol.choose(st, jobs[-1], st.mask(jobs[-1])) < 12
