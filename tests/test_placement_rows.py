"""Draft's row arithmetic and tiresias' small-cluster ranking give the floats the task-by-task (numpy) way gives
(issue 18): ``k`` tasks of one row taken as ``k * row`` only where that is exact, and the candidates' nodes ranked in
Python floats only where numpy's order of additions is the sequential one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cohabit.policies import tiresias_preempt
from cohabit.policies.placement import Draft
from cohabit.policies.placement_rows import less_times, plus_times, row_of
from cohabit.policies.tiresias_preempt import _best_nodes


def _one_by_one(row: list[float], d: list[float], k: int, sign: float) -> list[float] | None:
    out = list(row)
    for _ in range(k):
        out = [a + b for a, b in zip(out, d)] if sign > 0 else [a - b for a, b in zip(out, d)]
        if min(out) < -1e-9:
            return None
    return out


VALUES = st.sampled_from([0.0, 0.1, 0.25, 0.3, 1.0, 1.5, 2.0, 7.0, 11.5, 1 / 3, 64.0, 520.0, 1e16, 3.7e9])


@settings(max_examples=300, deadline=None)
@given(row=st.lists(VALUES, min_size=3, max_size=3), d=st.lists(VALUES, min_size=3, max_size=3),
       k=st.integers(1, 9))
def test_k_tasks_at_once_equal_k_tasks_in_turn(row, d, k):
    as_list, exact = row_of(np.array(d))
    assert less_times(row, as_list, k, exact) == _one_by_one(row, d, k, -1.0)
    assert plus_times(row, as_list, k, exact) == _one_by_one(row, d, k, 1.0)


def test_rows_that_round_are_taken_one_by_one():
    """0.1 is no multiple of 2**-10: three subtractions in turn round differently from one of 0.3 (the test above
    fails on such rows if the exactness checks are dropped)."""
    as_list, exact = row_of(np.array([0.1, 1.0, 2.0]))
    assert not exact
    assert less_times([1.0, 8.0, 8.0], as_list, 3, exact) == [1.0 - 0.1 - 0.1 - 0.1, 5.0, 2.0]
    assert 1.0 - 0.1 - 0.1 - 0.1 != 1.0 - 3 * 0.1
    whole, exact = row_of(np.array([1.0, 11.5, 64.0]))
    assert exact and less_times([0.1, 92.0, 520.0], whole, 2, exact) == _one_by_one([0.1, 92.0, 520.0], whole, 2, -1)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), k=st.integers(1, 6))
def test_draft_reserve_equals_task_by_task_numpy(data, k):
    """A Draft on a cluster whose capacities round (tenths of cores and GB): a reservation of ``k`` tasks on one node
    leaves the rows numpy's task-by-task updates leave, or fails where one of them would go below zero."""
    from cohabit.engine.loop import Scheduler
    from cohabit.sim.backend import SimBackend
    from cohabit.sim.physics import SimConfig
    from cohabit.spec import ClusterSpec, Resources
    from conftest import trace_job

    cpu = data.draw(st.sampled_from([32.3, 36.0, 29.7, 32.1, 0.1 + 0.2 + 32.0]))
    cluster = ClusterSpec.homogeneous("rows", 2, Resources(gpu=8, cpu=cpu, mem_gb=data.draw(
        st.sampled_from([128.0, 100.1, 127.3]))))
    jobs = [trace_job("a", k, 10)]

    class _Hold:
        name = "hold"

        def decide(self, view):  # noqa: ANN001, ANN201
            return []

    sched = Scheduler(cluster, _Hold(), SimBackend(jobs, SimConfig()))
    sched._arrive(jobs[0].spec)
    view = sched.view
    job = view.pending["a"]
    draft = Draft(view)
    w = view.demand_vector(job)
    want = view.free.copy()
    for _ in range(k):
        want[1] = want[1] - w
    if (want < -1e-9).any():
        assert not draft.reserve(job, (1,) * k)
        return
    assert draft.reserve(job, (1,) * k)
    assert np.array_equal(draft.free_now, want)


def _numpy_best(free: np.ndarray, spreads, m: int, need: float):  # the rule as numpy computes it
    saved = tiresias_preempt.SMALL_NODES
    tiresias_preempt.SMALL_NODES = 0
    try:
        return _best_nodes(free, spreads, m, need)
    finally:
        tiresias_preempt.SMALL_NODES = saved


@pytest.mark.parametrize("m", range(1, 11))
def test_small_rankings_equal_numpys(m):
    """Python floats rank the nodes as numpy does for ``m`` < 8; from 8 nodes numpy sums pairwise (8 partial sums),
    so the small path would differ there: with 1e16 first and ones after, numpy keeps the ones, in turn they vanish."""
    rng = np.random.default_rng(m)
    for trial in range(200):
        n = int(rng.integers(m, 17))
        free = rng.choice([0.0, 1.0, 1 / 3, 2.5, 1e16], size=n)
        spreads = []
        for _ in range(int(rng.integers(0, 4))):
            workers = rng.integers(0, n, size=int(rng.integers(1, 5))).tolist()
            share = float(rng.choice([1.0, 0.1, 1 / 3]))
            spreads.append((frozenset(workers), workers, [share] * len(workers)))
        want = _numpy_best(free, spreads, m, 0.0)
        room = free.copy()
        for _, workers, shares in spreads:
            np.add.at(room, workers, shares)
        top = np.argsort(-room, kind="stable")[:m]
        need = float(room[top].sum())  # exactly numpy's sum: it fits, and a hair more does not
        assert _best_nodes(free, spreads, m, need) == _numpy_best(free, spreads, m, need) == set(top.tolist())
        over = np.nextafter(need + 1e-9, np.inf) + 1e-6 * abs(need)
        assert _best_nodes(free, spreads, m, over) is _numpy_best(free, spreads, m, over) is None
        assert want == set(top.tolist())
    free = np.array([1e16] + [1.0] * (m - 1) + [0.0] * 3)
    need = float(np.sort(free)[::-1][:m].sum())
    assert _best_nodes(free, [], m, need) == _numpy_best(free, [], m, need)


DEVICE = st.sampled_from([0.0, 1.0, 0.25, 0.5, 1.0 - 1e-10, 0.999, 1.0])


@settings(max_examples=300, deadline=None)
@given(vals=st.lists(DEVICE, min_size=1, max_size=8),
       share=st.sampled_from([0.0, 1e-10, 0.25, 0.5, 1.0 - 1e-9, 1.0, 2.0, 3.0, 4.0]), k=st.integers(1, 5))
def test_take_whole_takes_the_devices_take_many_takes(vals, share, k):
    """A draft's same-share device take answers as ``take_many`` and leaves the same device row (whole GPUs: the
    lowest-index free devices; fractions: best fit task by task). Fails if whole shares take other devices than the
    first free ones, count a device below ``1 - EPS`` as free, or ignore the GPUs per task."""
    from cohabit.engine.alloc import take_many
    from cohabit.policies.placement import take_whole

    mine, theirs = list(vals), list(vals)
    got = take_whole(mine, share, k)
    want = take_many(theirs, [share] * k)
    assert got == (want is not None)
    if got:
        assert mine == theirs


def test_a_draft_without_sums_plans_as_one_with_them_and_refuses_to_be_asked_them():
    """``Draft(view, sums=False)`` (tiresias' rounds) reserves, gives back and restores as a draft that keeps its column
    sums, and raises if a caller asks it the sums (``could_fit``) instead of answering a number it does not keep."""
    from cohabit.engine.loop import Scheduler
    from cohabit.sim.backend import SimBackend
    from cohabit.sim.physics import SimConfig
    from cohabit.spec import ClusterSpec, Resources
    from conftest import trace_job

    cluster = ClusterSpec.homogeneous("rows", 3, Resources(gpu=8, cpu=32.3, mem_gb=100.1))
    jobs = [trace_job("a", 3, 10), trace_job("b", 4, 10)]

    class _Hold:
        name = "hold"

        def decide(self, view):  # noqa: ANN001, ANN201
            return []

    sched = Scheduler(cluster, _Hold(), SimBackend(jobs, SimConfig()))
    for j in jobs:
        sched._arrive(j.spec)
    view = sched.view
    a, b = view.pending["a"], view.pending["b"]
    plain, bare = Draft(view), Draft(view, sums=False)
    for d in (plain, bare):
        assert d.reserve(a, (0, 0, 1))
        mark = d.save()
        assert d.reserve(b, (2,) * 4)
        assert not d.reserve(b, (2,) * 5)
        d.restore(mark)
        assert d.reserve(b, (1, 1, 2, 2))
    assert np.array_equal(plain.free_now, bare.free_now)
    assert np.array_equal(plain._arrays()[1], bare._arrays()[1])
    with pytest.raises(RuntimeError, match="sums=False"):
        bare.could_fit(a, 3)
    assert plain.could_fit(a, 1)
