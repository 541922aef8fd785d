"""The service's persistent store: SQLAlchemy 2 over SQLite (default) or PostgreSQL (by URL).

:class:`Store` opens the database, brings its schema to the newest Alembic revision
(:func:`migrate`, run programmatically at every start) and offers the few transactions the API
and the scheduler feed need. Everything is committed before it takes effect (write-ahead): the
API commits a submission, cancel or hold request before answering, and the feed
(:mod:`.feed`) commits an allocation before the backend launches anything.

Tokens are random 256-bit strings; only their SHA-256 digest is stored (a fast hash is enough for
secrets of that entropy; no password is ever stored). Tenants carry the weight and quotas the
scheduler uses (:mod:`.quota`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from importlib import resources
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, delete, event, func, insert, select, update
from sqlalchemy.sql.expression import ClauseElement
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from ..engine.record import EventKind, Record
from ..engine.state import TERMINAL, JobState
from ..spec.job import JobSpec
from .db import AllocationRow, CheckpointRow, EventRow, Job, Meta, PolicyRow, Tenant, Token

#: Job states in the store besides the engine's: ``submitted`` (stored, not yet seen by the loop).
ACTIVE_STATES = (str(JobState.SUBMITTED), str(JobState.PENDING), str(JobState.RUNNING), str(JobState.PAUSED))
TERMINAL_STATES = tuple(str(s) for s in TERMINAL)
ADMIN = "admin"


class StoreError(ValueError):
    """A request the store refuses (unknown tenant, duplicate name, ...)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "cbt_" + secrets.token_urlsafe(32)


#: ``PRAGMA synchronous`` levels a SQLite store may run with (``--sqlite-sync``).
SQLITE_SYNC = ("normal", "full")


def engine_for(url: str, sqlite_sync: str = "normal") -> Engine:
    """An engine for ``url``; SQLite files get WAL, a busy timeout and cross-thread use.

    ``sqlite_sync``: with WAL, ``normal`` writes each commit to the log before the commit returns
    but fsyncs only at checkpoints: durable across a crash of the process (``kill -9``), not of the
    machine (power loss can drop the last commits); ``full`` fsyncs the log at every commit (group
    commit: one fsync per group of submissions), durable across power loss too."""
    if sqlite_sync not in SQLITE_SYNC:
        raise ValueError(f"sqlite_sync: expected one of {', '.join(SQLITE_SYNC)}, got {sqlite_sync!r}")
    if url.startswith("sqlite"):
        eng = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=8,
                            max_overflow=16)

        @event.listens_for(eng, "connect")
        def _pragmas(dbapi_conn: Any, _rec: Any) -> None:  # noqa: ANN401 - DB-API connection
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={sqlite_sync.upper()}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()
        return eng
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return create_engine(url, pool_size=8, max_overflow=16, pool_pre_ping=True)


def migrate(engine: Engine, revision: str = "head") -> None:
    """Upgrade the schema to ``revision`` with the packaged Alembic migrations."""
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("cohabit.service") / "migrations"))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


@dataclass(frozen=True)
class Caller:
    """Who is calling: a tenant (``is_admin`` for the administrator)."""

    tenant_id: int
    name: str
    is_admin: bool


@dataclass
class _Submission:
    """One submit request waiting in the group commit queue; ``result`` or ``error`` once ``done``."""

    caller: Caller
    specs: list[JobSpec]
    idempotency_key: str | None
    done: bool = False
    result: tuple[list[dict[str, Any]], bool] | None = None
    error: Exception | None = None
    future: asyncio.Future | None = None  # submit_async's waiter

    def settle(self) -> None:
        """Hand the outcome to submit_async's waiter (on its event loop; a waiter gone: nothing)."""
        if self.future is not None and not self.future.done():
            if self.error is not None:
                self.future.set_exception(self.error)
            else:
                self.future.set_result(self.result)

    @property
    def keys(self) -> list[str | None]:
        k = self.idempotency_key
        return [f"{k}:{i}" for i in range(len(self.specs))] if k else [None] * len(self.specs)


def job_public(j: Any, tenant: str) -> dict[str, Any]:
    """A job (a :class:`Job` or a row of :data:`_PUBLIC_COLS`) as the API shows it."""
    return {
        "id": j.seq, "name": j.name, "tenant": tenant, "state": j.state, "pending_reason": j.pending_reason,
        "reason": j.reason, "submit_time": j.submit_time, "start_time": j.start_time, "end_time": j.end_time,
        "iterations": j.iterations, "total_iterations": j.total_iterations, "gpus": j.gpus, "runs": j.runs,
        "cancel_requested": j.cancel_requested, "held": j.hold_requested,
    }


#: The ``jobs`` columns :func:`job_public` reads.
_PUBLIC_COLS = (Job.seq, Job.name, Job.state, Job.pending_reason, Job.reason, Job.submit_time, Job.start_time,
                Job.end_time, Job.iterations, Job.total_iterations, Job.gpus, Job.runs, Job.cancel_requested,
                Job.hold_requested, Job.tenant_id)


def sched_id(seq: int) -> str:
    """The scheduler's job id (and checkpoint / log name) of job ``seq``."""
    return f"j{seq}"


def seq_of(job_id: str) -> int:
    return int(job_id[1:])


class Store:
    """The database of one service; safe to share between the API's threads and the loop's thread."""

    def __init__(self, url: str, *, sqlite_sync: str = "normal") -> None:
        self.url = url
        self.engine = engine_for(url, sqlite_sync)
        migrate(self.engine)
        self.session = sessionmaker(self.engine, expire_on_commit=False)
        # SQLite has one writer at a time; queueing writers on a lock here is much cheaper than
        # SQLite's busy handler (which sleeps with back-off). PostgreSQL writes concurrently.
        self._wlock = threading.Lock() if url.startswith("sqlite") else contextlib.nullcontext()
        self._callers: dict[str, Caller] = {}
        self._glock = threading.Lock()  # group commit of submissions (see submit)
        self._qlock = threading.Lock()
        self._queue: list[_Submission] = []
        self._aqueue: list[_Submission] = []  # submit_async: touched on the event loop's thread only
        self._adraining = False
        self.epoch = self._epoch()

    def close(self) -> None:
        self.engine.dispose()

    @contextlib.contextmanager
    def write(self) -> Iterator[Session]:
        """A write transaction (serialised in this process on SQLite), committed on exit."""
        with self._wlock, self.session.begin() as s:
            yield s

    def _epoch(self) -> float:
        """Wall-clock time of the service's first start: event times are seconds since it."""
        with self.write() as s:
            row = s.get(Meta, "epoch")
            if row is None:
                row = Meta(key="epoch", value=repr(time.time()))
                s.add(row)
            return float(row.value)

    # ------------------------------------------------------------------ tenants
    def ensure_admin(self) -> str | None:
        """Create the admin tenant and its token at first start; the clear token is returned once
        (None when an admin already exists)."""
        with self.write() as s:
            if s.scalar(select(Tenant).where(Tenant.name == ADMIN)) is not None:
                return None
            t = Tenant(name=ADMIN, is_admin=True, weight=1.0, created=time.time())
            s.add(t)
            s.flush()
            token = new_token()
            s.add(Token(tenant_id=t.id, digest=hash_token(token), created=time.time()))
            return token

    def create_tenant(self, name: str, *, weight: float = 1.0, max_gpus: float | None = None,
                      max_running: int | None = None) -> str:
        """A new tenant and its first token (returned in clear, once)."""
        try:
            with self.write() as s:
                t = Tenant(name=name, is_admin=False, weight=weight, max_gpus=max_gpus, max_running=max_running,
                           created=time.time())
                s.add(t)
                s.flush()
                token = new_token()
                s.add(Token(tenant_id=t.id, digest=hash_token(token), created=time.time()))
                return token
        except IntegrityError:
            raise StoreError(f"tenant {name!r} already exists") from None

    def update_tenant(self, name: str, **fields: Any) -> dict[str, Any]:
        with self.write() as s:
            t = s.scalar(select(Tenant).where(Tenant.name == name))
            if t is None:
                raise StoreError(f"unknown tenant {name!r}")
            for k, v in fields.items():
                setattr(t, k, v)
            return tenant_public(t)

    def tenants(self) -> list[dict[str, Any]]:
        with self.session() as s:
            return [tenant_public(t) for t in s.scalars(select(Tenant).order_by(Tenant.id))]

    def cached_caller(self, token: str) -> Caller | None:
        """The tenant of ``token`` if it is a known token already looked up (no database access)."""
        return self._callers.get(hash_token(token))

    def caller(self, token: str) -> Caller | None:
        """The tenant of ``token`` (tokens are never changed or removed, so known ones are cached)."""
        hit = self.cached_caller(token)
        if hit is not None:
            return hit
        digest = hash_token(token)
        with self.session() as s:
            row = s.execute(select(Tenant).join(Token, Token.tenant_id == Tenant.id)
                            .where(Token.digest == digest)).scalar_one_or_none()
            if row is None:
                return None
            who = self._callers[digest] = Caller(row.id, row.name, row.is_admin)
            return who

    # --------------------------------------------------------------------- jobs
    def submit(self, caller: Caller, specs: Sequence[JobSpec], idempotency_key: str | None = None,
               ) -> tuple[list[dict[str, Any]], bool]:
        """Store ``specs`` as submitted jobs of ``caller``, committed before this returns. With an
        ``idempotency_key`` already used by this tenant, the jobs of that first submission are
        returned instead (``created`` False).

        Group commit: concurrent submissions queue up; the thread that takes the group lock commits
        every queued one in one transaction (:meth:`_commit_group`) and the others find theirs done,
        so N concurrent submits cost one transaction instead of N serialised ones."""
        req = _Submission(caller, list(specs), idempotency_key)
        with self._qlock:
            self._queue.append(req)
        with self._glock:
            if not req.done:
                with self._qlock:
                    group, self._queue = self._queue, []
                self._commit_group(group)
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result

    async def submit_async(self, caller: Caller, specs: Sequence[JobSpec], idempotency_key: str | None = None,
                           ) -> tuple[list[dict[str, Any]], bool]:
        """:meth:`submit` for an asyncio event loop (the API's): the same group commit, committed
        before this returns, but a submission waits as a future, not as a thread blocked on the
        group lock. The loop's submissions queue up while one group is being committed in a worker
        thread and go together as the next group: one thread hop per group instead of one per
        request (that hop and the threads waiting on the lock were most of the commit's CPU)."""
        req = _Submission(caller, list(specs), idempotency_key)
        loop = asyncio.get_running_loop()
        req.future = loop.create_future()
        self._aqueue.append(req)
        if not self._adraining:
            self._adraining = True
            loop.create_task(self._drain_async())
        return await req.future

    async def _drain_async(self) -> None:
        """Commit the queued groups of :meth:`submit_async` one after the other."""
        group: list[_Submission] = []
        try:
            while self._aqueue:
                group, self._aqueue = self._aqueue, []
                await asyncio.to_thread(self._commit_locked, group)
                for req in group:
                    req.settle()
        except BaseException:  # cancelled (the server stops): nobody waits for a result never given
            for req in group + self._aqueue:
                if not req.done:
                    req.error = RuntimeError("the service is stopping; the submission may not be stored")
                req.settle()
            self._aqueue = []
            raise
        finally:
            self._adraining = False

    def _commit_locked(self, group: list[_Submission]) -> None:
        with self._glock:  # serialised with submit()'s groups
            self._commit_group(group)

    def _commit_group(self, group: list[_Submission]) -> None:
        """Commit ``group`` in one transaction; a submission whose key is already stored (or used
        earlier in the group) gets that first submission's jobs. The group is first inserted
        without looking for stored keys (the common case: none is); if a stored key makes that
        transaction fail, the group is retried looking its keys up first, and should that fail too
        (a key stored by another process in between), each submission alone."""
        try:
            try:
                self._insert_group(group, lookup=False)
            except IntegrityError:
                self._insert_group(group, lookup=True)
        except IntegrityError:
            for req in group:
                try:
                    self._insert_group([req], lookup=True)
                except Exception as exc:  # noqa: BLE001 - handed to the submitting thread
                    req.error = exc
        except Exception as exc:  # noqa: BLE001 - handed to every submitting thread
            for req in group:
                req.error = exc
        finally:  # even if interrupted: no submitter may wait for, or return, a result never committed
            for req in group:
                if req.error is None and req.result is None:
                    req.error = RuntimeError("the group commit was interrupted; nothing was stored")
                req.done = True

    def _insert_group(self, group: list[_Submission], *, lookup: bool) -> None:
        """Insert ``group`` in one transaction; with ``lookup``, keys already stored are replays."""
        now = time.time()
        keyed = {(r.caller.tenant_id, k) for r in group for k in r.keys if k is not None}
        with self.write() as s:
            stored: dict[tuple[int, str], Job] = {}
            if keyed and lookup:
                tenants = {t for t, _ in keyed}
                for j in s.scalars(select(Job).where(Job.tenant_id.in_(tenants),
                                                     Job.idempotency_key.in_([k for _, k in keyed]))):
                    stored[(j.tenant_id, j.idempotency_key)] = j  # type: ignore[index]
            fresh: list[tuple[_Submission, list[SimpleNamespace]]] = []
            replays: list[_Submission] = []
            values: list[dict[str, Any]] = []
            for req in group:
                key0 = req.keys[0] if req.keys else None
                if key0 is not None and (req.caller.tenant_id, key0) in stored:
                    replays.append(req)
                    continue
                rows = [SimpleNamespace(tenant_id=req.caller.tenant_id, name=spec.id, spec=spec.model_dump(mode="json"),
                                        state=str(JobState.SUBMITTED), pending_reason="Submitted", reason="",
                                        submit_time=now, start_time=None, end_time=None, iterations=0.0,
                                        total_iterations=spec.iterations, gpus=spec.num_gpus, idempotency_key=key,
                                        cancel_requested=False, hold_requested=False, runs=0)
                        for spec, key in zip(req.specs, req.keys)]
                values += [vars(r) for r in rows]
                for row, key in zip(rows, req.keys):
                    if key is not None:
                        stored[(req.caller.tenant_id, key)] = row
                fresh.append((req, rows))
            if values:  # one Core INSERT ... RETURNING over the group (no ORM unit of work: its cost was
                # most of a group's), ids handed back in the order of the rows
                seqs = s.connection().execute(insert(Job.__table__).returning(Job.__table__.c.seq,
                                                                              sort_by_parameter_order=True),
                                              values).scalars().all()
                for v, seq in zip(values, seqs, strict=True):
                    v["seq"] = seq
        # committed: only now may the submitters see their jobs (rows keep their values: no expiry on commit)
        for req, rows in fresh:
            req.result = ([job_public(r, req.caller.name) for r in rows], True)
        for req in replays:
            rows = [stored[(req.caller.tenant_id, k)] for k in req.keys if (req.caller.tenant_id, k) in stored]
            req.result = (sorted((job_public(r, req.caller.name) for r in rows), key=lambda j: j["id"]), False)

    def list_jobs(self, caller: Caller, *, state: str | None = None, tenant: str | None = None,
                  name: str | None = None, after: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        """Jobs in submission order after job id ``after`` (cursor pagination); a tenant sees its own."""
        q = select(*_PUBLIC_COLS, Tenant.name.label("tenant")).join(Tenant, Tenant.id == Job.tenant_id).where(
            Job.seq > after)  # the columns a list shows, not whole rows (no JSON spec to decode)
        if not caller.is_admin:
            q = q.where(Job.tenant_id == caller.tenant_id)
        elif tenant is not None:
            q = q.where(Tenant.name == tenant)
        if state is not None:
            q = q.where(Job.state == state)
        if name is not None:
            q = q.where(Job.name == name)
        with self.session() as s:
            return [job_public(r, r.tenant) for r in s.execute(q.order_by(Job.seq).limit(limit))]

    def get_job(self, caller: Caller, seq: int) -> dict[str, Any] | None:
        """One job, or None when it does not exist or belongs to another tenant (the same answer)."""
        with self.session() as s:
            row = s.execute(select(Job, Tenant.name).join(Tenant, Tenant.id == Job.tenant_id)
                            .where(Job.seq == seq)).first()
            if row is None or (not caller.is_admin and row[0].tenant_id != caller.tenant_id):
                return None
            j, tname = row
            out = job_public(j, tname)
            out["spec"] = j.spec
            alloc = s.get(AllocationRow, seq)
            out["placement"] = None if alloc is None else {"nodes": alloc.nodes, "alloc": alloc.alloc}
            ck = s.get(CheckpointRow, seq)
            out["checkpoint"] = None if ck is None else {"iteration": ck.iteration, "time": ck.time}
            if j.state in (str(JobState.PENDING), str(JobState.SUBMITTED)):
                out["queue_position"] = 1 + s.scalar(select(func.count()).select_from(Job).where(
                    Job.state.in_((str(JobState.PENDING), str(JobState.SUBMITTED))), Job.seq < seq))
            else:
                out["queue_position"] = None
            evs = s.scalars(select(EventRow).where(EventRow.job == sched_id(seq))
                            .order_by(EventRow.id.desc()).limit(20)).all()
            out["events"] = [{"time": e.time, "kind": e.kind, "data": e.data} for e in reversed(evs)]
            return out

    def request(self, caller: Caller, seq: int, *, cancel: bool = False, hold: bool | None = None,
                ) -> dict[str, Any] | None:
        """Commit a cancel or hold/release request (the loop carries it out); None if not the caller's."""
        with self.write() as s:
            j = s.get(Job, seq)
            if j is None or (not caller.is_admin and j.tenant_id != caller.tenant_id):
                return None
            if j.state not in ACTIVE_STATES:
                raise StoreError(f"job {seq} already ended ({j.state})")
            if cancel:
                j.cancel_requested = True
            if hold is not None:
                j.hold_requested = hold
            tname = s.get(Tenant, j.tenant_id).name  # type: ignore[union-attr]
            return job_public(j, tname)

    def queue(self, caller: Caller, limit: int = 1000) -> list[dict[str, Any]]:
        """Pending and held jobs in queue order, then running and paused ones."""
        out = []
        for st in (JobState.SUBMITTED, JobState.PENDING, JobState.PAUSED, JobState.RUNNING):
            out += self.list_jobs(caller, state=str(st), limit=limit)
        return sorted(out, key=lambda j: (j["state"] != str(JobState.RUNNING), j["id"]))

    # ---------------------------------------------------------- the loop's side
    def active_jobs(self, states: Sequence[str] = ACTIVE_STATES) -> list[tuple[Job, Tenant]]:
        """Jobs in ``states`` (default: every job not ended), with their tenant, in queue order."""
        with self.session() as s:
            q = (select(Job, Tenant).join(Tenant, Tenant.id == Job.tenant_id)
                 .where(Job.state.in_(tuple(states))).order_by(Job.seq))
            return [(j, t) for j, t in s.execute(q)]

    def requests(self) -> list[tuple[int, bool, bool]]:
        """(seq, cancel, hold) of every active job with a pending cancel or a hold flag."""
        with self.session() as s:
            q = select(Job.seq, Job.cancel_requested, Job.hold_requested).where(
                Job.state.in_(ACTIVE_STATES), (Job.cancel_requested | Job.hold_requested))
            return [(a, b, c) for a, b, c in s.execute(q)]

    def submitted_ids(self, jobs: Sequence[str]) -> set[str]:
        """Which of these scheduler job ids already have their ``submitted`` event stored."""
        out: set[str] = set()
        with self.session() as s:
            for i in range(0, len(jobs), 500):
                q = select(EventRow.job).where(EventRow.kind == str(EventKind.SUBMITTED),
                                               EventRow.job.in_(jobs[i:i + 500])).distinct()
                out.update(s.scalars(q))
        return out

    def tenant_limits(self) -> dict[int, Tenant]:
        with self.session() as s:
            return {t.id: t for t in s.scalars(select(Tenant))}

    def commit_turn(self, events: Iterable[tuple[float, str, str | None, dict[str, Any]]],
                    jobs: dict[int, dict[str, Any]], checkpoints: dict[int, tuple[int, str]] | None = None) -> None:
        """One transaction: append ``events`` (service time, kind, job, data), update job rows
        (``jobs[seq]`` = columns to set) and the checkpoint index."""
        now = time.time()
        rows = [{"time": t, "kind": k, "job": j, "data": d} for t, k, j, d in events]
        same_cols: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        with self.write() as s:
            if rows:
                s.execute(insert(EventRow), rows)
            for seq, cols in jobs.items():
                if any(isinstance(v, ClauseElement) for v in cols.values()):  # e.g. coalesce(start_time, t)
                    s.execute(update(Job).where(Job.seq == seq).values(**cols))
                else:  # the rest in executemany batches, one per set of columns
                    same_cols.setdefault(tuple(sorted(cols)), []).append({"seq": seq, **cols})
            for batch in same_cols.values():
                s.execute(update(Job), batch)  # ORM bulk UPDATE by primary key
            released = [seq for seq, cols in jobs.items()
                        if cols.get("state") in TERMINAL_STATES or cols.get("state") == str(JobState.PAUSED)]
            if released:
                s.execute(delete(AllocationRow).where(AllocationRow.job_seq.in_(released)))
            for seq, (it, path) in (checkpoints or {}).items():
                row = s.get(CheckpointRow, seq)
                if row is None:
                    s.add(CheckpointRow(job_seq=seq, iteration=it, path=path, time=now))
                else:
                    row.iteration, row.path, row.time = it, path, now

    def write_allocation(self, seq: int, nodes: list[int], alloc: dict[str, float], since: float,
                         from_checkpoint: bool) -> None:
        """Commit where ``seq`` is about to run, and mark it running (before the launch)."""
        with self.write() as s:
            row = s.get(AllocationRow, seq)
            if row is None:
                s.add(AllocationRow(job_seq=seq, nodes=nodes, alloc=alloc, pids=[], since=since,
                                    from_checkpoint=from_checkpoint))
            else:
                row.nodes, row.alloc, row.pids, row.since, row.from_checkpoint = nodes, alloc, [], since, from_checkpoint
            s.execute(update(Job).where(Job.seq == seq).values(state=str(JobState.RUNNING), pending_reason="",
                                                               runs=Job.runs + 1))

    def set_pids(self, seq: int, pids: list[int]) -> None:
        with self.write() as s:
            s.execute(update(AllocationRow).where(AllocationRow.job_seq == seq).values(pids=pids))

    def drop_allocation(self, seq: int) -> list[int]:
        """Forget where ``seq`` ran (it is being halted); the pids it had."""
        with self.write() as s:
            row = s.get(AllocationRow, seq)
            if row is None:
                return []
            pids = list(row.pids)
            s.delete(row)
            return pids

    def allocations(self) -> dict[int, dict[str, Any]]:
        with self.session() as s:
            return {a.job_seq: {"nodes": a.nodes, "alloc": a.alloc, "pids": a.pids}
                    for a in s.scalars(select(AllocationRow))}

    # ------------------------------------------------------------------- policy
    def policy(self) -> str | None:
        with self.session() as s:
            row = s.get(PolicyRow, 1)
            return None if row is None else row.spec

    def set_policy(self, spec: str) -> None:
        with self.write() as s:
            row = s.get(PolicyRow, 1)
            if row is None:
                s.add(PolicyRow(id=1, spec=spec, updated=time.time()))
            else:
                row.spec, row.updated = spec, time.time()

    # ------------------------------------------------------------------- record
    def record(self) -> Record:
        """Every stored event as a :class:`Record` (the metrics' input)."""
        rec = Record()
        with self.session() as s:
            for e in s.scalars(select(EventRow).order_by(EventRow.id)).yield_per(5000):
                rec.append(e.time, EventKind(e.kind), e.job, **e.data)
        return rec

    def count_jobs(self) -> int:
        with self.session() as s:
            return int(s.scalar(select(func.count()).select_from(Job)) or 0)


def tenant_public(t: Tenant) -> dict[str, Any]:
    return {"name": t.name, "is_admin": t.is_admin, "weight": t.weight, "max_gpus": t.max_gpus,
            "max_running": t.max_running}
