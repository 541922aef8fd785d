"""Quiet rounds of the learning-curve policies (issue 18, ninth session): a full round with nobody waiting
and only rigid running jobs keeps every size, so Optimus (also with a queue when the room left is below
every job's first worker) and SLAQ skip it (``skip_quiet``; SLAQ also needs
its jobs' demands and the capacity to be integers that fit, :meth:`JobModels.rigid_and_fitting`), and Themis
renews expired leases without a round when nobody waits (``Themis._renews_all``). These tests run the
skipped rounds anyway and compare: each plan is empty (Themis: every expired job gets what it holds), and
whole runs with and without the shortcut give the same results."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cohabit.policies.optimus import JobModels, Optimus
from cohabit.policies.slaq import SLAQ
from cohabit.policies.targets import apply_targets, consolidated_placer
from cohabit.policies.themis import Themis
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
    "optimus": (lambda: Optimus(interval=120.0, report_interval=60.0), "_quiet"),
    "themis": (lambda: Themis(lease=120.0, report_interval=30.0, tick=30.0), "_renews_all"),
}


def _full_round_of(policy: str, pol, view, expired=None) -> list:  # type: ignore[no-untyped-def]
    """The plan of the round the shortcut skipped, computed in full on the same view (Themis: also every
    expired job's target must be what it holds, its lease renewed as it is)."""
    if policy == "slaq":
        return pol._round(view, list(view.running.values()), full=True)
    if policy == "optimus":
        return pol._round(view, full=True)
    targets, served, shrink = pol.targets(view, expired)
    assert targets == {job.id: job.n_workers for job in expired}, view.now
    return apply_targets(view, targets, [view.jobs[j] for j in served], consolidated_placer, reason="check",
                         shrink=[view.jobs[j] for j in shrink])


def _run(policy: str, kind: str, seed: int, *, skip: bool, check: bool = False, stalled: str | None = None
         ) -> tuple[dict, int, set[str]]:
    """One run; with ``check``, every skipped round is run in full on the same view and must plan nothing.
    ``stalled``: this job's speed model says 0 s per iteration (its rho is NaN: a round passes it over).
    Returns the run's fingerprint, how many rounds were skipped, and the jobs whose quiet expiry was asked
    about (Themis)."""
    make, test_name = POLICIES[policy]
    pol = make()
    pol.skip_quiet = skip
    skipped = [0]
    asked: set[str] = set()
    owner = pol if policy in ("themis", "optimus") else pol.models
    real = getattr(owner, test_name)

    def counted(view, *more):  # type: ignore[no-untyped-def]
        out = real(view, *more)
        if policy == "themis":
            asked.update(job.id for job in more[0])
        if out and (policy == "optimus" or not (view.paused or view.pending)):
            skipped[0] += 1
            if check:
                full = _full_round_of(policy, pol, view, *(more if policy == "themis" else ()))
                assert full == [], (view.now, full)
        return out

    setattr(owner, test_name, counted)
    if stalled is not None:
        coefficients = pol.models.coefficients
        pol.models.coefficients = lambda job: (0.0, 0.0, 0.0) if job.id == stalled else coefficients(job)
        real_snapshot = pol.models.snapshot

        def snapshot(view, jobs, **kw):  # type: ignore[no-untyped-def]
            pol.models._abc.pop(stalled, None)  # (read through coefficients)
            pol.models._speed.pop(stalled, None)
            return real_snapshot(view, jobs, **kw)
        pol.models.snapshot = snapshot
    res = simulate(_workload(seed, kind), small_cluster(2, 4), pol)
    assert stalled is not None or not res.result.unfinished  # (a stalled job is passed over: it may never end)
    return fingerprint(res.result.record, res.metrics), skipped[0], asked


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
        with_skip, n, _ = _run(policy, kind, seed, skip=True)
        without, m, _ = _run(policy, kind, seed, skip=False)
        assert with_skip == without, (policy, kind, seed)
        assert m == 0 and (n > 0 or kind != "rigid")


def test_themis_does_not_renew_a_lease_whose_rho_is_not_a_number() -> None:
    """A job whose speed model gives no positive time per iteration has a NaN rho, which Themis' greedy passes
    over (the job loses its lease): the quiet check must say no then (fails if the speed check is dropped:
    the skipped round would have paused it)."""
    _, n, asked = _run("themis", "rigid", 2, skip=True, check=True, stalled="j3")
    assert n > 0 and "j3" in asked  # its lease expired while nobody waited


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


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_plan_from_the_changed_rows_is_the_plan_from_every_row(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rounds hand :func:`apply_targets` only the rows whose target differs from what the job holds
    (``changed_rows``: the running jobs to shrink, in running order, and the jobs to grow or start, in
    placing order); the plan is the one made from every running job and every job with a target (fails if
    a shrink or a start is left out)."""
    import cohabit.policies.optimus as optimus_mod
    import cohabit.policies.slaq as slaq_mod
    import cohabit.policies.themis as themis_mod
    import cohabit.policies.targets as targets_mod

    module = {"slaq": slaq_mod, "optimus": optimus_mod, "themis": themis_mod}[policy]
    real = targets_mod.apply_targets
    seen = {"plans": 0, "shrinks": 0}

    def compared(view, targets, order, place, *, reason, shrink=None):  # type: ignore[no-untyped-def]
        plan = real(view, targets, order, place, reason=reason, shrink=shrink)
        rest = [view.jobs[jid] for jid in targets if view.jobs[jid] not in order]
        assert plan == real(view, targets, list(order) + rest, place, reason=reason), view.now
        seen["plans"] += bool(plan)
        seen["shrinks"] += sum(1 for jid, t in targets.items() if jid in view.running and t < view.running[jid].n_workers)
        return plan

    monkeypatch.setattr(module, "apply_targets", compared)
    for seed in range(2):
        simulate(_workload(seed, "mixed"), small_cluster(2, 4), POLICIES[policy][0]())
    assert seen["plans"] > 10 and seen["shrinks"] > 0


@pytest.mark.parametrize("gpus,quiet", [(4, True), (5, False)])
def test_optimus_skips_a_round_with_a_queue_only_when_nobody_fits(gpus: int, quiet: bool) -> None:
    """Four rigid one-GPU jobs run on one node, eight wait. On 4 GPUs the room left is below every job's
    first worker: the full round admits nobody and is skipped. On 5 GPUs one waiting job fits: the round
    runs and starts it (fails if the room test is off by a worker)."""
    from test_policy_optimus import NO_COST, Script

    from cohabit.engine.actions import Start
    from cohabit.engine.loop import Scheduler
    from cohabit.sim.backend import SimBackend

    class FourOnNodeZero(Script):
        def decide(self, view):  # type: ignore[no-untyped-def,override]
            room = 4 - len(view.running)
            return [Start(j.id, (0,)) for j in list(view.pending.values())[:max(room, 0)]]

    jobs = [TraceJob(simple_job(f"j{i}", 1, submit_time=float(i), iterations=500),
                     JobTruth(iterations=500, duration=500.0, ref_workers=1)) for i in range(12)]
    sched = Scheduler(small_cluster(1, gpus), FourOnNodeZero(), SimBackend(jobs, NO_COST), horizon=100.0,
                      strict=True)
    sched.run([j.spec for j in jobs])
    view = sched.view
    assert len(view.running) == 4 and view.pending
    pol = Optimus(interval=120.0, report_interval=60.0)
    pol.targets(view, full=True)  # (a round has seen the running jobs: their constants are in the table)
    assert pol._quiet(view, True) is quiet
    plan = pol._round(view, full=True)
    assert (plan == []) is quiet
