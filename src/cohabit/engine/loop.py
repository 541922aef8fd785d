"""The scheduler loop: one event-driven loop for every policy and every backend.

Each turn: advance the backend to the next moment something happens (a job
arrives, the backend reports an event, the policy's tick is due), fold the
events into job state and the record, ask the policy for a plan, check each
action against the ledger, and hand the accepted ones to the backend.
Rejected actions are recorded with their reason; the loop never stops on a
policy's mistake unless ``strict`` is set (tests use it).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from ..spec.cluster import ClusterSpec
from ..spec.job import JobSpec
from ..spec.resources import Resources
from . import actions as A
from .backend import Backend, BackendEvent, BackendEventKind, Unsupported
from .criteria import CriteriaBook, Verdict
from .history import FinishedJob, History
from .job import JobView
from .ledger import Allocation, AllocationError, Ledger
from .live import JobSource, LiveControl
from .oracle import Oracle
from .record import EventKind, Record
from .state import IllegalTransition, JobState, check_transition
from .view import ClusterView


_USED = BackendEventKind.USED


class ActionError(ValueError):
    """A plan action that cannot be carried out (wrong state, wrong size, unknown job)."""


#: Idle policy ticks in a row (nothing waits, empty plans) before the next ones are spaced out.
IDLE_TICKS = 1000


@dataclass
class RunResult:
    policy: str
    record: Record
    jobs: dict[str, JobView]
    unfinished: dict[str, str] = field(default_factory=dict)
    wall_seconds: float = 0.0
    end_time: float = 0.0


class Scheduler(LiveControl):
    """Drives ``policy`` over ``backend`` on ``cluster``.

    ``oracle`` is handed to the policy only if the policy declares
    ``uses_oracle``; a policy that declares it without an oracle is refused.
    ``record``: the record to append to (a service passes one that also persists each event).
    ``decision_period``: rounds; the policy decides only at ``first_round + k x decision_period``
    (``first_round`` defaults to one period: Pollux's artifact; Gavel's rounds start at 0), and
    launches and stops happen only there.
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        policy: object,
        backend: Backend,
        *,
        oracle: Oracle | None = None,
        strict: bool = False,
        horizon: float = math.inf,
        on_progress: Callable[[int, int, float], None] | None = None,
        record: Record | None = None,
        decision_period: float | None = None,
        first_round: float | None = None,
    ) -> None:
        name = getattr(policy, "name", type(policy).__name__)
        if getattr(policy, "uses_oracle", False):
            if oracle is None:
                raise ValueError(
                    f"policy {name!r} reads true job lengths; allow it explicitly with --oracle "
                    f"(Scheduler(oracle=...)) or choose its non-oracle variant"
                )
            policy.bind_oracle(oracle)  # type: ignore[attr-defined]
        self.cluster = cluster
        self.policy = policy
        self.backend = backend
        self._backend_job_ended = getattr(backend, "job_ended", None)  # optional: told when a job ended
        self.strict = strict
        self.horizon = horizon
        if decision_period is not None and not 0 < decision_period < math.inf:
            raise ValueError(f"decision_period must be a finite number of seconds > 0, got {decision_period!r}")
        if first_round is not None and not 0 <= first_round < math.inf:
            raise ValueError(f"first_round must be a finite number of seconds >= 0, got {first_round!r}")
        self._period_arg = decision_period
        self._first_round = first_round
        self.record = record if record is not None else Record()
        self.ledger = Ledger(cluster)
        self.history = History()
        self.criteria = CriteriaBook()  # completion criteria: evaluations, verdicts, budget timers
        self.jobs: dict[str, JobView] = {}
        self.pending: dict[str, JobView] = {}
        self.running: dict[str, JobView] = {}
        self.paused: dict[str, JobView] = {}
        self.held: dict[str, JobView] = {}  # out of the policy's sight (LiveControl.hold)
        self._demands: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        self._graph_vectors: dict[str, list[np.ndarray]] = {}  # per-task demand rows of task-graph jobs
        self._demand_cache: dict[tuple[int, int], tuple[object, object, dict[str, float]]] = {}
        self.view = ClusterView(cluster, self.ledger, self.jobs, self.pending, self.running, self.paused, self.history)
        self.now = 0.0
        self._on_progress = on_progress
        self._bind_hooks(policy)
        self._done = 0
        self._handlers: dict[type, Callable[[object], None]] = {
            A.Start: self._start, A.Pause: self._pause, A.Resume: self._resume,
            A.Migrate: self._migrate, A.Resize: self._resize, A.Stop: self._stop,
            A.Colocate: self._colocate, A.Pack: self._pack, A.SetShare: self._set_share,
        }

    def _bind_hooks(self, policy: object) -> None:
        self._hook_arrival = getattr(policy, "on_arrival", None)
        self._hook_finish = getattr(policy, "on_finish", None)
        self._hook_progress = getattr(policy, "on_progress", None)
        self._tick = getattr(policy, "tick_interval", None)
        self._hook_wake = getattr(policy, "next_decision_time", None)  # a one-off re-decision the policy asks for
        # rounds: the policy decides only at multiples of this (Pollux's scheduling interval)
        self._period = self._period_arg or getattr(policy, "decision_period", None)
        # decisions with nothing running and nothing to arrive before the loop gives up (a policy that
        # holds jobs back for a while, Gavel's allocation resets, says how many it may need)
        self._idle_limit = int(getattr(policy, "idle_decisions", 3))
        self._first = self._first_round if self._first_round is not None else getattr(policy, "first_round", None)

    # ------------------------------------------------------------------ run
    def run(self, specs: Iterable[JobSpec], source: JobSource | None = None) -> RunResult:
        """Run until every job ended; with a ``source`` (a service), until the source says stop.

        ``source.poll(self)`` is called every turn after the backend's events and the arrivals
        (it submits new jobs and carries out cancels through :class:`LiveControl`), and the loop
        wakes at ``source.next_poll(now)`` at the latest, so the same loop runs forever as a daemon.
        """
        wall0 = time.perf_counter()
        arrivals = sorted(specs, key=lambda s: s.submit_time)
        total = len(arrivals)
        i = 0
        next_tick = math.inf
        # rounds (decision_period P): the policy decides at first + k x P, k >= 0, once each (first: P by
        # default, so k x P with k >= 1; Gavel's rounds start at 0)
        last_round = -math.inf
        idle_turns = 0
        idle_ticks = 0
        rec = self.record
        # The loop makes many long-lived objects and few cycles: the cyclic collector's
        # full sweeps only cost time here (they grow with the heap). Restored on exit.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            while True:
                t_arr = arrivals[i].submit_time if i < total else math.inf
                t_be = self.backend.next_event_time()
                t_src = source.next_poll(self.now) if source is not None else math.inf
                active = bool(self.running or self.pending or self.paused)
                if not active:
                    next_tick = math.inf
                t = min(t_arr, next_tick, t_src, t_be if t_be is not None else math.inf,
                        self.criteria.next_time())
                if self._hook_wake is not None and active:
                    wake = self._hook_wake()
                    if wake is not None and self.now < wake < t:  # (one already past is not a reason to turn)
                        t = wake
                if t == math.inf and not self.running:
                    break  # (a real backend with running jobs waits for their next event)
                if t > self.horizon:
                    break
                reached, events = self.backend.advance(t)
                self.now = max(self.now, reached)
                self.view._clock_now = self.now
                if events and any(ev.kind is _USED for ev in events):
                    events = self._record_used(events)  # metrics only: not a reason to decide
                for ev in events:
                    self._on_backend_event(ev)
                while i < total and arrivals[i].submit_time <= self.now:
                    self._arrive(arrivals[i])
                    i += 1
                if source is not None and not source.poll(self):
                    break
                ended = self._criteria_due()
                if not (self.pending or self.paused or self.running or events or ended):
                    continue
                period = self._period
                if period:  # between rounds events are folded in and the policy waits for the next round
                    first = period if self._first is None else self._first
                    k = math.floor((self.now - first) / period + 1e-9)
                    at = first + k * period
                    if k < 0 or self.now - at > 1e-6 or at <= last_round:
                        next_tick = first + max(k + 1, 0) * period
                        continue
                    last_round = at
                t0 = time.perf_counter()
                plan = self.policy.decide(self.view)  # type: ignore[attr-defined]  (set_policy may switch it)
                rec.append(self.now, EventKind.DECISION, None, ms=(time.perf_counter() - t0) * 1e3)
                for action in plan:
                    self._apply(action)
                if period:
                    next_tick = last_round + period
                elif self._tick:
                    # nothing waits and the policy changed nothing: past IDLE_TICKS such ticks in a row, each
                    # further one comes twice as late (a job running for years is not ticked through every
                    # minute); any change, arrival or waiting job resets it
                    idle_ticks = idle_ticks + 1 if (not plan and not self.pending and not self.paused) else 0
                    next_tick = self.now + self._tick * 2.0 ** min(max(idle_ticks - IDLE_TICKS, 0), 60)
                if self.running or i < total or self.backend.next_event_time() is not None:
                    idle_turns = 0
                else:
                    idle_turns += 1  # nothing runs and nothing will arrive: only ticks remain
                    if idle_turns > self._idle_limit and source is None:
                        break
        finally:
            if gc_was_enabled:
                gc.enable()
            try:
                drain = getattr(self.backend, "drain_usage", None)
                if drain is not None:
                    self._record_used(drain(self.now))
            finally:
                self.backend.close()
        unfinished = self._close_unfinished(arrivals[i:])
        return RunResult(
            policy=getattr(self.policy, "name", type(self.policy).__name__), record=rec, jobs=self.jobs,
            unfinished=unfinished, wall_seconds=time.perf_counter() - wall0, end_time=self.now,
        )

    def _close_unfinished(self, not_arrived: list[JobSpec]) -> dict[str, str]:
        """Reason of every job that did not end, by id; jobs whose submit time was never reached are added
        to ``jobs`` (state ``submitted``) so that every job given to :meth:`run` is reported."""
        out: dict[str, str] = {}
        for spec in not_arrived:
            if spec.id in self.jobs:  # a duplicate id, as on arrival: recorded, the first one is reported
                self.record.append(self.now, EventKind.REJECTED, spec.id,
                                   reason=f"duplicate job id {spec.id!r} (never submitted)")
                continue
            j = JobView(spec, len(self.jobs))
            j._reason = (f"never submitted: submit_time t={spec.submit_time:g} is after the end of the run "
                         f"(t={self.now:g}, horizon {self.horizon:g})")
            self.jobs[spec.id] = j
            out[spec.id] = j._reason
        for j in self.pending.values():
            j._reason = j._reason or "still pending when the run ended (the policy never started it)"
            out[j.id] = j._reason
        for j in self.paused.values():
            j._reason = j._reason or "paused when the run ended (the policy never resumed it)"
            out[j.id] = j._reason
        for j in self.running.values():
            j._reason = f"still running at the horizon t={self.horizon:g}"
            out[j.id] = j._reason
        return out

    # ------------------------------------------------------------- arrivals
    def _arrive(self, spec: JobSpec) -> None:
        now = self.now
        if spec.id in self.jobs:
            # keep the first; record the duplicate so nothing vanishes silently
            self.record.append(now, EventKind.REJECTED, spec.id, reason=f"duplicate job id {spec.id!r}")
            return
        job = JobView(spec, len(self.jobs))
        self.jobs[spec.id] = job
        self.record.append(
            now, EventKind.SUBMITTED, spec.id, tenant=spec.tenant, weight=spec.weight,
            deadline=spec.absolute_deadline, demand=self._demand_dict(spec),
        )
        reason = self._admission_check(spec)
        if reason is not None:
            job._state = JobState.REJECTED
            job._reason = reason
            job._end_time = now
            self.record.append(now, EventKind.REJECTED, spec.id, reason=reason)
            self._done += 1
            return
        job._state = JobState.PENDING
        self.pending[spec.id] = job
        job._criterion = self.criteria.admit(spec.id, spec)
        self.view._admitted(job)
        if self._hook_arrival is not None:
            self._hook_arrival(job, self.view)

    def _demand_dict(self, spec: JobSpec) -> dict[str, float]:
        """Total demand at submission; cached per shared task-group object (traces share them)."""
        key = (id(spec.workers), id(spec.ps))
        hit = self._demand_cache.get(key)
        if hit is None or hit[0] is not spec.workers or hit[1] is not spec.ps:
            hit = self._demand_cache[key] = (spec.workers, spec.ps, spec.total_demand().as_dict())
        return dict(hit[2])

    def _admission_check(self, spec: JobSpec) -> str | None:
        w = self.ledger.vector(spec.workers.demand)
        p = self.ledger.vector(spec.ps.demand) if spec.ps is not None else None
        if w is None or (spec.ps is not None and p is None):
            known = ", ".join(self.ledger.names)
            return f"demands a resource no node has (cluster has: {known})"
        self._demands[spec.id] = (w, p)
        if spec.graph is not None:  # a task DAG (MLFS): each partition's tasks may demand their own
            per = [self.ledger.vector(d) for d in spec.graph.task_demands(spec.workers.demand)]
            if any(v is None for v in per):
                return f"a graph partition demands a resource no node has (cluster has: {', '.join(self.ledger.names)})"
            self._graph_vectors[spec.id] = per  # type: ignore[assignment]
        return self.ledger.ever_fits(self._task_vectors(spec.id, spec.min_workers))

    def _task_vectors(self, job: str, n_workers: int) -> list[np.ndarray]:
        w, p = self._demands[job]
        spec = self.jobs[job].spec
        per = self._graph_vectors.get(job)
        workers = per if per is not None and len(per) == n_workers else [w] * n_workers
        return workers + ([p] * spec.num_ps if p is not None else [])

    # -------------------------------------------------------- backend events
    def _record_used(self, events: list[BackendEvent]) -> list[BackendEvent]:
        """Record the ``USED`` samples among ``events`` (what jobs actually used: metrics only,
        nothing a policy sees) and return the other events."""
        rest = []
        for ev in events:
            if ev.kind is _USED:
                d = ev.data
                self.record.append(self.now, EventKind.USED, ev.job, used=dict(d["used"]),
                                   since=float(d["since"]), until=float(d["until"]))
            else:
                rest.append(ev)
        return rest

    def _on_backend_event(self, ev: BackendEvent) -> None:
        job = self.running.get(ev.job)
        if job is None:
            return  # stale: the job was paused or stopped after the backend scheduled this
        if ev.kind is BackendEventKind.PROGRESS:
            job._settle(self.now)
            job._iters = float(ev.data["iterations"])
            job._report_time = self.now
            job._iter_time = float(ev.data["iter_time"])
            split = {k: float(ev.data[k]) for k in ("compute_s", "comm_s") if ev.data.get(k) is not None}
            if split:  # the iteration split into computation and communication (subtask times)
                job._comp_time = split.get("compute_s", job._comp_time)
                job._comm_time = split.get("comm_s", job._comm_time)
            for name, value in ev.data.get("metrics", {}).items():
                job._metrics.setdefault(name, []).append((job._iters, float(value)))
            self.record.append(self.now, EventKind.PROGRESS, job.id, iterations=job._iters, iter_time=job._iter_time,
                               **split)
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

    def _check_criterion(self, job: JobView) -> bool:
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

    def _conclude(self, job: JobView, verdict: Verdict) -> None:
        """End a job on its criterion: ``finished`` when attained, ``stopped`` when its budget ran out
        (a running job is checkpointed and halted first, so its model is kept)."""
        if job._state is JobState.RUNNING:
            self.backend.halt(job.id, self.now, checkpoint=True)
        if verdict.attained:
            self._end(job, JobState.FINISHED, EventKind.FINISHED, verdict.reason, attained=True)
        else:
            self._end(job, JobState.STOPPED_EARLY, EventKind.STOPPED, verdict.reason)

    def _criteria_due(self) -> bool:
        """Check the jobs whose time budget fell due by now; True if any of them ended."""
        ended = False
        for job_id in self.criteria.due(self.now):
            job = self.jobs.get(job_id)
            if job is not None and self._check_criterion(job):
                ended = True
        return ended

    def _end(self, job: JobView, state: JobState, kind: EventKind, reason: str, *, attained: bool = False) -> None:
        now = self.now
        check_transition(job.id, job._state, state)
        job._settle(now)
        if job._state is JobState.RUNNING:
            self._release(job.id)
            self.running.pop(job.id, None)
        self.pending.pop(job.id, None)
        self.paused.pop(job.id, None)
        if self._backend_job_ended is not None:
            self._backend_job_ended(job.id, now)  # a backend holding the job's paused state lets go of it
        job._state = state
        job._reason = reason
        job._end_time = now
        job._alloc = Resources()
        job._placement = ()
        self._done += 1
        data = {"reason": reason} if reason else {}
        if job._criterion is not None:  # attainment, false attainment, accuracy reached (engine/criteria.py)
            data.update(self.criteria.outcome(job.id, attained and state is JobState.FINISHED))
        self.record.append(now, kind, job.id, **data)
        if state is JobState.FINISHED:
            self.history.add(FinishedJob(
                job.id, job.spec.model, job.spec.num_gpus, job._run_time, job._attained, job._iters, job._iter_time,
            ))
        if self._on_progress is not None:
            self._on_progress(self._done, len(self.jobs), now)
        if self._hook_finish is not None:
            self._hook_finish(job, self.view)

    # ---------------------------------------------------------------- actions
    def _apply(self, action: object) -> None:
        handler = self._handlers.get(type(action))
        try:
            if handler is None:
                raise Unsupported(f"{type(action).__name__} is not supported by this scheduler/backend yet")
            handler(action)
        except (ActionError, AllocationError, IllegalTransition, Unsupported, KeyError) as exc:
            msg = str(exc) if not isinstance(exc, KeyError) else f"unknown job {exc}"
            self.record.append(self.now, EventKind.ACTION_REJECTED, getattr(action, "job", None),
                               action=type(action).__name__, reason=msg)
            if self.strict:
                raise

    def _job(self, job_id: str, *states: JobState) -> JobView:
        job = self.jobs.get(job_id)
        if job is None:
            raise ActionError(f"unknown job {job_id!r}")
        if job._state not in states:
            want = " or ".join(str(s) for s in states)
            raise ActionError(f"job {job_id!r} is {job._state}, needs to be {want}")
        return job

    def _n_workers(self, job: JobView, placement: A.Placement) -> int:
        n = len(placement) - job.spec.num_ps
        lo, hi = job.spec.min_workers, job.spec.max_workers
        if not lo <= n <= hi:
            raise ActionError(
                f"job {job.id!r}: placement gives {n} workers, must be in [{lo}, {hi}] "
                f"(plus {job.spec.num_ps} parameter servers)"
            )
        return n

    def _place(self, job: JobView, placement: A.Placement, kind: EventKind, *, from_checkpoint: bool,
               share_gpus: bool = False, group: tuple[str, tuple[int, ...]] | None = None,
               only_devices: frozenset[tuple[int, int]] | None = None, **extra: object) -> None:
        n = self._n_workers(job, placement)
        if group is not None:
            alloc = self.ledger.allocate_group(job.id, placement, self._task_vectors(job.id, n),
                                               mode=group[0], nodes=group[1])
        else:
            alloc = self.ledger.allocate(job.id, placement, self._task_vectors(job.id, n), share_gpus=share_gpus,
                                         only_devices=only_devices)
        self._occupy(job, alloc, placement)
        self.backend.launch(job.spec, alloc, self.now, from_checkpoint=from_checkpoint)
        self.record.append(self.now, kind, job.id, alloc=alloc.total.as_dict(), nodes=list(placement), **extra)

    def _occupy(self, job: JobView, alloc: Allocation, placement: A.Placement) -> None:
        """Mark ``job`` running on ``alloc`` (before the backend launches it)."""
        job._settle(self.now)
        check_transition(job.id, job._state, JobState.RUNNING)
        job._state = JobState.RUNNING
        job._placement = tuple(placement)
        job._alloc = alloc.total
        job._gpus = self._demand_gpus(job.id, len(placement))
        job._iter_time = None  # a new placement must be measured anew
        job._report_time = self.now
        if job._first_start is None:
            job._first_start = self.now
        self.running[job.id] = job
        if job._criterion is not None:
            self.criteria.placed(job.id, self.now, job._run_time)

    def _demand_gpus(self, job_id: str, n_tasks: int) -> float:
        """GPUs a job uses on ``n_tasks`` tasks (shared or owned): the rate of its attained service."""
        col = self.ledger.gpu_col
        if col is None:
            return 0.0
        spec = self.jobs[job_id].spec
        return float(sum(v[col] for v in self._task_vectors(job_id, n_tasks - spec.num_ps)))

    def _release(self, job_id: str) -> None:
        """Free a job's allocation; GPU time-sharing guests that inherit a device are recorded.
        A pack member leaving its pack is recorded as ``unpacked`` (the others continue)."""
        device = self.ledger.allocations[job_id].pack if job_id in self.ledger.allocations else None
        for guest in self.ledger.release(job_id):
            self._reallocated(guest, f"inherited GPU from {job_id}")
        if device is not None:
            self.record.append(self.now, EventKind.UNPACKED, None, device=list(device), left=job_id,
                               members=list(self.ledger.packs.get(device, ())))

    def _reallocated(self, job_id: str, reason: str) -> None:
        g = self.jobs[job_id]
        g._settle(self.now)
        g._alloc = self.ledger.owned(job_id)
        self.record.append(self.now, EventKind.REALLOCATED, job_id, alloc=g._alloc.as_dict(), reason=reason)

    def _start(self, a: A.Start) -> None:
        job = self._job(a.job, JobState.PENDING)
        self._place(job, a.placement, EventKind.STARTED, from_checkpoint=False)
        del self.pending[job.id]

    def _resume(self, a: A.Resume) -> None:
        job = self._job(a.job, JobState.PAUSED)
        self._place(job, a.placement, EventKind.RESUMED, from_checkpoint=True)
        del self.paused[job.id]

    def _colocate(self, a: A.Colocate) -> None:
        """Mode ``share``: start or resume ``a.jobs[0]`` on ``a.nodes``, time-sharing GPUs already in
        use (Gandiva's packing, naive co-location); ``a.jobs[1:]`` name the intended hosts.
        Modes ``pipelined`` / ``naive``: see :meth:`_group`."""
        if a.mode in A.GROUP_MODES:
            self._group(a)
            return
        if a.mode != "share":
            raise Unsupported(f"Colocate mode {a.mode!r} is not supported "
                              f"(supported: 'share', {', '.join(repr(m) for m in A.GROUP_MODES)})")
        if not a.jobs:
            raise ActionError("Colocate needs at least one job")
        job = self._job(a.jobs[0], JobState.PENDING, JobState.PAUSED)
        resumed = job._state is JobState.PAUSED
        kind = EventKind.RESUMED if resumed else EventKind.STARTED
        only = None
        if a.on_hosts:
            held = [self.ledger.allocations[h].devices for h in a.jobs[1:] if h in self.ledger.allocations]
            if not held:
                raise ActionError(f"Colocate(on_hosts=True): none of the hosts {list(a.jobs[1:])} holds GPUs")
            only = frozenset().union(*held)
        self._place(job, a.nodes, kind, from_checkpoint=resumed, share_gpus=True, only_devices=only,
                    colocated_with=list(a.jobs[1:]))
        (self.paused if resumed else self.pending).pop(job.id)

    def _group(self, a: A.Colocate) -> None:
        """Put ``a.jobs`` in the group that holds machines ``a.nodes`` (Harmony's job group).

        Each job runs one worker on every machine of the group (its DoP is ``len(nodes)``) and its
        parameter servers co-located on the same machines. Pending jobs start, paused ones resume
        from their checkpoint, running ones already in this group stay untouched, running ones
        elsewhere move here (checkpoint at the iteration boundary, restore: a migration, or a
        resize if their DoP changes). Members of the group not listed stay. Every machine must be
        held by this group already or be left empty once the moving jobs have gone; otherwise the
        whole action is refused and nothing changes."""
        if not a.jobs or len(set(a.jobs)) != len(a.jobs):
            raise ActionError(f"Colocate needs distinct jobs, got {list(a.jobs)}")
        nodes = tuple(int(n) for n in a.nodes)
        if not nodes or len(set(nodes)) != len(nodes):
            raise ActionError(f"Colocate({a.mode!r}) needs distinct nodes, got {list(a.nodes)}")
        key = self.ledger.group_key(a.mode, nodes)
        jobs = [self._job(j, JobState.PENDING, JobState.PAUSED, JobState.RUNNING) for j in a.jobs]
        placements = {j.id: self._group_placement(j, nodes) for j in jobs}
        for j in jobs:
            self._n_workers(j, placements[j.id])
        alloc_of = self.ledger.allocations
        joining = [j for j in jobs if j._state is not JobState.RUNNING or alloc_of[j.id].group != key]
        movers = {j.id for j in joining if j._state is JobState.RUNNING}
        reason = self.ledger.group_blocked(nodes, key, movers)
        for j in joining:
            if reason is None:
                reason = self.ledger.group_task_fits(j.id, placements[j.id],
                                                     self._task_vectors(j.id, len(nodes)))
        if reason is not None:
            raise AllocationError(reason)
        kinds: dict[str, EventKind] = {}
        for j in joining:  # every mover leaves its old place first (checkpoint at the iteration boundary)
            if j.id in movers:
                j._settle(self.now)
                resized = j.n_workers != len(nodes)
                self._release(j.id)
                self.backend.halt(j.id, self.now, checkpoint=True)
                del self.running[j.id]
                kinds[j.id] = EventKind.RESIZED if resized else EventKind.MIGRATED
        for j in joining:
            kind = kinds.get(j.id)
            if kind is None:
                kind = EventKind.RESUMED if j._state is JobState.PAUSED else EventKind.STARTED
            elif kind is EventKind.RESIZED:
                j._resizes += 1
            else:
                j._migrations += 1
            others = [o for o in a.jobs if o != j.id]
            self._place(j, placements[j.id], kind, from_checkpoint=kind is not EventKind.STARTED, group=key,
                        group_nodes=list(key[1]), mode=a.mode, colocated_with=others)
            self.pending.pop(j.id, None)
            self.paused.pop(j.id, None)

    def _pack(self, a: A.Pack) -> None:
        """Train ``a.jobs`` jointly as one packed model on ``a.device`` (Liu, Pack, §2.1.2).

        Pending jobs start and paused ones resume (from their own checkpoints) into the pack;
        members already in this pack stay and keep training (a job may be *loaded* into a
        running pack, §2.2.3). Only single-task jobs pack; a job running elsewhere must be paused
        first. The ledger checks the device (wholly free, or already this pack's), the node's
        resources and the pack's device memory; the backend must support packing
        (``launch_pack``). All-or-nothing."""
        if not a.jobs or len(set(a.jobs)) != len(a.jobs):
            raise ActionError(f"Pack needs distinct jobs, got {list(a.jobs)}")
        try:
            device = (int(a.device[0]), int(a.device[1]))
        except (TypeError, ValueError, IndexError):
            raise ActionError(f"Pack device must be (node, gpu), got {a.device!r}") from None
        jobs = [self._job(j, JobState.PENDING, JobState.PAUSED, JobState.RUNNING) for j in a.jobs]
        members = set(self.ledger.packs.get(device, ()))
        for j in jobs:
            if j.spec.num_ps or j.spec.min_workers != 1:
                raise ActionError(f"job {j.id!r} has {j.spec.workers.count} workers and {j.spec.num_ps} parameter "
                                  f"servers; only single-task jobs can be packed")
            if j._state is JobState.RUNNING and j.id not in members:
                raise ActionError(f"job {j.id!r} is running outside the pack on {list(device)}; pause it first")
        joining = [j for j in jobs if j._state is not JobState.RUNNING]
        if not joining:
            raise ActionError(f"Pack: every job of {list(a.jobs)} already trains in the pack on {list(device)}")
        launch = getattr(self.backend, "launch_pack", None)
        if launch is None:
            raise Unsupported(f"backend {type(self.backend).__name__} cannot run packs (no launch_pack)")
        reason = self.ledger.pack_blocked(device, [(j.id, self._demands[j.id][0]) for j in joining])
        if reason is not None:
            raise AllocationError(reason)
        owner = self.ledger.packs[device][0] if device in self.ledger.packs else None
        owner_total = self.ledger.allocations[owner].total if owner is not None else None
        allocs = [self.ledger.allocate_pack(j.id, device, self._demands[j.id][0]) for j in joining]
        if owner is not None and self.ledger.allocations[owner].total != owner_total:
            self._reallocated(owner, f"pack on {list(device)} needs more CPU for its new members")
        resumed = [j._state is JobState.PAUSED for j in joining]
        for j, alloc in zip(joining, allocs):
            self._occupy(j, alloc, (device[0],))
            self.pending.pop(j.id, None)
            self.paused.pop(j.id, None)
        launch(device, [j.spec for j in joining], allocs, self.now, from_checkpoint=resumed)
        everyone = list(self.ledger.packs[device])
        for j, alloc, r in zip(joining, allocs, resumed):
            self.record.append(self.now, EventKind.RESUMED if r else EventKind.STARTED, j.id,
                               alloc=alloc.total.as_dict(), nodes=[device[0]], pack=list(device),
                               packed_with=[o for o in everyone if o != j.id])
        self.record.append(self.now, EventKind.PACKED, None, device=list(device), members=everyone,
                           joined=[j.id for j in joining], mem_gb=self.ledger.pack_mem[device])

    @staticmethod
    def _group_placement(job: JobView, nodes: tuple[int, ...]) -> A.Placement:
        """One worker per machine of the group, parameter servers co-located round-robin."""
        return nodes + tuple(nodes[i % len(nodes)] for i in range(job.spec.num_ps))

    def _unplace(self, job: JobView) -> None:
        job._settle(self.now)
        self._release(job.id)
        self.backend.halt(job.id, self.now, checkpoint=True)
        del self.running[job.id]

    def _pause(self, a: A.Pause) -> None:
        job = self._job(a.job, JobState.RUNNING)
        self._unplace(job)
        self._paused(job, a.reason)

    def _paused(self, job: JobView, reason: str) -> None:
        """Record ``job`` (already halted and released) as paused, for the policy to place again."""
        check_transition(job.id, job._state, JobState.PAUSED)
        job._state = JobState.PAUSED
        job._placement = ()
        job._alloc = Resources()
        job._preemptions += 1
        self.paused[job.id] = job
        self.record.append(self.now, EventKind.PAUSED, job.id, reason=reason)

    def _move(self, job: JobView, placement: A.Placement, kind: EventKind) -> None:
        """Checkpoint ``job``, release it, and restore it on ``placement`` (Migrate / Resize)."""
        n_new = self._n_workers(job, placement)
        alloc_now = self.ledger.allocations.get(job.id)
        if alloc_now is not None and alloc_now.group is not None:
            raise ActionError(f"job {job.id!r} is in a {alloc_now.group[0]} group; move it with Colocate "
                              f"or Pause it")
        vectors = self._task_vectors(job.id, n_new)
        # Try the move on a scratch copy first: releasing has effects that cannot be undone exactly
        # (time-sharing guests inherit the job's GPUs, a pack member leaves its pack), so a move that
        # does not fit must be refused before anything changes. AllocationError leaves all as it was.
        trial = self.ledger.draft()
        trial.release(job.id)
        trial.allocate(job.id, placement, vectors)
        job._settle(self.now)
        self._release(job.id)  # a pack member moves out of its pack: it runs alone afterwards
        alloc = self.ledger.allocate(job.id, placement, vectors)
        self.backend.halt(job.id, self.now, checkpoint=True)
        job._placement = tuple(placement)
        job._alloc = alloc.total
        job._gpus = self._demand_gpus(job.id, len(placement))
        job._iter_time = None
        job._report_time = self.now
        self.backend.launch(job.spec, alloc, self.now, from_checkpoint=True)
        self.record.append(self.now, kind, job.id, alloc=alloc.total.as_dict(), nodes=list(placement))

    def _migrate(self, a: A.Migrate) -> None:
        job = self._job(a.job, JobState.RUNNING)
        if len(a.placement) != len(job._placement):
            raise ActionError(f"Migrate keeps the task count ({len(job._placement)}); use Resize to change it")
        self._move(job, a.placement, EventKind.MIGRATED)
        job._migrations += 1

    def _resize(self, a: A.Resize) -> None:
        job = self._job(a.job, JobState.RUNNING)
        self._move(job, a.placement, EventKind.RESIZED)
        job._resizes += 1

    def _set_share(self, a: A.SetShare) -> None:
        """Change a running single-task job's share in place (Rotary-AQP's extra cores, Alg. 4).

        ``a.share`` names the resources to change and their new amounts for the task (the others
        keep the job's demand); the job stays on its node and keeps running (no checkpoint). Only
        jobs holding no GPU, outside groups and packs; the backend must support it (``set_share``).
        The share lasts until the job is paused, moved or ends: a resumed job gets its demand again.
        """
        job = self._job(a.job, JobState.RUNNING)
        set_share = getattr(self.backend, "set_share", None)
        if set_share is None:
            raise Unsupported(f"backend {type(self.backend).__name__} cannot change a running job's share "
                              f"(no set_share)")
        alloc_now = self.ledger.allocations[job.id]
        if len(alloc_now.slots) != 1 or alloc_now.group is not None or alloc_now.pack is not None:
            raise ActionError(f"SetShare changes the share of a single-task job running alone; job {job.id!r} "
                              f"has {len(alloc_now.slots)} tasks" + (" in a group or pack" if len(alloc_now.slots) == 1 else ""))
        if alloc_now.devices or "gpu" in a.share:
            raise ActionError(f"SetShare does not change GPUs; job {job.id!r} holds or names GPUs")
        if not a.share:
            raise ActionError("SetShare needs at least one resource")
        base = dict(job.spec.workers.demand.items())
        for name, amount in a.share.items():
            if not amount > 0:
                raise ActionError(f"SetShare {name}={amount!r} for job {job.id!r}: amounts must be > 0")
            base[name] = float(amount)
        vec = self.ledger.vector(Resources(base))
        if vec is None:
            raise ActionError(f"SetShare for job {job.id!r} names a resource no node has: {sorted(a.share)}")
        placement = job._placement
        trial = self.ledger.draft()  # all-or-nothing: a share that does not fit changes nothing
        trial.release(job.id)
        trial.allocate(job.id, placement, [vec])
        job._settle(self.now)
        self.ledger.release(job.id)
        alloc = self.ledger.allocate(job.id, placement, [vec])
        job._alloc = alloc.total
        job._iter_time = None  # a new share runs at a new speed: measured anew
        job._report_time = self.now
        set_share(job.id, alloc, self.now)
        self.record.append(self.now, EventKind.REALLOCATED, job.id, alloc=alloc.total.as_dict(),
                           reason="share set by the policy")

    def _stop(self, a: A.Stop) -> None:
        job = self._job(a.job, JobState.PENDING, JobState.RUNNING, JobState.PAUSED)
        if job._state is JobState.RUNNING:
            self.backend.halt(job.id, self.now, checkpoint=True)
        if a.outcome == "cancelled":
            self._end(job, JobState.CANCELLED, EventKind.CANCELLED, a.reason)
        else:
            self._end(job, JobState.STOPPED_EARLY, EventKind.STOPPED, a.reason)
