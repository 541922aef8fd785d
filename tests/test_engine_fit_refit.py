"""Incremental fits (issue 18): the ledger's fit memo and a planning draft's fits are updated on the
nodes a change touched (``alloc.refit``) instead of recomputed; every answer must equal
``fit_counts`` on the arrays as they are."""

from __future__ import annotations

import numpy as np

from cohabit.engine.actions import Start
from cohabit.engine.alloc import fit_counts, refit
from cohabit.engine.ledger import AllocationError, Ledger
from cohabit.engine.loop import Scheduler
from cohabit.policies.placement import Draft
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.spec.resources import Resources

from conftest import small_cluster
from conftest import trace_job
from test_placement_draft import _Hold


def test_refit_equals_fit_counts_on_the_changed_rows() -> None:
    rng = np.random.default_rng(7)
    for _ in range(400):
        n, r = int(rng.integers(1, 7)), int(rng.integers(1, 5))
        free = np.round(rng.random((n, r)) * 16, int(rng.integers(0, 3)))
        dev = np.where(rng.random((n, 6)) < 0.3, -1.0, rng.choice([0.0, 0.25, 0.5, 1.0], size=(n, 6)))
        demand = rng.choice([0.0, 0.25, 0.5, 1.0, 2.0, 3.0], size=r)
        g = int(rng.integers(0, r)) if rng.random() < 0.8 else None
        before = fit_counts(free, dev, demand, g)
        nodes = sorted(set(rng.integers(0, n, size=2).tolist()))
        for k in nodes:
            free[k] = np.maximum(free[k] - rng.random(r) * 4, 0.0)
            dev[k] = np.where(dev[k] >= 0, rng.choice([0.0, 0.5, 1.0], size=6), -1.0)
        got = refit(before, free, dev, demand, g, nodes)
        assert np.array_equal(got, fit_counts(free, dev, demand, g))
        assert got is not before


def test_the_ledger_fit_memo_follows_allocations_and_releases() -> None:
    """Plain, GPU-sharing and fractional allocations and releases in a random order; after each one
    every memoised row's fit equals a fresh computation (fails if a mutation's nodes are not touched)."""
    led = Ledger(small_cluster(4, 4))
    rows = [led.vector(Resources(gpu=g, cpu=c, mem_gb=m)) for g, c, m in
            ((1, 4, 16), (2, 8, 64), (0.5, 2, 8), (4, 1, 1))]
    rng = np.random.default_rng(3)
    live: list[str] = []
    for step in range(300):
        for row in rows:  # memoise every row at this version
            assert np.array_equal(led.fit_of(row), led.tasks_fit(row))
        if live and rng.random() < 0.45:
            led.release(live.pop(int(rng.integers(0, len(live)))))
            continue
        row = rows[int(rng.integers(0, len(rows)))]
        nodes = [int(x) for x in rng.integers(0, 4, size=int(rng.integers(1, 3)))]
        try:
            led.allocate(f"j{step}", nodes, [row] * len(nodes), share_gpus=bool(rng.random() < 0.2))
            live.append(f"j{step}")
        except AllocationError:
            pass
    led.check()


def test_a_draft_keeps_its_fits_exact_across_reservations_and_give_backs() -> None:
    """A draft derives a row's fit from the ledger's on the nodes it reserved; room given back as the
    draft's first write (not a reservation) must not be mistaken for an unchanged copy."""
    jobs = [trace_job(f"j{i}", g, 10) for i, g in enumerate((4, 2, 1, 4, 2, 1))]
    sched = Scheduler(small_cluster(3, 4), _Hold(), SimBackend(jobs, SimConfig()))
    for tj in jobs:
        sched._arrive(tj.spec)
    sched.strict = True
    sched._apply(Start("j0", (0,) * sched.view.target_workers(sched.view.pending["j0"])))
    view = sched.view
    waiting = list(view.pending.values())

    def exact(d: Draft) -> None:
        for j in waiting:
            w = view.demand_vector(j)
            assert np.array_equal(d.tasks_fit(w), fit_counts(d.free_now, d._dev, w, view.gpu_col))

    d = Draft(view)
    for job in waiting[:3]:
        assert d.place(job) is not None
        exact(d)
    d2 = Draft(view)
    d2.give_back(view.running["j0"])  # the first write gives node 0's GPUs back
    exact(d2)
    assert d2.place(waiting[2]) is not None  # j3 (4 GPUs) on the room given back
    exact(d2)
