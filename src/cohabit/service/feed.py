"""The store-backed feed of the one scheduler loop: job source, record sink, write-ahead backend.

* :class:`StoreRecord`: the loop's :class:`~cohabit.engine.record.Record`; events are kept
  in memory only until the next flush, then appended to the store's ``events`` table (times
  shifted to seconds since the service's epoch, so one record spans restarts).
* :class:`JournaledBackend`: wraps the real backend; before any launch it flushes the record
  and commits the job's allocation (and state ``running``), and only then launches: the store is
  always ahead of the processes (write-ahead). After a halt the allocation row is dropped.
* :class:`StoreFeed`: the loop's :class:`~cohabit.engine.live.JobSource`. Every
  ``poll_interval`` seconds it admits new submissions (through the tenant quota gate of
  :mod:`.quota`), carries out cancel and hold/release requests, switches the policy when the
  store's row changed, and commits the turn (events, job rows, checkpoint index). Its first poll
  recovers from a crash: see :meth:`StoreFeed.recover`.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import func

from ..engine import actions as A
from ..engine.backend import BackendEvent, Unsupported
from ..engine.ledger import Allocation
from ..engine.loop import Scheduler
from ..engine.record import ALLOCATING, EventKind, Record
from ..engine.state import JobState
from ..policies import make_policy
from ..spec.job import JobSpec
from .db import Job
from .quota import QuotaGate
from .whatif import observed
from .store import Store, sched_id, seq_of

_END_STATE = {
    EventKind.FINISHED: JobState.FINISHED, EventKind.STOPPED: JobState.STOPPED_EARLY,
    EventKind.FAILED: JobState.FAILED, EventKind.CANCELLED: JobState.CANCELLED, EventKind.REJECTED: JobState.REJECTED,
}


class StoreRecord(Record):
    """A record that hands its events to the store; only the unflushed ones stay in memory (plus
    the last flushed one, which the time-order check compares against)."""

    __slots__ = ("offset", "_tail_sent")

    def __init__(self, offset: float) -> None:
        super().__init__()
        self.offset = offset
        self._tail_sent = False

    def drain(self) -> list[tuple[float, str, str | None, dict[str, Any]]]:
        """Events not yet flushed, as (service time, kind, job, data)."""
        new = self._iter_from(1 if self._tail_sent else 0)
        out = [(self.offset + e.time, str(e.kind), e.job, e.data) for e in new]
        if out:
            self._keep_last()
            self._tail_sent = True
        return out


def job_updates(events: Sequence[tuple[float, str, str | None, dict[str, Any]]], epoch: float) -> dict[int, dict[str, Any]]:
    """The ``jobs`` columns the events change, per job seq (later events win)."""
    out: dict[int, dict[str, Any]] = {}
    for t, kind, job, data in events:
        if job is None or not job.startswith("j"):
            continue
        cols = out.setdefault(seq_of(job), {})
        k = EventKind(kind)
        wall = epoch + t
        if k is EventKind.SUBMITTED:
            cols.update(state=str(JobState.PENDING))
        elif k in ALLOCATING:
            cols.update(state=str(JobState.RUNNING), pending_reason="", start_time=func.coalesce(Job.start_time, wall))
        elif k is EventKind.PAUSED:
            cols.update(state=str(JobState.PAUSED), pending_reason=str(data.get("reason", "")))
        elif k in _END_STATE:
            cols.update(state=str(_END_STATE[k]), reason=str(data.get("reason", "")), end_time=wall, pending_reason="")
            if k is EventKind.FINISHED:  # the finished event carries no count: the job did all it declared
                cols["iterations"] = func.coalesce(Job.total_iterations, Job.iterations)
        elif k is EventKind.PROGRESS:
            cols["iterations"] = float(data["iterations"])
    return out


class JournaledBackend:
    """The real backend behind a write-ahead journal in the store (see the module docstring)."""

    def __init__(self, inner: Any, db: Store, feed: StoreFeed) -> None:
        self.inner = inner
        self.db = db
        self.feed = feed
        self._pids: dict[str, tuple[int, ...]] = {}  # stored task pids per running job

    def __getattr__(self, name: str) -> Any:  # status, timings, store, pids, ...
        return getattr(self.inner, name)

    def launch(self, spec: JobSpec, alloc: Allocation, now: float, *, from_checkpoint: bool) -> None:
        self.feed.flush()
        seq = seq_of(spec.id)
        self.db.write_allocation(seq, list(alloc.nodes), alloc.total.as_dict(), self.feed.epoch_time(now),
                                    from_checkpoint)
        self.inner.launch(spec, alloc, now, from_checkpoint=from_checkpoint)
        self._pids.pop(spec.id, None)
        self._sync_pids([spec.id])

    def _sync_pids(self, jobs: Sequence[str]) -> None:
        """Store the task pids of ``jobs`` where they changed: a Ray actor's process id is known only
        once the actor started, and a restarted task has a new process. Recovery kills by these."""
        status = getattr(self.inner, "status", {})
        for job in jobs:
            st = status.get(job)
            pids = tuple(p for p in (st.pids if st is not None else ()) if p > 0)  # > 0: real process ids
            if pids and pids != self._pids.get(job):
                self.db.set_pids(seq_of(job), list(pids))
                self._pids[job] = pids

    def launch_pack(self, device: tuple[int, int], specs: Sequence[JobSpec], allocs: Sequence[Allocation],
                    now: float, *, from_checkpoint: Sequence[bool]) -> None:
        inner = getattr(self.inner, "launch_pack", None)
        if inner is None:
            raise Unsupported(f"backend {type(self.inner).__name__} cannot run packs (no launch_pack)")
        self.feed.flush()
        for spec, alloc, fc in zip(specs, allocs, from_checkpoint):
            self.db.write_allocation(seq_of(spec.id), list(alloc.nodes), alloc.total.as_dict(),
                                        self.feed.epoch_time(now), fc)
        inner(device, specs, allocs, now, from_checkpoint=from_checkpoint)

    def halt(self, job: str, now: float, *, checkpoint: bool) -> None:
        self.inner.halt(job, now, checkpoint=checkpoint)
        self._pids.pop(job, None)
        self.db.drop_allocation(seq_of(job))

    def next_event_time(self) -> float | None:
        return self.inner.next_event_time()

    def advance(self, until: float) -> tuple[float, list[BackendEvent]]:
        out = self.inner.advance(until)
        status = getattr(self.inner, "status", {})
        for job in [j for j in self._pids if not getattr(status.get(j), "pids", ())]:
            del self._pids[job]  # ended: nothing left to kill
        sched = self.feed.sched
        if sched is not None:
            self._sync_pids(list(sched.running))
        return out

    def close(self) -> None:
        self.inner.close()


def _is_our_task(pid: int) -> bool:
    """True if ``pid`` is alive and is a cohabit task process (not a reused pid): a local task
    (``python -m cohabit.runtime...``) or a Ray task actor on this machine (``ray::TaskActor``)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"cohabit.runtime" in cmd or cmd.startswith(b"ray::TaskActor")


def kill_leftovers(pids: Sequence[int], timeout: float = 10.0) -> int:
    """SIGKILL the task processes a crashed service left behind (by pid, checked to be ours) and
    wait until they are gone, so no job ever has two incarnations writing its checkpoints."""
    mine = [p for p in pids if _is_our_task(p)]
    for p in mine:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in mine) and time.monotonic() < deadline:
        time.sleep(0.02)
    return len(mine)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


class StoreFeed:
    """The loop's job source over a :class:`Store` (see the module docstring)."""

    def __init__(self, store: Store, *, policy_spec: str, poll_interval: float = 0.25) -> None:
        self.store = store
        self.poll_interval = poll_interval
        self.policy_spec = policy_spec
        self.record = StoreRecord(offset=time.time() - store.epoch)
        self.gate = QuotaGate(store)
        self.stop = threading.Event()
        self.sched: Scheduler | None = None
        self.snapshot: dict[str, Any] = {}
        self.recovered: dict[str, int] = {}
        self._known: set[int] = set()  # stored as submitted and already taken in
        self._started = False
        self._last_poll = -1.0
        self._reasons: dict[int, str] = {}
        self._written: dict[int, str] = {}
        self._seen: set[str] = set()  # re-admitted jobs whose `submitted` event is already stored
        self._lock = threading.Lock()

    def epoch_time(self, now: float) -> float:
        """Service time (seconds since the epoch of the store) of scheduler time ``now``."""
        return self.record.offset + now

    # ----------------------------------------------------------- JobSource
    def next_poll(self, now: float) -> float:
        return max(now, self._last_poll + self.poll_interval)

    def poll(self, sched: Scheduler) -> bool:
        self.sched = sched
        self._last_poll = sched.now
        if self.stop.is_set():
            for jid in list(sched.running):  # a clean stop: checkpoint every running job first
                sched._apply(A.Pause(jid, reason="service stopped; resumes from its checkpoint at restart"))
            self.flush()
            return False
        if not self._started:
            self._started = True
            self.recover(sched)
        self._admit_new(sched)
        self._requests(sched)
        self._switch_policy(sched)
        self.gate.admit(sched, self._pending_reason)
        self.flush()
        self._snapshot(sched)
        return True

    # ------------------------------------------------------------ recovery
    def recover(self, sched: Scheduler) -> None:
        """Bring back every job the store says is not ended, before anything else happens.

        Jobs that were running or paused (their allocation row may still name task processes of
        the crashed service: those are killed by pid first) re-enter paused with their last stored
        iterations; the policy resumes them from their newest checkpoint, so at most one
        checkpoint interval of progress is lost. Submitted and pending jobs go back to the queue
        gate in submission order, so their order is kept."""
        allocs = self.store.allocations()
        active = self.store.active_jobs()
        self._seen = self.store.submitted_ids([sched_id(j.seq) for j, _ in active])
        killed = kill_leftovers([p for a in allocs.values() for p in a["pids"]])
        n_run = n_pend = 0
        for job, tenant in active:
            spec = self._spec(job, tenant)
            if job.state in (str(JobState.RUNNING), str(JobState.PAUSED)) or job.seq in allocs:
                sched.readmit_paused(spec, job.iterations, "recovered after a service restart; resumes from "
                                                           "its newest checkpoint")
                if job.hold_requested:
                    sched.hold(spec.id)
                n_run += 1
            else:
                self.gate.add(job.seq, spec)
                self._known.add(job.seq)
                n_pend += 1
        self.recovered = {"resumed": n_run, "requeued": n_pend, "killed_leftover_tasks": killed}
        self.record.append(sched.now, EventKind.DECISION, None, ms=0.0, recovered=self.recovered)

    @staticmethod
    def _spec(job: Job, tenant: Any) -> JobSpec:
        spec = JobSpec.model_validate(job.spec)
        return spec.model_copy(update={"id": sched_id(job.seq), "tenant": tenant.name, "weight": tenant.weight})

    # ---------------------------------------------------------------- turns
    def _admit_new(self, sched: Scheduler) -> None:
        """Take in every job stored as ``submitted`` not taken in yet. (Not a high-water mark on the
        id: on PostgreSQL a lower id can commit after a higher one.) A job stays ``submitted`` in the
        store only until the flush at the end of the poll that took it in."""
        rows = self.store.active_jobs((str(JobState.SUBMITTED),))
        for job, tenant in rows:
            if job.seq not in self._known:
                self.gate.add(job.seq, self._spec(job, tenant))
        self._known = {job.seq for job, _ in rows}

    def _requests(self, sched: Scheduler) -> None:
        reqs = self.store.requests()
        held_all = {seq for seq, cancel, hold in reqs if hold and not cancel}
        held: set[int] = set()
        for seq, cancel, hold in reqs:
            jid = sched_id(seq)
            if cancel:
                if jid in sched.jobs:
                    sched.cancel(jid, "cancelled by request")
                elif self.gate.drop(seq):
                    self._end_unadmitted(sched, seq, "cancelled by request")
            elif hold and jid in sched.jobs:
                if jid not in sched.held:
                    sched.hold(jid)
            elif hold:
                held.add(seq)
        for jid in list(sched.held):
            if seq_of(jid) not in held_all:
                sched.unhold(jid)
        self.gate.held = held

    def _end_unadmitted(self, sched: Scheduler, seq: int, reason: str) -> None:
        """A job cancelled before the loop admitted it: recorded as submitted and cancelled now."""
        jid = sched_id(seq)
        self.record.append(sched.now, EventKind.SUBMITTED, jid, tenant=None, weight=1.0, deadline=None, demand={})
        self.record.append(sched.now, EventKind.CANCELLED, jid, reason=reason)

    def _switch_policy(self, sched: Scheduler) -> None:
        want = self.store.policy()
        if want is not None and want != self.policy_spec:
            sched.set_policy(make_policy(want))
            self.policy_spec = want

    def _pending_reason(self, seq: int, reason: str) -> None:
        if self._written.get(seq) != reason:  # write a waiting job's reason only when it changes
            self._reasons[seq] = self._written[seq] = reason

    # ---------------------------------------------------------------- flush
    def flush(self) -> None:
        """Commit the record's new events, the job rows they change, pending reasons and the
        checkpoint index in one transaction."""
        with self._lock:
            events = self.record.drain()
            if self._seen:  # a job re-admitted after a restart was submitted once: keep one event
                keep = [e for e in events if not (e[1] == "submitted" and e[2] in self._seen)]
                self._seen.difference_update(e[2] for e in events if e[1] == "submitted")
                events = keep
            reasons, self._reasons = self._reasons, {}
            if not events and not reasons:
                return
            updates = job_updates(events, self.store.epoch)
            for seq, r in reasons.items():
                cols = updates.setdefault(seq, {})
                if cols.get("state") in (None, str(JobState.PENDING)):
                    cols.setdefault("pending_reason", r)
                    cols.setdefault("state", str(JobState.PENDING))
            ckpts = self._checkpoints(events)
            self.store.commit_turn(events, updates, ckpts)

    def _checkpoints(self, events: Sequence[tuple[float, str, str | None, dict[str, Any]]]) -> dict[int, tuple[int, str]]:
        sched = self.sched
        store = getattr(getattr(sched, "backend", None), "store", None) if sched is not None else None
        if store is None or not hasattr(store, "latest"):
            return {}
        out = {}
        for job in {e[2] for e in events if e[2] is not None and e[1] in ("progress", "paused", "finished")}:
            info = store.latest(job)
            if info is not None:
                out[seq_of(job)] = (info.iteration, str(info.path))
        return out

    def _snapshot(self, sched: Scheduler) -> None:
        """What the API's cluster / top / what-if read (in memory, replaced whole each turn)."""
        led = sched.ledger
        status = getattr(sched.backend, "status", {})
        running = {}
        for jid, jv in sched.running.items():
            st = status.get(jid)
            running[jid] = {
                "id": seq_of(jid), "name": jv.spec.id, "tenant": jv.spec.tenant, "nodes": list(jv.placement),
                "iterations": st.iterations if st is not None else jv.reported_iterations,
                "total": jv.spec.iterations, "iter_time": jv.iter_time,
                "metrics": dict(st.metrics) if st is not None else {},
            }
        self.snapshot = {
            "time": self.epoch_time(sched.now), "policy": self.policy_spec,
            "resources": list(led.names),
            "nodes": [{"name": n.name, "capacity": dict(zip(led.names, map(float, led.capacity[i]))),
                       "allocated": dict(zip(led.names, map(float, led.capacity[i] - led.free[i]))),
                       "free": dict(zip(led.names, map(float, led.free[i])))} for i, n in enumerate(sched.cluster.nodes)],
            "running": running,
            "pending": [seq_of(j) for j in sched.pending],
            "paused": [seq_of(j) for j in sched.paused],
            "held": [seq_of(j) for j in sched.held],
            "waiting_quota": self.gate.waiting(),
            "observed": observed(sched),
        }
