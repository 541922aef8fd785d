"""Optimus' rounds of rigid jobs without the round's rows (``Optimus._rigid_round``, issue 18's twelfth
session): where every running job and every job admitted is rigid, the plan is that of the whole round
(snapshot, greedy, restart weighing, ``apply_targets``), at every round of runs that mix rigid and elastic
jobs; where an admitted job is elastic the round goes on from the same admission."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from cohabit.engine import actions as A
from cohabit.engine.loop import Scheduler
from cohabit.policies.base import BasePolicy
from cohabit.policies.optimus import Optimus, lone_start
from cohabit.policies.placement import Draft
from cohabit.policies.targets import apply_targets, balanced_placement, balanced_start, below_floor, changed_rows
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import JobSpec, Resources, TaskGroup

from conftest import small_cluster

GPU = Resources(gpu=1, cpu=4, mem_gb=16)


def _jobs(seed: int, elastic: float) -> list[TraceJob]:
    """70 jobs of one to four GPUs over 3,000 s; a share ``elastic`` may grow by up to two workers."""
    rng = random.Random(seed)
    out = []
    for i in range(70):
        w = rng.choice([1, 1, 2, 3, 4])
        hi = w + rng.randint(1, 2) if rng.random() < elastic else w
        iters = rng.randint(100, 2000)
        spec = JobSpec(id=f"j{i}", submit_time=rng.uniform(0, 3000), architecture="allreduce",
                       workers=TaskGroup(count=w, demand=GPU), n_min=w, n_max=hi, iterations=iters)
        out.append(TraceJob(spec, JobTruth(iterations=iters, duration=float(iters) * rng.uniform(0.5, 2),
                                           ref_workers=w)))
    return out


class _Checked(Optimus):
    """Optimus whose every round is also planned the whole way (the rows of every running and admitted
    job), and compared."""

    def __init__(self) -> None:
        super().__init__(interval=120.0, report_interval=60.0)
        self.quick = self.handed_on = self.whole = self.kept = 0
        self.backend = None  # the simulator (set by the test): its reports still waiting

    def _round(self, view, *, full):  # type: ignore[override]
        seen = []
        real = self.models.admit_waiting

        def admit(*a, **k):  # (the admissions of both ways, compared below)
            out = real(*a, **k)
            seen.append(([j.id for j in out[0]], out[1].tobytes()))
            return out
        self.models.admit_waiting = admit  # type: ignore[method-assign]
        memo = self._admitted_at  # (wants_reports' admission for this round, if it found one)
        self._admitted_at = None
        quick = self._rigid_round(view, full=full)  # (found afresh)
        snap, n = self._allocate(view, None, full=full)
        del self.models.admit_waiting
        if quick is not None:
            assert seen[0] == seen[1]  # the same jobs admitted and the same room left, from the same room
        if memo is not None and full and memo[:2] == (view.now, view.allocation_version):
            self.kept += 1
            assert (memo[2] is None) == (quick is None)
            if memo[2] is not None:
                assert ([j.id for j in memo[2][0]], memo[2][1].tobytes()) == seen[0]
        self._admitted_at = memo  # (the round below reads it)
        ids, jobs = snap.ids, view.jobs
        shrink, grow = changed_rows(snap.state, snap.cur, n)
        want = apply_targets(view, dict(zip(ids, n.tolist())), [jobs[ids[i]] for i in grow.tolist()],
                             balanced_placement, reason="optimus: re-allocation",
                             shrink=[jobs[ids[i]] for i in shrink.tolist()])
        got = super()._round(view, full=full)
        assert got == want, (view.now, got, want)
        if full and not isinstance(quick, list) and self.backend is not None:  # (it reads the running rows:
            assert not any(self.backend.reports_pending(jid) for jid in view.running)  # none may wait)
        if isinstance(quick, list):
            self.quick += 1
            assert quick == want
        elif quick is None:
            self.whole += 1
        else:  # (the round went on from this admission: ``got`` above)
            self.handed_on += 1
        return got


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("elastic", [0.0, 0.3])
def test_a_round_of_rigid_jobs_plans_as_the_whole_round(seed: int, elastic: float,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import cohabit.sim.runner as runner

    pol = _Checked()
    real = runner.SimBackend

    def made(*a, **k):  # type: ignore[no-untyped-def]
        pol.backend = real(*a, **k)
        return pol.backend
    monkeypatch.setattr(runner, "SimBackend", made)
    out = simulate(_jobs(seed, elastic), small_cluster(2, 4), pol)
    assert not out.result.unfinished
    assert pol.quick > 20  # rounds planned without rows
    assert pol.kept > 5  # rounds that read the admission wants_reports found
    if elastic:
        assert pol.whole + pol.handed_on > 0  # and rounds that needed them
    else:
        assert pol.whole == pol.handed_on == 0


def test_a_full_round_of_rigid_jobs_leaves_the_reports_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A due full round that ``_rigid_round`` plans reads no running job's telemetry, so ``wants_reports``
    asks for none: at its decide the running jobs' reports are still waiting in the simulator, to be folded
    in one batch later (fails if it asks for them). What the round then reads is checked by
    ``tests/test_sim_lazy_reports.py`` (no running job read with reports waiting)."""
    import cohabit.sim.runner as runner
    from cohabit.sim.backend import SimBackend

    made: list[SimBackend] = []
    real = runner.SimBackend
    monkeypatch.setattr(runner, "SimBackend", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    pol = Optimus(interval=120.0, report_interval=30.0)
    inner_wants, inner_decide = pol.wants_reports, pol.decide
    asked: list[tuple[float, object]] = []
    waited: list[bool] = []

    def wants(view):  # type: ignore[no-untyped-def]
        due = view.now >= pol._next_full
        out = inner_wants(view)
        quiet = pol._quiet_at is not None and pol._quiet_at[3]
        asked.append((view.now, out if due and not quiet else None))
        return out

    def decide(view):  # type: ignore[no-untyped-def]
        if asked and asked[-1] == (view.now, False) and view.running:
            waited.append(any(made[0].reports_pending(jid) for jid in view.running))
        return inner_decide(view)
    pol.wants_reports, pol.decide = wants, decide  # type: ignore[method-assign]
    out = simulate(_jobs(5, 0.0), small_cluster(2, 4), pol)
    assert not out.result.unfinished
    assert len(waited) > 10 and all(waited)


class _OnNodeZero(BasePolicy):
    """Starts every job that fits at its minimum on node 0 (node 1 stays free)."""

    name = "node-zero"

    def decide(self, view):  # type: ignore[override]
        draft, plan = Draft(view), []
        for j in view.pending.values():
            p = (0,) * j.spec.min_workers
            if draft.reserve(j, p):
                plan.append(A.Start(j.id, p))
        return plan


@pytest.mark.parametrize("elastic", [False, True])
def test_a_full_round_admitting_an_elastic_job_wants_the_reports(elastic: bool) -> None:
    """Rigid jobs fill node 0; a job waits that the free node 1 takes at the next full round. If it is rigid
    the round is planned without rows and wants no reports; if it is elastic the round reads the running jobs'
    rows and wants every report (fails if ``wants_reports`` looks only at the running jobs)."""
    jobs = []
    for i in range(5):
        hi = 3 if elastic and i == 4 else 1
        spec = JobSpec(id=f"j{i}", submit_time=float(i), architecture="allreduce",
                       workers=TaskGroup(count=1, demand=GPU), n_min=1, n_max=hi, iterations=5000)
        jobs.append(TraceJob(spec, JobTruth(iterations=5000, duration=5000.0, ref_workers=1)))
    sched = Scheduler(small_cluster(2, 4), _OnNodeZero(), SimBackend(jobs, SimConfig(checkpoint_s=0.0, restore_s=0.0)),
                      horizon=100.0, strict=True)
    sched.run([j.spec for j in jobs])
    view = sched.view
    assert len(view.running) == 4 and list(view.pending) == ["j4"]
    pol = Optimus()
    for job in view.running.values():  # (the running jobs in the per-job table, as admitted by a round)
        pol.models._slots(view, [job.id])
    assert pol.wants_reports(view) is (True if elastic else False)
    plan = pol.decide(view)
    assert [a.job for a in plan] == ["j4"]



class _HeldChecked(Optimus):
    """Optimus whose every read of the running jobs' holdings (``_held``, kept while the allocation stays) is
    compared with ``JobModels.rigid_hold`` made afresh, bit for bit."""

    def __init__(self) -> None:
        super().__init__(interval=120.0, report_interval=60.0)
        self.reads = self.later = 0  # reads; reads of holdings kept from an earlier instant
        self._made_at = -1.0  # the instant the kept holdings were summed

    def _held(self, view):  # type: ignore[no-untyped-def]
        memo = self._held_at
        got = super()._held(view)
        fresh = self.models.rigid_hold(view)
        assert (got is None) == (fresh is None)
        if got is not None:
            assert got.tobytes() == fresh.tobytes(), (view.now, got, fresh)
            assert not got.flags.writeable  # (kept: a caller must not write into it)
            if memo is not None and memo[2] is got:
                self.later += view.now != self._made_at
            else:
                self._made_at = view.now
        self.reads += 1
        return got


@pytest.mark.parametrize("seed", range(3))
def test_the_running_holdings_are_kept_while_the_allocation_stays(seed: int) -> None:
    """Every read of the kept holdings equals a fresh sum (fails when the memo outlives an allocation change,
    e.g. kept per view alone), and holdings are read at later instants from the memo (fails when it is kept
    per instant only, as before issue 18's sixteenth session)."""
    pol = _HeldChecked()
    out = simulate(_jobs(seed, 0.0), small_cluster(2, 4), pol)
    assert not out.result.unfinished
    assert pol.reads > 20
    assert pol.later > 5


class _QuietChecked(Optimus):
    """Optimus whose every quiet test (``_quiet``, its answer kept while its inputs stay) is compared with the
    test made afresh (the holdings summed again, the room and floor compared again)."""

    def __init__(self) -> None:
        super().__init__(interval=120.0, report_interval=60.0)
        self.kept = self.fresh = self.quiet = 0

    def _quiet(self, view, waiting):  # type: ignore[no-untyped-def]
        memo = self._quiet_memo
        got = super()._quiet(view, waiting)
        held = self.models.rigid_hold(view)
        want = held is not None and (not waiting or below_floor(view.capacity.sum(axis=0) - held, view.task_floor))
        assert got == want, (view.now, got, want)
        if memo is not None and self._quiet_memo is memo:
            self.kept += 1
        else:
            self.fresh += 1
        self.quiet += got
        return got


@pytest.mark.parametrize("seed", range(4))
def test_the_quiet_answer_is_kept_while_its_inputs_stay(seed: int) -> None:
    """A kept quiet answer equals the test made afresh at every due full round (fails when the memo outlives an
    allocation change, a move of the task floor, or a change of whether a job waits), and most are kept."""
    pol = _QuietChecked()
    out = simulate(_jobs(seed, 0.0)[:40] + _mixed_jobs(seed)[:30], small_cluster(3, 4), pol)
    assert not out.result.unfinished
    assert pol.kept > 10 and pol.fresh > 10 and pol.quiet > 10, (pol.kept, pol.fresh, pol.quiet)


def _rigid(jid: str, at: float, gpu: float, cpu: float, iters: int) -> TraceJob:
    spec = JobSpec(id=jid, submit_time=at, architecture="allreduce", n_min=1, n_max=1, iterations=iters,
                   workers=TaskGroup(count=1, demand=Resources(gpu=gpu, cpu=cpu, mem_gb=8)))
    return TraceJob(spec, JobTruth(iterations=iters, duration=float(iters), ref_workers=1))


@pytest.mark.parametrize("case", ["waits", "floor"])
def test_the_kept_quiet_answer_is_made_again_when_a_job_waits_or_the_floor_moves(case: str) -> None:
    """One node of 4 GPUs and 32 cores; ``a`` holds 3 GPUs and 4 cores for the whole run, and later arrivals
    cannot start, so the allocation does not change. ``waits``: ``b0`` (1 GPU, 30 cores) ran first, so its row is
    in the task floor; nobody waits (quiet) until ``b``, of ``b0``'s shape, arrives: the floor does not move, but
    the room (1 GPU, 28 cores) now holds a first worker by the floor's test, so the rounds are not quiet (fails
    without the waiting test). ``floor``: ``b`` (2 GPUs) waits and the room is below every worker (quiet) until
    ``c`` (1 GPU, 30 cores) lowers the floor to 1 GPU (fails without the floor test)."""
    pol = _QuietChecked()
    if case == "waits":
        jobs = [_rigid("b0", 0.0, 1, 30, 50), _rigid("a", 10.0, 3, 4, 3000), _rigid("b", 1000.0, 1, 30, 100)]
    else:
        jobs = [_rigid("a", 0.0, 3, 4, 3000), _rigid("b", 500.0, 2, 4, 100), _rigid("c", 1000.0, 1, 30, 100)]
    seen = []
    real = pol._quiet

    def quiet(view, waiting):  # type: ignore[no-untyped-def]
        got = real(view, waiting)
        seen.append((view.now, waiting, got))
        return got
    pol._quiet = quiet  # type: ignore[method-assign]
    simulate(jobs, small_cluster(1, 4), pol)
    before = [(w, q) for t, w, q in seen if (200 if case == "waits" else 500) < t < 1000]
    after = [(w, q) for t, w, q in seen if 1000 < t < 2000]
    assert before and set(before) == ({(False, True)} if case == "waits" else {(True, True)}), seen
    assert after and set(after) == {(True, False)}, seen


def _mixed_jobs(seed: int) -> list[TraceJob]:
    """80 rigid jobs of half, one or two GPUs per worker (devices shared by halves) and one to six workers over
    2,000 s: spreads that a reservation refuses and jobs that only the consolidated fallback places."""
    rng = random.Random(seed)
    out = []
    for i in range(80):
        w = rng.choice([1, 1, 2, 3, 5, 6])
        per = rng.choice([0.5, 1.0, 1.0, 2.0])
        demand = Resources(gpu=per, cpu=rng.choice([2, 4, 12]), mem_gb=rng.choice([8, 16, 96]))
        iters = rng.randint(100, 2000)
        spec = JobSpec(id=f"m{i}", submit_time=rng.uniform(0, 2000), architecture="allreduce",
                       workers=TaskGroup(count=w, demand=demand), n_min=w, n_max=w, iterations=iters)
        out.append(TraceJob(spec, JobTruth(iterations=iters, duration=float(iters) * rng.uniform(0.5, 2),
                                           ref_workers=w)))
    return out


class _StartCompared(Optimus):
    """Optimus that, at every decision, places every waiting job both ways: ``balanced_start`` on the ledger's
    room and ``apply_targets`` with ``balanced_placement`` on a scratch draft."""

    def __init__(self) -> None:
        super().__init__(interval=120.0, report_interval=60.0)
        self.placed = self.refused = self.uneven = 0

    def decide(self, view):  # type: ignore[no-untyped-def]
        for job in list(view.pending.values()) + list(view.paused.values()):
            n = job.spec.min_workers
            want = apply_targets(view, {job.id: n}, [job], balanced_placement, reason="x", shrink=())
            got = balanced_start(view, job, n)
            assert got == want, (view.now, job.id, got, want)
            if not job.spec.num_ps:
                assert lone_start(view, job) == got, (view.now, job.id)
            if not got:
                self.refused += 1
            else:
                self.placed += 1
                counts = sorted(Counter(got[0].placement).values())
                self.uneven += counts[-1] - counts[0] > 1  # (not an even spread: the fallback's)
        return super().decide(view)


@pytest.mark.parametrize("seed", range(2))
def test_a_lone_start_on_the_ledger_is_the_start_a_draft_gives(seed: int) -> None:
    """``balanced_start`` (no draft) gives ``apply_targets``' plan for one waiting job, whether it is placed by an
    even spread, by the consolidated fallback, or not at all (fails when its reservation test accepts what a
    draft refuses, or when it skips the fallback)."""
    pol = _StartCompared()
    out = simulate(_mixed_jobs(seed), small_cluster(3, 4), pol)
    assert not out.result.unfinished
    assert pol.placed > 50 and pol.refused > 50 and pol.uneven > 0


def test_the_one_node_choice_is_the_numpy_passes_choice() -> None:
    """``targets._one_node`` (issue 18, seventeenth session: ``_balanced``'s ``k = 1`` in Python) picks the node
    the numpy passes pick: among nodes fitting ``a`` tasks whose free row is at least ``need - EPS``, the one
    fitting fewest, the first on ties; None when there is none. Random fits with many ties, rows that fail
    the free test by a hair (and pass at exactly ``need - EPS``), zero fits and huge ones."""
    import numpy as np

    from cohabit.policies.targets import EPS, _one_node

    rng = np.random.default_rng(7)
    kinds = Counter()
    for _ in range(3000):
        nodes = int(rng.integers(1, 12))
        fits = rng.integers(0, 5, nodes)
        if rng.random() < 0.1:
            fits[rng.integers(0, nodes)] = np.iinfo(np.int64).max // 4
        a = int(rng.integers(1, 4))
        need = rng.integers(0, 4, 3).astype(float) * a
        free = need[None, :] + rng.choice([-1.0, -2 * EPS, -EPS, 0.0, 1.0], (nodes, 3), p=[.1, .1, .1, .3, .4])
        ok = (fits >= a) & (free >= need - EPS).all(axis=1)
        cand = np.flatnonzero(ok)
        want = int(cand[np.argsort(fits[cand], kind="stable")[0]]) if cand.size else None
        got = _one_node(fits.tolist(), free, (need - EPS).tolist(), a)
        assert got == want
        kinds["none" if want is None else "tie" if (fits[cand] == fits[want]).sum() > 1 else "one"] += 1
    assert kinds["none"] > 100 and kinds["tie"] > 100 and kinds["one"] > 100, kinds


def test_the_lone_start_picks_the_node_balanced_start_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    """``optimus.lone_start`` (issue 18, nineteenth session: the ``k = 1`` node by one ``argmin``) starts the job
    on the node ``targets._one_node`` picks (fitting ``n`` tasks, free row at least ``need - EPS``, fitting
    fewest, the first on ties), or hands the job to ``balanced_start``; it hands it on whenever no node
    qualifies or the reservation fails. Random fits with ties and rows a hair either side of ``need - EPS``
    (fails with ties to the last node, without the row test, and without the reservation test)."""
    import types

    import numpy as np

    import cohabit.policies.optimus as opt
    from cohabit.policies.targets import EPS, _one_node

    rng = np.random.default_rng(11)
    kinds = Counter()
    monkeypatch.setattr(opt, "balanced_start", lambda view, job, n: "handed on")
    for _ in range(3000):
        nodes = int(rng.integers(1, 12))
        fits = rng.integers(0, 5, nodes)
        n = int(rng.integers(1, 4))
        w = rng.integers(0, 4, 3).astype(float)
        w.flags.writeable = False
        need = w * n
        free = need[None, :] + rng.choice([-1.0, -2 * EPS, -EPS, 0.0, 1.0], (nodes, 3), p=[.1, .1, .1, .3, .4])
        reserves = bool(rng.random() < 0.9)
        monkeypatch.setattr(opt, "reserve_fits", lambda view, row, placement: reserves)
        view = types.SimpleNamespace(demand_vector=lambda job: w, fit_now=lambda row: fits, free=free)
        job = types.SimpleNamespace(id="j", state=None, spec=types.SimpleNamespace(min_workers=n))
        want = _one_node(fits.tolist(), free, (need - EPS).tolist(), n)
        got = opt.lone_start(view, job)  # type: ignore[arg-type]
        whole = want is not None and all(x.is_integer() for x in free[want].tolist())  # (w holds integers)
        if got == "handed on":
            kinds["handed on"] += 1
            assert want is None or not reserves or fits[want] > fits[fits >= n].min() or \
                (fits[:want][fits[:want] == fits[want]]).size, (fits, free, n)
        else:  # (the reservation is asked unless the rows hold integers: test_the_lone_start_skips_...)
            assert (reserves or whole) and want is not None and got == [A.Start("j", (want,) * n)], \
                (fits, free, n, got, want)
            kinds["tie" if (fits == fits[want]).sum() > 1 else "one"] += 1
    assert kinds["handed on"] > 100 and kinds["tie"] > 100 and kinds["one"] > 100, kinds


def test_the_lone_start_skips_only_reservations_that_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where ``optimus.lone_start`` starts a job without asking ``reserve_fits`` (the demand row and the node's free
    row hold integers), the real ``reserve_fits`` accepts that placement; rows a hair below ``n d`` (fractions)
    that pass the row test but that the reservation refuses are asked, and handed on. Real fits
    (``fit_counts``) and device rows of whole and partly used GPUs (fails without the integer test of the free
    row or of the demand row)."""
    import types

    import numpy as np

    import cohabit.policies.optimus as opt
    from cohabit.engine.alloc import fit_counts
    from cohabit.policies.tetris_room import reserve_fits

    from cohabit.policies.targets import EPS, _one_node

    rng = np.random.default_rng(5)
    kinds = Counter()
    monkeypatch.setattr(opt, "balanced_start", lambda view, job, n: "handed on")
    for i in range(4000):
        nodes = int(rng.integers(1, 6))
        n = int(rng.integers(1, 4))
        whole = rng.random() < 0.5
        w = np.array([float(rng.integers(0, 3)), *(rng.integers(1, 4, 2) if whole else rng.choice([0.1, 0.3, 0.7], 2))])
        free = (w * n)[None, :] + rng.choice([0.0, 1.0, -1.0, -1e-9, -5e-10, -1.5e-9], (nodes, 3))
        if i % 10 == 0:  # a large fractional demand whose n copies a free row of integers holds within EPS, the
            n = int(rng.choice([3, 6]))  # subtractions in turn rounding below -EPS (reserve_fits refuses)
            w = np.array([0.0, 1e10 / 3, 1.0])
            free = np.array([[0.0, float(round(n * w[1])), float(n)]] * nodes)
        w.flags.writeable = False
        free = np.maximum(free, 0.0)
        dev = rng.choice([0.0, 0.5, 1.0], (nodes, 8), p=[.3, .2, .5])
        view = types.SimpleNamespace(demand_vector=lambda job: w, free=free, device_free=dev, gpu_col=0,
                                     fit_now=lambda row: fit_counts(free, dev, row, 0))
        job = types.SimpleNamespace(id="j", state=None, spec=types.SimpleNamespace(min_workers=n))
        got = opt.lone_start(view, job)  # type: ignore[arg-type]
        if got == "handed on":
            want = _one_node(fit_counts(free, dev, w, 0).tolist(), free, (w * n - EPS).tolist(), n)
            kinds["refused" if want is not None and not reserve_fits(view, w, (want,) * n) else "handed on"] += 1
            continue
        assert reserve_fits(view, w, got[0].placement), (w, free, dev, n, got)  # type: ignore[arg-type]
        kinds["whole" if whole else "fraction"] += 1
    assert min(kinds.values()) > 100, kinds


@pytest.mark.parametrize("seed,elastic", [(0, 0.0), (1, 0.0), (2, 0.3)])
def test_the_kept_running_holdings_are_a_fresh_sum(seed: int, elastic: float) -> None:
    """``JobModels.rigid_hold`` of the whole running set, brought up to date from the running set's journal
    (``_kept_hold``, issue 18's seventeenth session), equals the sum made afresh over the running jobs bit for
    bit at every read (None alike where a job is elastic), and the kept holdings answer most reads (fails
    when a started job is not added, a stopped one not taken off, or the holdings outlive a change unseen)."""
    pol = Optimus(interval=120.0, report_interval=60.0)
    models = pol.models
    real, real_kept = models.rigid_hold, models._kept_hold
    seen = Counter()

    def kept(view):  # type: ignore[no-untyped-def]
        got = real_kept(view)
        seen["kept" if got is not False else "afresh"] += 1
        return got

    def checked(view, ids=None):  # type: ignore[no-untyped-def]
        got = real(view, ids)
        if ids is None:
            fresh = real(view, list(view.running))
            assert (got is None) == (fresh is None), view.now
            if got is not None:
                assert got.tobytes() == fresh.tobytes(), (view.now, got, fresh)
                seen["held"] += 1
        return got

    models.rigid_hold, models._kept_hold = checked, kept  # type: ignore[method-assign]
    out = simulate(_jobs(seed, elastic), small_cluster(2, 4), pol)
    assert not out.result.unfinished
    if not elastic:  # (with elastic jobs running the holdings are mostly None, summed afresh)
        assert seen["held"] > 20 and seen["kept"] > 20 and seen["kept"] > seen["afresh"], seen
    else:
        assert seen["kept"] + seen["afresh"] > 20, seen


def test_below_floor_is_the_numpy_test() -> None:
    """``targets.below_floor`` (a round's "no waiting job's first worker fits" on Python floats, issue 18's
    seventeenth session) answers ``(free + EPS < floor).any()`` for rooms within a hair of the floor, at it,
    above it, and floors of inf (nothing admitted yet)."""
    import numpy as np

    from cohabit.policies.targets import EPS, below_floor

    rng = np.random.default_rng(3)
    answers = Counter()
    for _ in range(4000):
        floor = rng.integers(0, 4, 3).astype(float)
        if rng.random() < 0.05:
            floor[rng.integers(0, 3)] = np.inf
        free = floor + rng.choice([-1.0, -2 * EPS, -EPS, -EPS / 2, 0.0, EPS, 1.0], 3)
        want = bool((free + EPS < floor).any())
        assert below_floor(free, floor) is want, (free, floor)
        answers[want] += 1
    assert answers[True] > 500 and answers[False] > 500
