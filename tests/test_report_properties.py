"""Property: utilization never exceeds 1 for any valid allocation sequence within capacity."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record
from cohabit.report import compute_metrics
from cohabit.spec import Resources

EPS = 1e-9
amounts = st.one_of(st.integers(0, 8).map(float), st.floats(0.0, 8.0, allow_nan=False))


def _fits(alloc: dict[str, float], free: dict[str, float]) -> bool:
    return all(q <= free[n] + 1e-12 for n, q in alloc.items())


@settings(max_examples=150, deadline=None)
@given(data=st.data(), gpu=st.integers(1, 16), cpu=st.floats(1.0, 64.0))
def test_utilization_never_exceeds_one(data: st.DataObject, gpu: int, cpu: float) -> None:
    cap = {"gpu": float(gpu), "cpu": cpu}
    used = {"gpu": 0.0, "cpu": 0.0}
    holding: dict[str, dict[str, float]] = {}
    paused: set[str] = set()
    r, t, n_jobs = Record(), 0.0, 0
    for _ in range(data.draw(st.integers(1, 40), label="steps")):
        t += data.draw(st.sampled_from([0.0, 0.5, 1.0, 3.7]), label="dt")
        op = data.draw(st.sampled_from(["start", "release", "pause", "resume", "move"]), label="op")
        want = {"gpu": data.draw(amounts) % (gpu + 1), "cpu": data.draw(amounts) % (cpu + 1)}
        free = {n: cap[n] - used[n] for n in cap}
        if op == "start" and _fits(want, free):
            job = f"j{n_jobs}"
            n_jobs += 1
            r.append(t, K.SUBMITTED, job)
            r.append(t, K.STARTED, job, alloc=want, nodes=[0])
        elif op == "resume" and paused and _fits(want, free):
            job = paused.pop()
            r.append(t, K.RESUMED, job, alloc=want, nodes=[0])
        elif op in ("release", "pause", "move") and holding:
            job = data.draw(st.sampled_from(sorted(holding)), label="job")
            old = holding.pop(job)
            for n in cap:
                used[n] -= old[n]
            if op == "move":
                kind = data.draw(st.sampled_from([K.MIGRATED, K.RESIZED]), label="kind")
                free = {n: cap[n] - used[n] for n in cap}
                want = want if _fits(want, free) else old
                r.append(t, kind, job, alloc=want, nodes=[1])
            else:
                r.append(t, K.PAUSED if op == "pause" else K.FINISHED, job)
                if op == "pause":
                    paused.add(job)
                continue
        else:
            continue
        holding[job] = want
        for n in cap:
            used[n] += want[n]
    r.append(t + 1.0, K.DECISION, ms=1.0)

    m = compute_metrics(r, Resources(cap))
    for name, u in m.allocated.items():
        assert -EPS <= u <= 1 + EPS, (name, u)
    for name, frac in m.allocated_series.fractions.items():
        assert frac.size == 0 or (frac.min() >= -EPS and frac.max() <= 1 + EPS), name
    json.dumps(m.to_json(series=True), allow_nan=False)
