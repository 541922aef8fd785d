"""What :func:`cohabit.report.metrics.compute_metrics` returns: :class:`Metrics` and its parts.

:class:`Metrics` (every evaluation metric of one run, defined in
:mod:`cohabit.report.metrics`' module docstring), :class:`JobResults` (per-job
columns), :class:`DecisionStats` (decision times), and their JSON forms
(:func:`report_json` is the ``simulate --json`` document). JSON never holds NaN
or infinity: undefined values are None.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cohabit.report.attainment import Attainment
from cohabit.report.steps import ShareSeries

__all__ = ["DecisionStats", "JobResults", "Metrics", "report_json"]


def _safe(x: float | None) -> float | None:
    """JSON-safe float: None for None, NaN or infinity."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass(frozen=True, eq=False)
class DecisionStats:
    """Wall time of ``Policy.decide`` calls, in milliseconds."""

    mean: float | None
    p99: float | None
    max: float | None
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"mean": _safe(self.mean), "p99": _safe(self.p99), "max": _safe(self.max), "count": self.count}


@dataclass(frozen=True, eq=False)
class JobResults:
    """Each submitted job's outcome, as parallel columns in order of first appearance in the record.

    Times are as recorded (seconds); ``start`` is the first start, ``end`` the
    time the job finished, stopped, failed or was cancelled (NaN where there is
    none: never started, rejected, or still pending at the end of the window).
    ``state`` is the final state: ``finished``, ``stopped``, ``failed``,
    ``cancelled``, ``rejected``, or for a job that never ended its last known
    state (``pending``, ``running``, ``paused``).
    """

    ids: list[str]
    submit: np.ndarray
    start: np.ndarray
    end: np.ndarray
    preemptions: np.ndarray
    states: list[str]

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def jct(self) -> np.ndarray:
        """``end - submit`` of finished jobs; NaN for the others (as the JCT metrics define it)."""
        done = np.asarray([s == "finished" for s in self.states], dtype=bool)
        return np.where(done, self.end - self.submit, np.nan)

    @property
    def queueing(self) -> np.ndarray:
        """``start - submit``; NaN for jobs that never started."""
        return self.start - self.submit

    def to_json(self) -> dict[str, list[Any]]:
        """Columns of equal length (``pandas.DataFrame(d)`` reads it); undefined times are None."""
        def times(a: np.ndarray) -> list[float | None]:
            return [None if not math.isfinite(v) else round(v, 3) for v in a.tolist()]

        return {"id": list(self.ids), "submit": times(self.submit), "start": times(self.start),
                "end": times(self.end), "jct": times(self.jct), "queueing": times(self.queueing),
                "preemptions": [int(n) for n in self.preemptions], "state": list(self.states)}


@dataclass(frozen=True, eq=False)
class Metrics:
    """All evaluation metrics of one run; build it with :func:`compute_metrics`."""

    avg_jct: float | None
    median_jct: float | None
    p95_jct: float | None
    makespan: float | None
    avg_queueing_delay: float | None
    #: resource -> time-weighted share of its capacity the ledger allocated.
    allocated: dict[str, float]
    allocated_series: ShareSeries
    #: resource -> time-weighted share of its capacity jobs actually used (only resources some
    #: ``used`` event measured; see the module doc).
    used: dict[str, float]
    used_series: ShareSeries
    jobs_submitted: int
    jobs_finished: int
    jobs_rejected: int
    jobs_stopped: int
    jobs_failed: int
    jobs_cancelled: int
    jobs_pending_at_end: int
    #: job id -> last known state ("pending", "running" or "paused") of jobs that never ended.
    pending_states: dict[str, str]
    preemptions: int
    migrations: int
    resizes: int
    jain_fairness: float | None
    tenant_jain_fairness: float | None
    deadline_met_ratio: float | None
    decision_time_ms: DecisionStats
    action_rejections: int
    #: JCTs of finished jobs, in seconds, in order of finishing (for CDF plots).
    jct_values: np.ndarray
    #: The window of the allocated and used shares (start, end), or None for a record with no jobs.
    window: tuple[float, float] | None
    capacity: dict[str, float] = field(default_factory=dict)
    #: Per-job results (submit, start, end, JCT, queueing, preemptions, final state).
    jobs: JobResults | None = None
    #: How jobs with completion criteria ended (report/attainment.py); None when no job had criteria.
    attainment: Attainment | None = None

    @property
    def preemptions_per_job(self) -> float | None:
        """Pauses per submitted job (preemption thrash shows here first); None without jobs."""
        return self.preemptions / self.jobs_submitted if self.jobs_submitted else None

    @property
    def max_preemptions_of_a_job(self) -> int | None:
        """The most pauses any one job suffered; None without per-job results."""
        return int(self.jobs.preemptions.max()) if self.jobs is not None and len(self.jobs) else None

    @property
    def pending_by_state(self) -> dict[str, int]:
        """Number of never-ended jobs per last known state."""
        return dict(Counter(self.pending_states.values()))

    def to_json(self, *, series: bool = False, jobs: bool = False) -> dict[str, Any]:
        """A JSON-safe dict (no NaN or infinity; undefined values are None).

        The leading keys are the shape required by the ``simulate --json``
        output; the rest are extras. ``allocated_share`` / ``used_share`` give each
        resource's allocated and used share of capacity (``used_share`` is None
        where nothing measured it). ``series=True`` adds both series,
        ``jobs=True`` the per-job results (:meth:`JobResults.to_json`) as ``"jobs"``.
        """
        out: dict[str, Any] = {
            "avg_jct": _safe(self.avg_jct),
            "median_jct": _safe(self.median_jct),
            "p95_jct": _safe(self.p95_jct),
            "makespan": _safe(self.makespan),
            "avg_queueing_delay": _safe(self.avg_queueing_delay),
            "allocated_share": {r: _safe(u) for r, u in self.allocated.items()},
            "used_share": {r: _safe(self.used.get(r)) for r in self.allocated},
            "jobs_finished": self.jobs_finished,
            "jobs_rejected": self.jobs_rejected,
            "preemptions": self.preemptions,
            "preemptions_per_job": _safe(self.preemptions_per_job),
            "max_preemptions_of_a_job": self.max_preemptions_of_a_job,
            "decision_time_ms": self.decision_time_ms.to_json(),
            "jobs_submitted": self.jobs_submitted,
            "jobs_stopped": self.jobs_stopped,
            "jobs_failed": self.jobs_failed,
            "jobs_cancelled": self.jobs_cancelled,
            "jobs_pending_at_end": self.jobs_pending_at_end,
            "pending_by_state": self.pending_by_state,
            "migrations": self.migrations,
            "resizes": self.resizes,
            "jain_fairness": _safe(self.jain_fairness),
            "tenant_jain_fairness": _safe(self.tenant_jain_fairness),
            "deadline_met_ratio": _safe(self.deadline_met_ratio),
            "action_rejections": self.action_rejections,
            "window": None if self.window is None else [_safe(self.window[0]), _safe(self.window[1])],
        }
        if self.attainment is not None:
            out["attainment"] = self.attainment.to_json()
        if series:
            out["allocated_series"] = self.allocated_series.to_json()
            out["used_series"] = self.used_series.to_json()
        if jobs and self.jobs is not None:
            out["jobs"] = self.jobs.to_json()
        return out


def report_json(results: Mapping[str, Metrics], **context: Any) -> dict[str, Any]:
    """The ``simulate --json`` document: ``{"policies": {name: metrics}, **context}``.

    ``context`` carries the other top-level keys (``trace=..., cluster=...``).
    """
    return {"policies": {name: m.to_json() for name, m in results.items()}, **context}
