"""The scheduler loop: one event-driven loop for every policy and every backend.

Each turn: advance the backend to the next moment something happens (a job
arrives, the backend reports an event, the policy's tick is due), fold the
events into job state and the record, ask the policy for a plan, check each
action against the ledger, and hand the accepted ones to the backend.
Rejected actions are recorded with their reason; the loop never stops on a
policy's mistake unless ``strict`` is set (tests use it).

The actions are carried out by :mod:`.apply`, the backend's events folded in (and a job's end) by
:mod:`.folding`: mixins of :class:`Scheduler`.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

import numpy as np

from ..spec.cluster import ClusterSpec
from ..spec.job import JobSpec
from ..spec.resources import Resources
from . import actions as A
from .apply import ActionError, ActionHandlers
from .backend import Backend, BackendEventKind
from .criteria import CriteriaBook
from .folding import EventFolding
from .history import History
from .job import JobView
from .ledger import Ledger
from .live import JobSource, LiveControl
from .oracle import Oracle
from .record import EventKind, Record
from .state import JobState
from .view import ClusterView
from .waiting import Running, Waiting

__all__ = ["IDLE_TICKS", "ActionError", "RunResult", "Scheduler"]


_USED = BackendEventKind.USED
_UNKNOWN = object()


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


class Scheduler(ActionHandlers, EventFolding, LiveControl):
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
        # the backend hands out one never-changed ``used`` dict per level (SimBackend): the record keeps it as is
        self._used_kept = getattr(backend, "shares_used_levels", False) is True
        # a backend that hands its use samples out raw after each advance (SimBackend.open_usage_channel: refused
        # by a subclass that overrides advance, e.g. to filter them); looked up on the class, not through a
        # wrapper's __getattr__ (a wrapper's own advance would be bypassed)
        opener = getattr(type(backend), "open_usage_channel", None)
        self._take_used: Callable[[], list[tuple[float, str, dict[str, float], float, float]]] | None = (
            backend.take_used if opener is not None and opener(backend) else None)  # type: ignore[attr-defined]
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
        self.pending = Waiting()  # a dict by id that also keeps the jobs per tenant (engine/waiting.py)
        self.running = Running()  # a dict by id with a journal of changes (engine/waiting.py)
        self.paused = Waiting()
        self.held: dict[str, JobView] = {}  # out of the policy's sight (LiveControl.hold)
        self._demands: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        self._demand_pairs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray | None]] = {}
        # (id(demand pair), workers, parameter servers) -> (the pair, its task rows): see _task_vectors
        self._vector_lists: dict[tuple[int, int, int], tuple[tuple[np.ndarray, np.ndarray | None], list[np.ndarray]]] = {}
        self._graph_vectors: dict[str, list[np.ndarray]] = {}  # per-task demand rows of task-graph jobs
        self._demand_cache: dict[tuple[int, int], tuple[object, object, dict[str, float], float]] = {}
        self._alloc_dicts: dict[int, tuple[Resources, dict[str, float]]] = {}  # (apply._alloc_dict)
        self._node_lists: dict[tuple[int, ...], list[int]] = {}  # placement -> its nodes as a list (apply._node_list)
        # (id(worker row), workers, id(PS row), PS count) -> Ledger.ever_fits of those tasks (rows are the
        # ledger's interned ones: their ids stay theirs); task-graph jobs are checked each time
        self._ever_fits: dict[tuple[int, int, int, int], str | None] = {}
        self.view = ClusterView(cluster, self.ledger, self.jobs, self.pending, self.running, self.paused, self.history)
        self.pending.group_by(self.view.shape_key)  # ClusterView.pending_by_shape
        self.now = 0.0
        self._on_progress = on_progress
        # the backend's periodic reports, kept until taken (the simulator's report grid; None: every report
        # comes as an event)
        self._take_reports = getattr(backend, "take_reports", None)
        self._reports_pending = getattr(backend, "reports_pending", None)
        self._lazy: Callable[[ClusterView], bool | Collection[str]] | None = None
        self._criteria_seen = False  # a job with a completion criterion arrived: every report is taken at once
        self._bind_hooks(policy)
        self._done = 0
        self._handlers: dict[type, Callable[[object], None]] = {
            A.Start: self._start, A.Pause: self._pause, A.Resume: self._resume,
            A.Migrate: self._migrate, A.Resize: self._resize, A.Stop: self._stop,
            A.Colocate: self._colocate, A.Pack: self._pack, A.SetShare: self._set_share,
        }

    def _bind_hooks(self, policy: object) -> None:
        if self._lazy is not None:
            self._fold_reports()  # (a policy switched live: what the old one left untaken is folded now)
        # a policy that says whose reported telemetry it reads (``wants_reports(view)``, called before each
        # decide: True for every job, else the ids of the running jobs it may read) gets the simulator's grid
        # reports of those jobs folded in then, not as they happen (see _fold_reports)
        wants = getattr(policy, "wants_reports", None)
        self._lazy = wants if self._take_reports is not None and not self._criteria_seen else None
        self._hook_arrival = getattr(policy, "on_arrival", None)
        self._hook_finish = getattr(policy, "on_finish", None)
        self._hook_progress = getattr(policy, "on_progress", None)
        self._tick = getattr(policy, "tick_interval", None)
        self._hook_wake = getattr(policy, "next_decision_time", None)  # a one-off re-decision the policy asks for
        # asked after a turn that the backend alone woke (``wants_turn(events)``, see policies/base.py): False
        # means the policy's decide would plan nothing and change nothing, so none is made (no decision row)
        self._hook_turn = getattr(policy, "wants_turn", None)
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
        # bound once: these objects are the scheduler's for its whole life (the policy and its hooks are
        # not: set_policy may switch them, so they are looked up each turn)
        next_event_time, advance = self.backend.next_event_time, self.backend.advance
        timers = self.criteria._timers  # (its heap of budget timers, never replaced: criteria_next() inline)
        running, pending, paused, view = self.running, self.pending, self.paused, self.view
        on_event, arrive, apply = self._on_backend_event, self._arrive, self._apply
        take_used, used_kept = self._take_used, self._used_kept
        perf_counter, inf = time.perf_counter, math.inf
        try:
            while True:
                t_arr = arrivals[i].submit_time if i < total else inf
                t_be = next_event_time()
                t_src = source.next_poll(self.now) if source is not None else inf
                active = bool(running or pending or paused)
                if not active:
                    next_tick = inf
                t_due = min(t_arr, next_tick, t_src, timers[0][0] if timers else inf)  # (a turn whatever comes)
                if self._hook_wake is not None and active:
                    wake = self._hook_wake()
                    if wake is not None and self.now < wake < t_due:  # (one already past is not a reason to turn)
                        t_due = wake
                t = t_due if t_be is None or t_due <= t_be else t_be
                if t == inf and not running:
                    break  # (a real backend with running jobs waits for their next event)
                if t > self.horizon:
                    break
                reached, events = advance(t)
                now = self.now = view._clock_now = max(self.now, reached)
                if take_used is not None:  # (the samples advance would have put first among its events)
                    used = take_used()
                    if used:
                        rec.append_used_rows(now, used, used_kept)
                if events:
                    if take_used is None:  # (with the raw channel no USED event comes)
                        for ev in events:
                            if ev.kind is _USED:
                                events = self._record_used(events)  # metrics only: not a reason to decide
                                break
                    for ev in events:
                        on_event(ev)
                if now < t_due and events and self._hook_turn is not None and not self._hook_turn(events):
                    continue  # woken by the backend alone (no arrival, wake-up, tick, timer or poll due yet)
                while i < total and arrivals[i].submit_time <= now:
                    arrive(arrivals[i])
                    i += 1
                if source is not None and not source.poll(self):
                    break
                ended = self._criteria_due() if timers and timers[0][0] <= self.now + 1e-9 else False
                if not (pending or paused or running or events or ended):
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
                lazy = self._lazy
                if lazy is not None:
                    wanted = lazy(view)  # True: every job's reports; else the ids of the jobs it reads
                    if wanted is True:
                        self._fold_reports()
                    elif wanted:
                        self._fold_segments(self._take_reports(wanted, chunked=True))  # (each job's, in order)
                t0 = perf_counter()
                plan = self.policy.decide(view)  # type: ignore[attr-defined]  (set_policy may switch it)
                rec.append_decision(self.now, (perf_counter() - t0) * 1e3)
                for action in plan:
                    apply(action)
                if period:
                    next_tick = last_round + period
                elif self._tick:
                    # nothing waits and the policy changed nothing: past IDLE_TICKS such ticks in a row, each
                    # further one comes twice as late (a job running for years is not ticked through every
                    # minute); any change, arrival or waiting job resets it
                    idle_ticks = idle_ticks + 1 if (not plan and not pending and not paused) else 0
                    next_tick = (self.now + self._tick if idle_ticks <= IDLE_TICKS  # (x 2.0 ** 0: the same float)
                                 else self.now + self._tick * 2.0 ** min(idle_ticks - IDLE_TICKS, 60))
                if running or i < total or next_event_time() is not None:
                    idle_turns = 0
                else:
                    idle_turns += 1  # nothing runs and nothing will arrive: only ticks remain
                    if idle_turns > self._idle_limit and source is None:
                        break
        finally:
            if gc_was_enabled:
                gc.enable()
            if self._lazy is not None:
                self._fold_reports()  # the reports not read yet: into the jobs' telemetry and the record
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
        self.record.append_submitted(now, spec.id, spec.tenant, spec.weight, spec.absolute_deadline,
                                     self._total_demand(spec)[2])  # (the demand dict is shared: never changed)
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
        if job._criterion is not None and not self._criteria_seen:
            self._criteria_seen = True  # a criterion judges each report as it comes (it may end the job)
            if self._lazy is not None:
                self._fold_reports()
                self._lazy = None
        self.view._admitted(job)
        if self._hook_arrival is not None:
            self._hook_arrival(job, self.view)

    def _total_demand(self, spec: JobSpec) -> tuple[object, object, dict[str, float], float]:
        """``(workers, ps, spec.total_demand().as_dict(), spec.num_gpus)``, cached per shared task-group
        objects (traces share them; a task-graph job's partitions have their own demands: not cached)."""
        if spec.graph is not None:
            total = spec.total_demand()
            return (spec.workers, spec.ps, total.as_dict(), total["gpu"])
        key = (id(spec.workers), id(spec.ps))
        hit = self._demand_cache.get(key)
        if hit is None or hit[0] is not spec.workers or hit[1] is not spec.ps:
            total = spec.total_demand()
            hit = self._demand_cache[key] = (spec.workers, spec.ps, total.as_dict(), total["gpu"])
        return hit

    def _admission_check(self, spec: JobSpec) -> str | None:
        w = self.ledger.vector(spec.workers.demand)
        p = self.ledger.vector(spec.ps.demand) if spec.ps is not None else None
        if w is None or (spec.ps is not None and p is None):
            known = ", ".join(self.ledger.names)
            return f"demands a resource no node has (cluster has: {known})"
        pair = self._demand_pairs.get((id(w), id(p)))  # (rows are the ledger's, kept alive: ids stay theirs)
        if pair is None:
            pair = self._demand_pairs[(id(w), id(p))] = (w, p)
        self._demands[spec.id] = pair  # one tuple per distinct demand, not per job (82k jobs: ~6 MB)
        if spec.graph is not None:  # a task DAG (MLFS): each partition's tasks may demand their own
            per = [self.ledger.vector(d) for d in spec.graph.task_demands(spec.workers.demand)]
            if any(v is None for v in per):
                return f"a graph partition demands a resource no node has (cluster has: {', '.join(self.ledger.names)})"
            self._graph_vectors[spec.id] = per  # type: ignore[assignment]
            return self.ledger.ever_fits(self._task_vectors(spec.id, spec.min_workers))
        key = (id(w), spec.min_workers, id(p), spec.num_ps)
        reason = self._ever_fits.get(key, _UNKNOWN)
        if reason is _UNKNOWN:
            reason = self._ever_fits[key] = self.ledger.ever_fits(self._task_vectors(spec.id, spec.min_workers))
        return reason  # type: ignore[return-value]

    def _task_vectors(self, job: str, n_workers: int, num_ps: int | None = None) -> list[np.ndarray]:
        """The job's task rows on ``n_workers`` workers (workers, then parameter servers): the ledger's read-only
        rows, in a list shared by every job of the same demand and size (read it, never change it). ``num_ps``:
        the job's parameter-server count, if the caller has it."""
        pair = self._demands[job]
        if num_ps is None:
            num_ps = self.jobs[job].spec.num_ps
        key = (id(pair), n_workers, num_ps)  # (pairs are kept alive in _demand_pairs: their ids stay theirs)
        if job not in self._graph_vectors:
            hit = self._vector_lists.get(key)
            if hit is not None and hit[0] is pair:
                return hit[1]
        w, p = pair
        per = self._graph_vectors.get(job)
        workers = per if per is not None and len(per) == n_workers else [w] * n_workers
        out = workers + ([p] * num_ps if p is not None else [])
        if per is None and len(self._vector_lists) < 65536:
            self._vector_lists[key] = (pair, out)
        return out
