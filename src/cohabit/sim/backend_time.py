"""How simulated time advances in :class:`~cohabit.sim.backend.SimBackend` (mixed into it): the heap of future
events (finishes, first-iteration reports, epoch ends, speed changes), ``next_event_time`` and ``advance``, and
what a job reports when an event comes (its progress report, its epoch-end evaluation, the shared report grid's
passes and the segments the engine takes). The actions (launch, halt) and the physics that set each run's speed,
and so push its events, stay in :mod:`.backend`; the usage levels in :mod:`.backend_usage`."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..engine.backend import BackendEvent, BackendEventKind
from .pollux_goodput import goodput_app
from .report_grid import ReportGrid
from .truth import JobTruth

if TYPE_CHECKING:
    from .backend import SimBackend, _Run

#: the kinds of heap entries (the second field: it orders entries due at one time)
_FINISH, _PROGRESS, _EPOCH, _RATE, _BACKGROUND = 0, 1, 2, 3, 4
_EPS = 1e-9
#: the job field of the heap entry of a report-grid time (no job id is empty: ``JobSpec`` requires one)
_GRID_KEY = ""


class EventClock:
    """The simulator's event heap, its advance through time and the reports its events carry (mixed into
    ``SimBackend``, whose state, ``_heap``, ``_top``, ``_seq``, ``_runs``, ``_grid``, ``_grid_next``, ``_used``,
    ``now``, ``cfg``, it uses)."""

    def _push_epoch(self: SimBackend, run: _Run, finish: float, now: float | None = None) -> None:
        """Schedule the run's next epoch-end evaluation after ``now`` (jobs with an accuracy curve), if
        before it finishes."""
        ipe = run.truth.iters_per_epoch
        if ipe is None:
            return
        done = run.done if now is None else run.done_at(now)
        k = math.floor(done / ipe + 1e-6) + 1
        t = run.t0 + (k * ipe - run.done) / run.rate
        if t < finish - _EPS:
            self._push(t, _EPOCH, run.spec.id, run.version)

    @staticmethod
    def _evaluation(truth: JobTruth, done: float, epochs: int | None = None) -> dict:
        """What a job with an accuracy curve reports at the epoch end reached with ``done`` iterations.

        A curve sampled finer than the job's declared ``epochs`` (a progressive query's accuracy
        after every batch) reports its ``epoch`` in the job's epochs (fractional between ends)."""
        ipe = truth.iters_per_epoch
        acc = truth.accuracy
        if ipe is None or acc is None:
            return {}
        e = min(max(int(round(done / ipe)), 1), len(acc))
        epoch = float(e) if not epochs else e * epochs / len(acc)
        out: dict = {"metrics": {"accuracy": acc[e - 1], "epoch": epoch}}
        if truth.heldout_accuracy is not None:
            out["heldout"] = {"accuracy": truth.heldout_accuracy[e - 1]}
        return out

    def _push(self: SimBackend, t: float, kind: int, job: str, version: int) -> None:
        self._top = None
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, job, version))

    def _join_grid(self: SimBackend, run: _Run, t: float) -> None:
        """``run`` reports next on the grid, at its first time after ``t`` (if before it finishes)."""
        every = self.cfg.report_interval_s
        assert every is not None
        grid = self._grid
        if grid is None or grid.every != every:
            grid = self._grid = ReportGrid(every)
        plain = run.goodput is None and run.speed is None and run.split is None and run.spec.graph is None
        due = grid.join(run.spec.id, run, t, done0=run.done, t0=run.t0, rate=run.rate,
                        total=float(run.truth.iterations), loss=run.truth.loss_parameters(run.spec.id), plain=plain)
        if due is not None and (self._grid_next is None or due < self._grid_next - _EPS):
            self._grid_next = due
            self._push(due, _PROGRESS, _GRID_KEY, 0)

    def _grid_reports(self: SimBackend, t: float, events: list[BackendEvent]) -> None:
        """The pass of the grid at ``t`` (``ReportGrid.grid_pass``): the members that are not plain report
        as their own ``PROGRESS`` events (the same data as a first-iteration report); the plain members'
        reports (loss only) are kept as segments until the engine takes them (:meth:`take_reports`), and
        one ``REPORTS`` event (data ``{"grid": t}``) says that they happened."""
        if self._grid is None or self._grid_next is None or abs(t - self._grid_next) > _EPS:
            return  # a stale entry (the grid moved earlier)
        grid = self._grid
        plain, other, soonest = grid.grid_pass(round(self._grid_next / grid.every))
        self._grid_next = None
        for run, done in other:
            events.append(BackendEvent(t, BackendEventKind.PROGRESS, run.spec.id,
                                       self._report_data(run, done, float(run.truth.iterations))))
        if plain:
            events.append(BackendEvent(t, BackendEventKind.REPORTS, _GRID_KEY, {"grid": t}))
        if soonest is not None:
            self._grid_next = soonest
            self._push(soonest, _PROGRESS, _GRID_KEY, 0)

    @property
    def report_every(self: SimBackend) -> float | None:
        """The grid's interval (None: no job reported on it yet); report ``k`` of a segment from
        :meth:`take_reports` is at ``(k0 + k) * report_every``."""
        return self._grid.every if self._grid is not None else None

    def reports_pending(self: SimBackend, job: str | None = None) -> bool:
        """Whether grid reports (of ``job``, or of anyone) happened and were not taken yet."""
        return self._grid is not None and self._grid.pending(job)

    def take_reports(self: SimBackend, job: str | Sequence[str] | None = None, *, chunked: bool = False
                     ) -> Iterable[tuple[str, int, list[float], list[float], float, float, float, float]]:
        """The periodic reports of ``job`` (None: every job; a sequence: each of those jobs, in order) that
        happened and were not taken yet (``ReportGrid.take``: per segment ``(job, k0, iterations, losses,
        iter_time, done0, t0, rate)``; ``chunked``: computed a chunk at a time as they are read)."""
        if self._grid is None:
            return []
        return self._grid.take(job, chunked=chunked)

    def _report_data(self: SimBackend, run: _Run, done: float, total: float) -> dict[str, Any]:
        """What a job reports at a progress report with ``done`` of its ``total`` iterations."""
        data: dict[str, Any] = {
            "iterations": done, "iter_time": 1.0 / run.rate,
            "metrics": {"loss": run.truth.loss_at(done / total, run.spec.id)},
        }
        if run.goodput is not None:  # what Pollux's agent reports: its batch, step times, gradient stats
            data["metrics"].update(run.goodput.metrics(goodput_app(run.truth.app).limits))  # type: ignore[arg-type]
        if run.speed is not None:  # the runtime's subtask timers
            data.update(compute_s=run.speed.compute_s, comm_s=run.speed.comm_s, alpha=run.speed.alpha,
                        mem_gb=run.speed.mem_gb)
        elif run.split is not None and run.spec.architecture == "ps":  # a real PS worker's subtask timers
            data.update(compute_s=run.split[0], comm_s=run.split[1])
        elif run.spec.graph is not None and run.truth.compute_s is not None:  # measured task times
            data.update(compute_s=run.truth.compute_s, comm_s=max(1.0 / run.rate - run.truth.compute_s, 0.0))
        return data

    # ------------------------------------------------------------- time
    def next_event_time(self: SimBackend) -> float | None:
        heap, runs = self._heap, self._runs
        while heap:
            entry = heap[0]
            run = runs.get(entry[3])  # (_valid, inline)
            if run is not None:
                if run.version == entry[4]:
                    break
            elif entry[3] == _GRID_KEY and self._grid:
                break
            if heapq.heappop(heap)[3] == _GRID_KEY:
                self._grid_next = None  # the grid emptied: the next member to join schedules it again
        if heap:
            self._top = heap[0]
            return self._top[0]
        return None

    def advance(self: SimBackend, until: float) -> tuple[float, list[BackendEvent]]:
        heap = self._heap
        # the entry on top was found valid by next_event_time and nothing changed since (every change of a run's
        # version pushes an entry, every halt forgets it): the scheduler asks for the time, then advances
        nxt = heap[0][0] if heap and heap[0] is self._top else self.next_event_time()
        if nxt is None or nxt > until:
            if until == math.inf:
                raise RuntimeError("simulation has running jobs but no future events")
            self.now = max(self.now, until)
            return self.now, ([] if self._raw_used or not self._used else self._used_events())
        t = max(nxt, self.now)
        self.now = t
        events: list[BackendEvent] = []
        heap, runs = self._heap, self._runs
        while heap and heap[0][0] <= t + _EPS:
            _, kind, _, jid, version = heapq.heappop(heap)
            run = runs.get(jid)  # (_valid, inline)
            if run is None:
                if jid == _GRID_KEY:
                    if self._grid:  # (the grid entry: valid while it has members)
                        self._grid_reports(t, events)
                    else:
                        self._grid_next = None
                continue
            if run.version != version:
                continue
            if kind == _RATE:  # past the epoch's end (never short of it by rounding), at the next epoch's speed
                run = self._runs[jid]
                self._report_use(run, t)
                self._fold(run, t)
                run.done = min(max(run.done, run.epoch_end), float(run.truth.iterations))
                self._reschedule({jid}, t)
            elif kind == _BACKGROUND:
                self._reschedule({jid}, t)
            elif kind == _FINISH:
                total = float(run.truth.iterations)
                self._checkpoint[jid] = total
                events.append(BackendEvent(t, BackendEventKind.FINISHED, jid,
                                           {"iterations": total, **self._evaluation(run.truth, total, run.spec.epochs)}))
                self.halt(jid, t, checkpoint=False)
            elif kind == _EPOCH:
                done = run.done_at(t)
                total = float(run.truth.iterations)
                data = {"iterations": done, "iter_time": 1.0 / run.rate,
                        **self._evaluation(run.truth, done, run.spec.epochs)}
                data["metrics"]["loss"] = run.truth.loss_at(done / total, jid)
                events.append(BackendEvent(t, BackendEventKind.PROGRESS, jid, data))
                self._push_epoch(run, run.t0 + (total - run.done) / run.rate, t)
            else:  # the first iteration at this speed: its measured iteration time
                done = run.done_at(t)
                total = float(run.truth.iterations)
                events.append(BackendEvent(t, BackendEventKind.PROGRESS, jid, self._report_data(run, done, total)))
                if self.cfg.report_interval_s is not None:  # then periodically, on the shared grid
                    self._join_grid(run, t)
        if self._used and not self._raw_used:
            events = self._used_events() + events
        return t, events
