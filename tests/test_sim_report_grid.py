"""Periodic reports on one shared grid (issue 18): every running job reports at the global multiples
of the report interval; the reports of a grid time are taken from the simulator in one batch (or later,
see tests/test_sim_lazy_reports.py), and the engine folds a batch exactly as it folds the same reports
one event each."""

from __future__ import annotations

import json
from array import array

import pytest

from cohabit.engine.backend import BackendEvent, BackendEventKind
from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record
from cohabit.policies import FIFO, make_policy
from cohabit.report.metrics import compute_metrics
from cohabit.sim.backend import SimBackend
from cohabit.sim.report_grid import report_grid_after
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec import preset

from conftest import small_cluster, trace_job
from metrics_helpers import assert_same_metrics_at_horizons, flattened


def test_the_next_grid_time_is_the_next_global_multiple():
    assert report_grid_after(0.0, 60.0) == 60.0
    assert report_grid_after(59.9, 60.0) == 60.0
    assert report_grid_after(60.0, 60.0) == 120.0
    assert report_grid_after(60.0 - 1e-12, 60.0) == 120.0  # a multiple within rounding counts as now
    assert report_grid_after(61.0, 60.0) == 120.0


class _Recording:
    """The simulator, keeping every event it hands the scheduler, and every grid report taken from it
    (as a ``REPORTS`` event of columns per grid time: jobs, iterations, iter_time, loss)."""

    def __init__(self, inner: SimBackend) -> None:
        self.inner = inner
        self.seen: list[tuple[float, BackendEvent]] = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def advance(self, until: float):
        t, events = self.inner.advance(until)
        self.seen.extend((t, e) for e in events)
        return t, events

    def take_reports(self, job=None, chunked=False):
        segs = list(self.inner.take_reports(job, chunked=chunked))  # (read here and by the engine)
        every = self.inner.report_every
        for jid, k0, iters, losses, itt, *_ in segs:
            for i, (it, loss) in enumerate(zip(iters, losses)):
                t = (k0 + i) * every
                if not self.seen or self.seen[-1][1].kind is not BackendEventKind.REPORTS or self.seen[-1][0] != t \
                        or "jobs" not in self.seen[-1][1].data:
                    self.seen.append((t, BackendEvent(t, BackendEventKind.REPORTS, "", {
                        "jobs": [], "iterations": [], "iter_time": [], "loss": []})))
                d = self.seen[-1][1].data
                d["jobs"].append(jid), d["iterations"].append(it), d["iter_time"].append(itt), d["loss"].append(loss)
        return segs


class _Reporting(FIFO):
    report_interval = 60.0


def _two_jobs_started_apart(monkeypatch) -> tuple[SimBackend, list[tuple[float, BackendEvent]]]:
    import cohabit.sim.runner as runner

    made: list[_Recording] = []
    real = runner.SimBackend
    monkeypatch.setattr(runner, "SimBackend", lambda *a, **k: made.append(_Recording(real(*a, **k))) or made[-1])
    jobs = [trace_job("a", 1, 3000, submit=7.0), trace_job("b", 1, 2000, submit=100.0)]
    simulate(jobs, small_cluster(1, 2), _Reporting())
    return made[0].inner, made[0].seen


def test_running_jobs_report_together_on_the_grid_after_their_first_iteration(monkeypatch):
    _, seen = _two_jobs_started_apart(monkeypatch)
    first = [(t, e.job) for t, e in seen if e.kind is BackendEventKind.PROGRESS]
    assert [j for _, j in first] == ["a", "b"]  # each job's first iteration: at its own time
    assert first[0][0] == pytest.approx(8.0) and first[1][0] == pytest.approx(101.0)
    batches = [(t, e.data) for t, e in seen if e.kind is BackendEventKind.REPORTS and "jobs" in e.data]
    assert batches, "periodic reports come as batches"
    marks = [t for t, e in seen if e.kind is BackendEventKind.REPORTS and "grid" in e.data]
    assert marks == [t for t, _ in batches]  # each grid pass with reports says so, and they are taken then
    for t, d in batches:
        assert t == pytest.approx(round(t / 60.0) * 60.0)  # on the grid
        assert len(d["jobs"]) == len(d["iterations"]) == len(d["iter_time"]) == len(d["loss"])
    together = [t for t, d in batches if sorted(d["jobs"]) == ["a", "b"]]
    assert together and together[0] == 120.0  # b joins the grid at the first multiple after its first report
    assert [t for t, d in batches][:2] == [60.0, 120.0]
    ends = {e.job: t for t, e in seen if e.kind is BackendEventKind.FINISHED}
    for t, d in batches:  # nobody reports at or after its finish
        assert all(t < ends[j] for j in d["jobs"])


def test_a_batch_report_carries_what_a_single_report_would(monkeypatch):
    be, seen = _two_jobs_started_apart(monkeypatch)
    for t, e in seen:
        if e.kind is BackendEventKind.REPORTS and "jobs" in e.data:
            for j, it, itt, loss in zip(e.data["jobs"], e.data["iterations"], e.data["iter_time"], e.data["loss"]):
                truth = be._truth[j]
                assert itt == pytest.approx(1.0)
                assert loss == pytest.approx(truth.loss_at(it / truth.iterations, j), rel=1e-12)


def test_rows_of_reports_read_back_one_event_per_job():
    r = Record()
    r.append(0.0, K.DECISION, None, ms=0.1)
    r.append_reports(60.0, ["a", "b"], array("d", [10.0, 20.0]), array("d", [1.0, 0.5]))
    r.append(60.0, K.PROGRESS, "c", iterations=3.0, iter_time=2.0)
    r.append(61.0, K.FINISHED, "a")
    evs = list(r)
    assert len(r) == len(evs) == 5
    assert [(e.time, e.kind, e.job, e.data) for e in evs[1:3]] == [
        (60.0, K.PROGRESS, "a", {"iterations": 10.0, "iter_time": 1.0}),
        (60.0, K.PROGRESS, "b", {"iterations": 20.0, "iter_time": 0.5})]
    assert [e.job for e in r.of_kind(K.PROGRESS)] == ["a", "b", "c"]
    assert r.kind_counts() == {K.DECISION: 1, K.PROGRESS: 3, K.FINISHED: 1}
    assert [e.kind for e in r.without_report_rows()] == [K.DECISION, K.PROGRESS, K.FINISHED]
    assert r.report_rows() == [(60.0, 2)]
    with pytest.raises(ValueError, match="time-ordered"):
        r.append_reports(1.0, ["a"], array("d", [1.0]), array("d", [1.0]))


def test_metrics_read_rows_of_reports_as_the_events_they_stand_for():
    """compute_metrics (with and without a horizon) on a record whose reports are rows equals it on the
    same events appended one by one."""
    jobs = load_trace("tiresias_480", "tiresias").jobs[:40]
    cluster = preset("tiresias")
    out = simulate(jobs, cluster, make_policy("slaq"))
    rec = out.result.record
    assert rec.report_rows()
    flat = flattened(rec)
    assert len(flat) == len(rec) and not flat.report_rows()
    assert_same_metrics_at_horizons(rec, flat, cluster.capacity, rec.report_rows()[-1][0])


def test_a_horizon_that_only_rows_of_reports_pass_ends_the_metrics_there():
    """The pass over every event stops at the first event past the horizon; rows of reports count
    for that as the events they stand for (the time the run is measured up to)."""
    rows, flat = Record(), Record()
    for r in (rows, flat):
        r.append(0.0, K.SUBMITTED, "a", tenant=None, weight=1.0, deadline=None, demand={"gpu": 1.0})
        r.append(0.0, K.STARTED, "a", alloc={"gpu": 1.0}, nodes=[0])
    rows.append_reports(60.0, ["a"], array("d", [60.0]), array("d", [1.0]))
    rows.append_reports(120.0, ["a"], array("d", [120.0]), array("d", [1.0]))
    for t in (60.0, 120.0):
        flat.append(t, K.PROGRESS, "a", iterations=t, iter_time=1.0)
    for horizon in (None, 90.0, 150.0):
        a = compute_metrics(rows, {"gpu": 1.0}, horizon=horizon).to_json()
        b = compute_metrics(flat, {"gpu": 1.0}, horizon=horizon).to_json()
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True), horizon


def test_each_batched_report_has_the_speed_of_the_jobs_first_report_and_its_truths_loss(monkeypatch):
    """While a job is on the grid its speed is the one its first-iteration report measured: a batch
    that mixed up members' columns (jobs join and leave all the time here) would show another speed."""
    import cohabit.sim.runner as runner

    made: list[_Recording] = []
    real = runner.SimBackend
    monkeypatch.setattr(runner, "SimBackend", lambda *a, **k: made.append(_Recording(real(*a, **k))) or made[-1])
    jobs = load_trace("tiresias_480", "tiresias").jobs[:80]
    simulate(jobs, preset("tiresias"), make_policy("slaq"))
    be, seen = made[0].inner, made[0].seen
    measured: dict[str, float] = {}
    checked = 0
    for t, e in sorted(seen, key=lambda te: te[0]):  # (slaq takes its reports when it reads them: later)
        if e.kind is BackendEventKind.PROGRESS:
            measured[e.job] = e.data["iter_time"]
        elif e.kind is BackendEventKind.REPORTS and "jobs" in e.data:
            d = e.data
            for j, it, itt, loss in zip(d["jobs"], d["iterations"], d["iter_time"], d["loss"]):
                truth = be._truth[j]
                assert itt == measured[j], (t, j)
                assert loss == truth.loss_at(it / truth.iterations, j), (t, j)
                checked += 1
    assert checked > 500
