"""Dorm's P2 on classes of identical servers (policies/dorm/aggregate.py) against the per-server model."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.policies.dorm.aggregate import ServerClasses, aggregate, should_aggregate, solve_aggregated
from cohabit.policies.dorm.milp import Problem, Thresholds, evaluate, solve
from cohabit.policies.dorm.shares import AppDemand

TH = Thresholds(0.2, 0.3)
KINDS = [((2, 0, 4), 8), ((4, 0, 8), 4), ((4, 1, 8), 2), ((2, 0, 8), 6)]


def small_instance(seed: int) -> Problem:
    """6 servers of two capacities (2 with a GPU), 8 applications of which 6 run (first fit)."""
    rng = np.random.default_rng(seed)
    cap = np.array([[8.0, 1.0 if j < 2 else 0.0, 32.0] for j in range(6)])
    apps = []
    for i in range(8):
        dmd, n_max = KINDS[rng.integers(len(KINDS))]
        apps.append(AppDemand(f"a{i}", np.array(dmd, float), float(rng.integers(1, 3)), 1, n_max))
    prev = np.zeros((8, 6), dtype=np.int64)
    free = cap.copy()
    for i in range(6):
        for j in rng.permutation(6):
            if (free[j] - apps[i].demand >= 0).all() and prev[i].sum() < 2:
                prev[i, j] += 1
                free[j] -= apps[i].demand
    return Problem(apps, cap, previous=prev)


def test_server_classes_count_identical_servers() -> None:
    cl = ServerClasses(np.array([[8.0, 1.0], [8.0, 0.0], [8.0, 1.0], [8.0, 0.0], [8.0, 0.0]]))
    assert len(cl) == 2 and sorted(cl.count.tolist()) == [2, 3]
    x = np.array([[1, 2, 3, 4, 5]])
    assert sorted(cl.sum_columns(x)[0].tolist()) == [1 + 3, 2 + 4 + 5]


def test_aggregated_model_has_the_per_server_objective_on_small_instances() -> None:
    feasible = exact = 0
    for seed in range(12):
        p = small_instance(seed)
        per_server = solve(p, TH, threads=1)
        classes = ServerClasses(p.capacity)
        agg = solve(aggregate(p, classes), TH, threads=1)
        if per_server.status != "optimal":
            assert per_server.status == "infeasible"
            continue
        feasible += 1
        assert agg.status == "optimal" and agg.utilization == pytest.approx(per_server.utilization, abs=1e-9)
        split = solve_aggregated(p, TH, threads=1)
        if split.ok and split.size["rounds"] == 1 and split.size["split_dropped"] == 0:
            # no container lost: the split has the class model's objective, the per-server optimum
            assert split.utilization == pytest.approx(per_server.utilization, abs=1e-9)
            exact += 1
        if split.ok:  # whatever the rounds, the split is a feasible per-server allocation of P2
            x = split.x
            assert (x.T.astype(float) @ p.demand <= p.capacity + 1e-9).all()
            assert all(a.n_min <= n <= a.n_max for a, n in zip(p.apps, x.sum(axis=1)))
            util, loss, adjusted = evaluate(p, x)
            assert util == pytest.approx(split.utilization) and loss <= split.fairness_bound + 1e-9
            assert len(adjusted) <= split.adjust_bound
    assert feasible >= 5 and exact >= 4


def test_only_large_problems_of_few_server_kinds_are_aggregated() -> None:
    p = small_instance(2)
    assert not should_aggregate(p)
    apps = [AppDemand(f"a{i}", np.array([1.0, 0.0]), 1.0, 1, 4) for i in range(300)]
    same = np.tile([[8.0, 0.0]], (100, 1))
    assert should_aggregate(Problem(apps, same))
    distinct = np.array([[8.0 + j, 0.0] for j in range(100)])
    assert not should_aggregate(Problem(apps, distinct))


def test_an_absolute_gap_stops_the_solve_at_an_incumbent_within_it() -> None:
    """``solve(mip_abs_gap=...)`` reaches HiGHS: with a gap above any utilization the solve stops at its
    first incumbent (here the keep-and-fill start), below the optimum; ``one_container`` is the smallest
    container's utilization (the class solve's gap on large instances)."""
    from cohabit.policies.dorm.aggregate import one_container
    from cohabit.policies.dorm.milp import keep_and_fill

    stopped = 0
    for seed in range(12):
        p = small_instance(seed)
        assert p.running is not None
        exact = solve(p, TH, threads=1)
        start = keep_and_fill(p, TH.adjust_bound(int(p.running.sum())))
        s_util = evaluate(p, start)[0]
        if exact.status != "optimal" or s_util >= exact.utilization - 1e-9:
            continue
        loose = solve(p, TH, threads=1, start=start, mip_abs_gap=10.0, symmetry=False)
        if loose.ok and loose.utilization < exact.utilization - 1e-9:
            stopped += 1
        assert loose.ok and loose.utilization <= exact.utilization + 1e-9
    assert stopped >= 1
    p = small_instance(0)
    assert one_container(p) == pytest.approx(float(p.util_per_container[p.util_per_container > 0].min()), rel=1e-5)
    assert one_container(p) < float(p.util_per_container[p.util_per_container > 0].min())
