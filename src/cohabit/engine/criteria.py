"""Completion criteria enforced end to end: per-job criterion state and its verdicts.

Rotary (Liu dissertation, ch. 3, §3.1.2 and §3.1.4) dequeues a progressive job
"if c(acc_{i,t}) == true" or once its WITHIN deadline has passed. This module is
the one place that turns a job's *reported* metrics into that decision, for any
kind of progressive job: a training job reports ``accuracy`` (and ``epoch``) at
each epoch end, a progressive query reports ``accuracy`` per batch the same way.

* :class:`CriterionTracker` — one job's criterion and the evaluations it has
  seen (one per epoch: a report whose ``epoch`` did not advance is the same
  evaluation repeated and is not counted twice). Policies may read it through
  :attr:`cohabit.engine.job.JobView.criterion` (it holds observed values only).
* :class:`CriteriaBook` — the scheduler's side: a tracker per job, the held-out
  values a job reported next to each evaluation (never shown to policies: they
  are what a user would check afterwards, the "true" accuracy), and a heap of
  times at which a time budget runs out, so that the loop wakes up for them.

Budgets count what a real scheduler observes:

* ``within <duration>`` of an accuracy or convergence criterion is a deadline
  measured from submission (the job is stopped when it passes, running,
  paused or still pending: Rotary-AQP's deadlines);
* ``run <duration>`` counts seconds *running* (a job paused for an hour has
  not run that hour);
* ``epochs`` count evaluations seen (or the reported ``epoch``), ``iterations``
  the reported iterations.

A verdict is one of: *attained* (the criterion is met: the job ends
``finished``), or *not attained* (the budget ran out first: it ends
``stopped``). :meth:`CriteriaBook.outcome` gives what the record keeps:
criterion, kind, attained, false attainment (attained by the reported metric
but not by the held-out one), the metric reached and its held-out value.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..spec.criteria import Convergence, MetricTarget, RunFor, lower_is_better

__all__ = ["CriteriaBook", "CriterionTracker", "Verdict"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a job's criterion ended it: ``attained`` (met) or not (its budget ran out)."""

    attained: bool
    reason: str


class CriterionTracker:
    """One job's completion criterion and the evaluations it has seen (observed values only).

    ``iters_per_epoch``: iterations in one epoch when the job declares both ``iterations`` and
    ``epochs`` (used when reports carry no ``epoch``); ``None`` otherwise.
    """

    __slots__ = ("criterion", "submit_time", "iters_per_epoch", "_values", "_epochs", "_last_epoch",
                 "iterations")

    def __init__(self, criterion: MetricTarget | Convergence | RunFor, submit_time: float,
                 iters_per_epoch: float | None = None) -> None:
        self.criterion = criterion
        self.submit_time = submit_time
        self.iters_per_epoch = iters_per_epoch
        self._values: dict[str, list[float]] = {}
        self._epochs: list[float] = []
        self._last_epoch: float | None = None
        self.iterations = 0.0

    # ------------------------------------------------------------ reading
    @property
    def metric(self) -> str | None:
        """The metric the criterion watches (None for a runtime criterion)."""
        return None if isinstance(self.criterion, RunFor) else self.criterion.metric

    @property
    def kind(self) -> str:
        """Rotary's name of the criterion type: ``accuracy``, ``convergence`` or ``runtime``."""
        return self.criterion.kind

    @property
    def evaluations(self) -> int:
        """Number of distinct evaluations seen."""
        return len(self._epochs)

    @property
    def epochs_done(self) -> float:
        """Epochs completed as reported (the last evaluation's epoch), else from iterations."""
        if self._last_epoch is not None:
            return self._last_epoch
        if self.iters_per_epoch:
            return self.iterations / self.iters_per_epoch
        return float(len(self._epochs))

    def series(self, metric: str) -> list[float]:
        """Values of ``metric`` at each evaluation, oldest first (a copy)."""
        return list(self._values.get(metric, ()))

    def epoch_points(self, metric: str | None = None) -> list[tuple[float, float]]:
        """``(epoch, value)`` of ``metric`` (default: the criterion's) at each evaluation."""
        m = metric or self.metric or "accuracy"
        return [(e, v) for e, v in zip(self._epochs, self._values.get(m, ())) if not math.isnan(v)]

    def last(self, metric: str | None = None) -> float | None:
        """The latest value of ``metric`` (default: the criterion's), or None."""
        s = self._values.get(metric or self.metric or "accuracy")
        return s[-1] if s else None

    # ---------------------------------------------------------- observing
    def observe(self, metrics: Mapping[str, float], iterations: float) -> bool:
        """Fold one report in; True if it is a new evaluation.

        A report is an evaluation when it carries the criterion's metric (any metric for a
        runtime criterion) and, when it names its ``epoch``, that epoch is later than the last.
        """
        self.iterations = max(self.iterations, float(iterations))
        watched = self.metric
        has_eval = (watched in metrics) if watched is not None else ("epoch" in metrics)
        if not has_eval:
            return False
        epoch = metrics.get("epoch")
        if epoch is not None:
            epoch = float(epoch)
            if self._last_epoch is not None and epoch <= self._last_epoch:
                return False
        else:
            epoch = (self.iterations / self.iters_per_epoch) if self.iters_per_epoch else float(len(self._epochs) + 1)
        self._last_epoch = epoch
        self._epochs.append(epoch)
        n = len(self._epochs)
        for name, value in metrics.items():
            if name == "epoch":
                continue
            s = self._values.setdefault(name, [])
            s.extend([math.nan] * (n - 1 - len(s)))
            s.append(float(value))
        return True

    def _metrics(self) -> dict[str, list[float]]:
        return {k: [x for x in v if not math.isnan(x)] for k, v in self._values.items()}

    # ----------------------------------------------------------- deciding
    def verdict(self, now: float, run_time: float) -> Verdict | None:
        """The verdict at ``now`` (``run_time``: seconds the job has run), or None to continue."""
        c = self.criterion
        epochs = self.epochs_done
        if isinstance(c, RunFor):
            if c.budget.is_exhausted(run_time, epochs, self.iterations):
                return Verdict(True, f"ran {c.budget} ({c})")
            return None
        if c.is_met(metrics=self._metrics()):
            reached = self.last()
            return Verdict(True, f"criterion met: {c.metric} = {reached:.4g} ({c})")
        b = c.within
        if b is not None and b.is_exhausted(now - self.submit_time, epochs, self.iterations):
            return Verdict(False, f"budget ran out before the criterion was met ({c})")
        return None

    def due_times(self, now: float, run_time: float, running: bool) -> list[float]:
        """Times after ``now`` at which a time budget runs out (the loop wakes up then)."""
        c = self.criterion
        out: list[float] = []
        if isinstance(c, RunFor):
            if c.budget.unit == "seconds" and running:
                out.append(now + max(c.budget.amount - run_time, 0.0))
        elif c.within is not None and c.within.unit == "seconds":
            out.append(self.submit_time + c.within.amount)
        return out

    def fraction(self) -> float:
        """Share of the WITHIN (or run) budget observed so far, in [0, 1], counted in epochs or
        iterations (Alg. 6's e*/e for runtime criteria); 0 for a time budget."""
        c = self.criterion
        b = c.budget
        if b is None or b.unit == "seconds":
            return 0.0
        return b.fraction_used(0.0, self.epochs_done, self.iterations)


class CriteriaBook:
    """The scheduler's criteria state: a tracker per job, held-out values, budget timers."""

    def __init__(self) -> None:
        self.trackers: dict[str, CriterionTracker] = {}
        self._heldout: dict[str, dict[str, list[float]]] = {}
        self._timers: list[tuple[float, str]] = []

    def admit(self, job_id: str, spec: Any) -> CriterionTracker | None:
        """A tracker for a job with ``criteria`` (None for a job without); its deadline timer is set."""
        crit = getattr(spec, "criteria", None)
        if crit is None:
            return None
        ipe = None
        if spec.iterations is not None and spec.epochs is not None:
            ipe = spec.iterations / spec.epochs
        tr = CriterionTracker(crit, float(spec.submit_time), ipe)
        self.trackers[job_id] = tr
        self._push(job_id, tr.due_times(float(spec.submit_time), 0.0, running=False))
        return tr

    def placed(self, job_id: str, now: float, run_time: float) -> None:
        """The job starts or resumes running: set the timer of a ``run <duration>`` budget."""
        tr = self.trackers.get(job_id)
        if tr is not None and isinstance(tr.criterion, RunFor):
            self._push(job_id, tr.due_times(now, run_time, running=True))

    def _push(self, job_id: str, times: list[float]) -> None:
        for t in times:
            heapq.heappush(self._timers, (t, job_id))

    def next_time(self) -> float:
        """The earliest pending budget timer (inf when none)."""
        return self._timers[0][0] if self._timers else math.inf

    def due(self, now: float) -> list[str]:
        """Jobs whose timers fell due at or before ``now`` (each once; they are re-checked by the caller)."""
        out: list[str] = []
        while self._timers and self._timers[0][0] <= now + 1e-9:
            _, job = heapq.heappop(self._timers)
            if job in self.trackers and job not in out:
                out.append(job)
        return out

    def observe(self, job_id: str, data: Mapping[str, Any]) -> bool:
        """Fold a backend report (``metrics``, optional ``heldout``, ``iterations``) into the job's state.

        Returns True when it was a new evaluation. ``heldout`` values are kept here only.
        """
        tr = self.trackers.get(job_id)
        if tr is None:
            return False
        metrics = data.get("metrics") or {}
        new = tr.observe(metrics, float(data.get("iterations", tr.iterations)))
        if new:
            held = self._heldout.setdefault(job_id, {})
            n = tr.evaluations
            for name, value in (data.get("heldout") or {}).items():
                s = held.setdefault(name, [])
                s.extend([math.nan] * (n - 1 - len(s)))
                s.append(float(value))
        return new

    def outcome(self, job_id: str, attained: bool) -> dict[str, Any]:
        """What the record keeps about a job's criterion when it ends (empty without one).

        ``false_attained``: attained by the reported metric, but the held-out value of the same
        evaluation does not meet the criterion (None when nothing held-out was reported).
        """
        tr = self.trackers.get(job_id)
        if tr is None:
            return {}
        metric = tr.metric
        reached = tr.last(metric) if metric is not None else tr.last("accuracy")
        held_series = self._heldout.get(job_id, {}).get(metric or "accuracy", [])
        held = held_series[-1] if held_series and len(held_series) == tr.evaluations else None
        if held is not None and math.isnan(held):
            held = None
        false_att: bool | None = None
        c = tr.criterion
        if attained and held is not None:
            if isinstance(c, MetricTarget):
                false_att = not c.satisfied_by(held)
            elif isinstance(c, Convergence):
                prev = held_series[-2] if len(held_series) >= 2 else None
                if prev is not None and not math.isnan(prev):
                    gain = (prev - held) if lower_is_better(c.metric) else (held - prev)
                    false_att = not gain < c.delta
            else:
                false_att = False
        elif attained and isinstance(c, RunFor):
            false_att = False
        return {
            "criterion": str(c), "criterion_kind": tr.kind, "attained": bool(attained),
            "false_attained": false_att, "metric": metric or "accuracy",
            "reached": None if reached is None or math.isnan(reached) else float(reached),
            "heldout": held, "epochs": tr.epochs_done, "evaluations": tr.evaluations,
        }

