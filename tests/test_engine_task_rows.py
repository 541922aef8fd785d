"""A job's tasks on one node taken in one step (issue 18): the draft's reservation, its give-back, the
ledger's device choice and release read each node's rows once (Python lists) and take whole GPUs in one
scan (``alloc.take_many``). Each must leave exactly what the task-by-task numpy updates left: the same
free rows, the same devices, the same column sums, the same fits and error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cohabit.engine.actions import Start
from cohabit.engine.alloc import EPS, Allocation, TaskSlot, fit_counts, take_many
from cohabit.engine.ledger import AllocationError, Ledger
from cohabit.engine.loop import Scheduler
from cohabit.policies.placement import Draft, _workers_small, fill
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig, consolidation_factor, replicas_per_node
from cohabit.sim.profiles.placement import SpreadModel
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec.job import JobSpec, TaskGroup
from cohabit.spec.resources import Resources

from conftest import small_cluster
from test_placement_draft import _Hold

SHARES = [0.0, 0.25, 0.5, 0.75, 1.0, 2.0, 3.0]


def _ref_take(row: np.ndarray, g: float) -> tuple[tuple[int, float], ...] | None:
    """One task's devices on a numpy device row (mutated), as the ledger chose them before issue 18's
    session 11: whole GPUs take the lowest-index fully free devices, a fraction the best-fitting one."""
    if g <= EPS:
        return ()
    if g < 1.0 - EPS:
        ok = np.flatnonzero(row >= g - EPS)
        if not ok.size:
            return None
        best = int(ok[np.argmin(row[ok])])  # (the first of the least)
        row[best] -= g
        return ((best, g),)
    k = int(round(g))
    whole = np.flatnonzero(row >= 1.0 - EPS)[:k]
    if whole.size < k:
        return None
    row[whole] = 0.0
    return tuple((int(i), 1.0) for i in whole)


def _random_row(rng: np.random.Generator, width: int = 8) -> list[float]:
    row = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0], size=width)
    row[int(rng.integers(2, width + 1)):] = -1.0  # devices the node does not have
    return row.tolist()


def test_take_many_equals_one_take_per_task() -> None:
    rng = np.random.default_rng(11)
    outcomes = set()
    for _ in range(3000):
        vals = _random_row(rng)
        mode = rng.random()
        pool = [0.0, 1.0, 2.0, 3.0] if mode < 0.6 else SHARES
        shares = [float(x) for x in rng.choice(pool, size=int(rng.integers(1, 6)))]
        ref_row = np.array(vals)
        ref: list[tuple[tuple[int, float], ...]] | None = []
        for g in shares:
            got = _ref_take(ref_row, g)
            if got is None:
                ref = None
                break
            ref.append(got)  # type: ignore[union-attr]
        mine = list(vals)
        assert take_many(mine, shares) == ref, (vals, shares)
        if ref is not None:
            assert mine == ref_row.tolist()
        outcomes.add(ref is None)
    assert outcomes == {True, False}  # both fits and refusals were checked


def _job(jid: str, workers: int, gpu: float, cpu: float, ps: int = 0) -> TraceJob:
    spec = JobSpec(id=jid, model="resnet50", architecture="allreduce" if not ps else "ps",
                   workers=TaskGroup(count=workers, demand=Resources(gpu=gpu, cpu=cpu, mem_gb=8.0 * cpu)),
                   ps=TaskGroup(count=ps, demand=Resources(cpu=2.0, mem_gb=4.0)) if ps else None, iterations=100)
    return TraceJob(spec, JobTruth(iterations=100, duration=100.0, ref_workers=workers))


def _scheduler(jobs: list[TraceJob], nodes: int = 3, gpus: int = 4) -> Scheduler:
    sched = Scheduler(small_cluster(nodes, gpus), _Hold(), SimBackend(jobs, SimConfig()))
    for tj in jobs:
        sched._arrive(tj.spec)
    return sched


def _jobs(rng: np.random.Generator, n: int) -> list[TraceJob]:
    out = []
    for i in range(n):
        kind = int(rng.integers(0, 5))
        if kind == 4:  # no GPU, much CPU: refused on the overdraft check alone
            out.append(_job(f"c{i}", int(rng.integers(1, 4)), 0.0, 12.0))
        elif kind == 0:
            out.append(_job(f"f{i}", 1, float(rng.choice([0.25, 0.5, 0.75])), 2.0))
        elif kind == 1:
            out.append(_job(f"w{i}", int(rng.integers(1, 5)), 1.0, float(rng.choice([1.0, 3.0, 7.5]))))
        elif kind == 2:
            out.append(_job(f"d{i}", int(rng.integers(1, 3)), 2.0, 4.0))
        else:
            out.append(_job(f"p{i}", int(rng.integers(1, 3)), 1.0, 2.0, ps=1))
    return out


def _ref_reserve(free: np.ndarray, dev: np.ndarray, vecs: list[np.ndarray], placement: tuple[int, ...],
                 g: int) -> bool:
    """Draft.reserve before session 11: one numpy row update, device take and overdraft check per task."""
    saved = {n: (free[n].copy(), dev[n].copy()) for n in set(placement)}
    for node, d in zip(placement, vecs):
        free[node] -= d
        if _ref_take(dev[node], float(d[g])) is None or free[node].min() < -1e-9:
            for n, (f, dv) in saved.items():
                free[n], dev[n] = f, dv
            return False
    return True


@pytest.mark.parametrize("seed", range(6))
def test_draft_reserve_and_give_back_leave_what_task_by_task_updates_leave(seed: int) -> None:
    rng = np.random.default_rng(seed)
    jobs = _jobs(rng, 14)
    sched = _scheduler(jobs)
    view, g = sched.view, sched.view.gpu_col
    assert g is not None
    # some jobs run (so that the draft can give them back); the rest are planned on the draft
    running = []
    for tj in jobs[:5]:
        job = view.pending[tj.spec.id]
        d0 = Draft(view)
        p = d0.place(job)
        if p is not None:
            sched._apply(Start(job.id, p))
            running.append(view.running[job.id])
    draft = Draft(view)
    draft.tasks_fit(view.demand_vector(view.pending[jobs[-1].spec.id]))  # a fit memo to keep in step
    free, dev = view.free.copy(), view.device_free.copy()
    total = view.free.sum(axis=0)
    refused = 0
    saves: list[tuple[tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray]] = []
    for step in range(60):
        u = rng.random()
        if u < 0.1:
            saves.append((draft.save(), free.copy(), dev.copy()))
        elif u < 0.2 and saves:  # back to any earlier save (the fits known must follow what it undoes)
            saved, f, dv = saves[int(rng.integers(0, len(saves)))]
            draft.restore(saved)
            free, dev = f.copy(), dv.copy()
            total = free.sum(axis=0)
        elif running and rng.random() < 0.25:
            job = running.pop(int(rng.integers(0, len(running))))
            draft.give_back(job)
            alloc = view.allocation_of(job.id)
            assert alloc is not None
            for slot, d in zip(alloc.slots, draft.task_vectors(job, len(alloc.slots) - job.spec.num_ps)):
                free[slot.node] += d
                for i, share in slot.devices:
                    dev[slot.node, i] += share
            total = free.sum(axis=0)
        else:
            pending = [j for j in view.pending.values()]
            job = pending[int(rng.integers(0, len(pending)))]
            n = job.spec.workers.count
            placement = tuple(int(x) for x in rng.integers(0, 3, size=n + job.spec.num_ps))
            vecs = draft.task_vectors(job, n)
            ok = _ref_reserve(free, dev, vecs, placement, g)
            assert draft.reserve(job, placement) is ok, (step, job.id, placement)
            if ok:
                total = total - np.sum(vecs, axis=0)
            else:
                refused += 1
        assert np.array_equal(draft.free_now, free), step
        assert np.array_equal(draft._dev, dev), step
        assert np.array_equal(draft._total_now(), total), step  # the same float sums, bit for bit
        for tj in jobs:
            w = view.demand_vector(sched.jobs[tj.spec.id])
            assert np.array_equal(draft.tasks_fit(w), fit_counts(free, dev, w, g)), step
    assert refused > 0


def test_a_total_made_when_next_read_never_follows_a_callers_own_write() -> None:
    jobs = [_job("a", 2, 1.0, 2.0), _job("b", 1, 1.0, 2.0)]
    sched = _scheduler(jobs, nodes=2)
    view = sched.view
    sched._apply(Start("a", (0, 0)))
    draft = Draft(view)
    draft.give_back(view.running["a"])  # the column sums are left to be made when next read
    expected = draft.free_now.sum(axis=0)
    draft.free[1] -= 1.0  # the caller plans into the arrays itself: the draft's total does not follow it
    assert np.array_equal(draft._total_now(), expected)


def _ref_allocate(ledger: Ledger, placement: tuple[int, ...], demands: list[np.ndarray]) -> str | list:
    """The devices per task (or the error message) of the task-by-task rule, on a copy of the device rows."""
    dev = ledger.device_free.copy()
    g = ledger.gpu_col
    assert g is not None
    out = []
    for node, d in zip(placement, demands):
        got = _ref_take(dev[node], float(d[g]))
        if got is None:
            fr = [round(float(x), 3) for x in dev[node] if x >= 0]
            return f"node {node} cannot hold a GPU share of {float(d[g]):g} (device free fractions: {fr})"
        out.append(got)
    return out


def test_ledger_devices_release_and_messages_equal_the_task_by_task_rule() -> None:
    rng = np.random.default_rng(5)
    ledger = Ledger(small_cluster(3, 8))
    rows = [ledger.vector(Resources(gpu=x, cpu=1.0, mem_gb=2.0)) for x in (0.25, 0.5, 1.0, 2.0, 3.0)]
    rows.append(ledger.vector(Resources(cpu=1.0, mem_gb=2.0)))
    held: list[str] = []
    messages = 0
    for step in range(600):
        if held and rng.random() < 0.4:
            job = held.pop(int(rng.integers(0, len(held))))
            alloc = ledger.allocations[job]
            dev = ledger.device_free.copy()
            ledger.release(job)
            for s in alloc.slots:
                for i, share in s.devices:
                    dev[s.node, i] += share
            assert np.array_equal(ledger.device_free, dev)
        else:
            n = int(rng.integers(1, 6))
            placement = tuple(int(x) for x in rng.integers(0, 3, size=n))
            demands = [rows[int(rng.integers(0, len(rows)))] for _ in range(n)]
            ref = _ref_allocate(ledger, placement, demands)
            before = ledger.device_free.copy()
            job = f"j{step}"
            try:
                alloc = ledger.allocate(job, placement, demands)
            except AllocationError as exc:
                assert np.array_equal(ledger.device_free, before)  # all-or-nothing
                if "GPU share" in str(exc):
                    assert isinstance(ref, str) and str(exc) == f"job {job!r}: {ref}"
                    messages += 1
                continue
            assert not isinstance(ref, str)
            assert [s.devices for s in alloc.slots] == ref and [s.node for s in alloc.slots] == list(placement)
            held.append(job)
        ledger.check()  # device shares and dev_jobs kept in step
    assert messages > 0


def test_ledger_fits_read_after_many_changes_equal_fresh_ones() -> None:
    """The ledger's fit memo is updated per row when the row is next read, on the nodes logged since it was
    made; a change the log does not name (a draft writing the shared arrays, ``room_changed``) makes every
    fit made before it stale. Rows are read at random, several changes apart."""
    rng = np.random.default_rng(9)
    led = Ledger(small_cluster(5, 4))
    rows = [led.vector(Resources(gpu=g, cpu=c, mem_gb=m)) for g, c, m in
            ((1, 4, 16), (2, 8, 64), (0.5, 2, 8), (4, 1, 1), (0, 30, 8))]
    live: list[str] = []
    for step in range(500):
        for row in rows:
            if rng.random() < 0.3:
                assert np.array_equal(led.fit_of(row), led.tasks_fit(row)), step
        u = rng.random()
        if u < 0.05:
            led.free[int(rng.integers(0, 5))] *= 0.5  # an untracked write, as a draft sharing the arrays makes
            led.room_changed()
        elif live and u < 0.45:
            led.release(live.pop(int(rng.integers(0, len(live)))))
        else:
            row = rows[int(rng.integers(0, len(rows)))]
            nodes = [int(x) for x in rng.integers(0, 5, size=int(rng.integers(1, 4)))]
            try:
                led.allocate(f"j{step}", nodes, [row] * len(nodes), share_gpus=bool(rng.random() < 0.2))
                live.append(f"j{step}")
            except AllocationError:
                pass


def test_small_cluster_worker_choice_equals_the_numpy_rule() -> None:
    """``consolidated_first`` on at most ``SMALL_CLUSTER`` nodes chooses in Python lists: the same nodes as
    the numpy rule (best fit for all workers on one node; else most room first, ties in index order)."""
    rng = np.random.default_rng(4)
    for _ in range(3000):
        fit = rng.integers(0, 5, size=int(rng.integers(1, 12)))
        n = int(rng.integers(1, 10))
        whole = np.flatnonzero(fit >= n)
        if whole.size:
            ref = [int(whole[np.argmin(fit[whole])])] * n
        elif fit.sum() < n:
            ref = None
        else:
            ref = fill(fit, n, np.argsort(-fit, kind="stable"))
        assert _workers_small(fit.tolist(), n) == ref, (fit, n)


def test_consolidation_factor_kept_per_spread_model_equals_the_formula() -> None:
    """The launch's placement factor (``physics.consolidation_factor``) keeps its spread ratio per (spread
    model, model, nodes, fewest nodes): equal to the formula on the nodes the workers span, for two spread
    models that give the same model different factors, asked in turn."""
    rng = np.random.default_rng(2)
    cfgs = [SimConfig(gpus_per_node=8, spread=SpreadModel(factors={"resnet50": f})) for f in (0.5, 0.9)]
    for _ in range(300):
        workers = int(rng.integers(1, 9))
        tj = _job("x", workers, 1.0, 2.0)
        nodes = [int(x) for x in rng.integers(0, 4, size=workers)]
        alloc = Allocation("x", tuple(TaskSlot(n, ()) for n in nodes), Resources(gpu=workers))
        for cfg in cfgs:
            per_node = replicas_per_node(alloc, workers)
            m = math.ceil(workers / 8)
            ref = min(cfg.spread.speed_factor("resnet50", len(per_node)) / cfg.spread.speed_factor("resnet50", m), 1.0)
            assert consolidation_factor(tj.spec, tj.truth, alloc, cfg) == ref
