"""Gavel's policies on its round mechanism: LAS (max-min fairness) and FIFO (issue 19)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.gavel.las import max_min_times
from cohabit.sim.physics import physics_config
from cohabit.sim.runner import simulate

from conftest import small_cluster, trace_job


def lp_level(scale: list[float], weight: list[float], gpus: float) -> float:
    """Gavel's LP optimum: max t s.t. t <= s_j X_j / w_j, sum s_j X_j <= gpus, 0 <= X_j <= 1."""
    n = len(scale)
    c = np.zeros(n + 1)
    c[-1] = -1.0
    a = [[-(scale[j] / weight[j]) if k == j else 0.0 for k in range(n)] + [1.0] for j in range(n)]
    a.append(list(scale) + [0.0])
    b = [0.0] * n + [gpus]
    res = linprog(c, A_ub=a, b_ub=b, bounds=[(0, 1)] * n + [(0, None)], method="highs")
    assert res.status == 0
    return -res.fun


@pytest.mark.parametrize("scale,weight,gpus", [
    ([1, 2, 4, 1], [1, 1, 1, 1], 4),
    ([1, 1, 4], [1, 1, 1], 4),
    ([1, 1], [2, 1], 1),
    ([2, 1, 1, 4, 1], [1, 3, 1, 1, 2], 6),
])
def test_max_min_times_reach_the_lp_optimum_and_fill_what_is_left(scale, weight, gpus) -> None:
    x = max_min_times(scale, weight, gpus)
    level = min(s * xj / w for s, xj, w in zip(scale, x, weight))
    assert level == pytest.approx(lp_level(scale, weight, gpus), rel=1e-9)
    shares = [s * xj for s, xj in zip(scale, x)]
    assert sum(shares) == pytest.approx(min(gpus, sum(scale)))  # no GPU left unallocated
    below = [s * xj / w for s, xj, w in zip(scale, x, weight) if xj < 1 - 1e-9]
    assert all(0 < xj <= 1 + 1e-12 for xj in x)
    # water-filling: the jobs below their cap share one level, at least the level of every capped job
    assert below == pytest.approx([max(below, default=0.0)] * len(below))
    assert all(b >= level - 1e-9 for b in below)


def test_max_min_times_on_a_tiny_case() -> None:
    assert max_min_times([1, 2, 4, 1], [1, 1, 1, 1], 4) == pytest.approx([1.0, 0.5, 0.25, 1.0])
    assert max_min_times([1, 1, 4], [1, 1, 1], 4) == pytest.approx([1.0, 1.0, 0.5])
    assert max_min_times([1, 1], [2, 1], 1) == pytest.approx([2 / 3, 1 / 3])


def _run(policy: str, jobs, gpus: int):
    return simulate(jobs, small_cluster(1, gpus), make_policy(policy), config=physics_config("gavel"))


def test_las_time_slices_three_jobs_on_two_gpus_fairly() -> None:
    # max-min fair: each job 2/3 of a GPU; all three end in the last rounds. FIFO would end two at 1,440 s.
    jobs = [trace_job(n, 1, 1440.0) for n in "abc"]
    out = _run("gavel-las", jobs, 2)
    ends = sorted(j.end_time for j in out.result.jobs.values())
    assert ends[0] >= 1800.0 - 1e-6 and ends[-1] <= 2520.0 + 1e-6, ends
    assert out.metrics.preemptions >= 2
    for e in out.result.record.of_kind(EventKind.DECISION):  # decides only at Gavel's round boundaries
        assert e.time % 360.0 == pytest.approx(0.0, abs=1e-6)


def test_las_gives_a_heavier_job_more_time() -> None:
    heavy = trace_job("heavy", 1, 1800.0)
    heavy = type(heavy)(heavy.spec.model_copy(update={"weight": 3.0}), heavy.truth)
    out = _run("gavel-las", [heavy, trace_job("light", 1, 1800.0)], 1)
    assert out.result.jobs["heavy"].end_time < out.result.jobs["light"].end_time


def test_gavel_fifo_runs_jobs_whole_in_arrival_order() -> None:
    jobs = [trace_job("a", 1, 700.0), trace_job("b", 1, 700.0, submit=1.0), trace_job("c", 1, 100.0, submit=2.0)]
    out = _run("gavel-fifo", jobs, 1)
    j = out.result.jobs
    assert j["a"].first_start == pytest.approx(0.0) and out.metrics.preemptions == 0
    assert j["a"].end_time < j["b"].first_start < j["c"].first_start


def test_an_allocation_waits_for_the_reset_interval() -> None:
    # a ends at 100 s; b arrived at 1 s after the reset at t=0, so b has no allocation until a reset at
    # least 1,920 s after the last one after t=0 ... Gavel resets whenever the last reset was at t=0:
    # b is allocated at 360 s. c arrives at 400 s, after the reset at 360 s: it waits until 360 + 1,920.
    jobs = [trace_job("a", 1, 100.0), trace_job("b", 1, 100.0, submit=1.0), trace_job("c", 1, 100.0, submit=400.0)]
    out = _run("gavel-fifo", jobs, 1)
    j = out.result.jobs
    assert j["b"].first_start == pytest.approx(360.0)
    assert j["c"].first_start == pytest.approx(360.0 + 1920.0 + 360.0 - (360.0 + 1920.0) % 360.0)


def _rho(left, since, past, iso, x):
    return max((t + r / xx) / (c + r / i) for r, t, c, i, xx in zip(left, since, past, iso, x))


def test_min_max_rho_matches_a_brute_force_search_on_one_gpu() -> None:
    from cohabit.policies.gavel.ftf import min_max_rho

    left, since, past, iso = [100.0, 300.0], [1000.0, 0.0], [50.0, 0.0], [0.5, 0.5]
    rho, x = min_max_rho(left, since, past, iso, [1.0, 1.0], 1.0)
    grid = np.linspace(1e-4, 1 - 1e-4, 20001)
    best = min(_rho(left, since, past, iso, (a, 1 - a)) for a in grid)
    assert rho == pytest.approx(best, rel=1e-3)
    assert sum(x) == pytest.approx(1.0, rel=1e-6)  # the GPU is exhausted at the optimum
    assert _rho(left, since, past, iso, x) == pytest.approx(rho, rel=1e-6)


def test_min_max_rho_gives_fresh_equal_jobs_their_isolated_share() -> None:
    from cohabit.policies.gavel.ftf import min_max_rho

    rho, x = min_max_rho([100.0, 100.0, 50.0], [0.0] * 3, [0.0] * 3, [2 / 3] * 3, [1.0, 1.0, 1.0], 2.0)
    assert rho == pytest.approx(1.0, rel=1e-6) and x == pytest.approx([2 / 3] * 3, rel=1e-6)


def test_gavel_ftf_needs_the_oracle_only_when_asked() -> None:
    jobs = [trace_job(n, 1, 700.0) for n in "ab"]
    with_oracle = simulate(jobs, small_cluster(1, 1), make_policy("gavel-ftf", oracle=True),
                           config=physics_config("gavel"), oracle=True)
    observed = _run("gavel-ftf", jobs, 1)
    for out in (with_oracle, observed):
        assert not out.result.unfinished
        assert out.metrics.preemptions >= 1  # rho-fair: the two equal jobs take turns


def test_gavel_fifo_listed_last_fills_the_last_type_in_name_order_first() -> None:
    from cohabit.spec.cluster import gavel_cluster

    cluster = gavel_cluster(4, 0, 4, gpus_per_server=4)  # node 0: 4 V100s, node 1: 4 K80s
    jobs = [trace_job(n, 1, 300.0) for n in "abcd"]

    def on_v100(pick: str, seed: int) -> int:
        out = simulate(jobs, cluster, make_policy(f"gavel-fifo:pick={pick}:seed={seed}"), config=physics_config("gavel"))
        assert not out.result.unfinished
        starts = out.result.record.of_kind(EventKind.STARTED)
        return sum(1 for e in starts if cluster.nodes[e.data["nodes"][0]].labels["gpu_model"] == "v100")

    assert [on_v100("gavel-code", s) for s in range(4)] == [4] * 4  # Gavel's code: v100 while it has room
    assert any(on_v100("random", s) < 4 for s in range(4))  # a random pick spreads them


def test_gavel_fifo_gavel_code_can_oversubscribe_a_type_when_a_job_ends() -> None:
    # 2 GPUs: a ends at 100 s; at the reset at 360 s Gavel's code hands a's type to c (2 GPUs) while b is
    # not yet counted, so b and c share the 2 GPUs in turns; the fair pick lets c wait until b ends.
    jobs = [trace_job("a", 1, 100.0), trace_job("b", 1, 3000.0), trace_job("c", 2, 300.0, submit=1.0)]
    code = _run("gavel-fifo:pick=gavel-code", jobs, 2).result.jobs
    fair = _run("gavel-fifo", jobs, 2).result.jobs
    assert code["c"].first_start < code["b"].end_time
    assert fair["c"].first_start > fair["b"].end_time
