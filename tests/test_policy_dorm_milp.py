"""Dorm's optimizer: DRF theoretical shares (textbook example) and P2 (Eq. 10-18) against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cohabit.policies.dorm.milp import PAPER_SETTINGS, Problem, Thresholds, evaluate, keep_and_fill, solve
from cohabit.policies.dorm.shares import AppDemand, drf_containers, fairness_loss, theoretical_shares


def test_drf_textbook_example():
    # Ghodsi et al. (NSDI'11) §4: <9 CPU, 18 GB>; A needs <1 CPU, 4 GB>, B needs <3 CPU, 1 GB>.
    cap = np.array([[9.0, 18.0]])
    apps = [AppDemand("A", np.array([1.0, 4.0]), n_max=100), AppDemand("B", np.array([3.0, 1.0]), n_max=100)]
    assert drf_containers(apps, cap) == {"A": 3, "B": 2}
    shares = theoretical_shares(apps, cap)
    assert shares["A"] == pytest.approx(2 / 3) and shares["B"] == pytest.approx(2 / 3)


def test_drf_respects_weights_and_n_max():
    cap = np.array([[12.0, 0.0]])
    apps = [AppDemand("a", np.array([1.0, 0.0]), weight=1.0, n_max=100),
            AppDemand("b", np.array([1.0, 0.0]), weight=2.0, n_max=100)]
    assert drf_containers(apps, cap) == {"a": 4, "b": 8}
    capped = [apps[0], AppDemand("b", np.array([1.0, 0.0]), weight=2.0, n_max=3)]
    assert drf_containers(capped, cap) == {"a": 9, "b": 3}  # b saturates at n_max; a takes the rest


def test_drf_pooled_capacity_and_integer_containers():
    # two servers of 3 CPUs: pooled 6; containers of 4 CPUs -> only one fits the pool
    cap = np.array([[3.0], [3.0]])
    apps = [AppDemand("big", np.array([4.0]), n_max=5), AppDemand("small", np.array([1.0]), n_max=5)]
    assert drf_containers(apps, cap) == {"big": 1, "small": 2}


def brute_force(problem: Problem, th: Thresholds) -> float | None:
    """Best utilization over every integer x within the column bounds; None if infeasible."""
    ub = problem.fit_bounds()
    n, b = ub.shape
    ranges = [range(int(ub[i, j]) + 1) for i in range(n) for j in range(b)]
    best = None
    m = problem.m
    for flat in itertools.product(*ranges):
        x = np.array(flat, dtype=np.int64).reshape(n, b)
        if ((x[:, :, None] * problem.demand[:, None, :]).sum(axis=0) > problem.capacity + 1e-9).any():
            continue
        tot = x.sum(axis=1)
        if any(not a.n_min <= t <= a.n_max for a, t in zip(problem.apps, tot)):
            continue
        util, loss, adjusted = evaluate(problem, x)
        if loss > th.fairness_bound(m) + 1e-9:
            continue
        if len(adjusted) > th.adjust_bound(int(problem.running.sum())):
            continue
        best = util if best is None else max(best, util)
    return best


def random_instance(rng: np.random.Generator) -> Problem:
    n_apps, n_srv = int(rng.integers(2, 4)), 2
    cap = np.array([[float(rng.integers(2, 6)), float(rng.integers(0, 2)), float(rng.integers(4, 10))]
                    for _ in range(n_srv)])
    apps = []
    for i in range(n_apps):
        d = np.array([float(rng.integers(1, 3)), float(rng.integers(0, 2)) * (cap[:, 1].sum() > 0),
                      float(rng.integers(1, 5))])
        apps.append(AppDemand(f"a{i}", d, weight=float(rng.integers(1, 4)), n_min=int(rng.integers(0, 2)) or 1,
                              n_max=int(rng.integers(1, 4))))
    prob = Problem(apps, cap)
    # a previous allocation: a feasible random one for a random subset (the others are new)
    prev = np.zeros((n_apps, n_srv), dtype=np.int64)
    free = cap.copy()
    for i in range(n_apps - 1):
        for j in range(n_srv):
            for _ in range(int(rng.integers(0, 3))):
                if prev[i].sum() < apps[i].n_max and (free[j] - apps[i].demand >= -1e-9).all():
                    prev[i, j] += 1
                    free[j] -= apps[i].demand
    prev[[i for i in range(n_apps) if prev[i].sum() < apps[i].n_min]] = 0
    return Problem(apps, cap, previous=prev)


@pytest.mark.parametrize("compact", [True, False])
@pytest.mark.parametrize("seed", range(30))
def test_milp_matches_brute_force(seed, compact):
    rng = np.random.default_rng(seed)
    prob = random_instance(rng)
    th = Thresholds(float(rng.choice([0.05, 0.1, 0.2, 1.0])), float(rng.choice([0.0, 0.3, 0.5, 1.0])))
    want = brute_force(prob, th)
    got = solve(prob, th, mip_rel_gap=0.0, compact=compact)
    if want is None:
        assert got.status == "infeasible" and got.x is None
        return
    assert got.status == "optimal"
    assert got.utilization == pytest.approx(want, abs=1e-6)
    util, loss, adjusted = evaluate(prob, got.x)
    assert loss <= got.fairness_bound + 1e-6
    assert len(adjusted) <= got.adjust_bound


def test_bounds_are_the_papers_ceilings():
    th = PAPER_SETTINGS["dorm-3"]
    assert th.fairness_bound(3) == 1  # ⌈0.1 * 2 * 3⌉
    assert PAPER_SETTINGS["dorm-1"].fairness_bound(3) == 2  # ⌈0.2 * 6⌉ = ⌈1.2⌉
    assert th.adjust_bound(15) == 2 and th.adjust_bound(0) == 0
    with pytest.raises(ValueError):
        Thresholds(1.5, 0.1)


def test_hand_instance_adjustment_bound_binds():
    # one server, 4 CPUs; two running apps of 1 CPU holding 2 each; a third arrives (n_min 1).
    cap = np.array([[4.0]])
    apps = [AppDemand(f"a{i}", np.array([1.0]), n_max=4) for i in range(3)]
    prev = np.array([[2], [2], [0]])
    # θ2 = 0 forbids touching a0, a1: no room for a2 -> infeasible
    assert solve(Problem(apps, cap, previous=prev), Thresholds(1.0, 0.0)).status == "infeasible"
    # θ2 = 0.5 allows one: a2 gets a container from one of them, the cluster stays full
    s = solve(Problem(apps, cap, previous=prev), Thresholds(1.0, 0.5))
    assert s.status == "optimal" and s.utilization == pytest.approx(1.0)
    assert sorted(s.x[:, 0].tolist()) == [1, 1, 2] and len(s.adjusted) == 1


def test_infeasible_fairness_bound():
    # one server of 2 CPUs; ŝ = 1/2 each (DRF: one container each). a's n_min forces it to hold
    # the whole server, b (n_min 0) gets nothing: loss |1 − ½| + |0 − ½| = 1. Only Eq. 15 decides:
    # bound ⌈0 · 2⌉ = 0 -> infeasible; θ1 = 0.5 gives ⌈0.5 · 2⌉ = 1 -> that allocation is optimal.
    cap = np.array([[2.0]])
    apps = [AppDemand("a", np.array([1.0]), n_min=2, n_max=2), AppDemand("b", np.array([1.0]), n_min=0, n_max=2)]
    assert solve(Problem(apps, cap), Thresholds(0.0, 1.0)).status == "infeasible"
    s = solve(Problem(apps, cap), Thresholds(0.5, 1.0))
    assert s.status == "optimal" and s.x.tolist() == [[2], [0]]
    assert s.fairness_loss == pytest.approx(1.0) and s.fairness_bound == 1


def test_fairness_bound_trades_utilization_for_fairness():
    # <4 CPU, 4 GB>; a needs <1, 0>, b needs <1, 1>: both have dominant share ¼ per container,
    # so DRF gives 2 + 2 (ŝ = ½ each, utilization ½ + 1 = 1.5). b's containers count twice in
    # Eq. 10, so without Eq. 15 the optimum is a 1, b 3 (utilization 1.75, loss ¼ + ¼ = ½).
    cap = np.array([[4.0, 4.0]])
    apps = [AppDemand("a", np.array([1.0, 0.0]), n_max=4), AppDemand("b", np.array([1.0, 1.0]), n_max=4)]
    fair = solve(Problem(apps, cap), Thresholds(0.0, 1.0), mip_rel_gap=0.0)  # bound ⌈0 · 2m⌉ = 0
    assert fair.status == "optimal" and fair.x.sum(axis=1).tolist() == [2, 2]
    assert fair.utilization == pytest.approx(1.5) and fair.fairness_loss == pytest.approx(0.0)
    loose = solve(Problem(apps, cap), Thresholds(0.1, 1.0), mip_rel_gap=0.0)  # bound ⌈0.1 · 4⌉ = 1
    assert loose.status == "optimal" and loose.x.sum(axis=1).tolist() == [1, 3]
    assert loose.utilization == pytest.approx(1.75) and loose.fairness_loss == pytest.approx(0.5)


def fairness_instance(rng: np.random.Generator) -> Problem:
    """One server of <CPU, GB>, nothing running, room for several containers per application:
    instances where the utilization optimum is often not DRF's allocation."""
    cap = np.array([[float(rng.integers(4, 9)), float(rng.integers(4, 9))]])
    apps = [AppDemand(f"a{i}", np.array([float(rng.integers(1, 3)), float(rng.integers(0, 3))]),
                      weight=float(rng.integers(1, 3)), n_min=int(rng.integers(0, 2)), n_max=int(rng.integers(2, 6)))
            for i in range(int(rng.integers(2, 4)))]
    return Problem(apps, cap)


@pytest.mark.parametrize("compact", [True, False])
def test_milp_matches_brute_force_where_the_fairness_bound_binds(compact):
    """θ1 = 0 (Eq. 15: Σ l_i <= 0) cuts the unconstrained optimum on a share of random instances;
    the MILP must match brute force there, and the test counts that the bound did bind."""
    rng = np.random.default_rng(5)
    binding = 0
    for _ in range(40):
        prob = fairness_instance(rng)
        want = brute_force(prob, Thresholds(0.0, 1.0))
        free = brute_force(prob, Thresholds(1.0, 1.0))
        got = solve(prob, Thresholds(0.0, 1.0), mip_rel_gap=0.0, compact=compact)
        binding += free is not None and (want is None or free > want + 1e-9)
        if want is None:
            assert got.status == "infeasible"
            continue
        assert got.status == "optimal" and got.utilization == pytest.approx(want, abs=1e-6)
        assert got.fairness_loss <= 1e-6
    assert binding >= 5, binding


def test_fairness_loss_helper():
    cap = np.array([[9.0, 18.0]])
    apps = [AppDemand("A", np.array([1.0, 4.0]), n_max=100), AppDemand("B", np.array([3.0, 1.0]), n_max=100)]
    assert fairness_loss({"A": 3, "B": 2}, apps, cap) == pytest.approx(0.0)
    assert fairness_loss({"A": 0, "B": 2}, apps, cap) == pytest.approx(2 / 3)


def test_keep_and_fill_makes_room_within_the_adjustment_bound():
    # a full server: a holds 4 of 4 CPUs (n_max 4), b arrives needing 1; one adjustment allowed
    cap = np.array([[4.0]])
    apps = [AppDemand("a", np.array([1.0]), n_max=4), AppDemand("b", np.array([1.0]), n_max=4)]
    prob = Problem(apps, cap, previous=np.array([[4], [0]]))
    x0 = keep_and_fill(prob, adjust_bound=1)
    assert x0.tolist() == [[3], [1]]
    assert keep_and_fill(prob, adjust_bound=0).tolist() == [[4], [0]]  # may not touch a: b gets nothing
    got = solve(prob, Thresholds(1.0, 1.0), start=x0, time_limit=5.0)
    assert got.status == "optimal" and got.x.sum(axis=1).tolist() in ([2, 2], [3, 1], [1, 3])
    util, loss, adjusted = evaluate(prob, x0)
    assert util == pytest.approx(1.0) and adjusted == (0,)


def test_keep_and_fill_default_bound_and_several_containers_from_one_donor():
    # a holds all 4 CPUs (n_max 4); b arrives needing n_min = 2: both come from a on server 0.
    # With no adjust_bound every application may be touched.
    cap = np.array([[4.0]])
    apps = [AppDemand("a", np.array([1.0]), n_max=4), AppDemand("b", np.array([1.0]), n_min=2, n_max=4)]
    prob = Problem(apps, cap, previous=np.array([[4], [0]]))
    assert keep_and_fill(prob).tolist() == [[2], [2]]
    assert keep_and_fill(prob, adjust_bound=1).tolist() == [[2], [2]]
