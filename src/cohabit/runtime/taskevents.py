"""How :class:`~.local.LocalBackend` turns what its tasks say and do into backend events.

:class:`TaskEvents` is mixed into ``LocalBackend`` (and so into
:class:`~.ray_backend.RayBackend`, which extends ``_poll`` and ``_on_task_death``):
one poll reads every running job's messages (``ready``, ``progress``,
``finished``, ``halted``, ``error``) and turns them into PROGRESS / FINISHED /
FAILED events, keeps :attr:`LocalBackend.status` and ``timings`` current,
queues the USED events of :mod:`.usage`, and on a task's death restarts its job
from its newest checkpoint with backoff, or fails it past ``max_restarts``.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

from ..engine.backend import BackendEvent, BackendEventKind
from .procs import Run, Task, describe_exit, log_tail
from .ps.parts import checkpoint_iteration
from .ps.spilling import SPILL_REPORT_KEYS
from .status import JobStatus, split_heldout, update_status

if TYPE_CHECKING:
    from .local import LocalBackend


class TaskEvents:
    """Methods mixed into ``LocalBackend``: its tasks' messages and deaths as backend events."""

    def _poll(self: LocalBackend) -> list[BackendEvent]:
        events, self._pending = self._pending, []
        now = self.now()
        for job in list(self._runs):
            run = self._runs[job]
            if run.restart_at is not None:
                if now >= run.restart_at:
                    self._start_tasks(run, from_checkpoint=True)
                continue
            events += self._poll_run(job, run)
        if self._used:
            events += self._used
            self._used = []
        return events

    def _sample_use(self: LocalBackend, job: str, *, end: bool = False) -> None:
        """Queue a ``USED`` event for what ``job`` used since its last one (:mod:`.usage`);
        ``end``: the job's processes are gone, stop measuring it."""
        ev = self.usage.sample(job, self.now())
        if ev is not None:
            self._used.append(ev)
        if end:
            self.usage.forget(job)

    def drain_usage(self: LocalBackend, now: float) -> list[BackendEvent]:
        """``USED`` events for every running job up to now and those not yet returned."""
        for job in self._runs:
            self._sample_use(job)
        out, self._used = self._used, []
        return out

    def _note_restore(self: LocalBackend, job: str, st: JobStatus, ready: dict[str, Any]) -> None:
        """Record a restore that skipped corrupt checkpoints or found none (status and timings)."""
        bad = list(ready.get("skipped_corrupt") or [])
        if ready.get("from_scratch"):
            why = f"all {len(bad)} checkpoint(s) corrupt" if bad else "no checkpoint yet"
            note, kind = f"restarted from iteration 0 ({why})", "from_scratch"
        elif bad:
            note, kind = (f"fell back past {len(bad)} corrupt checkpoint(s) to iteration "
                          f"{ready.get('restored_iteration')}"), "checkpoint_fallback"
        else:
            return
        st.checkpoint_events.append(note)
        self.timings.append({"job": job, "kind": kind, "at": self.now(), "note": note, "errors": bad})

    def _poll_run(self: LocalBackend, job: str, run: Run) -> list[BackendEvent]:
        """Read one run's messages; return its events (progress, finished, failed), oldest first.

        Progress reports read together are folded into the last one, except those the worker
        marks ``evaluation`` (an epoch's evaluation of a job with a completion criterion, or each
        batch of a progressive query): each is its own PROGRESS event, so that a criterion judges
        every epoch (convergence compares consecutive ones, epoch budgets count them) even when
        this loop polls less often than the job evaluates."""
        st = self.status[job]
        progress: dict[str, Any] | None = None
        earlier: list[dict[str, Any]] = []  # evaluations read in this poll before ``progress``
        for task in run.tasks:
            for msg in task.chan.recv_ready():
                self._notify(job, msg)
                kind = msg.get("type")
                if kind in ("progress", "finished", "halted"):
                    self.usage.read(job, task.proc.pid, self.now())
                    if msg.get("net_remote_bytes_s") is not None:
                        self.usage.net(job, task.rank, float(msg["net_remote_bytes_s"]), self.now())
                if kind == "ready":
                    st.total = msg.get("total")
                    self.timings.append({"job": job, "kind": "start", "at": self.now(), "rank": task.rank,
                                         "since_launch": self.now() - run.launched,
                                         "interpreter_s": msg.get("interpreter_s"), "imports_s": msg.get("imports_s"),
                                         "torch_import_s": msg.get("torch_import_s"), "build_s": msg.get("build_s"),
                                         "restore_s": msg.get("restore_s"),
                                         "restored_iteration": msg.get("restored_iteration"),
                                         "device": msg.get("device"),
                                         "cuda_visible_devices": msg.get("cuda_visible_devices"),
                                         "accelerator_ids": msg.get("accelerator_ids")})
                    if task.rank == 0:
                        st.iterations = int(msg.get("iteration", 0))
                        st.state = "running"
                        st.device, st.device_note = msg.get("device"), msg.get("device_note")
                        st.cuda_visible_devices = msg.get("cuda_visible_devices")
                        self._note_restore(job, st, msg)
                elif kind == "progress" and task.rank == 0:
                    if progress is not None and progress.get("evaluation"):
                        earlier.append(progress)
                    progress = msg
                elif kind in ("finished", "halted"):
                    task.done = True
                    if kind == "finished" and task.rank == 0:
                        st.metrics.update(msg.get("metrics") or {})
                        st.iterations = int(msg.get("iterations", st.iterations))
                elif kind == "error":
                    task.error, task.fatal = str(msg.get("reason")), bool(msg.get("fatal"))
        if progress is not None:
            self._sample_use(job)
            update_status(st, progress)
            run.last_iter_time = float(progress["iter_time"])
            if not run.first_progress:
                run.first_progress = True
                self.timings.append({"job": job, "kind": "first_progress", "at": self.now(),
                                     "since_launch": self.now() - run.launched})
        for task in run.tasks:
            if task.chan.closed or task.proc.poll() is not None:
                if not task.chan.closed:
                    continue  # exited, but its last words are still in the socket: read them next turn
                if task.done and task.proc.poll() is None:
                    try:
                        task.proc.wait(timeout=2.0)
                    except subprocess.TimeoutExpired:
                        pass
                if not task.done or task.error:
                    death = self._on_task_death(job, run, task)
                    return [] if death is None else [death]
        evals = [self._progress_event(job, m) for m in earlier]
        if run.tasks and all(t.done for t in run.tasks):
            del self._runs[job]
            self._sample_use(job, end=True)
            self._kill(run.tasks)
            st.state, st.pids = "finished", ()
            if progress is not None and progress.get("evaluation"):
                evals.append(self._progress_event(job, progress))
            return [*evals, BackendEvent(self.now(), BackendEventKind.FINISHED, job,
                                         {"iterations": float(st.iterations), **split_heldout(st.metrics)})]
        if progress is not None:
            evals.append(self._progress_event(job, progress))
        return evals

    def _progress_event(self: LocalBackend, job: str, progress: dict[str, Any]) -> BackendEvent:
        """The PROGRESS event of one progress report (held-out metrics split off)."""
        data = {"iterations": float(progress["iterations"]), "iter_time": float(progress["iter_time"])}
        for k in ("compute_s", "comm_s", "mem_mb", "device_mem_mb", "net_bytes_s", *SPILL_REPORT_KEYS):
            if progress.get(k) is not None:
                data[k] = float(progress[k])
        data.update(split_heldout(progress.get("metrics")))
        return BackendEvent(self.now(), BackendEventKind.PROGRESS, job, data)

    def _on_task_death(self: LocalBackend, job: str, run: Run, task: Task) -> BackendEvent | None:
        try:
            rc = task.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            rc = None
        self._kill(run.tasks)
        st = self.status[job]
        what = task.error or f"task {task.rank} (pid {task.proc.pid}) on node {task.node} {describe_exit(rc)}"
        if task.error:
            what = f"task {task.rank} (pid {task.proc.pid}) on node {task.node}: {task.error}"
        tail = log_tail(task.log_path)
        used = self._restarts.get(job, 0)
        self._sample_use(job, end=True)
        if task.fatal or used >= self.max_restarts:
            del self._runs[job]
            reason = what if task.fatal else f"{what}; gave up after {used} restart(s)"
            if tail and not task.fatal:
                reason += f"; last log lines: {tail}"
            st.state, st.reason, st.pids = "failed", reason, ()
            return BackendEvent(self.now(), BackendEventKind.FAILED, job, {"reason": reason})
        self._restarts[job] = used + 1
        delay = self.restart_backoff * self.backoff_factor ** used
        run.restart_at = self.now() + delay
        run.tasks = []
        st.state, st.restarts, st.pids = "restarting", used + 1, ()
        st.checkpoint_iteration = self._checkpoint_iteration(run)
        st.reason = (f"{what}; restart {used + 1}/{self.max_restarts} from checkpoint iteration "
                     f"{st.checkpoint_iteration or 0} in {delay:g} s")
        self.timings.append({"job": job, "kind": "restart", "at": self.now(), "reason": st.reason,
                             "checkpoint_iteration": st.checkpoint_iteration})
        self._notify(job, {"type": "restarting", "reason": st.reason})
        if run.last_iter_time is not None:
            # progress rolls back to the checkpoint: tell the scheduler what is really done
            st.iterations = st.checkpoint_iteration or 0
            return BackendEvent(self.now(), BackendEventKind.PROGRESS, job,
                                {"iterations": float(st.iterations), "iter_time": run.last_iter_time,
                                 "restarting": True})
        return None

    def _checkpoint_iteration(self: LocalBackend, run: Run) -> int | None:
        """Iteration of the job's newest checkpoint (a PS job's newest complete set of parts)."""
        if run.is_ps:
            return checkpoint_iteration(self.store.root, run.spec.id)
        ck = self.store.latest(run.spec.id)
        return ck.iteration if ck is not None else None
