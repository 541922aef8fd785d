"""A run's fingerprint: the numbers a speed-up must leave unchanged.

Used by the regression pins (``tests/test_sim_pins.py`` on the 480-job Tiresias trace,
``bench/sim_scale.py --check`` on the contended 82k Philly run): average JCT, makespan,
the count of every record event kind (preemptions are the ``paused`` count; ``decision``
counts the policy's rounds), and a digest of every job's start and end time. Times are
rounded to a millisecond, so only a change of behaviour moves a fingerprint, not the order
in which floating-point sums were added.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from ..engine.record import Record
from .metrics import Metrics


def _ms(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def fingerprint(record: Record, metrics: Metrics) -> dict[str, Any]:
    """The pinned numbers of one run (JSON-ready, comparable with ``==``)."""
    counts = Counter({str(k): n for k, n in record.kind_counts().items()}) if isinstance(record, Record) \
        else Counter(str(e.kind) for e in record)
    h = hashlib.sha256()
    jobs = metrics.jobs
    if jobs is not None:
        for i, jid in enumerate(jobs.ids):
            h.update(f"{jid}:{_ms(jobs.start[i])}:{_ms(jobs.end[i])}:{jobs.states[i]};".encode())
    return {
        "avg_jct": _ms(metrics.avg_jct),
        "makespan": _ms(metrics.makespan),
        "jobs_finished": metrics.jobs_finished,
        "preemptions": metrics.preemptions,
        "events": dict(sorted(counts.items())),
        "jobs_digest": h.hexdigest()[:16],
    }


def differences(pinned: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Human-readable differences between two fingerprints (empty when equal)."""
    out = []
    for key in sorted(set(pinned) | set(now)):
        a, b = pinned.get(key), now.get(key)
        if key == "events" and isinstance(a, dict) and isinstance(b, dict):
            out += [f"events[{k}]: pinned {a.get(k)}, now {b.get(k)}" for k in sorted(set(a) | set(b))
                    if a.get(k) != b.get(k)]
        elif a != b:
            out.append(f"{key}: pinned {a}, now {b}")
    return out
