"""Session drl12: the load-matched 30-server workload, the skip of jobs that cannot fit in total,
and the multi-seed summary of bench/drl_seeds.py (tiny)."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.policies.drl.state import PlacementState, new_entry
from cohabit.policies.drl.taskwise import place_new
from cohabit.sim.drl_workload import (LOAD_MATCHED_30, arrival_counts, generate, mean_arrivals, mean_length,
                                      offered_load)
from conftest import load_bench

W_DEMAND = np.array([0.5, 0.25, 0.25])  # one of a server's 2 GPUs, 2 of its 8 cores, 12 of its 48 GB


def test_load_matched_rack_is_offered_the_testbeds_load_per_gpu():
    # (3 jobs x 2 GPUs) / 12 GPUs = (3 s jobs x 5.5 GPUs) / 60 GPUs  =>  s = 20 / 11
    assert LOAD_MATCHED_30 == pytest.approx(20 / 11)
    for arrival in ("poisson", "bursty"):
        six, rack = offered_load(arrival, 6), offered_load(arrival, 30, rate_scale=LOAD_MATCHED_30)
        assert rack["gpu_load"] == pytest.approx(six["gpu_load"])
        assert rack["cpu_load"] == pytest.approx(six["cpu_load"])
        assert offered_load(arrival, 30)["gpu_load"] < 0.6 * six["gpu_load"]
    # uniform counts are whole numbers: 2-9 (mean 5.5) for the wanted 5.45
    assert offered_load("uniform", 30, rate_scale=LOAD_MATCHED_30)["gpu_load"] == pytest.approx(
        offered_load("uniform", 6)["gpu_load"], rel=0.01)


def test_arrival_means_and_mean_length_match_the_generator():
    rng = np.random.default_rng(0)
    for arrival in ("uniform", "poisson", "bursty"):
        for scale in (1.0, LOAD_MATCHED_30):
            counts = arrival_counts(arrival, 20000, rng, scale)
            assert np.mean(counts) == pytest.approx(mean_arrivals(arrival, scale), rel=0.04)
    lengths = [j.truth.iterations for j in generate(400, arrival="poisson", seed=4)]
    # work = length x solo speed; the clipped log-normal's mean (1.207 intervals) vs a direct sample
    sample = np.clip(np.random.default_rng(1).lognormal(np.log(0.8), 0.9, 200000), 0.25, 30.0)
    assert mean_length() == pytest.approx(float(sample.mean()), rel=0.01) and len(lengths) > 600
    # scale 1 leaves the existing workloads unchanged (the embedded traces and every seed used so far)
    a = generate(5, arrival="bursty", seed=7)
    b = generate(5, arrival="bursty", seed=7, rate_scale=1.0)
    assert [j.spec for j in a] == [j.spec for j in b]
    assert len(generate(30, arrival="poisson", seed=7, n_servers=30, rate_scale=LOAD_MATCHED_30)) > len(
        generate(30, arrival="poisson", seed=7, n_servers=30))
    with pytest.raises(ValueError, match="rate_scale"):
        generate(3, rate_scale=0.0)


def test_a_job_that_cannot_fit_in_total_waits_without_an_inference():
    free = np.full((3, 3), 0.5)  # 3 servers with one free GPU each: 3 GPUs in all
    big = new_entry("big", "vgg-16", True, 4, 0, W_DEMAND, np.zeros(3), 3)   # 4 GPUs: cannot fit
    small = new_entry("small", "wlm", True, 2, 0, W_DEMAND, np.zeros(3), 3)  # 2 GPUs on two servers
    state = PlacementState(free.copy(), [big, small])
    asked: list[str] = []

    def first_valid(st, job, mask):
        asked.append(job.key)
        return int(np.flatnonzero(mask)[0])

    placed, waiting = place_new(state, first_valid)
    assert [e.key for e in placed] == ["small"] and [e.key for e in waiting] == ["big"]
    assert asked == ["small", "small"]  # the big job's turn asked nothing
    # a job that fits in total but not task by task is still tried (the check is only necessary)
    odd = new_entry("odd", "wlm", True, 1, 0, np.array([0.5, 0.75, 0.25]), np.zeros(3), 3)
    state = PlacementState(np.full((3, 3), 0.5), [odd])
    assert state.room_in_total(odd) and not state.mask(odd).any()
    asked.clear()
    placed, waiting = place_new(state, first_valid)
    assert not placed and [e.key for e in waiting] == ["odd"]


def test_seed_summary_pairs_drl_with_the_best_mean_baseline():
    seeds = load_bench("drl_seeds")
    rows = []
    for s, (drl, tetris, lif) in enumerate([(2.0, 3.0, 2.5), (3.0, 2.0, 4.0), (1.0, 4.0, 1.5)]):
        jct = {"drl": drl, "lb": 9.0, "tetris": tetris, "tiresias": 9.0, "lif-line": lif, "lif-quad": 9.0}
        rows.append({"pattern": "uniform", "seed": s, "solo_bound": 1.0, "jct": jct, "cpu_s": {"drl": 0.1}})
    out = seeds.summarise(rows)["uniform"]
    assert out["best_baseline"] == "lif-line"  # mean 2.667 against tetris 3.0
    assert out["gain_pct"] == pytest.approx(100 * (1 - 2.0 / (8 / 3)))
    assert out["ratio_mean"] == pytest.approx(np.mean([2 / 2.5, 3 / 4, 1 / 1.5]))
    assert out["wins"] == 3
    # against the least baseline of each seed (tetris 2.0 on seed 1): drl wins two of three
    assert out["wins_vs_seed_best"] == 2
    assert out["ratio_vs_seed_best_mean"] == pytest.approx(np.mean([2 / 2.5, 3 / 2, 1 / 1.5]))
    assert out["solo_gain_bound_pct"] == pytest.approx(100 * (1 - 1.0 / (8 / 3)))


def test_isolated_teacher_chooses_off_shared_servers_while_the_mask_stays_whole():
    from cohabit.learn.drl_dagger import IsolatedTeacher

    running = new_entry("r", "vgg-16", True, 1, 0, W_DEMAND, np.zeros(3), 3, placed=(0,), new=False)
    job = new_entry("n", "wlm", True, 2, 0, W_DEMAND, np.zeros(3), 3)
    free = np.array([[0.5, 0.75, 0.75], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    state = PlacementState(free, [running, job])

    def lowest(st, j, mask):
        return int(np.flatnonzero(mask)[0])

    mask = state.mask(job)
    assert lowest(state, job, mask) == 0  # beside the running job
    teacher = IsolatedTeacher(lowest, "compact")
    first = teacher(state, job, mask)
    assert first == 2  # server 1, unshared
    state.apply(job, first)
    assert teacher(state, job, state.mask(job)) == 2  # compact: beside its own first worker
    assert state.mask(job)[0]  # the actor's mask (what is recorded) still offers the shared server
