"""The service store: migrations equal the models, tokens are stored hashed, idempotent submits,
tenant isolation at the store level, and the record sink's event flow."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from cohabit.engine.record import EventKind
from cohabit.service.db import Base
from cohabit.service.feed import StoreRecord, job_updates
from cohabit.service.store import Caller, Store, hash_token
from cohabit.spec.yamlio import loads_jobs

from service_helpers import db_params, db_url, mlr_jobs


@pytest.fixture(params=db_params())
def store(request, tmp_path):
    url = db_url(request.param, tmp_path) or f"sqlite:///{tmp_path / 's.db'}"
    s = Store(url)
    yield s
    s.close()


def test_migrations_produce_exactly_the_models_schema(store) -> None:
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_reopening_runs_no_migration_twice_and_keeps_epoch(store) -> None:
    again = Store(store.url)
    assert again.epoch == store.epoch
    again.close()


@pytest.mark.parametrize("sync, level", [("normal", 1), ("full", 2)])
def test_sqlite_store_runs_wal_with_the_chosen_synchronous_level(tmp_path, sync, level) -> None:
    s = Store(f"sqlite:///{tmp_path / 's.db'}", sqlite_sync=sync)
    try:
        with s.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == level
    finally:
        s.close()
    with pytest.raises(ValueError, match="sqlite_sync: expected one of normal, full, got 'off'"):
        Store(f"sqlite:///{tmp_path / 't.db'}", sqlite_sync="off")


def test_tokens_are_stored_as_digests_only(store) -> None:
    admin = store.ensure_admin()
    assert admin and store.ensure_admin() is None  # once
    tok = store.create_tenant("alice", max_running=2)
    with store.engine.connect() as c:
        dump = repr(c.exec_driver_sql("SELECT * FROM tokens").fetchall())
    assert tok not in dump and admin not in dump
    assert hash_token(tok) in dump
    who = store.caller(tok)
    assert who is not None and who.name == "alice" and not who.is_admin
    assert store.caller(tok + "x") is None


def test_idempotent_submit_returns_the_first_jobs(store) -> None:
    store.ensure_admin()
    alice = store.caller(store.create_tenant("alice"))
    bob = store.caller(store.create_tenant("bob"))
    specs = loads_jobs(mlr_jobs(3, 100))
    first, created = store.submit(alice, specs, "key-1")
    again, created2 = store.submit(alice, specs, "key-1")
    assert created and not created2 and [j["id"] for j in first] == [j["id"] for j in again]
    other, created3 = store.submit(bob, specs, "key-1")  # keys are per tenant
    assert created3 and {j["id"] for j in other}.isdisjoint(j["id"] for j in first)
    assert store.count_jobs() == 6
    # tenant isolation: bob cannot see or touch alice's job; the answer is "no such job"
    assert store.get_job(bob, first[0]["id"]) is None
    assert store.request(bob, first[0]["id"], cancel=True) is None
    assert [j["id"] for j in store.list_jobs(bob)] == [j["id"] for j in other]


def test_concurrent_submits_share_one_transaction_and_keep_idempotency(store) -> None:
    """Group commit: submissions that queue while one is being committed are committed together
    in one transaction; a key used twice in a group, or already stored, makes one set of jobs."""
    import threading

    from sqlalchemy import event

    store.ensure_admin()
    alice = store.caller(store.create_tenant("alice"))
    stored_before, _ = store.submit(alice, loads_jobs(mlr_jobs(1, 100)), "old")
    commits = []
    event.listen(store.engine, "commit", lambda conn: commits.append(1))
    results: dict[int, tuple[list, bool]] = {}
    keys = [f"k{i // 2}" for i in range(20)] + ["old"]  # each key twice, and one already stored

    def one(i: int) -> None:
        results[i] = store.submit(alice, loads_jobs(mlr_jobs(2, 100)), keys[i])

    with store._glock:  # a commit in progress: the submissions below queue up behind it
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(keys))]
        for t in threads:
            t.start()
        while len(store._queue) < len(keys):
            threading.Event().wait(0.01)
    for t in threads:
        t.join(30)
    assert len(commits) <= 2, f"{len(keys)} queued submissions took {len(commits)} commits"
    by_key: dict[str, set[tuple[int, ...]]] = {}
    for i, (jobs, _created) in results.items():
        assert len(jobs) == (1 if keys[i] == "old" else 2)
        by_key.setdefault(keys[i], set()).add(tuple(j["id"] for j in jobs))
    assert all(len(v) == 1 for v in by_key.values())  # both sends of a key got the same jobs
    assert by_key["old"] == {tuple(j["id"] for j in stored_before)}
    assert sorted(created for i, (_, created) in results.items() if keys[i] != "old").count(True) == 10
    assert store.count_jobs() == 1 + 10 * 2


def test_async_submits_share_one_transaction_and_keep_idempotency(store) -> None:
    """submit_async (the API's path): submissions made while the loop is busy go as one group, in
    one transaction; duplicate and already-stored keys answer with the first submission's jobs."""
    import asyncio

    from sqlalchemy import event

    store.ensure_admin()
    alice = store.caller(store.create_tenant("alice"))
    stored_before, _ = store.submit(alice, loads_jobs(mlr_jobs(1, 100)), "old")
    commits = []
    event.listen(store.engine, "commit", lambda conn: commits.append(1))
    keys = [f"k{i // 2}" for i in range(20)] + ["old"]
    specs = [loads_jobs(mlr_jobs(2, 100)) for _ in keys]

    async def main() -> list[tuple[list, bool]]:
        return await asyncio.gather(*(store.submit_async(alice, sp, k) for sp, k in zip(specs, keys)))

    results = asyncio.run(main())
    assert len(commits) <= 2, f"{len(keys)} concurrent submissions took {len(commits)} commits"
    by_key: dict[str, set[tuple[int, ...]]] = {}
    for k, (jobs, _created) in zip(keys, results):
        by_key.setdefault(k, set()).add(tuple(j["id"] for j in jobs))
    assert all(len(v) == 1 for v in by_key.values())
    assert by_key["old"] == {tuple(j["id"] for j in stored_before)}
    assert [c for k, (_, c) in zip(keys, results) if k != "old"].count(True) == 10
    assert store.count_jobs() == 1 + 10 * 2


def test_async_submit_hands_a_commit_failure_to_every_waiter(store) -> None:
    import asyncio

    from cohabit.service.store import Caller

    store.ensure_admin()
    ghost = Caller(987654, "ghost", False)  # no such tenant: the foreign key refuses the insert
    specs = loads_jobs(mlr_jobs(1, 100))

    async def main() -> list:
        return await asyncio.gather(*(store.submit_async(ghost, specs, f"g{i}") for i in range(3)),
                                    return_exceptions=True)

    if store.url.startswith("sqlite"):
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    out = asyncio.run(main())
    assert all(isinstance(x, Exception) for x in out), out
    assert store.count_jobs() == 0


def test_store_record_drains_each_event_once_and_keeps_time_order() -> None:
    rec = StoreRecord(offset=100.0)
    rec.append(1.0, EventKind.SUBMITTED, "j1")
    rec.append(2.0, EventKind.STARTED, "j1", alloc={}, nodes=[0])
    assert [(t, k) for t, k, _, _ in rec.drain()] == [(101.0, "submitted"), (102.0, "started")]
    assert rec.drain() == []
    rec.append(3.0, EventKind.FINISHED, "j1")
    assert [k for _, k, _, _ in rec.drain()] == ["finished"]
    with pytest.raises(ValueError):
        rec.append(0.5, EventKind.PROGRESS, "j1", iterations=1, iter_time=1)  # still time-ordered


def test_job_updates_follow_the_state_machine_of_the_events() -> None:
    evs = [(1.0, "submitted", "j3", {}), (2.0, "started", "j3", {}), (3.0, "progress", "j3", {"iterations": 7}),
           (4.0, "paused", "j3", {"reason": "srtf"}), (5.0, "cancelled", "j4", {"reason": "user"})]
    up = job_updates(evs, epoch=1000.0)
    assert up[3]["state"] == "paused" and up[3]["iterations"] == 7.0 and up[3]["pending_reason"] == "srtf"
    assert up[4] == {"state": "cancelled", "reason": "user", "end_time": 1005.0, "pending_reason": ""}


def test_journal_stores_task_pids_once_known_and_when_they_change(tmp_path) -> None:
    """A Ray actor's pid is known only after its start (a negative handle before), and a restarted
    task has a new process: the allocation row follows, so recovery can kill the right ones."""
    from types import SimpleNamespace

    from cohabit.service.feed import JournaledBackend, StoreFeed

    s = Store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        s.ensure_admin()
        jobs, _ = s.submit(Caller(1, "admin", True), loads_jobs(mlr_jobs(1, 10)))
        seq = jobs[0]["id"]
        s.write_allocation(seq, [0], {"cpu": 1.0}, 0.0, False)
        st = SimpleNamespace(pids=(-1,))
        inner = SimpleNamespace(status={f"j{seq}": st}, advance=lambda until: (until, []))
        feed = StoreFeed(s, policy_spec="fifo")
        feed.sched = SimpleNamespace(running={f"j{seq}": None})
        jb = JournaledBackend(inner, s, feed)
        jb.advance(1.0)
        assert s.allocations()[seq]["pids"] == []  # not known yet: nothing stored
        st.pids = (4242,)
        jb.advance(2.0)
        assert s.allocations()[seq]["pids"] == [4242]
        st.pids = (4343,)  # the task was restarted
        jb.advance(3.0)
        assert s.allocations()[seq]["pids"] == [4343]
    finally:
        s.close()


def test_kill_leftovers_kills_only_cohabit_tasks_by_pid() -> None:
    import subprocess
    import sys

    from cohabit.service.feed import kill_leftovers

    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "cohabit.runtime.worker"])
    # a Ray task actor on this machine: Ray titles the process ray::TaskActor[.method]
    actor = subprocess.Popen(["ray::TaskActor.run", "-c", "import time; time.sleep(60)"], executable=sys.executable)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert kill_leftovers([ours.pid, actor.pid, other.pid, 999999999, -3]) == 2
        assert ours.wait(10) == -9 and actor.wait(10) == -9
        assert other.poll() is None  # not a cohabit task: left alone
    finally:
        for p in (ours, actor, other):
            if p.poll() is None:
                p.kill()
                p.wait()
