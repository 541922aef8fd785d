"""Optimus (Peng et al., EuroSys'18): marginal-gain greedy, start-up, placement, the shared greedy; properties."""

from __future__ import annotations

import heapq
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine import actions as A
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.base import BasePolicy
from cohabit.policies.optimus import Optimus
from cohabit.policies.targets import balanced_placement, greedy_by_value
from cohabit.policies.placement import Draft
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import JobSpec, Resources, TaskGroup

from conftest import small_cluster

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)
GPU = Resources(gpu=1, cpu=4, mem_gb=16)


def elastic(id: str, iterations: int, *, workers: int = 1, n_max: int = 4, submit: float = 0.0,
            declare: bool = True) -> TraceJob:
    """An elastic all-reduce job of 1-second iterations at one worker (speed proportional to workers)."""
    spec = JobSpec(id=id, submit_time=submit, architecture="allreduce", workers=TaskGroup(count=workers, demand=GPU),
                   n_min=1, n_max=n_max, iterations=iterations if declare else None)
    return TraceJob(spec, JobTruth(iterations=iterations, duration=float(iterations), ref_workers=1))


class Script(BasePolicy):
    """Starts every job with one worker on node 0 and then looks every 99 s (to stop at t=100)."""

    name = "script"
    tick_interval = 99.0

    def decide(self, view):  # type: ignore[override]
        draft = Draft(view)
        return [A.Start(j.id, p) for j in view.pending.values() if (p := draft.place(j, 1)) is not None]


def state_at(jobs: list[TraceJob], cluster, t: float):
    sched = Scheduler(cluster, Script(), SimBackend(jobs, NO_COST), horizon=t, strict=True)
    sched.run([j.spec for j in jobs])
    return sched.view


# ------------------------------------------------------------------ the marginal-gain rule
def test_next_worker_goes_to_the_job_with_the_largest_marginal_gain() -> None:
    # A and B run on 1 worker each at 1 iteration/s; at t=100, A has 900 iterations left and B 300
    # (declared minus done). One measured point each: perfect scaling, T(w) = Q / w seconds.
    # Worker shares are equal (1 GPU of the node's 3), so the gain of a 2nd worker decides:
    #   A: 900 (1 - 1/2) = 450 s      B: 300 (1 - 1/2) = 150 s   -> the free GPU goes to A.
    view = state_at([elastic("A", 1000), elastic("B", 400)], small_cluster(1, 3), 100.0)
    assert view.now == pytest.approx(100.0)
    pol = Optimus()
    for job in view.running.values():
        pol.on_progress(job, view)
    assert pol.targets(view, [], full=True) == {"A": 2, "B": 1}
    plan = pol.decide(view)
    assert [type(a) for a in plan] == [A.Resize] and plan[0].job == "A" and len(plan[0].placement) == 2


def test_greedy_continues_with_the_next_largest_gain() -> None:
    # 4 GPUs: two free workers. A (900 left) takes its 2nd worker first (450 s); then B's 2nd worker,
    # with B 400 left: 400 / 2 = 200 s, beats A's 3rd: 900 (1/2 - 1/3) = 150 s.
    view = state_at([elastic("A", 1000), elastic("B", 500)], small_cluster(1, 4), 100.0)
    pol = Optimus()
    for job in view.running.values():
        pol.on_progress(job, view)
    assert pol.targets(view, [], full=True) == {"A": 2, "B": 2}


def test_a_resize_that_saves_less_than_its_restart_cost_is_skipped() -> None:
    # B has 300 iterations left: a 2nd worker saves 150 s. With restart_cost=200 it stays at 1.
    view = state_at([elastic("A", 150), elastic("B", 400)], small_cluster(1, 3), 100.0)
    pol = Optimus(restart_cost=200.0)
    for job in view.running.values():
        pol.on_progress(job, view)
    # A: 50 left -> saves 25 s < 200; B: saves 150 s < 200: nobody is resized
    assert pol.targets(view, [], full=True) == {"A": 1, "B": 1}


def test_a_job_one_worker_below_its_largest_size_still_grows() -> None:
    # n_max = 2: every row may grow by exactly one worker (the growth's early return must not take that as none)
    view = state_at([elastic("A", 1000, n_max=2), elastic("B", 500, n_max=2)], small_cluster(1, 3), 100.0)
    pol = Optimus()
    for job in view.running.values():
        pol.on_progress(job, view)
    assert pol.targets(view, [], full=True) == {"A": 2, "B": 1}
    # at their largest size already: nothing grows (the early return), as the greedy over no room gives
    view = state_at([elastic("A", 1000, n_max=1), elastic("B", 500, n_max=1)], small_cluster(1, 3), 100.0)
    pol = Optimus()
    for job in view.running.values():
        pol.on_progress(job, view)
    assert pol.targets(view, [], full=True) == {"A": 1, "B": 1}


def test_rigid_jobs_keep_their_size_and_wait_in_arrival_order() -> None:
    from conftest import trace_job

    jobs = [trace_job("big", 2, 100, 0), trace_job("small", 1, 10, 1), trace_job("late", 2, 10, 2)]
    out = simulate(jobs, small_cluster(1, 3), Optimus(), config=NO_COST, strict=True)
    starts = {e.job: (e.time, len(e.data["nodes"])) for e in out.result.record if e.kind == EventKind.STARTED}
    # big (2) and small (1) fill the node; late (2) waits for big even though small finished first
    assert starts == {"big": (0.0, 2), "small": (pytest.approx(1.0), 1), "late": (pytest.approx(100.0), 2)}
    assert out.metrics.resizes == 0


def test_a_new_job_starts_on_the_free_room_with_the_perfect_scaling_prior() -> None:
    # Nothing is known: the prior (1 s per iteration per worker) predicts T(w) = Q / w, so the
    # greedy gives the lone job every free GPU (up to n_max) at its start.
    out = simulate([elastic("A", 400, n_max=3)], small_cluster(1, 4), Optimus(), config=NO_COST, strict=True)
    started = [e for e in out.result.record if e.kind == EventKind.STARTED]
    assert len(started[0].data["nodes"]) == 3
    assert out.metrics.avg_jct == pytest.approx(400 / 3)


# ------------------------------------------------------------------ placement (§4.2)
def test_balanced_placement_uses_the_fewest_servers_with_even_shares() -> None:
    # 3 nodes x 4 GPUs, one GPU taken on each: no node holds 4 workers; two nodes hold 2 workers
    # and 1 PS each -> k = 2, balanced 2 + 2 workers and 1 + 1 parameter servers.
    jobs = [TraceJob(JobSpec(id=f"f{i}", workers=TaskGroup(count=1, demand=GPU)),
                     JobTruth(iterations=10_000, duration=10_000.0)) for i in range(3)]
    ps = JobSpec(id="ps", architecture="ps", model="resnet-50", workers=TaskGroup(count=4, demand=GPU),
                 ps=TaskGroup(count=2, demand=Resources(cpu=2, mem_gb=8)))
    jobs.append(TraceJob(ps, JobTruth(iterations=1000, app="resnet-50")))

    class Fill(BasePolicy):
        name = "fill"

        def decide(self, view):  # type: ignore[override]
            return [A.Start(f"f{i}", (i,)) for i in range(3) if f"f{i}" in view.pending]

    sched = Scheduler(small_cluster(3, 4), Fill(), SimBackend(jobs, NO_COST), horizon=0.5, strict=True)
    sched.run([j.spec for j in jobs])
    view = sched.view
    draft = Draft(view)
    p = balanced_placement(draft, view.jobs["ps"], 4)
    assert p is not None
    workers, servers = p[:4], p[4:]
    assert len(set(workers)) == 2 and sorted(np.bincount(workers)[list(set(workers))]) == [2, 2]
    assert sorted(servers) == sorted(set(workers))


def test_ps_job_runs_under_optimus_with_its_parameter_servers() -> None:
    spec = JobSpec(id="ps", architecture="ps", model="resnet-50", n_min=1, n_max=4,
                   workers=TaskGroup(count=2, demand=GPU), ps=TaskGroup(count=1, demand=Resources(cpu=2)))
    out = simulate([TraceJob(spec, JobTruth(iterations=2000, app="resnet-50"))], small_cluster(2, 2), Optimus(),
                   config=NO_COST, strict=True)
    assert out.metrics.jobs_finished == 1


# ------------------------------------------------------------------ the shared sorted greedy
def heap_greedy(values: np.ndarray, first: np.ndarray, unit: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Reference: Optimus's loop -- pop the job whose next unit is worth most, give it if it fits."""
    counts = np.zeros(len(values), dtype=int)
    rem = free.astype(float).copy()
    heap = [(-values[j, 0], j) for j in range(len(values)) if values[j, 0] > 0]
    heapq.heapify(heap)
    while heap:
        _, j = heapq.heappop(heap)
        c = first[j] if counts[j] == 0 else unit[j]
        if (c > rem + 1e-9).any():
            continue
        rem -= c
        counts[j] += 1
        i = counts[j]
        if i < values.shape[1] and values[j, i] > 0:
            heapq.heappush(heap, (-values[j, i], j))
    return counts


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000))
def test_sorted_greedy_equals_the_one_unit_at_a_time_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, u = int(rng.integers(1, 8)), int(rng.integers(1, 6))
    values = -np.sort(-rng.uniform(-1, 10, (n, u)), axis=1)  # rows non-increasing
    first = rng.integers(1, 4, (n, 1)).astype(float)
    unit = rng.integers(1, 3, (n, 1)).astype(float)
    free = np.array([float(rng.integers(0, 15))])
    got, _ = greedy_by_value(values, first, unit, free)
    assert got.tolist() == heap_greedy(values, first, unit, free).tolist()


# ------------------------------------------------------------------ arguments and registry
@pytest.mark.parametrize("kw,word", [({"interval": 0}, "interval"), ({"report_interval": -1.0}, "report_interval"),
                                     ({"restart_cost": -5}, "restart_cost"), ({"tolerance": 1.5}, "tolerance"),
                                     ({"interval": float("nan")}, "interval")])
def test_constructor_rejects_bad_values(kw: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word) as err:
        Optimus(**kw)
    assert repr(next(iter(kw.values()))) in str(err.value)


def test_registry_builds_it() -> None:
    pol = make_policy("optimus")
    assert pol.name == "optimus" and pol.tick_interval == 300.0 and pol.report_interval == 300.0


# ------------------------------------------------------------------ properties
def random_workload(rng: random.Random, n: int) -> list[TraceJob]:
    jobs = []
    for i in range(n):
        w = rng.choice([1, 1, 2, 3])
        dur = rng.uniform(20, 400)
        if rng.random() < 0.5:
            spec = JobSpec(id=f"j{i}", submit_time=rng.uniform(0, 300), architecture="allreduce",
                           workers=TaskGroup(count=w, demand=GPU), n_min=1, n_max=w + rng.choice([0, 2, 4]),
                           iterations=int(dur) if rng.random() < 0.5 else None)
        else:
            arch = "single" if w == 1 else "allreduce"
            spec = JobSpec(id=f"j{i}", submit_time=rng.uniform(0, 300), architecture=arch,
                           workers=TaskGroup(count=w, demand=GPU), iterations=int(dur) if rng.random() < 0.5 else None)
        jobs.append(TraceJob(spec, JobTruth(iterations=max(int(dur), 1), duration=dur, ref_workers=w)))
    return jobs


def check_terminates(policy, seed: int) -> None:
    rng = random.Random(seed)
    jobs = random_workload(rng, rng.randint(1, 9))
    cluster = small_cluster(rng.randint(1, 3), rng.choice([3, 4]))
    out = simulate(jobs, cluster, policy, config=SimConfig(checkpoint_s=2.0, restore_s=3.0), strict=True)
    assert out.result.unfinished == {}
    assert out.metrics.jobs_finished == len(jobs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31))
def test_property_no_over_allocation_and_every_job_terminates(seed: int) -> None:
    check_terminates(Optimus(interval=40.0, report_interval=15.0, restart_cost=5.0), seed)


class Hold(BasePolicy):
    """Starts nothing: every job stays pending."""

    name = "hold"

    def decide(self, view):  # type: ignore[override]
        return []


@pytest.mark.parametrize("seed", range(6))
def test_the_admission_window_holds_every_job_admit_in_order_admits(seed: int) -> None:
    """A round looks only at the waiting jobs before ``admission_window``; every job admit_in_order
    admits from the whole queue lies before it, and admitting from the window alone gives the same."""
    from cohabit.policies.optimus import JobModels
    from cohabit.policies.targets import admit_in_order

    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(400):
        demand = Resources(gpu=float(rng.integers(0, 3)), cpu=float(rng.integers(1, 9)), mem_gb=float(rng.integers(1, 40)))
        n = int(rng.integers(1, 4))
        spec = JobSpec(id=f"j{i}", architecture="allreduce", workers=TaskGroup(count=n, demand=demand), n_min=1,
                       n_max=n + 1)
        jobs.append(TraceJob(spec, JobTruth(iterations=100, duration=100.0, ref_workers=1)))
    sched = Scheduler(small_cluster(4, 4), Hold(), SimBackend(jobs, NO_COST), horizon=1.0, strict=True)
    sched.run([j.spec for j in jobs])
    view, models = sched.view, JobModels()
    waiting = list(view.pending.values())
    assert len(waiting) == len(jobs)
    free = view.capacity.sum(axis=0) * float(rng.uniform(0.2, 4.0))
    scan = int(rng.integers(3, 40))
    k = models.admission_window(view, waiting, free, scan=scan)
    snap = models.snapshot(view, waiting)
    cost = snap.bundle(snap.n_min)
    ok_all, rem_all = admit_in_order(cost, free, scan=scan)
    ok_win, rem_win = admit_in_order(cost[:k], free, scan=scan)
    assert not ok_all[k:].any()
    assert (ok_all[:k] == ok_win).all() and (rem_all == rem_win).all()
    assert k < len(waiting)  # the queue is cut short
    assert models.admission_window(view, None, free, scan=scan) == k  # the queue read by job id: the same window


@pytest.mark.parametrize("seed", range(3))
def test_a_round_reading_the_queue_by_id_is_the_round_over_the_queue_listed(seed: int) -> None:
    """``Optimus.targets(view)`` reads the queue's admission window by job id (no list of the queue, no
    Python step per queued job); its targets are those of the round given the queue as a list."""
    from cohabit.policies.targets import waiting_jobs

    rng = random.Random(seed)
    jobs = [elastic(f"j{i}", rng.randint(50, 900), workers=rng.randint(1, 3), n_max=rng.randint(3, 6),
                    submit=float(rng.randint(0, 50))) for i in range(60)]
    sched = Scheduler(small_cluster(2, 4), _MinimumOnNodeZero(), SimBackend(jobs, NO_COST), horizon=100.0, strict=True)
    sched.run([j.spec for j in jobs])  # (node 1 stays free: the rounds admit queued jobs)
    view = sched.view
    assert view.pending and view.running
    for full in (True, False):
        by_id, listed = Optimus(), Optimus()
        got = by_id.targets(view, full=full)
        want = listed.targets(view, waiting_jobs(view), full=full)
        assert list(got.items()) == list(want.items())
        assert any(t > 0 for jid, t in got.items() if jid in view.pending)  # the round admitted queued jobs


class _MinimumOnNodeZero(Script):
    """Starts every job that fits at its minimum on node 0 (the other nodes stay free)."""

    def decide(self, view):  # type: ignore[override]
        draft = Draft(view)
        plan = []
        for j in view.pending.values():
            p = (0,) * j.spec.min_workers
            if draft.reserve(j, p):
                plan.append(A.Start(j.id, p))
        return plan


def _targets_over_the_whole_window(pol: Optimus, view, *, full: bool) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Optimus' round as it was before issue 18's ninth session: snapshot rows for every job of the admission
    window, admitted by admit_in_order over the rows' bundles, then the growth greedy over all rows."""
    from itertools import chain, islice

    from cohabit.policies.targets import admit_in_order

    running = list(view.running.values()) if full else []
    run = pol.models.snapshot(view, running)
    n_run = len(running)
    base_run = np.where(run.n_min == run.n_max, run.cur, run.n_min)
    free = run.total.copy() if full else view.free.sum(axis=0)
    free -= run.bundle(base_run).sum(axis=0)
    k = pol.models.admission_window(view, None, free)
    considered = list(islice(chain(view.paused.values(), view.pending.values()), k))
    snap = run.extend(pol.models.snapshot(view, considered, waiting_tail=k)) if considered else run
    base = snap.n_min.copy()
    base[:n_run] = base_run
    admitted = np.ones(len(snap), dtype=bool)
    if len(snap) > n_run:
        ok, free = admit_in_order(snap.bundle(base)[n_run:], free)
        admitted[n_run:] = ok
    n = np.where(admitted, base + pol.growth(snap, base, admitted, free), 0)
    with np.errstate(invalid="ignore"):
        saving = snap.remaining * (snap.inv_speed(snap.cur) - snap.inv_speed(n))
    n = np.where((snap.state == 1) & (n > snap.cur) & ~(saving >= pol.restart_cost), snap.cur, n)
    return dict(zip(snap.ids, n.tolist()))


@pytest.mark.parametrize("seed", range(6))
def test_rows_for_the_admitted_jobs_only_give_the_targets_of_the_whole_window(seed: int) -> None:
    """A round makes snapshot rows only for the running jobs and the waiting jobs admitted at their minimum
    (``JobModels.admit_waiting``, from the per-job table); its targets are those of the round over every job
    of the admission window, less the jobs that stay out (0 there). Fails if a job admitted is left out, or
    one left out is admitted (e.g. the back-filling scan of the window cut short)."""
    rng = random.Random(100 + seed)
    jobs = []
    for i in range(rng.randint(20, 80)):
        if rng.random() < 0.5:  # elastic from one worker
            jobs.append(elastic(f"j{i}", rng.randint(50, 900), workers=rng.randint(1, 3), n_max=rng.randint(3, 6),
                                submit=float(rng.randint(0, 50))))
        else:  # rigid, 1 to 4 GPUs: a large one at the queue's head is back-filled around
            w = rng.choice([1, 2, 3, 4])
            spec = JobSpec(id=f"j{i}", submit_time=float(rng.randint(0, 50)), architecture="allreduce",
                           workers=TaskGroup(count=w, demand=GPU), n_min=w, n_max=w, iterations=rng.randint(50, 900))
            jobs.append(TraceJob(spec, JobTruth(iterations=spec.iterations, duration=float(spec.iterations),
                                                ref_workers=w)))
    view = Scheduler(small_cluster(rng.randint(2, 3), 4), _MinimumOnNodeZero(), SimBackend(jobs, NO_COST),
                     horizon=float(rng.randint(60, 200)), strict=True)
    view.run([j.spec for j in jobs])
    view = view.view
    assert view.pending
    admitted = 0
    for full in (True, False):
        got = Optimus().targets(view, full=full)
        want = _targets_over_the_whole_window(Optimus(), view, full=full)
        assert got == {jid: t for jid, t in want.items() if t or jid in view.running}
        admitted += sum(1 for jid, t in got.items() if t and jid in view.pending)
    assert admitted > 0


def test_no_queue_is_read_when_the_room_left_is_below_every_jobs_first_worker() -> None:
    """A full cluster (every GPU held): ``admit_waiting`` admits nobody without reading the queue's minimums
    (no pending job gets a table slot), as admit_in_order over the whole window would (fails if the floor
    test lets the window be read, or admits where nothing fits)."""
    from cohabit.policies.targets import admit_in_order

    jobs = [elastic(f"j{i}", 500, submit=float(i)) for i in range(12)]
    view = state_at(jobs, small_cluster(1, 4), 100.0)
    assert len(view.running) == 4 and len(view.pending) == 8
    pol = Optimus()
    free = view.free.sum(axis=0)
    admitted, rem = pol.models.admit_waiting(view, None, free)
    assert admitted == [] and np.array_equal(rem, free)
    assert not any(jid in pol.models._table.slots for jid in view.pending)
    ok, _ = admit_in_order(pol.models._first_cost(view, list(view.pending)), free)
    assert not ok.any()
