"""JobView: one job as the scheduler and its policies see it — spec plus observed telemetry.

The scheduler owns and updates these objects; policies get them through a
``ClusterView`` and can only read them (public attributes are read-only
properties). Nothing here comes from a simulator's ground truth: progress is
what the job reported (iterations done at the last report and the measured
time per iteration), extrapolated to *now* the way a real scheduler would.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ..spec.job import JobSpec
from ..spec.resources import Resources
from .state import JobState

if TYPE_CHECKING:
    from .actions import Placement
    from .criteria import CriterionTracker
    from .series import MetricSeries


#: the allocation of a job that holds none (``Resources`` is immutable: one object serves every job)
NO_ALLOCATION = Resources()


class JobView:
    __slots__ = (
        "_spec", "_state", "_placement", "_alloc", "_gpus", "_first_start", "_attained", "_run_time",
        "_since", "_preemptions", "_migrations", "_resizes", "_iters", "_report_time", "_iter_time",
        "_metrics", "_reason", "_end_time", "_seq", "_comp_time", "_comm_time", "_criterion",
    )

    def __init__(self, spec: JobSpec, seq: int) -> None:
        self._spec = spec
        self._seq = seq
        self._state = JobState.SUBMITTED
        self._placement: Placement = ()
        self._alloc = NO_ALLOCATION
        self._gpus = 0.0
        self._first_start: float | None = None
        self._attained = 0.0  # GPU-seconds (CPU-seconds for CPU-only jobs) up to _since
        self._run_time = 0.0  # seconds running up to _since
        self._since = spec.submit_time
        self._preemptions = 0
        self._migrations = 0
        self._resizes = 0
        self._iters = 0.0
        self._report_time = spec.submit_time
        self._iter_time: float | None = None
        self._comp_time: float | None = None
        self._comm_time: float | None = None
        self._metrics: dict[str, MetricSeries] = {}
        self._reason = ""
        self._end_time: float | None = None
        self._criterion: CriterionTracker | None = None

    # Identity and spec ------------------------------------------------
    @property
    def id(self) -> str:
        return self._spec.id

    @property
    def spec(self) -> JobSpec:
        return self._spec

    @property
    def seq(self) -> int:
        """Arrival order (0 for the first job submitted)."""
        return self._seq

    @property
    def state(self) -> JobState:
        return self._state

    @property
    def reason(self) -> str:
        """Why the job is in its state (rejection, stop, or why it is still pending)."""
        return self._reason

    # Allocation -------------------------------------------------------
    @property
    def placement(self) -> Placement:
        return self._placement

    @property
    def allocation(self) -> Resources:
        return self._alloc

    @property
    def n_workers(self) -> int:
        return max(len(self._placement) - self._spec.num_ps, 0)

    # Accounting -------------------------------------------------------
    @property
    def first_start(self) -> float | None:
        return self._first_start

    @property
    def end_time(self) -> float | None:
        return self._end_time

    def attained_service(self, now: float) -> float:
        """GPU-seconds received so far (Tiresias's attained service); CPU-seconds for CPU-only jobs."""
        if self._state is JobState.RUNNING:
            return self._attained + (now - self._since) * self._service_rate()
        return self._attained

    def executed_time(self, now: float) -> float:
        """Seconds spent running so far."""
        if self._state is JobState.RUNNING:
            return self._run_time + (now - self._since)
        return self._run_time

    def waiting_time(self, now: float) -> float:
        """Seconds in the system not running (queued or paused)."""
        end = self._end_time if self._end_time is not None else now
        return (end - self._spec.submit_time) - self.executed_time(min(now, end))

    @property
    def preemptions(self) -> int:
        return self._preemptions

    @property
    def migrations(self) -> int:
        return self._migrations

    @property
    def resizes(self) -> int:
        return self._resizes

    # Observed telemetry -----------------------------------------------
    @property
    def iter_time(self) -> float | None:
        """Measured seconds per iteration at the current placement (None before the first report)."""
        return self._iter_time

    @property
    def comp_time(self) -> float | None:
        """Measured computation seconds per iteration (COMP subtasks), as last reported; None if the
        backend does not split iterations. Reported at the placement of that report."""
        return self._comp_time

    @property
    def comm_time(self) -> float | None:
        """Measured communication seconds per iteration (PULL + PUSH subtasks), as last reported."""
        return self._comm_time

    @property
    def reported_iterations(self) -> float:
        return self._iters

    @property
    def report_time(self) -> float:
        return self._report_time

    def iterations_done(self, now: float) -> float:
        """Iterations done by ``now``: the last report, extrapolated at the measured speed while running."""
        if self._state is JobState.RUNNING and self._iter_time and now > self._report_time:
            return self._iters + (now - self._report_time) / self._iter_time
        return self._iters

    @property
    def criterion(self) -> CriterionTracker | None:
        """The job's completion-criterion state (evaluations seen, epochs done), or None without
        criteria. Observed values only; policies read it, the scheduler updates it."""
        return self._criterion

    @property
    def metrics(self) -> Mapping[str, MetricSeries]:
        """Reported metric histories: name -> [(iterations done, value), ...] (e.g. ``loss``), each a
        :class:`~cohabit.engine.series.MetricSeries` (reads like that list of tuples)."""
        return MappingProxyType(self._metrics)

    # Scheduler-side updates (not for policies) --------------------------
    def _service_rate(self) -> float:
        return self._gpus if self._gpus > 0 else self._alloc["cpu"]

    def _settle(self, now: float) -> None:
        """Fold the running interval up to ``now`` into the counters."""
        if self._state is JobState.RUNNING:
            dt = now - self._since
            self._attained += dt * self._service_rate()
            self._run_time += dt
            if self._iter_time and now > self._report_time:
                self._iters += (now - self._report_time) / self._iter_time
                self._report_time = now
        self._since = now

    def _report(self, now: float, iterations: float, iter_time: float) -> None:
        """A running job's progress report at ``now``: :meth:`_settle` (the iterations it would
        extrapolate are replaced by the reported ones), then the reported telemetry. One call per
        report of a batch (``Scheduler._on_reports``)."""
        dt = now - self._since
        self._attained += dt * self._service_rate()
        self._run_time += dt
        self._since = now
        self._iters = iterations
        self._report_time = now
        self._iter_time = iter_time

    def _grid_reports(self, k0: int, every: float, iterations: list[float], iter_time: float) -> None:
        """:meth:`_report` of each of a running job's periodic reports at times ``(k0 + i) * every`` with
        ``iterations[i]`` and ``iter_time``, in order, in one call (the counters summed as those calls
        would: the same additions in the same order)."""
        rate = self._service_rate()
        attained, run_time, since = self._attained, self._run_time, self._since
        n = len(iterations)
        if n >= _NUMPY_SUMS:  # (a fold after a quiet spell: the same sums, one numpy pass)
            attained, run_time, since = _grid_sums(k0, n, every, rate, attained, run_time, since)
        else:
            for k in range(k0, k0 + n):
                t = k * every
                dt = t - since
                attained += dt * rate
                run_time += dt
                since = t
        self._attained, self._run_time, self._since = attained, run_time, since
        self._iters = iterations[-1]
        self._report_time = since
        self._iter_time = iter_time

    def __repr__(self) -> str:
        return f"JobView({self.id!r}, {self._state}, placement={self._placement})"


#: reports in one fold from which :func:`_grid_sums` (numpy) settles them instead of a Python step each
_NUMPY_SUMS = 64


def _grid_sums(k0: int, n: int, every: float, rate: float, attained: float, run_time: float, since: float
               ) -> tuple[float, float, float]:
    """``JobView._grid_reports``' loop over the grid times ``(k0 + i) * every``, ``i < n``, in numpy: the
    same products and differences elementwise (an index is exact in float64) and the same sums in the same
    order (``np.cumsum`` adds left to right, one term at a time, unlike ``np.sum``), so the same floats."""
    t = np.arange(k0, k0 + n, dtype=np.float64) * every
    dt = np.empty(n + 1)
    dt[0] = run_time
    dt[1] = t[0] - since
    np.subtract(t[1:], t[:-1], out=dt[2:])
    run = float(np.cumsum(dt)[-1])
    terms = dt * rate
    terms[0] = attained
    return float(np.cumsum(terms)[-1]), run, float(t[-1])
