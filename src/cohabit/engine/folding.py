"""How the scheduler loop folds the backend's events into the jobs' state and the record (mixed into
:class:`~cohabit.engine.loop.Scheduler`): use samples, progress reports (one by one, batched, or the simulator's
grid segments taken lazily), completion criteria and their verdicts, and a job's end (its release, its frozen
history, the policy's ``on_finish``). The loop itself, arrivals and the jobs' task rows stay in :mod:`.loop`,
the actions in :mod:`.apply`."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .backend import BackendEvent, BackendEventKind
from .criteria import Verdict
from .history import FinishedJob
from .job import NO_ALLOCATION, JobView
from .record import EventKind
from .series import MetricSeries
from .state import JobState, check_transition

if TYPE_CHECKING:
    from .loop import Scheduler

_USED = BackendEventKind.USED
_REPORTS = BackendEventKind.REPORTS
_PROGRESS = BackendEventKind.PROGRESS


class EventFolding:
    """The scheduler's handling of backend events and of a job's end (mixed into ``Scheduler``)."""
    def _record_used(self: Scheduler, events: list[BackendEvent]) -> list[BackendEvent]:
        """Record the ``USED`` samples among ``events`` (what jobs actually used: metrics only,
        nothing a policy sees) and return the other events."""
        rest = []
        append_used, now, kept = self.record.append_used, self.now, self._used_kept
        for ev in events:
            if ev.kind is _USED:
                d = ev.data
                append_used(now, ev.job, d["used"], float(d["since"]), float(d["until"]), kept)
            else:
                rest.append(ev)
        return rest

    def _on_reports(self: Scheduler, ev: BackendEvent) -> None:
        """The simulator's grid pass made periodic reports (``REPORTS``, data ``{"grid": t}``); they wait in
        the backend until taken. With a policy that says when it reads them (``wants_reports``) nothing
        happens now (:meth:`_fold_reports` takes them when read). Otherwise they are taken and folded as
        they come: each running job's report as a ``PROGRESS`` event with metrics ``{"loss": ...}`` would be,
        without building one; the record keeps them as one row (``Record.append_reports``). A job with a
        completion criterion takes the event path (its report may end it, after its progress is recorded)."""
        if self._lazy is not None:
            return
        segs = self._take_reports()  # type: ignore[misc]
        if not segs:
            return
        now = self.now
        every = self.backend.report_every  # type: ignore[attr-defined]
        if any(len(s[2]) != 1 or abs(s[1] * every - now) > 1e-9 for s in segs):
            self._fold_segments(segs)  # (reports left from before a policy switch: at their own times)
            return
        ids = [s[0] for s in segs]
        iters = [s[2][0] for s in segs]
        iter_times = [s[4] for s in segs]
        running, view = self.running, self.view
        # a policy may take the batch's jobs in one call (``on_reports(jobs, view)``, after all are folded)
        many = getattr(self.policy, "on_reports", None)
        hook = self._hook_progress if many is None else None
        folded: list[JobView] = []
        start = 0  # the reports from here on are not recorded yet
        skipped: list[int] = []  # of those, the stale ones
        for i, (jid, it, itt, seg) in enumerate(zip(ids, iters, iter_times, segs)):
            loss = seg[3][0]
            job = running.get(jid)
            if job is None:
                skipped.append(i)  # stale: paused or stopped after the backend scheduled this
                continue
            if job._criterion is not None:
                self._record_reports(ids, iters, iter_times, start, i, skipped)  # (in order: these came first)
                start, skipped = i + 1, []
                self._on_backend_event(BackendEvent(now, BackendEventKind.PROGRESS, jid,
                                                    {"iterations": it, "iter_time": itt, "metrics": {"loss": loss}}))
                continue
            job._report(now, it, itt)
            m = job._metrics.get("loss")
            if m is None:
                m = job._metrics["loss"] = MetricSeries()
            m.add(it, loss)
            if hook is not None:
                hook(job, view)
            elif many is not None:
                folded.append(job)
        self._record_reports(ids, iters, iter_times, start, len(ids), skipped)
        if folded:
            many(folded, view)

    def _fold_reports(self: Scheduler, job_id: str | None = None) -> None:
        """Fold the grid reports of ``job_id`` (None: of every job) that happened and were not taken yet.

        With a policy that declares ``wants_reports(view)`` the reports of the simulator's grid are not
        handed over as they happen: they are folded here, in the order they happened, before anything
        reads or changes the job (the policy's decide when it says it reads reports, an event or action
        of the job, its end, the end of the run). Each report settles the job's counters and sets its
        telemetry exactly as a ``PROGRESS`` event at its time would have (``JobView._report`` at the
        report's time, then its loss point); the policy's report hooks are not called for them (within
        a segment the job's placement and speed are those of the segment's first-iteration report,
        which came as an event); the record keeps them as segments (``Record.append_segment``)."""
        pending = self._reports_pending
        if pending is not None and not pending(job_id):
            return
        self._fold_segments(self._take_reports(job_id, chunked=True))  # type: ignore[misc]

    def _fold_segments(self: Scheduler, segs: Iterable[tuple[str, int, list[float], list[float], float, float, float, float]]
                       ) -> None:
        """Fold taken grid reports (``SimBackend.take_reports``, a list or computed as read) into the jobs and
        the record."""
        every = self.backend.report_every  # type: ignore[attr-defined]
        running, rec = self.running, self.record
        for jid, k0, iters, losses, itt, done0, t0, rate in segs:
            job = running.get(jid)
            if job is None:
                continue  # stale: it left the running set before these were due (never happens in order)
            m = job._metrics.get("loss")
            if m is None:
                m = job._metrics["loss"] = MetricSeries()
            job._grid_reports(k0, every, iters, itt)
            m.add_grid(k0, every, done0, t0, rate, losses)  # (iterations kept as their formula: iters)
            rec.append_segment(jid, k0, len(iters), every, done0, t0, rate)

    def _record_reports(self: Scheduler, ids: list[str], iters: list[float], iter_times: list[float], start: int, stop: int,
                        skipped: list[int]) -> None:
        """Record the reports ``start:stop`` of a batch but the ``skipped`` ones, as one row."""
        if skipped:
            gone = set(skipped)
            keep = [i for i in range(start, stop) if i not in gone]
            self.record.append_reports(self.now, [ids[i] for i in keep], array("d", [iters[i] for i in keep]),
                                       array("d", [iter_times[i] for i in keep]))
        elif start < stop:
            whole = start == 0 and stop == len(ids)
            self.record.append_reports(self.now, ids if whole else ids[start:stop], array("d", iters[start:stop]),
                                       array("d", iter_times[start:stop]))

    def _on_backend_event(self: Scheduler, ev: BackendEvent) -> None:
        if ev.kind is _REPORTS:
            self._on_reports(ev)
            return
        if self._lazy is not None:
            self._fold_reports(ev.job)  # its reports before this event came first
        job = self.running.get(ev.job)
        if job is None:
            return  # stale: the job was paused or stopped after the backend scheduled this
        if ev.kind is _PROGRESS:
            now, data = self.now, ev.data
            job._settle(now)
            job._iters = float(data["iterations"])
            job._report_time = now
            job._iter_time = float(data["iter_time"])
            split = ({k: float(data[k]) for k in ("compute_s", "comm_s") if data.get(k) is not None}
                     if "compute_s" in data or "comm_s" in data else None)
            if split:  # the iteration split into computation and communication (subtask times)
                job._comp_time = split.get("compute_s", job._comp_time)
                job._comm_time = split.get("comm_s", job._comm_time)
            metrics = data.get("metrics")
            if metrics:
                for name, value in metrics.items():
                    m = job._metrics.get(name)
                    if m is None:
                        m = job._metrics[name] = MetricSeries()
                    m.add(job._iters, float(value))
            if split:
                self.record.append(now, EventKind.PROGRESS, ev.job, iterations=job._iters, iter_time=job._iter_time,
                                   **split)
            else:
                self.record.append_progress(now, ev.job, job._iters, job._iter_time)
            if job._criterion is not None:
                self.criteria.observe(job.id, ev.data)
                if self._check_criterion(job):
                    return  # the job ended on its completion criterion
            if self._hook_progress is not None:
                self._hook_progress(job, self.view)
        elif ev.kind is BackendEventKind.FINISHED:
            job._settle(self.now)
            if "iterations" in ev.data:  # the job's own count is final: no extrapolation past it
                job._iters = float(ev.data["iterations"])
                job._report_time = self.now
            attained, reason = True, ""
            if job._criterion is not None:  # the job's last evaluation may meet its criterion
                self.criteria.observe(job.id, ev.data)
                verdict = job._criterion.verdict(self.now, job._run_time)
                if verdict is not None and not verdict.attained:  # its budget ran out as its work ended
                    self._end(job, JobState.STOPPED_EARLY, EventKind.STOPPED, verdict.reason)
                    return
                attained = verdict is not None
                reason = verdict.reason if verdict is not None else \
                    f"its work ended before its criterion was met ({job.spec.criteria})"
            self._end(job, JobState.FINISHED, EventKind.FINISHED, reason, attained=attained)
        elif ev.kind is BackendEventKind.FAILED:
            self._end(job, JobState.FAILED, EventKind.FAILED, str(ev.data.get("reason", "failed")))
        elif ev.kind is BackendEventKind.EVICTED:
            # the backend already stopped it: release and pause without asking the backend to halt
            job._settle(self.now)
            if "iterations" in ev.data:  # progress rolls back to the checkpoint it resumes from
                job._iters = float(ev.data["iterations"])
                job._report_time = self.now
            self._release(job.id)
            del self.running[job.id]
            self._paused(job, str(ev.data.get("reason", "evicted by the backend")))

    def _check_criterion(self: Scheduler, job: JobView) -> bool:
        """End ``job`` if its completion criterion gives a verdict now; True if it ended."""
        tr = job._criterion
        if tr is None or job._state.terminal:
            return False
        job._settle(self.now)
        verdict = tr.verdict(self.now, job._run_time)
        if verdict is None:
            return False
        self._conclude(job, verdict)
        return True

    def _conclude(self: Scheduler, job: JobView, verdict: Verdict) -> None:
        """End a job on its criterion: ``finished`` when attained, ``stopped`` when its budget ran out
        (a running job is checkpointed and halted first, so its model is kept)."""
        if job._state is JobState.RUNNING:
            self.backend.halt(job.id, self.now, checkpoint=True)
        if verdict.attained:
            self._end(job, JobState.FINISHED, EventKind.FINISHED, verdict.reason, attained=True)
        else:
            self._end(job, JobState.STOPPED_EARLY, EventKind.STOPPED, verdict.reason)

    def _criteria_due(self: Scheduler) -> bool:
        """Check the jobs whose time budget fell due by now; True if any of them ended."""
        ended = False
        for job_id in self.criteria.due(self.now):
            job = self.jobs.get(job_id)
            if job is not None and self._check_criterion(job):
                ended = True
        return ended

    def _end(self: Scheduler, job: JobView, state: JobState, kind: EventKind, reason: str, *, attained: bool = False) -> None:
        now = self.now
        jid = job.id
        if self._lazy is not None:
            self._fold_reports(jid)
        for m in job._metrics.values():
            m.freeze()  # (no more reports: kept compressed, read exactly)
        check_transition(jid, job._state, state)
        job._settle(now)
        if job._state is JobState.RUNNING:  # (a running job is in neither waiting dict)
            self._release(jid)
            self.running.pop(jid, None)
        else:
            self.pending.pop(jid, None)
            self.paused.pop(jid, None)
        if self._backend_job_ended is not None:
            self._backend_job_ended(jid, now)  # a backend holding the job's paused state lets go of it
        job._state = state
        job._reason = reason
        job._end_time = now
        job._alloc = NO_ALLOCATION
        job._placement = ()
        self._done += 1
        data = {"reason": reason} if reason else {}
        if job._criterion is not None:  # attainment, false attainment, accuracy reached (engine/criteria.py)
            data.update(self.criteria.outcome(job.id, attained and state is JobState.FINISHED))
        self.record.append(now, kind, job.id, **data)
        if state is JobState.FINISHED:
            self.history.add(FinishedJob(
                job.id, job.spec.model, self._total_demand(job.spec)[3], job._run_time, job._attained, job._iters, job._iter_time,
            ))
        if self._on_progress is not None:
            self._on_progress(self._done, len(self.jobs), now)
        if self._hook_finish is not None:
            self._hook_finish(job, self.view)
