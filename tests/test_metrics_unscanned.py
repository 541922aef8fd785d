"""The metrics pass over a :class:`Record` builds no event for the kinds it does not read (issue 18, speed21c):
single ``progress`` reports (one per job and speed in a simulation), ``packed`` and ``unpacked`` are left out
of its iteration (``metrics._UNSCANNED``), with the same metrics as a pass over every event one by one, the
last event's time included (a run's last row may be a progress report)."""

from __future__ import annotations

from cohabit.engine import record as record_module
from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record
from cohabit.policies import FIFO
from cohabit.report.metrics import _UNSCANNED, compute_metrics
from cohabit.sim.runner import simulate

from conftest import small_cluster, trace_job
from test_record_columns import _same_metrics


def test_unscanned_kinds_are_the_ones_the_pass_does_not_read() -> None:
    assert set(_UNSCANNED) == {K.PROGRESS, K.PACKED, K.UNPACKED}


def test_a_record_pass_builds_no_progress_event_and_gives_the_same_metrics(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Fails if progress rows are built as events for the pass, or if leaving them out changes a metric (the
    horizon falling among them, the last row a progress report)."""
    jobs = [trace_job(f"j{i}", 1 + i % 3, 50 + 17 * i, 5.0 * i) for i in range(12)]
    rec = simulate(jobs, small_cluster(1, 4), FIFO()).result.record
    rec.append(rec.times()[-1] + 5.0, K.PROGRESS, "j0", iterations=3.0, iter_time=1.0)  # (a last row of progress)
    cap = small_cluster(1, 4).capacity
    events = list(rec)
    n_progress = sum(e.kind is K.PROGRESS for e in events)
    assert n_progress >= 12
    built: list[str] = []

    class Counted(record_module.Event):  # type: ignore[misc, valid-type]
        def __new__(cls, time, kind, job, data):  # type: ignore[no-untyped-def]
            built.append(kind)
            return super().__new__(cls, time, kind, job, data)

    monkeypatch.setattr(record_module, "Event", Counted)
    for horizon in (None, events[len(events) // 2].time, events[-2].time + 1.0):
        built.clear()
        m = compute_metrics(rec, cap, horizon=horizon)
        assert K.PROGRESS not in built and built  # the pass read the other events, and built none of these
        _same_metrics(m, compute_metrics(events, cap, horizon=horizon))


def test_packed_rows_are_left_out_the_same_way() -> None:
    rec = Record()
    rec.append(0.0, K.SUBMITTED, "a", tenant="t", weight=1.0, deadline=None, demand={"gpu": 1.0})
    rec.append(1.0, K.STARTED, "a", alloc={"gpu": 1.0}, nodes=[0])
    rec.append(2.0, K.PACKED, None, device=[0, 0], members=["a"], joined=["a"], mem_gb=1.0)
    rec.append(3.0, K.FINISHED, "a")
    rec.append(4.0, K.UNPACKED, None, device=[0, 0], left=["a"], members=[])
    cap = {"gpu": 4.0}
    _same_metrics(compute_metrics(rec, cap), compute_metrics(list(rec), cap))
