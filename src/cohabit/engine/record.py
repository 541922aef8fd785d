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
* ``progress``: data ``iterations`` and ``iter_time`` — observed telemetry. Several jobs' reports
  at one time (the simulator's report grid) may be stored as one row of columns
  (:meth:`Record.append_reports`), and a job's periodic reports on the simulator's grid as one segment
  (:meth:`Record.append_segment`); reading the record gives one ``progress`` event per report all the same.
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

The batched progress reports (many jobs' reports at one time, grid segments) are stored by :mod:`.record_rows`.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator
from enum import StrEnum
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .record_rows import ReportsRow as _Reports
from .record_rows import Segments as _Segments


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


class Event(NamedTuple):
    """One recorded event (built on demand from the record's compact storage)."""

    time: float
    kind: EventKind
    job: str | None
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"time": self.time, "kind": str(self.kind), "job": self.job, "data": self.data}


_KINDS: tuple[EventKind, ...] = tuple(EventKind)
_CODE: dict[str, int] = {k: i for i, k in enumerate(_KINDS)}
_PROGRESS_CODE = _CODE[EventKind.PROGRESS]
#: Distinct nested values (allocation dicts, node lists) shared between events, at most this many.
_SHARED_MAX = 1 << 16

#: The usual data of the most frequent kinds, kept in columns (one per key, floats in ``array('d')``)
#: instead of a tuple per event: kind code -> (keys in order, which keys are float columns). An event
#: of such a kind with other keys, or a float key holding something else than a float, is kept as a
#: tuple like any other event.
_LAYOUTS: dict[int, tuple[tuple[str, ...], tuple[bool, ...]]] = {
    _CODE[EventKind.DECISION]: (("ms",), (True,)),
    _CODE[EventKind.USED]: (("used", "since", "until"), (False, True, True)),
    _CODE[EventKind.STARTED]: (("alloc", "nodes"), (False, False)),
    _CODE[EventKind.RESUMED]: (("alloc", "nodes"), (False, False)),
    _CODE[EventKind.PAUSED]: (("reason",), (False,)),
    _CODE[EventKind.SUBMITTED]: (("tenant", "weight", "deadline", "demand"), (False, False, False, False)),
}
_DECISION_CODE = _CODE[EventKind.DECISION]
_USED_CODE = _CODE[EventKind.USED]
_USED_KEYS = _LAYOUTS[_USED_CODE][0]
_ALLOC_KEYS = _LAYOUTS[_CODE[EventKind.STARTED]][0]
_PAUSED_CODE = _CODE[EventKind.PAUSED]
_SUBMITTED_CODE = _CODE[EventKind.SUBMITTED]
_PROGRESS_KEYS = ("iterations", "iter_time")


class _InColumns:
    """The ``_data`` entry of a row whose data is in its kind's columns (one shared instance)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<in columns>"

    def __reduce__(self) -> str:
        return "_IN_COLUMNS"  # (unpickled as the one instance: rows are told apart by identity)


_IN_COLUMNS = _InColumns()


def _columns_of(code: int) -> list[Any]:
    return [array("d") if is_float else [] for is_float in _LAYOUTS[code][1]]


class Record:
    """Append-only list of events. Events are never changed or removed.

    Stored compactly, column by column (a contended 82k-job simulation records ~640k events):
    times in a float array, kinds as one byte each, the job ids (the specs' own strings). The
    usual data of the most frequent kinds (``decision``, ``used``, ``started``, ``resumed``,
    ``paused``, ``submitted``: :data:`_LAYOUTS`) is kept in columns, one per key (floats in
    arrays, 8 bytes each); any other event's data is a tuple ``(value, ..., keys)`` whose key
    tuple is shared by every event with the same keys. Nested dicts and lists with hashable
    contents (``alloc``, ``demand``, ``nodes``, ``used``) are stored once per distinct content and
    shared by the events that carry them: read them, never change them. Iterating builds
    :class:`Event` objects on the fly, with the data as appended (the same keys in the same order,
    the same values and types). Many jobs' ``progress`` events at one time can be one row
    (:meth:`append_reports`): ``len`` and iteration count and give them one by one.
    """

    __slots__ = ("_time", "_kind", "_job", "_data", "_keys", "_shared", "_held", "_n", "_report_rows", "_cols",
                 "_generic", "_segments")

    def __init__(self) -> None:
        self._time = array("d")
        self._kind = bytearray()
        self._job: list[str | None] = []
        self._data: list[tuple[Any, ...] | _InColumns | None] = []
        self._keys: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._shared: dict[tuple[Any, ...], Any] = {}
        self._held: dict[int, Any] = {}  # id -> each value of _shared
        self._n = 0  # events (a row of reports counts one per job)
        self._report_rows = 0  # rows that hold several reports
        #: kind code -> its columns (:data:`_LAYOUTS`), one entry per row stored there, in row order
        self._cols: dict[int, list[Any]] = {code: _columns_of(code) for code in _LAYOUTS}
        #: kind codes of _LAYOUTS of which some row's data is a tuple (see :meth:`columns`)
        self._generic: set[int] = set()
        self._segments: _Segments | None = None  # report segments (append_segment)

    def _row(self, time: float, code: int, job: str | None) -> None:
        times = self._time
        if times and time < times[-1] - 1e-9:
            raise ValueError(f"record is time-ordered: {_KINDS[code]} at {time} after {times[-1]}")
        times.append(time)
        self._kind.append(code)
        self._job.append(job)
        self._n += 1

    def append(self, time: float, kind: EventKind, job: str | None = None, **data: Any) -> None:
        code = _CODE[kind]  # (a plain string names its kind as well; an unknown one raises KeyError)
        self._row(time, code, job)
        layout = _LAYOUTS.get(code) if data else None
        if layout is not None and tuple(data) == layout[0] and all(
                type(v) is float for v, f in zip(data.values(), layout[1]) if f):
            share = self._share
            for col, v, is_float in zip(self._cols[code], data.values(), layout[1]):
                col.append(v if is_float else share(v))
            self._data.append(_IN_COLUMNS)
            return
        if layout is not None:
            self._generic.add(code)
        self._data.append(self._compact(data) if data else None)

    def append_decision(self, time: float, ms: float) -> None:
        """``append(time, DECISION, None, ms=ms)``, without building the keyword dict."""
        if type(ms) is not float:
            self.append(time, EventKind.DECISION, None, ms=ms)
            return
        times = self._time
        if times and time < times[-1] - 1e-9:
            raise ValueError(f"record is time-ordered: decision at {time} after {times[-1]}")
        times.append(time)  # (_row, inline: one call per row)
        self._kind.append(_DECISION_CODE)
        self._job.append(None)
        self._n += 1
        self._cols[_DECISION_CODE][0].append(ms)
        self._data.append(_IN_COLUMNS)

    def append_used(self, time: float, job: str | None, used: dict[str, Any], since: float, until: float,
                    kept: bool = False) -> None:
        """``append(time, USED, job, used=dict(used), since=since, until=until)`` (``used`` is copied
        the first time its contents are seen, so the caller may reuse it; with ``kept`` the caller never changes
        it, and the record may keep that very dict: a caller handing out one dict per level pays one look-up
        by identity per sample)."""
        if type(since) is not float or type(until) is not float:
            self.append(time, EventKind.USED, job, used=dict(used), since=since, until=until)
            return
        self._row(time, _USED_CODE, job)
        cols = self._cols[_USED_CODE]
        cols[0].append(self._share(used, copy=not kept))
        cols[1].append(since)
        cols[2].append(until)
        self._data.append(_IN_COLUMNS)

    def append_used_rows(self, time: float, rows: list[tuple[Any, str | None, dict[str, Any], float, float]],
                         kept: bool = False) -> None:
        """``append_used(time, job, used, since, until, kept)`` for each ``(_, job, used, since, until)`` of ``rows``,
        in order, in one call (a simulator's raw use samples: ``SimBackend.take_used``; the first field, the
        sample's own time, is not recorded: the record's row is at ``time``, as for a ``USED`` event)."""
        if not rows:
            return
        times = self._time
        if times and time < times[-1] - 1e-9:
            raise ValueError(f"record is time-ordered: used at {time} after {times[-1]}")
        kinds, jobs, data, held, share = self._kind, self._job, self._data, self._held, self._share
        c_used, c_since, c_until = self._cols[_USED_CODE]
        copy = not kept
        n = 0
        for _, job, used, since, until in rows:
            if type(since) is not float or type(until) is not float:
                self._n += n
                n = 0
                self.append(time, EventKind.USED, job, used=dict(used), since=since, until=until)
                continue
            times.append(time)
            kinds.append(_USED_CODE)
            jobs.append(job)
            c_used.append(used if held.get(id(used)) is used else share(used, copy=copy))
            c_since.append(since)
            c_until.append(until)
            data.append(_IN_COLUMNS)
            n += 1
        self._n += n

    def append_alloc(self, time: float, kind: EventKind, job: str, alloc: dict[str, Any], nodes: list[Any]) -> None:
        """``append(time, kind, job, alloc=alloc, nodes=nodes)`` of a ``started`` or ``resumed`` event."""
        code = _CODE[kind]
        cols = self._cols.get(code)
        if cols is None or len(cols) != 2:
            self.append(time, kind, job, alloc=alloc, nodes=nodes)
            return
        times = self._time
        if times and time < times[-1] - 1e-9:
            raise ValueError(f"record is time-ordered: {_KINDS[code]} at {time} after {times[-1]}")
        times.append(time)  # (_row, inline: one call per row)
        self._kind.append(code)
        self._job.append(job)
        self._n += 1
        share = self._share
        cols[0].append(alloc if self._held.get(id(alloc)) is alloc else share(alloc))
        cols[1].append(share(nodes))
        self._data.append(_IN_COLUMNS)

    def append_progress(self, time: float, job: str, iterations: float, iter_time: float) -> None:
        """``append(time, PROGRESS, job, iterations=iterations, iter_time=iter_time)`` of two floats, without the
        keyword dict (the same stored row: the values, then the kind's shared key tuple)."""
        if type(iterations) is not float or type(iter_time) is not float:
            self.append(time, EventKind.PROGRESS, job, iterations=iterations, iter_time=iter_time)
            return
        times = self._time
        if times and time < times[-1] - 1e-9:
            raise ValueError(f"record is time-ordered: progress at {time} after {times[-1]}")
        times.append(time)  # (_row, inline: one call per row)
        self._kind.append(_PROGRESS_CODE)
        self._job.append(job)
        self._n += 1
        keys = self._keys.get(_PROGRESS_KEYS)
        if keys is None:
            keys = self._keys[_PROGRESS_KEYS] = _PROGRESS_KEYS
        self._data.append((iterations, iter_time, keys))

    def append_paused(self, time: float, job: str, reason: str) -> None:
        """``append(time, PAUSED, job, reason=reason)``."""
        times = self._time
        if times and time < times[-1] - 1e-9:
            raise ValueError(f"record is time-ordered: paused at {time} after {times[-1]}")
        times.append(time)  # (_row, inline: one call per row)
        self._kind.append(_PAUSED_CODE)
        self._job.append(job)
        self._n += 1
        self._cols[_PAUSED_CODE][0].append(reason)
        self._data.append(_IN_COLUMNS)

    def append_submitted(self, time: float, job: str, tenant: Any, weight: Any, deadline: Any, demand: Any) -> None:
        """``append(time, SUBMITTED, job, tenant=tenant, weight=weight, deadline=deadline, demand=demand)``, without
        the keyword dict (the same columns, each value shared as ``append`` shares it)."""
        times = self._time
        if times and time < times[-1] - 1e-9:
            raise ValueError(f"record is time-ordered: submitted at {time} after {times[-1]}")
        times.append(time)  # (_row, inline: one call per row)
        self._kind.append(_SUBMITTED_CODE)
        self._job.append(job)
        self._n += 1
        share, held = self._share, self._held
        c_tenant, c_weight, c_deadline, c_demand = self._cols[_SUBMITTED_CODE]
        c_tenant.append(tenant if type(tenant) is str else share(tenant))  # (_share gives any non-container back)
        c_weight.append(weight if type(weight) is float else share(weight))
        c_deadline.append(deadline if deadline is None or type(deadline) is float else share(deadline))
        c_demand.append(demand if held.get(id(demand)) is demand else share(demand))
        self._data.append(_IN_COLUMNS)

    def append_reports(self, time: float, jobs: list[str], iterations: array, iter_time: array) -> None:
        """``progress`` events of ``jobs`` at ``time`` (data ``iterations`` and ``iter_time``, one
        entry per job), stored as one row; the lists are kept as given (the caller hands them over)."""
        if not jobs:
            return
        if not len(jobs) == len(iterations) == len(iter_time):
            raise ValueError(f"append_reports: {len(jobs)} jobs, {len(iterations)} iterations, "
                             f"{len(iter_time)} iteration times")
        times = self._time
        if times and time < times[-1] - 1e-9:
            raise ValueError(f"record is time-ordered: progress at {time} after {times[-1]}")
        times.append(time)
        self._kind.append(_PROGRESS_CODE)
        self._job.append(None)
        self._data.append(_Reports(jobs, iterations, iter_time))  # type: ignore[arg-type]
        self._n += len(jobs)
        self._report_rows += 1

    def _share(self, v: Any, copy: bool = False) -> Any:
        """The one stored instance of a dict or list with ``v``'s contents (``v`` itself, or a copy
        if ``copy``, the first time); other values, and unhashable contents, as given."""
        t = type(v)
        if t is not dict and t is not list:
            return v
        if self._held.get(id(v)) is v:  # one the record holds already (a caller's cached dict): as is
            return v
        try:
            # the values' types belong to the key: 1 == 1.0 == True, yet each reads back as given
            key = (t, *v.items(), *map(type, v.values())) if t is dict else (t, *v, *map(type, v))
            hit = self._shared.get(key)
        except TypeError:  # unhashable contents: kept as given
            return t(v) if copy else v
        if hit is not None:
            return hit
        if copy:
            v = t(v)
        if len(self._shared) < _SHARED_MAX:
            self._shared[key] = v
            self._held[id(v)] = v  # (kept alive by the record: its id stays its own)
        return v

    def append_segment(self, job: str, k0: int, n: int, every: float, done0: float, t0: float, rate: float) -> None:
        """``n`` periodic ``progress`` events of ``job`` at times ``(k0 + i) * every``, i < n, with
        ``iterations = done0 + (t - t0) * rate`` (``done0`` when ``t <= t0``) and ``iter_time = 1 / rate``:
        the simulator's grid reports of one job at one speed, stored as one segment (appended when the
        engine takes them, which may be after later events: reading the record puts each report at its
        time, after the other events at the same time)."""
        if n <= 0:
            return
        if not (every > 0 and rate > 0):
            raise ValueError(f"append_segment: every {every!r} and rate {rate!r} must be > 0")
        if self._segments is None:
            self._segments = _Segments()
        self._segments.add(job, k0, n, every, done0, t0, rate)
        self._n += n

    def _compact(self, data: dict[str, Any]) -> tuple[Any, ...]:
        keys = tuple(data)
        keys = self._keys.setdefault(keys, keys)
        share = self._share
        vals = [share(v) for v in data.values()]
        vals.append(keys)
        return tuple(vals)

    def _positions(self, start: int) -> list[int]:
        """Per kind code, how many rows before row ``start`` keep their data in the columns."""
        pos = [0] * 256
        if start:
            for k, d in zip(self._kind[:start], self._data[:start]):
                if d is _IN_COLUMNS:
                    pos[k] += 1
        return pos

    def _iter_from(self, start: int, *, reports: bool = True, stop: int | None = None,
                   skip: frozenset[int] = frozenset(), drop: frozenset[int] = frozenset()) -> Iterator[Event]:
        """Events of rows ``start`` to ``stop`` (a row of reports gives one event per job; none when
        ``reports`` is false: see :meth:`report_rows`); rows of the kind codes in ``skip`` whose
        data is in columns are left out (:meth:`columns` gives them), and rows of the codes in ``drop``
        wherever their data is (no event is built for them)."""
        kinds, ev, batch, in_cols = _KINDS, Event, _Reports, _IN_COLUMNS
        progress = EventKind.PROGRESS
        pos = self._positions(start)
        layouts, cols = _LAYOUTS, self._cols
        rows: Iterator[tuple[float, int, str | None, Any]] = zip(self._time, self._kind, self._job, self._data)
        if start or stop is not None:  # (not slices: a copy of every column would outlive the pass)
            rows = islice(rows, start, stop)
        for t, k, j, d in rows:
            if d is in_cols:
                i = pos[k]
                pos[k] = i + 1
                if k in skip or k in drop:
                    continue
                yield ev(t, kinds[k], j, dict(zip(layouts[k][0], [c[i] for c in cols[k]])))
                continue
            if type(d) is batch:
                if reports and _PROGRESS_CODE not in drop:
                    for job, it, itt in zip(d.jobs, d.iterations, d.iter_time):  # type: ignore[union-attr]
                        yield ev(t, progress, job, {"iterations": it, "iter_time": itt})
                continue
            if k in drop:
                continue
            yield ev(t, kinds[k], j, {} if d is None else dict(zip(d[-1], d)))  # type: ignore[arg-type]

    def columns(self, kind: EventKind) -> tuple[np.ndarray, list[Any]] | None:
        """Every ``kind`` event as columns: ``(row_index, [one column per key])``, the row indices
        (ascending) and the values in row order, keys as in :data:`_LAYOUTS`; None if
        ``kind`` has no columns or some ``kind`` event's data is kept as a tuple (then iterate). Read
        the columns, never change them."""
        code = _CODE[kind]
        if code not in _LAYOUTS or code in self._generic:
            return None
        rows = np.flatnonzero(np.frombuffer(self._kind, dtype=np.uint8) == code) if self._kind else np.zeros(0, np.intp)
        return rows, self._cols[code]

    def without_report_rows(self, *, stop: int | None = None, skip: tuple[EventKind, ...] = (),
                            drop: tuple[EventKind, ...] = ()) -> Iterator[Event]:
        """Every event of rows before ``stop`` (default: all) except those stored in rows of reports
        (see :meth:`report_rows`), for each kind in ``skip`` those in its :meth:`columns`, and every event of
        the kinds in ``drop`` (a reader that counts none of them: no event is built for them)."""
        return self._iter_from(0, reports=False, stop=stop, skip=frozenset(_CODE[k] for k in skip),
                               drop=frozenset(_CODE[k] for k in drop))

    def last_times(self) -> tuple[float | None, float | None]:
        """The time of the last event not in a row of reports, and of the last row of reports
        (None where there is none)."""
        event = report = None
        data, times = self._data, self._time
        for i in range(len(times) - 1, -1, -1):
            if type(data[i]) is _Reports:
                if report is None:
                    report = times[i]
            elif event is None:
                event = times[i]
            if event is not None and (report is not None or not self._report_rows):
                break
        if self._segments is not None:
            seg = self._segments.last_time()
            if seg is not None and (report is None or seg > report):
                report = seg
        return event, report

    def times(self) -> array:
        """The time of every row, in row order (a row of reports has one time): read, never change."""
        return self._time

    def _merged(self) -> Iterator[Event]:
        """Every event, the segments' reports merged in at their times (after the rows at the same time)."""
        assert self._segments is not None
        progress, ev = EventKind.PROGRESS, Event
        times = self._time
        rows = self._iter_from(0)
        n_rows = len(times)
        i = 0  # rows given so far (a row of reports counts once)
        batch = _Reports
        for t, _, job, it, itt in self._segments.by_time():
            while i < n_rows and times[i] <= t:
                d = self._data[i]
                for _ in range(len(d) if type(d) is batch else 1):  # type: ignore[arg-type]
                    yield next(rows)
                i += 1
            yield ev(t, progress, job, {"iterations": it, "iter_time": itt})
        yield from rows

    def report_rows(self) -> list[tuple[float, int]]:
        """``(time, number of progress events)`` of each row of reports, in order (the segments' reports
        count as one row per time)."""
        batch = _Reports
        rows = [(self._time[i], len(d)) for i, d in enumerate(self._data) if type(d) is batch] \
            if self._report_rows else []  # type: ignore[arg-type]
        if self._segments is not None:
            rows = sorted(rows + self._segments.counts(), key=lambda r: r[0])
        return rows

    def kind_counts(self) -> dict[EventKind, int]:
        """Number of events of each kind present (rows of reports counted per job)."""
        counts = [0] * len(_KINDS)
        for k in self._kind:
            counts[k] += 1
        if self._report_rows:
            batch = _Reports
            counts[_PROGRESS_CODE] += sum(len(d) - 1 for d in self._data if type(d) is batch)  # type: ignore[arg-type]
        if self._segments is not None:
            counts[_PROGRESS_CODE] += self._segments.total
        return {_KINDS[i]: c for i, c in enumerate(counts) if c}

    def _keep_last(self) -> None:
        """Forget every event but the last (a record that hands its events on: the service's store)."""
        if self._segments is not None:
            raise TypeError("a record with report segments cannot hand its events on (append_segment)")
        if len(self._time) > 1:
            k, in_cols = self._kind[-1], self._data[-1] is _IN_COLUMNS
            del self._time[:-1]
            del self._kind[:-1]
            del self._job[:-1]
            del self._data[:-1]
            for code, cols in self._cols.items():
                for c in cols:
                    del c[:-1 if in_cols and code == k else len(c)]
            self._generic.clear()
            if not in_cols and k in _LAYOUTS and type(self._data[0]) is not _Reports:
                self._generic.add(k)  # (the row kept holds its data as a tuple)
            last = self._data[0]
            self._n = len(last) if type(last) is _Reports else 1  # type: ignore[arg-type]
            self._report_rows = 1 if type(last) is _Reports else 0

    def __iter__(self) -> Iterator[Event]:
        return self._iter_from(0) if self._segments is None else self._merged()

    def __len__(self) -> int:
        return self._n

    def of_kind(self, *kinds: EventKind) -> list[Event]:
        codes = {_CODE[k] for k in kinds}
        return [e for e in self if _CODE[e.kind] in codes]

    def write_jsonl(self, path: str | Path) -> None:
        with open(path, "w") as f:
            for e in self:
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
