"""The record's columns (``decision``, ``used``, ``started``, ``resumed``, ``paused``, ``submitted``
data kept one column per key) and the metrics pass that reads them without an event per row.

Every event must read back exactly as appended (keys, order, values, types), whichever way it was
appended; the metrics of a record must be bit for bit those of the same events iterated one by one.
"""

from __future__ import annotations

import math
import pickle
import random
import tracemalloc
from dataclasses import fields

import numpy as np
import pytest

from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record
from cohabit.policies import make_policy
from cohabit.report.metrics import compute_metrics
from cohabit.report.steps import ShareSeries
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec import preset


def _random_record(seed: int, unhashable: bool = True) -> tuple[Record, list[tuple]]:
    """A record appended through every entry point, with events that fit the columns and events
    that do not (other keys, an int where a float column is, unhashable contents)."""
    rng = random.Random(seed)
    r, want = Record(), []
    t = 0.0
    for i in range(600):
        t += rng.choice([0.0, 0.5, 1.0])
        job = f"j{rng.randrange(20)}"
        c = rng.randrange(12)
        if c == 0:
            ms = rng.choice([0.25, 1.0, 3])  # an int ms is not a float column's
            r.append_decision(t, ms)
            want.append((t, K.DECISION, None, {"ms": ms}))
        elif c == 1:
            r.append(t, K.DECISION, None, ms=0.5, note="x")
            want.append((t, K.DECISION, None, {"ms": 0.5, "note": "x"}))
        elif c == 2:
            used = rng.choice([{"gpu": 1.0}, {"gpu": 0.5, "cpu": 2.0}, {"gpu": 0}, *([{"gpu": [1, 2]}] * unhashable)])
            since, until = rng.choice([(t - 1.0, t), (0, t)])  # an int since is kept as given
            r.append_used(t, job, used, since, until)
            want.append((t, K.USED, job, {"used": dict(used), "since": since, "until": until}))
            if isinstance(used.get("gpu"), float):
                used["gpu"] = -7.0  # the caller may reuse its dict: the record keeps what it had
        elif c == 3:
            r.append(t, K.USED, job, used={"gpu": 2.0}, since=t, until=t)
            want.append((t, K.USED, job, {"used": {"gpu": 2.0}, "since": t, "until": t}))
        elif c == 4:
            kind = rng.choice([K.STARTED, K.RESUMED])
            alloc = rng.choice([{"gpu": 1.0, "cpu": 4.0}, {"gpu": 1, "cpu": 4.0}])
            nodes = rng.choice([[0], [0, 1], [3]])
            r.append_alloc(t, kind, job, dict(alloc), list(nodes))
            want.append((t, kind, job, {"alloc": alloc, "nodes": nodes}))
        elif c == 5:
            r.append(t, K.STARTED, job, alloc={"gpu": 1.0}, nodes=[2], reason="moved")
            want.append((t, K.STARTED, job, {"alloc": {"gpu": 1.0}, "nodes": [2], "reason": "moved"}))
        elif c == 6:
            reason = rng.choice(["preempted", ""])
            r.append_paused(t, job, reason)
            want.append((t, K.PAUSED, job, {"reason": reason}))
        elif c == 7:
            r.append(t, K.PAUSED, job)
            want.append((t, K.PAUSED, job, {}))
        elif c == 8:
            d = {"tenant": "a", "weight": 1.0, "deadline": rng.choice([None, t + 9.0]), "demand": {"gpu": 1.0}}
            r.append(t, K.SUBMITTED, job, **d)
            want.append((t, K.SUBMITTED, job, d))
        elif c == 9:
            r.append(t, K.FINISHED, job)
            want.append((t, K.FINISHED, job, {}))
        elif c == 10:
            r.append(t, K.MIGRATED, job, alloc={"gpu": 2.0}, nodes=[0, 1])
            want.append((t, K.MIGRATED, job, {"alloc": {"gpu": 2.0}, "nodes": [0, 1]}))
        else:
            r.append(t, K.PROGRESS, job, iterations=3.0, iter_time=0.1)
            want.append((t, K.PROGRESS, job, {"iterations": 3.0, "iter_time": 0.1}))
    return r, want


def _same_event(e, w) -> None:
    assert (e.time, e.kind, e.job) == w[:3]
    assert list(e.data) == list(w[3]), (e, w)
    for (k, a), b in zip(e.data.items(), w[3].values()):
        assert a == b and type(a) is type(b), (k, a, b)
        if isinstance(a, dict):
            assert all(type(x) is type(y) for x, y in zip(a.values(), b.values()))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_event_reads_back_as_appended(seed: int) -> None:
    r, want = _random_record(seed)
    got = list(r)
    assert len(got) == len(want) == len(r)
    for e, w in zip(got, want):
        _same_event(e, w)
    assert [e.time for e in r.of_kind(K.USED, K.PAUSED)] == [w[0] for w in want if w[1] in (K.USED, K.PAUSED)]
    counts = r.kind_counts()
    for kind in K:
        assert counts.get(kind, 0) == sum(w[1] is kind for w in want)


def test_a_pickled_record_reads_back_the_same() -> None:
    r, want = _random_record(4)
    again = pickle.loads(pickle.dumps(r))
    for e, w in zip(again, want, strict=True):
        _same_event(e, w)
    assert again.columns(K.DECISION) is None or list(again.columns(K.DECISION)[1][0]) == list(r.columns(K.DECISION)[1][0])


def test_columns_are_given_only_when_every_event_of_the_kind_is_in_them() -> None:
    r = Record()
    r.append_decision(0.0, 1.5)
    r.append(1.0, K.DECISION, None, ms=2.5)
    r.append_used(1.0, "a", {"gpu": 1.0}, 0.0, 1.0)
    rows, (ms,) = r.columns(K.DECISION)
    assert list(rows) == [0, 1] and list(ms) == [1.5, 2.5]
    rows, (levels, since, until) = r.columns(K.USED)
    assert list(rows) == [2] and levels == [{"gpu": 1.0}] and list(until) == [1.0]
    r.append(2.0, K.DECISION, None, ms=None)  # not a float: kept as a tuple
    assert r.columns(K.DECISION) is None and r.columns(K.FINISHED) is None
    assert [e.data for e in r.of_kind(K.DECISION)] == [{"ms": 1.5}, {"ms": 2.5}, {"ms": None}]


def test_a_record_that_keeps_only_its_last_event_keeps_its_columns_right() -> None:
    r = Record()
    r.append_decision(0.0, 1.0)
    r.append_alloc(1.0, K.STARTED, "a", {"gpu": 1.0}, [0])
    r.append_paused(2.0, "a", "x")
    r._keep_last()
    r.append_alloc(3.0, K.RESUMED, "a", {"gpu": 1.0}, [1])
    r.append_decision(3.0, 2.0)
    assert [(e.kind, e.data) for e in r] == [(K.PAUSED, {"reason": "x"}), (K.RESUMED, {"alloc": {"gpu": 1.0}, "nodes": [1]}),
                                             (K.DECISION, {"ms": 2.0})]
    assert [e.kind for e in r._iter_from(1)] == [K.RESUMED, K.DECISION]
    r.append(4.0, K.DECISION, None, ms=None)  # kept as a tuple
    r._keep_last()
    assert r.columns(K.DECISION) is None and [e.data for e in r] == [{"ms": None}]


def test_columns_take_less_memory_than_tuples() -> None:
    """A decision, a usage sample and a pause with its resume: ~40 bytes each in columns (a tuple
    with its float objects took 80-140)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        r = Record()
        for i in range(20_000):
            t = float(i)
            r.append_decision(t, 0.1 * (i % 7))
            r.append_used(t, "j", {"gpu": 1.0}, t - 1.0, t)
            r.append_paused(t, "j", "preempted")
            r.append_alloc(t, K.RESUMED, "j", {"gpu": 1.0, "cpu": 4.0}, [i % 8])
        per_event = (tracemalloc.get_traced_memory()[0] - before) / len(r)
    finally:
        tracemalloc.stop()
    assert per_event < 45, f"{per_event:.0f} bytes per event"


def _same_metrics(a, b) -> None:
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, ShareSeries):
            assert np.array_equal(x.times, y.times)
            assert x.fractions.keys() == y.fractions.keys()
            assert all(np.array_equal(x.fractions[k], y.fractions[k]) for k in x.fractions)
        elif isinstance(x, np.ndarray):
            assert np.array_equal(x, y), f.name
        elif f.name == "jobs":
            assert x.ids == y.ids and x.states == y.states
            for c in ("submit", "start", "end", "preemptions"):
                assert np.array_equal(getattr(x, c), getattr(y, c), equal_nan=True), c
        elif f.name == "decision_time_ms":
            assert x.to_json() == y.to_json()
        else:
            assert x == y, (f.name, x, y)


@pytest.mark.parametrize("policy", ["tiresias", "gandiva", "optimus"])
def test_metrics_from_columns_are_the_metrics_of_the_events_one_by_one(policy: str) -> None:
    jobs = load_trace("tiresias_480").jobs[:160]
    out = simulate(jobs, preset("tiresias"), make_policy(policy))
    rec, cap = out.result.record, preset("tiresias").capacity
    assert rec.columns(K.DECISION) is not None and rec.columns(K.USED) is not None  # the fast path is taken
    events = list(rec)
    end = events[-1].time
    for horizon in (None, end / 3, end / 3 + 1e-3, end * 2):
        _same_metrics(compute_metrics(rec, cap, horizon=horizon), compute_metrics(events, cap, horizon=horizon))
    _same_metrics(out.metrics, compute_metrics(iter(events), cap))


def test_metrics_with_events_outside_the_columns_are_still_those_of_the_events() -> None:
    r, _ = _random_record(7, unhashable=False)
    events = list(r)
    cap = {"gpu": 8.0, "cpu": 64.0}
    for horizon in (None, events[len(events) // 2].time):
        _same_metrics(compute_metrics(r, cap, horizon=horizon), compute_metrics(events, cap, horizon=horizon))
    ok = Record()
    for e in events:
        if e.kind is K.DECISION and type(e.data.get("ms")) is float and len(e.data) == 1:
            ok.append_decision(e.time, e.data["ms"])
        elif e.kind is K.USED and type(e.data["since"]) is float and type(e.data["until"]) is float:
            ok.append_used(e.time, e.job, e.data["used"], e.data["since"], e.data["until"])
    assert ok.columns(K.DECISION) is not None and ok.columns(K.USED) is not None
    m = compute_metrics(ok, cap)
    _same_metrics(m, compute_metrics(list(ok), cap))
    assert m.decision_time_ms.count == len(ok.columns(K.DECISION)[1][0]) and not math.isnan(m.used["gpu"])
