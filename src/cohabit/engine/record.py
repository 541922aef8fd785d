"""The append-only record of everything that happened; every metric is computed from it.

Each :class:`Event` has a time, a kind, the job it concerns (``None`` for
scheduler-wide events) and a small ``data`` dict. Conventions, relied on by
``cohabit.report.metrics``:

* ``submitted``: data ``tenant``, ``weight``, ``deadline`` (absolute, or None),
  ``demand`` (total resources at submission, a dict).
* ``started`` / ``resumed`` / ``migrated`` / ``resized``: data ``alloc`` — the
  job's total allocation *after* the event (a dict), and ``nodes`` (node
  indices, one per task).
* ``reallocated``: the job's owned allocation changed where it runs (a GPU
  time-sharing guest inherited its device when the owner left); data ``alloc``.
  Records carry *owned* resources: a time-sharing guest owns no GPU.
* ``paused`` / ``finished`` / ``stopped`` / ``failed`` / ``cancelled``: the
  job holds nothing afterwards; ``stopped`` / ``failed`` carry ``reason``.
* ``rejected``: data ``reason`` (the job can never fit, or its spec is bad).
* ``action_rejected``: data ``action`` and ``reason`` (a policy asked for
  something impossible; the scheduler carried on).
* ``decision``: data ``ms`` — wall time of one ``Policy.decide`` call.
* ``progress``: data ``iterations`` and ``iter_time`` — observed telemetry.
* ``used``: what the job actually used over ``[since, until]`` (data ``used``: resource name ->
  mean amount in capacity units, ``since``, ``until``; the event's time is when it was
  recorded, at or after ``until``). Allocation events say what the ledger *allocated*; these
  say what was *used*: the simulator's ground truth, or process CPU time, resident memory
  and network bytes measured in real runs. Only resources the backend knows appear.
* ``packed``: (job ``None``) jobs now train jointly as one packed model on one device
  (Liu, Pack): data ``device`` ([node, gpu]), ``members`` (all jobs in the pack after the
  event), ``joined`` (those that started or resumed into it; each also has its own
  ``started`` / ``resumed`` event) and ``mem_gb`` (device memory the pack needs).
* ``unpacked``: (job ``None``) a member left a pack (it finished, was paused, stopped,
  moved); the others continue. Data ``device``, ``left`` and ``members`` (those that stay).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class EventKind(StrEnum):
    SUBMITTED = "submitted"
    REJECTED = "rejected"
    STARTED = "started"
    PAUSED = "paused"
    RESUMED = "resumed"
    MIGRATED = "migrated"
    RESIZED = "resized"
    REALLOCATED = "reallocated"
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ACTION_REJECTED = "action_rejected"
    DECISION = "decision"
    PROGRESS = "progress"
    USED = "used"
    PACKED = "packed"
    UNPACKED = "unpacked"


#: Kinds after which a job holds no resources.
RELEASING = frozenset(
    {EventKind.PAUSED, EventKind.FINISHED, EventKind.STOPPED, EventKind.FAILED, EventKind.CANCELLED}
)
#: Kinds that set a job's allocation to ``data["alloc"]``.
ALLOCATING = frozenset(
    {EventKind.STARTED, EventKind.RESUMED, EventKind.MIGRATED, EventKind.RESIZED, EventKind.REALLOCATED}
)


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    kind: EventKind
    job: str | None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"time": self.time, "kind": str(self.kind), "job": self.job, "data": self.data}


class Record:
    """Append-only list of events. Events are never changed or removed."""

    __slots__ = ("_events",)

    def __init__(self) -> None:
        self._events: list[Event] = []

    def append(self, time: float, kind: EventKind, job: str | None = None, **data: Any) -> Event:
        if self._events and time < self._events[-1].time - 1e-9:
            raise ValueError(f"record is time-ordered: {kind} at {time} after {self._events[-1].time}")
        ev = Event(time, kind, job, data)
        self._events.append(ev)
        return ev

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def of_kind(self, *kinds: EventKind) -> list[Event]:
        ks = set(kinds)
        return [e for e in self._events if e.kind in ks]

    def write_jsonl(self, path: str | Path) -> None:
        with open(path, "w") as f:
            for e in self._events:
                f.write(json.dumps(e.to_json()) + "\n")

    @classmethod
    def read_jsonl(cls, path: str | Path) -> Record:
        rec = cls()
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                    rec.append(float(d["time"]), EventKind(d["kind"]), d.get("job"), **d.get("data", {}))
                except (KeyError, ValueError, TypeError) as exc:
                    raise ValueError(f"{path}:{lineno}: bad record line: {exc}") from None
        return rec
