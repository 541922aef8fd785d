"""The record stores events compactly (a contended 82k-job run records ~640k events) and reads
every event back exactly as it was appended."""

from __future__ import annotations

import tracemalloc

from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record


def test_events_read_back_as_appended():
    r = Record()
    r.append(0.0, K.SUBMITTED, "a", tenant="t", deadline=None, demand={"gpu": 1.0, "cpu": 4.0})
    r.append(1.0, K.STARTED, "a", alloc={"gpu": 1, "cpu": 4.0}, nodes=[0, 0])
    r.append(1.0, K.STARTED, "b", alloc={"gpu": 1.0, "cpu": 4.0}, nodes=[0, 0])  # 1 == 1.0, yet a float
    r.append(1.5, K.DECISION, None, ms=0.25)
    r.append(2.0, "paused", "a", reason="r")  # a kind given by its name
    r.append(3.0, K.USED, "b", used={"gpu": [1, 2]}, since=1.0, until=3.0)  # unhashable contents
    r.append(4.0, K.FINISHED, "b")
    evs = list(r)
    assert [(e.time, e.kind, e.job) for e in evs] == [
        (0.0, K.SUBMITTED, "a"), (1.0, K.STARTED, "a"), (1.0, K.STARTED, "b"), (1.5, K.DECISION, None),
        (2.0, K.PAUSED, "a"), (3.0, K.USED, "b"), (4.0, K.FINISHED, "b")]
    assert evs[0].data == {"tenant": "t", "deadline": None, "demand": {"gpu": 1.0, "cpu": 4.0}}
    assert type(evs[1].data["alloc"]["gpu"]) is int and type(evs[2].data["alloc"]["gpu"]) is float
    assert evs[1].data["nodes"] == [0, 0] and evs[3].data == {"ms": 0.25}
    assert evs[5].data["used"] == {"gpu": [1, 2]} and evs[6].data == {}
    assert [e.job for e in r.of_kind(K.STARTED, K.FINISHED)] == ["a", "b", "b"]
    assert len(r) == 7


def test_record_is_compact():
    """~110 bytes per typical event (a decision, a start with an allocation repeated across jobs);
    an Event object with a dict per event took ~450."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        r = Record()
        jobs = [f"j{i}" for i in range(20_000)]
        for i, j in enumerate(jobs):
            r.append(float(i), K.DECISION, None, ms=0.1)
            r.append(float(i), K.STARTED, j, alloc={"gpu": 1.0 + i % 4, "cpu": 4.0}, nodes=[i % 8])
        per_event = (tracemalloc.get_traced_memory()[0] - before) / len(r)
    finally:
        tracemalloc.stop()
    assert per_event < 160, f"{per_event:.0f} bytes per event (was ~450 as objects)"
