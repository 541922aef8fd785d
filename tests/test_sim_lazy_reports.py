"""Reports that cost nothing until read (issue 18): with a policy that says when it reads reported
telemetry (``wants_reports``), the simulator's grid reports are folded into the jobs and the record
only then. Everything must be as if each report had been handed over as it happened: the same
decisions and record, the same loss histories, the same settled counters, bit for bit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cohabit.engine.backend import BackendEvent, BackendEventKind
from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record
from cohabit.policies import make_policy
from cohabit.report.fingerprint import fingerprint
from cohabit.report.metrics import compute_metrics
from cohabit.sim.backend import SimBackend
from cohabit.sim.traces import load_trace
from cohabit.spec import preset

from conftest import small_cluster
from metrics_helpers import assert_same_metrics_at_horizons, flattened


class _OneByOne:
    """The simulator, handing each grid report on as its own PROGRESS event when it happens."""

    def __init__(self, inner: SimBackend) -> None:
        self.inner = inner

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def advance(self, until: float):
        t, events = self.inner.advance(until)
        out = []
        for e in events:
            if e.kind is BackendEventKind.REPORTS:
                every = self.inner.report_every
                for j, k0, iters, losses, itt, *_ in self.inner.take_reports():
                    out.extend(BackendEvent((k0 + i) * every, BackendEventKind.PROGRESS, j,
                                            {"iterations": it, "iter_time": itt, "metrics": {"loss": loss}})
                               for i, (it, loss) in enumerate(zip(iters, losses)))
            else:
                out.append(e)
        return t, out


_WORKLOADS = {
    # the Tiresias trace's first jobs on its cluster, and the same jobs queueing on 2 x 4 GPUs (preemptions,
    # rounds after arrivals and finishes while jobs run)
    "tiresias": lambda: (load_trace("tiresias_480", "tiresias").jobs[:60], preset("tiresias")),
    "contended": lambda: (load_trace("tiresias_480", "tiresias").jobs[:60], small_cluster(2, 4)),
}


def _some_elastic(jobs: list) -> list:
    """``jobs`` with every other one allowed one worker more than it asks for (elastic: Optimus sizes it
    from its telemetry)."""
    import dataclasses

    return [dataclasses.replace(tj, spec=tj.spec.model_copy(update={"n_max": tj.spec.workers.count + 1}))
            if i % 2 else tj for i, tj in enumerate(jobs)]


def _run(policy_name: str, mode: str, monkeypatch, workload: str = "tiresias"):
    import cohabit.sim.runner as runner

    jobs, cluster = _WORKLOADS[workload]()
    policy = make_policy(policy_name)
    if mode in ("batch", "single"):
        policy.wants_reports = None  # every report folded as it comes (the engine's path without the hook)
    elif mode == "every-turn":
        policy.wants_reports = lambda view: True  # lazy folding of every job, at every decision
    real = runner.SimBackend
    monkeypatch.setattr(runner, "SimBackend",
                        (lambda *a, **k: _OneByOne(real(*a, **k))) if mode == "single" else real)
    return runner.simulate(jobs, cluster, policy)


def _events(rec: Record):
    """Every event but a decision's wall time, in time order (events at one time in a fixed order: a
    segment's reports are read back after the other events of their time)."""
    out = [(e.time, str(e.kind), e.job or "", json.dumps({} if e.kind is K.DECISION else e.data, sort_keys=True))
           for e in rec]
    return sorted(out)


@pytest.mark.parametrize("workload", ["tiresias", "contended"])
@pytest.mark.parametrize("policy", ["slaq", "themis", "optimus"])
def test_reports_folded_when_read_are_the_reports_folded_as_they_come(policy, workload, monkeypatch):
    lazy = _run(policy, "lazy", monkeypatch, workload)
    rec = lazy.result.record
    assert rec._segments is not None and rec._segments.total > 100  # the run did keep reports as segments
    assert not rec._report_rows  # (and none as rows)
    assert lazy.metrics.jobs_finished > 50  # (jobs larger than 8 GPUs are rejected)
    assert workload != "contended" or policy == "optimus" or lazy.metrics.preemptions > 5
    for mode in ("every-turn", "batch", "single"):
        other = _run(policy, mode, monkeypatch, workload)
        assert fingerprint(rec, lazy.metrics) == fingerprint(other.result.record, other.metrics), mode
        assert _events(rec) == _events(other.result.record), mode
        assert len(rec) == len(other.result.record)
        for jid, job in lazy.result.jobs.items():
            o = other.result.jobs[jid]
            assert list(job.metrics.get("loss", [])) == list(o.metrics.get("loss", [])), (mode, jid)
            assert (job.reported_iterations, job.report_time, job.iter_time) == (
                o.reported_iterations, o.report_time, o.iter_time), (mode, jid)
            end = job.end_time if job.end_time is not None else 0.0  # the counters a report settles, bit for bit
            assert (job.executed_time(end), job.attained_service(end)) == (o.executed_time(end),
                                                                           o.attained_service(end)), (mode, jid)


def test_metrics_read_segments_as_the_events_they_stand_for(monkeypatch):
    """compute_metrics (with and without a horizon) on a record whose reports are segments equals it on
    the same events appended one by one."""
    out = _run("slaq", "lazy", monkeypatch)
    rec = out.result.record
    flat = flattened(rec)
    assert len(flat) == len(rec) and flat._segments is None
    assert flat.kind_counts() == rec.kind_counts()
    assert flat.report_rows() == [] and rec.report_rows()
    assert_same_metrics_at_horizons(rec, flat, preset("tiresias").capacity, rec.report_rows()[-1][0])


def test_a_segment_reads_back_as_its_reports():
    r = Record()
    r.append(0.0, K.DECISION, None, ms=0.1)
    r.append(120.0, K.FINISHED, "b")
    r.append_segment("a", 1, 2, 60.0, 5.0, 10.0, 0.5)
    r.append_segment("a", 3, 1, 60.0, 5.0, 10.0, 0.5)  # continues it: one segment
    r.append_segment("c", 2, 1, 60.0, 0.0, 200.0, 2.0)  # t <= t0: iterations at t0
    assert len(r._segments.jobs) == 2 and len(r) == 6
    got = [(e.time, e.kind, e.job, e.data) for e in r]
    assert got == [
        (0.0, K.DECISION, None, {"ms": 0.1}),
        (60.0, K.PROGRESS, "a", {"iterations": 5.0 + 50.0 * 0.5, "iter_time": 2.0}),
        (120.0, K.FINISHED, "b", {}),
        (120.0, K.PROGRESS, "a", {"iterations": 5.0 + 110.0 * 0.5, "iter_time": 2.0}),
        (120.0, K.PROGRESS, "c", {"iterations": 0.0, "iter_time": 0.5}),
        (180.0, K.PROGRESS, "a", {"iterations": 5.0 + 170.0 * 0.5, "iter_time": 2.0})]
    assert r.kind_counts() == {K.DECISION: 1, K.FINISHED: 1, K.PROGRESS: 4}
    assert r.report_rows() == [(60.0, 1), (120.0, 2), (180.0, 1)]
    assert [e.job for e in r.of_kind(K.PROGRESS)] == ["a", "a", "c", "a"]
    with pytest.raises(TypeError):
        r._keep_last()  # (a record handing its events on cannot take segments)


@pytest.mark.parametrize("skip_quiet", [False, True])
@pytest.mark.parametrize("workload", ["tiresias", "contended"])
@pytest.mark.parametrize("policy", ["slaq", "themis", "optimus"])
def test_a_policy_reads_no_running_job_whose_reports_wait(policy, workload, skip_quiet, monkeypatch):
    """The information barrier's other side: inside ``decide`` a policy reading a running job's telemetry
    (iterations, report time, speed, attained service, its loss history, also through a history it keeps
    and reads later) sees every report made up to now: none of that job's reports waits in the simulator.
    Fails if ``wants_reports`` leaves out a job the round reads; with ``skip_quiet``, if it calls a round quiet
    (wanting no reports) that ``decide`` then runs."""
    import cohabit.sim.runner as runner
    from cohabit.engine.job import JobView
    from cohabit.engine.series import MetricSeries
    from cohabit.engine.state import JobState

    made: list[SimBackend] = []
    real = runner.SimBackend
    monkeypatch.setattr(runner, "SimBackend", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    deciding = [False]
    series_of: dict[int, JobView] = {}
    reads: list[tuple[str, bool]] = []  # (job, whether its reports waited) per read of a running job

    def check(job: JobView) -> None:
        if deciding[0] and job._state is JobState.RUNNING:
            reads.append((job.id, made[0].reports_pending(job.id)))

    def watch_property(name: str) -> None:
        fget = getattr(JobView, name).fget

        def read(self):
            check(self)
            value = fget(self)
            if name == "metrics" and "loss" in value:
                series_of[id(value["loss"])] = self
            return value
        monkeypatch.setattr(JobView, name, property(read))

    def watch_method(cls, name: str, job_of) -> None:
        inner = getattr(cls, name)

        def call(self, *a, **k):
            job = job_of(self)
            if job is not None:
                check(job)
            return inner(self, *a, **k)
        monkeypatch.setattr(cls, name, call)

    for name in ("reported_iterations", "report_time", "iter_time", "metrics"):
        watch_property(name)
    for name in ("iterations_done", "attained_service", "executed_time"):
        watch_method(JobView, name, lambda self: self)
    for name in ("head", "__len__", "__getitem__", "__iter__"):
        watch_method(MetricSeries, name, lambda self: series_of.get(id(self)))

    jobs, cluster = _WORKLOADS[workload]()
    if policy == "optimus":  # (a round of rigid jobs only reads no running job: Optimus._rigid_round)
        jobs = _some_elastic(jobs)
    pol = make_policy(policy)
    pol.skip_quiet = skip_quiet  # (without: every round runs and reads more; with: quiet rounds want nothing)
    inner_decide = pol.decide

    def decide(view):
        deciding[0] = True
        try:
            return inner_decide(view)
        finally:
            deciding[0] = False
    pol.decide = decide
    runner.simulate(jobs, cluster, pol)
    assert len(reads) > (10 if skip_quiet else 100)  # the rounds did read running jobs (fewer run with skip_quiet)
    stale = [jid for jid, waited in reads if waited]
    assert stale == []


@pytest.mark.parametrize("policy", ["slaq", "themis", "optimus"])
def test_a_quiet_round_leaves_the_reports_waiting(policy, monkeypatch):
    """A full round skipped as quiet (Themis: a lease expiry that renews every lease as it is) reads no
    reported telemetry, so it wants none: at its decide the running jobs' reports are still waiting, to be
    folded in one batch later (fails if ``wants_reports`` asks for them at such a round)."""
    import cohabit.sim.runner as runner

    made: list[SimBackend] = []
    real = runner.SimBackend
    monkeypatch.setattr(runner, "SimBackend", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    jobs, cluster = _WORKLOADS["tiresias"]()
    pol = make_policy(policy)
    name = "_quiet_expiry" if policy == "themis" else "_skips"
    inner_check, inner_decide = getattr(pol, name), pol.decide
    quiet_at: list[tuple[float, list[str]]] = []  # (time, the jobs the round would have read: Themis' expired)
    waited: list[bool] = []  # per quiet round: whether one of those jobs' reports was still waiting at decide

    def check(view, *more):
        out = inner_check(view, *more)
        if out:
            quiet_at.append((view.now, [j.id for j in more[0]] if policy == "themis" else list(view.running)))
        return out

    def decide(view):
        plan = inner_decide(view)
        if quiet_at and quiet_at[-1][0] == view.now:
            waited.append(any(made[0].reports_pending(jid) for jid in quiet_at[-1][1]))
        return plan
    setattr(pol, name, check)
    pol.decide = decide
    out = runner.simulate(jobs, cluster, pol)
    assert len(waited) > 10 and sum(waited) > len(waited) // 2, (len(waited), sum(waited))
    assert out.metrics.jobs_finished > 50


def test_the_numpy_pass_computes_the_reports_of_the_python_steps_bit_for_bit():
    """``ReportGrid.take`` computes many reports in one numpy pass and a few in Python: the same numbers."""
    import random

    from cohabit.sim.report_grid import _reports_numpy, _reports_python

    rng = random.Random(7)
    for every in (60.0, 300.0, 7.3):
        due = []
        for i in range(40):
            t0 = rng.uniform(0.0, 5000.0)
            rate = rng.uniform(0.01, 30.0)
            done0 = rng.choice([0.0, rng.uniform(0.0, 1e5)])
            total = done0 + rng.uniform(1.0, 1e6)
            seg = [0, 0, done0, t0, rate, total, rng.uniform(1e-3, 50.0), rng.uniform(0.1, 3.0), rng.uniform(0.0, 2.0), 0]
            k0 = int(t0 // every) + rng.choice([0, 1])  # (a first grid time at or before t0: iterations at t0)
            due.append((f"j{i}", seg, k0, k0 + rng.randrange(0, 30)))
        assert _reports_numpy(due, every) == _reports_python(due, every)


def test_metrics_window_ends_at_a_segment_report_after_the_last_event():
    """A job still running when the record ends: its last segment report is the record's last time, and the
    metrics pass (which skips report rows) must end its window there, as it does on the same events flat."""
    cluster = preset("tiresias")
    rec, flat = Record(), Record()
    for r in (rec, flat):
        r.append(0.0, K.SUBMITTED, "a", tenant="t", weight=1.0, deadline=None, demand={"gpu": 1.0})
        r.append(0.0, K.STARTED, "a", alloc={"gpu": 1.0}, nodes=[0])
    rec.append_segment("a", 1, 5, 60.0, 0.0, 0.0, 1.0)
    for e in list(rec)[2:]:
        flat.append(e.time, e.kind, e.job, **e.data)
    assert rec.last_times() == (0.0, 300.0)
    for horizon in (None, 200.0):
        a = compute_metrics(rec, cluster.capacity, horizon=horizon).to_json()
        b = compute_metrics(flat, cluster.capacity, horizon=horizon).to_json()
        a.pop("decision_time", None), b.pop("decision_time", None)
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True), horizon


def _random_grid(rng: Any, n: int, totals: tuple[float, float]) -> Any:
    """A report grid of 60 s with ``n`` plain jobs joined at random times, speeds, totals drawn from
    ``totals`` and loss curves (the take tests' common setup)."""
    from cohabit.sim.report_grid import ReportGrid

    grid = ReportGrid(60.0)
    for i in range(n):
        t = rng.uniform(0.0, 3000.0)
        grid.join(f"j{i}", None, t, done0=rng.uniform(0, 100), t0=t, rate=rng.uniform(0.1, 5.0),
                  total=rng.uniform(*totals), loss=(rng.uniform(0.5, 9.0), 1.0, 0.2), plain=True)
    return grid


def test_a_take_of_many_jobs_is_their_takes_one_by_one():
    """``ReportGrid.take(ids)`` (the engine folds the jobs a Themis round reads with one take) gives what a
    take of each of them in that order gives, the jobs without waiting reports skipped, and leaves the grid
    as those takes leave it (fails if the order or a job's own take changes)."""
    import copy
    import random

    rng = random.Random(3)
    grid = _random_grid(rng, 30, (200.0, 3e4))
    for k in range(1, 120):
        grid.grid_pass(k)
        if k % 17 == 0:
            for i in rng.sample(range(30), 5):
                grid.leave(f"j{i}")
        if k % 7 == 0:
            ids = [f"j{i}" for i in rng.sample(range(30), 12)] + ["nobody"]
            other = copy.deepcopy(grid)
            # (the engine's fold of one job: a take when its reports wait)
            one_by_one = [seg for jid in ids if other.pending(jid) for seg in other.take(jid)]
            many = grid.take(ids)
            assert many == one_by_one, k
            assert len(many) > 0 or k < 50
            assert grid.take() == other.take(), k


def test_a_chunked_take_computes_the_same_reports(monkeypatch):
    """A chunked take (the engine's fold: a chunk of reports computed at a time, as read, so a fold after a
    long quiet spell never holds them all) gives the reports of the whole take, in order, and takes them
    all at once (fails if a chunk is dropped or computed from the wrong segments)."""
    import copy
    import random

    from cohabit.sim import report_grid

    monkeypatch.setattr(report_grid, "_CHUNK", 700)
    rng = random.Random(5)
    grid = _random_grid(rng, 40, (2e3, 3e5))
    for k in range(1, 400):
        grid.grid_pass(k)
        if k in (150, 399):
            other = copy.deepcopy(grid)
            chunked = grid.take(chunked=True)
            assert not isinstance(chunked, list)  # (over the chunk size: computed as read)
            assert grid.take() == []  # (every report was taken at the call)
            assert list(chunked) == other.take()


def test_a_long_fold_settles_the_counters_as_the_step_by_step_loop():
    """``JobView._grid_reports`` settles a long fold (64 reports and more: after a quiet spell) in one numpy
    pass (``engine.job._grid_sums``): the same attained service, run time and clock as the loop of one step
    per report, bit for bit (fails if the sums are taken pairwise, ``np.sum``, or a grid time is off)."""
    import random

    from cohabit.engine import job as job_module

    rng = random.Random(11)
    for _ in range(300):
        n = rng.choice([64, 65, 100, 1000, 5000])
        k0, every, rate = rng.randrange(0, 10 ** 6), rng.choice([60.0, 300.0, 7.3]), rng.choice([1.0, 8.0, 0.5, 3.7])
        attained, run_time = rng.uniform(0, 1e9), rng.uniform(0, 1e8)
        since = (k0 - 1) * every + rng.uniform(0, every)
        a, r, s = attained, run_time, since
        for k in range(k0, k0 + n):
            t = k * every
            dt = t - s
            a += dt * rate
            r += dt
            s = t
        assert job_module._grid_sums(k0, n, every, rate, attained, run_time, since) == (a, r, s)
