"""Evaluation metrics computed from an engine :class:`~cohabit.engine.record.Record`.

Every number here is derived from the append-only record plus the cluster's
total capacity, never from scheduler or simulator internals, so the same code
scores a simulated run, a real run, or a record read back from JSONL.

Definitions (times in seconds, as recorded):

* **JCT** (job completion time) = ``finished`` time - ``submitted`` time, over
  jobs that finished. Stopped / failed / cancelled / rejected jobs have no JCT.
* **makespan** = last job end (``finished`` / ``stopped`` / ``failed`` /
  ``cancelled``) - first submission. ``None`` if no job ended. If some jobs
  never ended it is a lower bound; ``jobs_pending_at_end`` says how many.
* **queueing delay** = first ``started`` - ``submitted``, over started jobs.
* **allocated share** of resource *r* = time-weighted amount of *r* the ledger
  allocated to jobs (``started`` ... ``paused`` events' ``alloc``) divided by
  ``capacity[r]``, over the window [first submission, end], where end is
  ``horizon`` if given, else the last job end when every job ended, else the
  time of the last event. Only names with positive capacity count. This is
  what schedulers call "utilisation" but it says only what was handed out.
* **used share** of resource *r* = time-weighted amount of *r* jobs actually
  used (``used`` events: the simulator's ground truth; measured process CPU,
  resident memory and network bytes in real runs) divided by ``capacity[r]``
  over the same window; ``None`` for a resource no ``used`` event measured.
  It can exceed the allocated share (a GPU time-sharing guest owns no GPU but
  uses one; a job may send more than its network demand).
* **preemptions** = number of ``paused`` events; **migrations** / **resizes**
  count ``migrated`` / ``resized`` events.
* **Jain's fairness index** (Jain, Chiu and Hawe, "A Quantitative Measure of
  Fairness and Discrimination for Resource Allocation in Shared Computer
  Systems", DEC TR-301, 1984): ``J(x) = (sum x)^2 / (n * sum x^2)``, from
  ``1/n`` (one job gets everything) to 1 (all equal). Per job we use the
  *service fraction* ``x_i = time running / JCT`` of finished jobs: the share
  of its time in the system that the job was actually served. It needs only
  the record (no isolated-run oracle), lies in [0, 1], and is 1 for a job that
  never waited or was paused; unequal waiting makes J drop. When finished jobs
  belong to more than one tenant, ``tenant_jain_fairness`` applies J to each
  tenant's average slowdown ``JCT / time running``.
* **deadline-met ratio** = among submitted jobs whose ``submitted`` event has a
  ``deadline``, the fraction that finished at or before it (rejected, stopped
  or unfinished jobs count as missed). ``None`` if no job has a deadline.
* **decision time** = statistics of ``decision`` events' ``ms``.
* **per-job results** (:class:`JobResults`): each job's submission, first
  start, end, JCT and queueing delay (as defined above), number of pauses and
  final state; the aggregates above are their means and counts.

Undefined values are ``None`` (never NaN); counts are 0.
"""

from __future__ import annotations

import gc
import math
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cohabit.engine.record import EventKind, Record
from cohabit.report.attainment import attainment_from_outcomes
from cohabit.report.results import DecisionStats, JobResults, Metrics, report_json
from cohabit.report.steps import ShareSeries, shares, steps
from cohabit.spec import Resources

__all__ = [
    "MAX_SERIES_POINTS", "DecisionStats", "JobResults", "Metrics", "ShareSeries", "compute_metrics", "jain_index",
    "report_json",
]

#: Default upper bound on the number of points in an allocated or used series.
MAX_SERIES_POINTS = 2000

# Small integer codes for the event kinds the single pass cares about. Codes up
# to _REALLOC set an allocation; codes _FINISH.._CANCEL end a job.
(_START, _RESUME, _MIGRATE, _RESIZE, _REALLOC, _PAUSE, _FINISH, _STOP, _FAIL, _CANCEL, _SUBMIT, _REJECT, _DECISION,
 _ACT_REJ, _USED) = range(15)
_CODE: dict[str, int] = {
    EventKind.STARTED: _START,
    EventKind.RESUMED: _RESUME,
    EventKind.MIGRATED: _MIGRATE,
    EventKind.RESIZED: _RESIZE,
    EventKind.REALLOCATED: _REALLOC,
    EventKind.PAUSED: _PAUSE,
    EventKind.FINISHED: _FINISH,
    EventKind.STOPPED: _STOP,
    EventKind.FAILED: _FAIL,
    EventKind.CANCELLED: _CANCEL,
    EventKind.SUBMITTED: _SUBMIT,
    EventKind.REJECTED: _REJECT,
    EventKind.DECISION: _DECISION,
    EventKind.ACTION_REJECTED: _ACT_REJ,
    EventKind.USED: _USED,
}

#: The kinds :func:`_scan` passes over without reading them (not in :data:`_CODE`): a record's pass builds no event
#: for them (:func:`_scan_record`).
_UNSCANNED: tuple[EventKind, ...] = tuple(k for k in EventKind if k not in _CODE)


# --------------------------------------------------------------------------- the pass


#: A job's state in the pass (codes of :attr:`_Jobs.state` and :attr:`_Jobs.ended`; 0 in ``ended``: not ended).
_STATES = ("pending", "running", "paused", "finished", "stopped", "failed", "cancelled", "rejected")
_PENDING, _RUNNING, _PAUSED, _FINISHED, _STOPPED, _FAILED, _CANCELLED, _REJECTED = range(len(_STATES))
_ENDED_STATE: dict[int, int] = {_FINISH: _FINISHED, _STOP: _STOPPED, _FAIL: _FAILED, _CANCEL: _CANCELLED}
_NAN = math.nan


class _Jobs:
    """Per-job accumulators filled by the single pass over the record, one column each (a job is
    row ``index[job]``; NaN where a time is not known yet): ~80 bytes a job where an object per job
    with its float objects took ~220 (an 82k-job record's pass)."""

    __slots__ = ("index", "submit", "first_start", "end", "run_since", "run_time", "preemptions", "state",
                 "ended", "alloc", "tenant", "deadline")

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.submit = array("d")
        self.first_start = array("d")
        self.end = array("d")
        self.run_since = array("d")  # NaN while not running
        self.run_time = array("d")
        self.preemptions = array("q")
        self.state = bytearray()  # _STATES codes
        self.ended = bytearray()  # 1 + the _STATES code it ended in (finished ... rejected), 0 while not
        self.alloc: list[tuple[float, ...] | None] = []
        self.tenant: list[Any] = []
        self.deadline: list[float | None] = []

    def add(self, job: str, t: float) -> int:
        i = self.index[job] = len(self.submit)
        self.submit.append(t)
        self.first_start.append(_NAN)
        self.end.append(_NAN)
        self.run_since.append(_NAN)
        self.run_time.append(0.0)
        self.preemptions.append(0)
        self.state.append(_PENDING)
        self.ended.append(0)
        self.alloc.append(None)
        self.tenant.append(None)
        self.deadline.append(None)
        return i

    def __len__(self) -> int:
        return len(self.submit)



def _floats() -> array:
    return array("d")


@dataclass
class _Pass:
    """Raw material collected by :func:`_scan` for the vectorised finish (numbers in ``array('d')``:
    8 bytes each, where a list holds a float object per time and per value: an 82k-job record's pass
    would keep millions of them)."""

    jobs: _Jobs = field(default_factory=_Jobs)
    #: Allocation changes: times and flattened rows (one value per resource name).
    alloc_t: array = field(default_factory=_floats)
    alloc_flat: array = field(default_factory=_floats)
    free_t: array = field(default_factory=_floats)
    free_flat: array = field(default_factory=_floats)
    #: Finished jobs in order of finishing.
    fin_submit: array = field(default_factory=_floats)
    fin_end: array = field(default_factory=_floats)
    fin_run: array = field(default_factory=_floats)
    fin_tenant: list[Any] = field(default_factory=list)
    queueing: array = field(default_factory=_floats)
    decision_ms: list[float] = field(default_factory=list)
    #: ``used`` samples: intervals and flattened rows (one value per resource name, 0 if absent).
    used_since: array = field(default_factory=_floats)
    used_until: array = field(default_factory=_floats)
    used_flat: array = field(default_factory=_floats)
    #: resource names some ``used`` sample measured.
    used_names: set[str] = field(default_factory=set)
    #: Number of events per code.
    n_code: list[int] = field(default_factory=lambda: [0] * len(_CODE))
    last_time: float | None = None
    last_end: float | None = None
    #: (end time, job, data) of jobs that ended with a completion-criterion outcome (``attained`` in data).
    outcomes: list[tuple[float, str, Any]] = field(default_factory=list)


def _scan(record: Iterable[Any], names: Sequence[str], horizon: float | None) -> _Pass:
    """One pass over the events: per-job timestamps and allocation changes.

    Deliberately one flat loop with locals bound up front: it is the only
    per-event Python code, and everything after it is vectorised.
    """
    p = _Pass()
    J, n_code, queueing = p.jobs, p.n_code, p.queueing
    index, add, submit, first_start, end_t = J.index, J.add, J.submit, J.first_start, J.end
    run_since, run_time, state, ended, held = J.run_since, J.run_time, J.state, J.ended, J.alloc
    alloc_t, alloc_flat, free_t, free_flat = p.alloc_t, p.alloc_flat, p.free_t, p.free_flat
    code_of = _CODE.get
    zero = tuple(0.0 for _ in names)
    cutoff = math.inf if horizon is None else horizon
    t = None
    for ev in record:
        t = ev.time
        if t > cutoff:
            break
        code = code_of(ev.kind)
        if code is None:
            continue
        n_code[code] += 1
        if code >= _DECISION:
            if code == _DECISION and (ms := ev.data.get("ms")) is not None:
                p.decision_ms.append(ms)
            elif code == _USED:
                d = ev.data
                u = d["used"]
                p.used_names.update(u)
                p.used_since.append(d["since"])
                p.used_until.append(d["until"])
                p.used_flat.extend(map(u.get, names, zero))
            continue
        job = ev.job
        if job is None:
            continue
        i = index.get(job)
        if i is None:
            i = add(job, t)
        if code <= _REALLOC:
            a = ev.data.get("alloc")
            row = tuple(map(a.get, names, zero)) if a else zero
            prev = held[i]
            if prev is not None:
                free_t.append(t)
                free_flat.extend(prev)
            alloc_t.append(t)
            alloc_flat.extend(row)
            held[i] = row
            if run_since[i] != run_since[i]:  # (NaN: not running)
                run_since[i] = t
            if first_start[i] != first_start[i]:
                first_start[i] = t
                queueing.append(t - submit[i])
            state[i] = _RUNNING
        elif code <= _CANCEL:
            prev = held[i]
            if prev is not None:
                free_t.append(t)
                free_flat.extend(prev)
                held[i] = None
            since = run_since[i]
            if since == since:
                run_time[i] += t - since
                run_since[i] = _NAN
            if code == _PAUSE:
                state[i] = _PAUSED
                J.preemptions[i] += 1
                continue
            end_t[i] = p.last_end = t
            s_code = _ENDED_STATE[code]
            state[i] = s_code
            ended[i] = s_code + 1
            if "attained" in ev.data:
                p.outcomes.append((t, job, ev.data))
            if code == _FINISH:
                p.fin_submit.append(submit[i])
                p.fin_end.append(t)
                p.fin_run.append(run_time[i])
                p.fin_tenant.append(J.tenant[i])
        elif code == _SUBMIT:
            d = ev.data
            J.tenant[i] = d.get("tenant")
            dl = d.get("deadline")
            J.deadline[i] = None if dl is None else float(dl)
        else:  # _REJECT
            state[i] = _REJECTED
            ended[i] = _REJECTED + 1
    else:
        p.last_time = t
        return p
    p.last_time = cutoff  # stopped at the horizon
    return p


def _scan_without_gc(record: Iterable[Any], names: Sequence[str], horizon: float | None) -> _Pass:
    """:func:`_scan` with the cyclic garbage collector paused (a :class:`Record`: :func:`_scan_record`).

    The pass allocates about one object per job and creates no cycles, but on a
    big record those allocations trigger full collections that traverse every
    event in the record (measured: up to +70% run time on 370k events).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        if isinstance(record, Record):
            return _scan_record(record, names, horizon)
        return _scan(record, names, horizon)
    finally:
        if was_enabled:
            gc.enable()


def _scan_record(record: Record, names: Sequence[str], horizon: float | None) -> _Pass:
    """:func:`_scan` of a :class:`Record`, the same numbers without an event per row where it can:
    ``decision`` and ``used`` events are read from the record's columns (:meth:`Record.columns`,
    in record order, as the pass would append them), and rows of ``progress`` reports
    (:meth:`Record.append_reports`, which count for no metric) are skipped, and so is every event of a kind the
    pass does not read (:data:`_UNSCANNED`: single ``progress`` reports, ``packed``, ``unpacked``); only their
    times can be the last one seen (:meth:`Record.last_times`). The pass stops at the first row after ``horizon``, as :func:`_scan` does."""
    times = record.times()
    n = len(times)
    stop = n
    if horizon is not None and n:
        over = np.flatnonzero(np.frombuffer(times, dtype=np.float64) > horizon)
        if over.size:
            stop = int(over[0])
    decisions = record.columns(EventKind.DECISION)
    used = record.columns(EventKind.USED)
    skip = tuple(k for k, c in ((EventKind.DECISION, decisions), (EventKind.USED, used)) if c is not None)
    p = _scan(record.without_report_rows(stop=stop, skip=skip, drop=_UNSCANNED), names, None)
    if stop < n:
        p.last_time = horizon
    else:
        last_event, last_report = record.last_times()
        p.last_time = last_event
        if last_event is not None and last_report is not None and last_event < last_report:
            p.last_time = last_report if horizon is None else min(last_report, horizon)
    if decisions is not None:
        rows, (ms,) = decisions
        k = int(np.searchsorted(rows, stop))
        p.n_code[_DECISION] += k
        p.decision_ms = ms[:k] if k < len(ms) else ms  # type: ignore[assignment]
    if used is not None:
        rows, (levels, since, until) = used
        k = int(np.searchsorted(rows, stop))
        p.n_code[_USED] += k
        p.used_since, p.used_until = since[:k], until[:k]
        zero = tuple(0.0 for _ in names)
        row_of: dict[int, tuple[float, ...]] = {}  # per distinct level (the record shares equal ones)
        flat = p.used_flat
        for u in islice(levels, k):
            r = row_of.get(id(u))
            if r is None:
                r = row_of[id(u)] = tuple(map(u.get, names, zero))
                p.used_names.update(u)
            flat.extend(r)
    return p


# --------------------------------------------------------------------------- statistics


def jain_index(values: Sequence[float] | np.ndarray) -> float | None:
    """Jain's fairness index ``(sum x)^2 / (n sum x^2)`` (Jain, Chiu and Hawe, 1984).

    Returns None for an empty vector or one that is all zeros.

    >>> jain_index([1, 1, 1, 1]), jain_index([1, 0, 0, 0])
    (1.0, 0.25)
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None
    sq = float(np.dot(x, x))
    if sq <= 0.0:
        return None
    return float(x.sum() ** 2 / (x.size * sq))


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if x.size else None


def _pct(x: np.ndarray, q: float) -> float | None:
    return float(np.percentile(x, q)) if x.size else None


def _decision_stats(ms: list[float]) -> DecisionStats:
    a = np.asarray(ms, dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return DecisionStats(None, None, None, 0)
    return DecisionStats(float(a.mean()), float(np.percentile(a, 99)), float(a.max()), int(a.size))


def _tenant_jain(tenants: list[Any], slowdown: np.ndarray) -> float | None:
    """Jain's index over each tenant's mean slowdown; None unless >1 tenant."""
    index: dict[Any, int] = {}
    codes = np.fromiter((index.setdefault(tn, len(index)) for tn in tenants), np.intp, len(tenants))
    if len(index) < 2:
        return None
    mean = np.bincount(codes, weights=slowdown) / np.bincount(codes)
    return jain_index(mean)


def _job_results(jobs: _Jobs) -> JobResults:
    """The per-job columns from the pass's accumulators."""
    return JobResults(
        ids=list(jobs.index),
        submit=np.array(jobs.submit, dtype=float),
        start=np.array(jobs.first_start, dtype=float),
        end=np.array(jobs.end, dtype=float),
        preemptions=np.array(jobs.preemptions, dtype=np.int64),
        states=[_STATES[c] for c in jobs.state],
    )


def _deadline_ratio(jobs: _Jobs) -> float | None:
    with_deadline = met = 0
    finished = _FINISHED + 1
    for dl, e, end in zip(jobs.deadline, jobs.ended, jobs.end):
        if dl is None:
            continue
        with_deadline += 1
        if e == finished and end == end and end <= dl + 1e-9:
            met += 1
    return met / with_deadline if with_deadline else None


# --------------------------------------------------------------------------- allocated and used shares


def _allocated(p: _Pass, names: Sequence[str], caps: np.ndarray, window: tuple[float, float] | None,
               max_points: int) -> tuple[dict[str, float], ShareSeries]:
    """Allocated share per resource: the allocation events' step function."""
    t, levels = steps(p.alloc_t, p.alloc_flat, p.free_t, p.free_flat, len(names))
    return shares(t, levels, names, caps, window, max_points)


def _used(p: _Pass, names: Sequence[str], caps: np.ndarray, window: tuple[float, float] | None,
          max_points: int) -> tuple[dict[str, float], ShareSeries]:
    """Used share of the resources ``used`` samples measured: each sample is its mean level over
    its interval [since, until], so the samples add up to a step function."""
    keep = [j for j, n in enumerate(names) if n in p.used_names]
    if not keep:
        return {}, ShareSeries(np.zeros(0), {})
    n_res = len(names)
    rows = np.asarray(p.used_flat, dtype=float).reshape(len(p.used_since), n_res)[:, keep].ravel()
    t, levels = steps(p.used_since, rows, p.used_until, rows, len(keep))
    return shares(t, levels, [names[j] for j in keep], caps[keep], window, max_points)


def _window(p: _Pass, horizon: float | None) -> tuple[float, float] | None:
    if not len(p.jobs):
        return None
    w0 = min(p.jobs.submit)
    if horizon is not None:
        w1 = horizon
    elif p.last_end is not None and 0 not in p.jobs.ended:
        w1 = p.last_end
    else:
        w1 = p.last_time if p.last_time is not None else w0
    return w0, max(w0, w1)


# --------------------------------------------------------------------------- entry point


def compute_metrics(record: Record | Iterable[Any], capacity: Resources | Mapping[str, float], *,
                    horizon: float | None = None, max_series_points: int = MAX_SERIES_POINTS) -> Metrics:
    """Compute every evaluation metric of a run from its record and the cluster capacity.

    Args:
        record: the run's :class:`Record` (any time-ordered iterable of events works).
        capacity: the cluster's total capacity; allocated (and, where measured, used)
            shares are reported for each name with a positive quantity.
        horizon: end of the observation window. Events after it are ignored and
            jobs not ended by then count as pending. Default: the last job end
            (or the last event, if some job never ended).
        max_series_points: point budget of the allocated and used series (>= 2).

    Raises:
        ValueError: ``max_series_points`` < 2, or ``horizon`` is not finite.
    """
    if max_series_points < 2:
        raise ValueError(f"max_series_points must be >= 2, got {max_series_points!r}")
    if horizon is not None and not math.isfinite(horizon):
        raise ValueError(f"horizon must be a finite time, got {horizon!r}")
    names = [n for n, q in capacity.items() if q > 0]
    caps = np.asarray([float(capacity[n]) for n in names], dtype=float)
    p = _scan_without_gc(record, names, horizon)
    window = _window(p, horizon)
    allocated = _allocated(p, names, caps, window, max_series_points)
    p.alloc_t = p.alloc_flat = p.free_t = p.free_flat = _floats()  # (done with: not alive beside _used's arrays)
    used = _used(p, names, caps, window, max_series_points)
    p.used_since = p.used_until = p.used_flat = _floats()
    return _assemble(p, window, allocated, used, dict(zip(names, caps.tolist())))


def _assemble(p: _Pass, window: tuple[float, float] | None, allocated: tuple[dict[str, float], ShareSeries],
              used: tuple[dict[str, float], ShareSeries], capacity: dict[str, float]) -> Metrics:
    """Vectorised statistics over what the pass collected."""
    jct = np.asarray(p.fin_end, dtype=float) - np.asarray(p.fin_submit, dtype=float)
    jct.flags.writeable = False
    run = np.asarray(p.fin_run, dtype=float)
    qdelay = np.asarray(p.queueing, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        service = np.where(jct > 0, run / jct, 1.0)
    served = run > 0
    slowdown = jct[served] / run[served]
    tenants = [tn for tn, s in zip(p.fin_tenant, served.tolist()) if s]

    jobs = p.jobs
    ended = Counter(_STATES[e - 1] for e in jobs.ended if e)
    state = jobs.state
    pending = {k: _STATES[state[i]] for k, i in jobs.index.items() if not jobs.ended[i]}
    makespan = None if p.last_end is None or window is None else p.last_end - window[0]
    n = p.n_code
    return Metrics(
        avg_jct=_mean(jct), median_jct=_pct(jct, 50), p95_jct=_pct(jct, 95), makespan=makespan,
        avg_queueing_delay=_mean(qdelay), allocated=allocated[0], allocated_series=allocated[1],
        used=used[0], used_series=used[1],
        jobs_submitted=len(jobs), jobs_finished=ended["finished"], jobs_rejected=ended["rejected"],
        jobs_stopped=ended["stopped"], jobs_failed=ended["failed"], jobs_cancelled=ended["cancelled"],
        jobs_pending_at_end=len(pending), pending_states=pending,
        preemptions=n[_PAUSE], migrations=n[_MIGRATE], resizes=n[_RESIZE],
        jain_fairness=jain_index(service), tenant_jain_fairness=_tenant_jain(tenants, slowdown),
        deadline_met_ratio=_deadline_ratio(jobs), decision_time_ms=_decision_stats(p.decision_ms),
        action_rejections=n[_ACT_REJ], jct_values=jct, window=window, capacity=capacity,
        jobs=_job_results(p.jobs),
        attainment=attainment_from_outcomes(p.outcomes, None if window is None else window[0]),
    )
