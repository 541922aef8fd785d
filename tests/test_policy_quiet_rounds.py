"""Quiet rounds of the learning-curve policies (issue 18, ninth session): a full round with nobody waiting
and only rigid running jobs keeps every size, so Optimus and SLAQ skip it (``skip_quiet``; SLAQ also needs
its jobs' demands and the capacity to be integers that fit, :meth:`JobModels.rigid_and_fitting`). These
tests run the skipped rounds anyway and compare: each plan is empty, and whole runs with and without the
shortcut give the same results."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cohabit.policies.optimus import JobModels, Optimus
from cohabit.policies.slaq import SLAQ
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster


def _workload(seed: int, kind: str) -> list[TraceJob]:
    """30 jobs on 8 GPUs arriving over six hours (the queue fills and empties): rigid ones (``rigid``), a third
    of them elastic down to one worker (``mixed``), or rigid with a few half-GPU jobs (``fractional``: demand
    rows that are not integers)."""
    rng = random.Random(seed)
    out = []
    for i in range(30):
        gpus: float = rng.choice([1, 1, 2, 4])
        kw: dict[str, object] = {}
        if kind == "mixed" and gpus > 1 and rng.random() < 0.5:
            kw = {"n_min": 1, "n_max": int(gpus)}
        if kind == "fractional" and rng.random() < 0.3:
            gpus = 0.5
        iters = rng.randint(300, 3000)
        spec = simple_job(f"j{i}", gpus, submit_time=rng.uniform(0, 6 * 3600), model=rng.choice(["a", "b"]),
                          iterations=iters if rng.random() < 0.6 else None, **kw)
        curve = (rng.uniform(2, 40), 1.0, rng.uniform(0.05, 0.5))
        out.append(TraceJob(spec, JobTruth(iterations=iters, duration=iters * rng.uniform(0.5, 2.0),
                                           ref_workers=max(int(gpus), 1), loss_curve=curve)))
    return out


POLICIES = {
    "slaq": (lambda: SLAQ(epoch=120.0, report_interval=30.0), "rigid_and_fitting"),
    "optimus": (lambda: Optimus(interval=120.0, report_interval=60.0), "rigid_hold"),
}


def _run(policy: str, kind: str, seed: int, *, skip: bool, check: bool = False) -> tuple[dict, int]:
    """One run; with ``check``, every skipped round is run in full on the same view and must plan nothing.
    Returns the run's fingerprint and how many rounds were skipped."""
    make, test_name = POLICIES[policy]
    pol = make()
    pol.skip_quiet = skip
    skipped = [0]
    real = getattr(pol.models, test_name)

    def counted(view):  # type: ignore[no-untyped-def]
        out = real(view)
        quiet = out if isinstance(out, bool) else out is not None
        if quiet and not (view.paused or view.pending):
            skipped[0] += 1
            if check:
                full = (pol._round(view, list(view.running.values()), full=True) if policy == "slaq"
                        else pol._round(view, full=True))
                assert full == [], (view.now, full)
        return out

    setattr(pol.models, test_name, counted)
    res = simulate(_workload(seed, kind), small_cluster(2, 4), pol)
    assert not res.result.unfinished
    return fingerprint(res.result.record, res.metrics), skipped[0]


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("kind", ["rigid", "mixed"])
def test_a_skipped_round_would_have_planned_nothing(policy: str, kind: str) -> None:
    """Fails if the shortcut fires where the full round would change an allocation (e.g. with an elastic job
    running: the rigid check dropped)."""
    total = 0
    for seed in range(2):
        total += _run(policy, kind, seed, skip=True, check=True)[1]
    assert total > 0  # the shortcut was taken (and checked)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("kind", ["rigid", "mixed", "fractional"])
def test_runs_with_and_without_skipping_quiet_rounds_are_the_same(policy: str, kind: str) -> None:
    """The loss points of skipped rounds are folded in when a later round reads them, with the same fits."""
    for seed in range(2):
        with_skip, n = _run(policy, kind, seed, skip=True)
        without, m = _run(policy, kind, seed, skip=False)
        assert with_skip == without, (policy, kind, seed)
        assert m == 0 and (n > 0 or kind != "rigid")


def test_slaq_does_not_skip_with_demands_that_are_not_integers() -> None:
    """Half-GPU jobs (demand rows 0.5 GPU, 2 CPUs, 8 GB): the sums a round compares are no longer exact in any
    order, so SLAQ's quiet check says no while such a row is known (Optimus' does not need exact sums)."""
    pol = SLAQ(epoch=120.0, report_interval=30.0)
    seen = {"running": 0, "quiet": 0}
    real = pol.models.rigid_and_fitting

    def counted(view):  # type: ignore[no-untyped-def]
        out = real(view)
        seen["running"] += 1
        seen["quiet"] += out
        return out

    pol.models.rigid_and_fitting = counted  # type: ignore[method-assign]
    jobs = [TraceJob(simple_job("half", 0.5, iterations=5000),
                     JobTruth(iterations=5000, duration=20000.0, ref_workers=1, loss_curve=(10.0, 1.0, 0.1))),
            TraceJob(simple_job("one", 1, iterations=5000, submit_time=10.0),
                     JobTruth(iterations=5000, duration=20000.0, ref_workers=1, loss_curve=(10.0, 1.0, 0.1)))]
    simulate(jobs, small_cluster(1, 4), pol)
    assert seen["running"] > 10 and seen["quiet"] == 0


def test_rigid_hold_is_the_snapshots_summed_bundles(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the running jobs hold, read from the per-job table, is the snapshot's bundles of what they hold
    (fails if a row index or the worker count is off); None as soon as one running job is elastic."""
    checked = {"rigid": 0, "elastic": 0}
    real = JobModels.rigid_hold

    def compared(self, view):  # type: ignore[no-untyped-def]
        out = real(self, view)
        running = list(view.running.values())
        if running and all(j.id in self._table.slots for j in running):
            snap = self.snapshot(view, running)
            if all(j.spec.min_workers == j.spec.max_workers for j in running):
                assert out is not None and np.array_equal(out, snap.bundle(snap.cur).sum(axis=0))
                checked["rigid"] += 1
            else:
                assert out is None
                checked["elastic"] += 1
        return out

    monkeypatch.setattr(JobModels, "rigid_hold", compared)
    for kind in ("rigid", "mixed"):
        simulate(_workload(5, kind), small_cluster(2, 4), Optimus(interval=120.0, report_interval=60.0))
    assert checked["rigid"] > 0 and checked["elastic"] > 0
