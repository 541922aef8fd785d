"""Live control of a running :class:`~cohabit.engine.loop.Scheduler`: the hook a service uses.

A batch run hands the loop every job up front. A long-running service instead
gives ``Scheduler.run`` a :class:`JobSource`; the loop wakes at
``source.next_poll(now)`` at the latest and calls ``source.poll(scheduler)``
once per turn, between folding the backend's events and asking the policy.
The source then changes the scheduler only through the methods of
:class:`LiveControl` (submit now, cancel, hold / release, re-admit a job
recovered after a crash, switch policy), which go through the same state
machine, ledger and record as everything else. There is no second loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..spec.job import JobSpec
from . import actions as A
from .job import JobView
from .record import EventKind
from .state import JobState

if TYPE_CHECKING:
    from .loop import Scheduler


class JobSource(Protocol):
    """Feeds a scheduler that runs forever (a daemon)."""

    def next_poll(self, now: float) -> float:
        """The latest scheduler time at which :meth:`poll` must be called next."""

    def poll(self, sched: Scheduler) -> bool:
        """Apply new arrivals and commands through ``sched``'s :class:`LiveControl`; False stops the loop."""


class LiveControl:
    """Methods mixed into ``Scheduler`` for a :class:`JobSource`; each acts at the scheduler's ``now``."""

    def submit_now(self: Scheduler, spec: JobSpec) -> JobView:
        """Admit ``spec`` as arriving now (its ``submit_time`` is set to the scheduler's clock)."""
        spec = spec.model_copy(update={"submit_time": self.now})
        self._arrive(spec)
        return self.jobs[spec.id]

    def readmit_paused(self: Scheduler, spec: JobSpec, iterations: float, reason: str) -> JobView:
        """Admit a job that had started before the service restarted: it enters *paused* (it holds
        nothing), with its last known ``iterations``, so the policy resumes it from its newest
        checkpoint like any paused job. A job that can never fit is rejected as on arrival."""
        view = self.submit_now(spec)
        if view._state is not JobState.PENDING:
            return view
        del self.pending[spec.id]
        view._iters = float(iterations)
        view._first_start = self.now  # it ran before; its waiting ended at its first start
        view._state = JobState.PAUSED
        view._preemptions += 1
        self.paused[spec.id] = view
        self.record.append(self.now, EventKind.PAUSED, spec.id, reason=reason)
        return view

    def cancel(self: Scheduler, job_id: str, reason: str = "cancelled by the user") -> str | None:
        """Cancel a pending, running, paused or held job (a running one is halted at a checkpoint).
        Returns None, or why it cannot be cancelled."""
        job = self.jobs.get(job_id)
        if job is None:
            return f"unknown job {job_id!r}"
        if job._state.terminal:
            return f"job {job_id!r} already ended ({job._state})"
        self.unhold(job_id)
        self._stop(A.Stop(job_id, reason=reason, outcome="cancelled"))
        return None

    def hold(self: Scheduler, job_id: str, reason: str = "held by an administrator") -> str | None:
        """Take a job out of the policy's sight until :meth:`unhold`: a running job is paused at a
        checkpoint first; a pending or paused job keeps its state. Returns None or why not."""
        job = self.jobs.get(job_id)
        if job is None:
            return f"unknown job {job_id!r}"
        if job._state is JobState.RUNNING:
            self._pause(A.Pause(job_id, reason=reason))
        if job._state is JobState.PENDING:
            self.held[job_id] = self.pending.pop(job_id)
        elif job._state is JobState.PAUSED:
            self.held[job_id] = self.paused.pop(job_id)
        else:
            return f"job {job_id!r} is {job._state}; only pending, running or paused jobs can be held"
        return None

    def unhold(self: Scheduler, job_id: str) -> bool:
        """Give a held job back to the policy (pending or paused as before); False if it was not held."""
        job = self.held.pop(job_id, None)
        if job is None:
            return False
        (self.pending if job._state is JobState.PENDING else self.paused)[job_id] = job
        return True

    def set_policy(self: Scheduler, policy: object) -> None:
        """Switch the policy live. The new policy sees every job still in the system through its
        ``on_arrival`` hook (in arrival order), as if it had been there from the start."""
        if getattr(policy, "uses_oracle", False):
            raise ValueError(f"policy {getattr(policy, 'name', policy)!r} reads true job lengths; "
                             f"a live service has no oracle")
        self.policy = policy
        self._bind_hooks(policy)
        if self._hook_arrival is not None:
            for job in sorted(self.jobs.values(), key=lambda j: j._seq):
                if not job._state.terminal:
                    self._hook_arrival(job, self.view)
