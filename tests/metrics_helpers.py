"""A large synthetic record for compute_metrics (shared by tests/test_report_metrics.py and
bench/metrics_scale.py, which times it)."""

from __future__ import annotations

from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record


def scale_record(n_jobs: int) -> Record:
    """``n_jobs`` jobs 10 s apart, ~5.2 events each: every tenth is paused and resumed on another node.

    Each job: submitted (7 tenants, a deadline on two in three), a decision, started with
    ``1 + i % 8`` GPUs, a progress report, finished 9 s after its submission.
    """
    r = Record()
    for i in range(n_jobs):
        j, t = f"j{i}", 10.0 * i
        r.append(t, K.SUBMITTED, j, tenant=f"t{i % 7}", deadline=t + 50 if i % 3 else None)
        r.append(t, K.DECISION, ms=0.1)
        r.append(t + 1, K.STARTED, j, alloc={"gpu": 1 + i % 8, "cpu": 4.0}, nodes=[0])
        if i % 10 == 0:
            r.append(t + 5, K.PAUSED, j)
            r.append(t + 6, K.RESUMED, j, alloc={"gpu": 1 + i % 8, "cpu": 4.0}, nodes=[1])
        r.append(t + 8, K.PROGRESS, j, iterations=100, iter_time=0.05)
        r.append(t + 9, K.FINISHED, j)
    return r


def flattened(rec: Record) -> Record:
    """The same events appended one by one: no rows of reports, no segments."""
    flat = Record()
    for e in rec:
        flat.append(e.time, e.kind, e.job, **e.data)
    return flat


def assert_same_metrics_at_horizons(rec: Record, flat: Record, capacity: object, last: float) -> None:
    """``compute_metrics`` reads ``rec`` and its flattened copy alike, with no horizon and around ``last``."""
    import json

    from cohabit.report.metrics import compute_metrics

    for horizon in (None, last, last - 1.0, last + 1.0):
        a = compute_metrics(rec, capacity, horizon=horizon).to_json()  # type: ignore[arg-type]
        b = compute_metrics(flat, capacity, horizon=horizon).to_json()  # type: ignore[arg-type]
        a.pop("decision_time", None), b.pop("decision_time", None)
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True), horizon
