"""Harmony's performance model (Eq. 1-4), profiles, memory floors and the prediction log."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cohabit.models.harmony_perf import (
    PredictionLog, ProfileBook, cluster_eval, cluster_util, group_time, group_util, groups_eval, memory_floor, score,
)


def test_eq1_resource_bound_case_fig8a() -> None:
    """Network-bound: the COMM subtasks add up to more than the COMP ones; the CPU idles."""
    c1, net = [16.0, 16.0, 16.0], [4.0, 4.0, 4.0]  # on 4 machines: T_cpu = 4 each
    assert group_time(c1, net, 8) == pytest.approx(12.0)  # sum T_net = 12 > sum T_cpu = 6
    uc, un = group_util(c1, net, 8)
    assert (uc, un) == pytest.approx((0.5, 1.0))


def test_eq1_cpu_bound_case() -> None:
    assert group_time([40.0, 40.0], [1.0, 1.0], 4) == pytest.approx(20.0)
    assert group_util([40.0, 40.0], [1.0, 1.0], 4) == pytest.approx((1.0, 0.1))


def test_eq1_job_bound_case_fig8b() -> None:
    """Job B's own iteration is longer than both sums: both resources idle."""
    c1, net = [4.0, 4.0, 40.0], [1.0, 1.0, 10.0]  # on 4 machines: B = 10 + 10 = 20
    assert group_time(c1, net, 4) == pytest.approx(20.0)  # > sum T_cpu = 12 and sum T_net = 12
    uc, un = group_util(c1, net, 4)
    assert uc < 1 and un < 1
    assert (uc, un) == pytest.approx((0.6, 0.6))


def test_eq2_more_machines_shorten_only_computation() -> None:
    c1, net = [64.0], [2.0]
    times = [group_time(c1, net, m) for m in (1, 2, 4, 8, 16, 32)]
    assert times == pytest.approx([66, 34, 18, 10, 6, 4])


def test_eq4_weights_groups_by_machines() -> None:
    g1 = ([40.0, 40.0], [1.0, 1.0], 4)  # U = (1, 0.1) on 4 machines
    g2 = ([16.0, 16.0, 16.0], [4.0, 4.0, 4.0], 8)  # U = (0.5, 1) on 8 machines
    uc, un = cluster_util([g1, g2])
    assert (uc, un) == pytest.approx(((4 * 1 + 8 * 0.5) / 12, (4 * 0.1 + 8 * 1) / 12))
    # the vectorised form agrees
    c1 = np.array([40.0, 40.0, 16, 16, 16])
    net = np.array([1.0, 1.0, 4, 4, 4])
    gid = np.array([0, 0, 1, 1, 1])
    assert cluster_eval(c1, net, gid, np.array([4.0, 8.0])) == pytest.approx((uc, un))
    t, _, _ = groups_eval(c1, net, gid, np.array([4.0, 8.0]))
    assert t == pytest.approx([20.0, 12.0])


def test_score_weights_cpu_above_network() -> None:
    assert score(1.0, 0.5) > score(0.5, 1.0)
    assert score(1.0, 1.0) == pytest.approx(1.0)


def test_profile_book_normalises_by_dop_and_averages() -> None:
    book = ProfileBook(weight=0.5)
    book.observe("j", 4, comp_s=10.0, comm_s=3.0)  # c1 = 40
    p = book.observe("j", 8, comp_s=6.0, comm_s=5.0)  # c1 = 48
    assert (p.c1, p.net, p.samples) == pytest.approx((44.0, 4.0, 2))
    assert p.t_cpu(11) == pytest.approx(4.0) and p.t_itr(11) == pytest.approx(8.0)
    assert p.ratio(11) == pytest.approx(1.0)


def test_memory_floor_with_and_without_spill() -> None:
    # without spill: inputs + server shards + worker copies; with: model shards + the active copy
    assert memory_floor([45.6, 4.3], [1.0, 2.1], 28.0, spill=False) == math.ceil((49.9 + 6.2) / 28)
    assert memory_floor([45.6, 4.3], [1.0, 2.1], 28.0, spill=True) == 1
    assert memory_floor([155.0] * 3, [24.0] * 3, 28.0, spill=True) == math.ceil(96 / 28)


def test_prediction_log_waits_for_every_member() -> None:
    log = PredictionLog()
    log.predict(("k",), ["a", "b"], 10.0, now=100.0)
    assert log.measured(("k",), {"a": (150.0, 11.0)}) is None
    assert log.measured(("k",), {"a": (150.0, 11.0), "b": (90.0, 12.0)}) is None  # b reported before
    err = log.measured(("k",), {"a": (150.0, 11.0), "b": (160.0, 12.5)})
    assert err == pytest.approx(2.5 / 12.5)
    assert log.summary()["n"] == 1
