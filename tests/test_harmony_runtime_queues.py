"""Harmony runtime state: the subtask synchronizer, a node's CPU/network queues and its link budget."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cohabit.runtime.harmony.queues import NodeLink, NodeQueues, Ticket
from cohabit.runtime.harmony.sync import SubtaskSynchronizer, SyncError
from cohabit.runtime.subtask import SubtaskKind as K

CYCLE = (K.PULL, K.COMP, K.PUSH)


def test_sync_first_subtask_waits_for_every_worker_then_each_waits_for_all() -> None:
    s = SubtaskSynchronizer()
    s.join("a", 0, 2)
    assert s.release_seq("a", 0, 0, "pull") is None
    s.join("a", 1, 2)
    assert s.release_seq("a", 0, 0, "pull") == 0 == s.release_seq("a", 1, 0, "pull")
    s.finished("a", 0, 0)
    assert s.release_seq("a", 0, 1, "comp") is None  # rank 1 still pulling
    s.finished("a", 1, 0)
    assert s.release_seq("a", 0, 1, "comp") == 1


def test_sync_numbers_releases_globally_across_jobs() -> None:
    s = SubtaskSynchronizer()
    s.join("a", 0, 1)
    s.join("b", 0, 1)
    s.finished("b", 0, 0)
    s.finished("a", 0, 0)
    assert [(j, k, q) for j, k, q, _ in s.releases] == [("a", 0, 0), ("b", 0, 1), ("b", 1, 2), ("a", 1, 3)]


def test_sync_a_leaving_worker_no_longer_holds_the_job_back() -> None:
    s = SubtaskSynchronizer()
    for r in range(3):
        s.join("a", r, 3)
    s.finished("a", 0, 0)
    s.finished("a", 1, 0)
    assert s.release_seq("a", 0, 1, "comp") is None
    s.leave("a", 2)
    assert s.release_seq("a", 0, 1, "comp") is not None
    s.leave("a", 0)
    s.leave("a", 1)
    assert s.released("a") == 0  # forgotten once everyone left


def test_sync_protocol_errors_are_named() -> None:
    s = SubtaskSynchronizer()
    with pytest.raises(SyncError, match="rank must be in"):
        s.join("a", 2, 2)
    s.join("a", 0, 2)
    with pytest.raises(SyncError, match="joined twice"):
        s.join("a", 0, 2)
    with pytest.raises(SyncError, match="world 3"):
        s.join("a", 1, 3)
    s.join("a", 1, 2)
    s.release_seq("a", 0, 0, "pull")
    with pytest.raises(SyncError, match="same subtasks"):
        s.release_seq("a", 1, 0, "comp")
    with pytest.raises(SyncError, match="asks for subtask 1"):
        s.release_seq("a", 1, 1, "comp")
    with pytest.raises(SyncError, match="has not joined"):
        s.finished("b", 0, 0)


@settings(max_examples=60, deadline=None)
@given(world=st.integers(1, 4), steps=st.integers(1, 6), data=st.data())
def test_sync_never_releases_before_all_workers_finished(world: int, steps: int, data: st.DataObject) -> None:
    """Any interleaving of workers' finishes: subtask k is released only once every worker finished k-1,
    and releases carry increasing sequence numbers."""
    s = SubtaskSynchronizer()
    for r in range(world):
        s.join("j", r, world)
    done = [0] * world
    while min(done) < steps:
        r = data.draw(st.sampled_from([r for r in range(world) if done[r] < steps]))
        if s.release_seq("j", r, done[r], CYCLE[done[r] % 3].value) is None:
            assert done[r] > min(done)  # only a worker ahead of the slowest is held back
            # the slowest goes on instead (drawing again until it is picked made the search mostly
            # overruns: ~10 CPU s, minutes under load)
            r = done.index(min(done))
            assert s.release_seq("j", r, done[r], CYCLE[done[r] % 3].value) is not None
        s.finished("j", r, done[r])
        done[r] += 1
        assert s.released("j") <= min(done) + 1
    seqs = [q for _, _, q, _ in s.releases]
    assert seqs == sorted(seqs) and len(seqs) == steps + 1


def _ticket(job: str, kind: K, seq: int) -> Ticket:
    return Ticket(job, 0, kind, seq)


def test_queue_one_comp_at_a_time_in_release_order() -> None:
    q, now = NodeQueues(0), time.monotonic()
    a, b, c = _ticket("a", K.COMP, 3), _ticket("b", K.COMP, 1), _ticket("c", K.COMP, 2)
    for t in (a, b, c):
        q.enqueue(t)
    assert not q.try_start(a, now) and not q.try_start(c, now)  # b was released first
    assert q.try_start(b, now) and q.cpu is b
    assert not q.try_start(c, now)  # CPU busy
    q.finish(b)
    assert q.try_start(c, now) and not q.try_start(a, now)
    q.finish(c)
    assert q.try_start(a, now)
    assert q.order == [("b", "comp"), ("c", "comp"), ("a", "comp")]


def test_network_queue_primary_secondary_and_promotion() -> None:
    q, now = NodeQueues(0), time.monotonic()
    p, s2, w = _ticket("a", K.PULL, 1), _ticket("b", K.PUSH, 2), _ticket("c", K.PULL, 3)
    comp = _ticket("d", K.COMP, 4)
    for t in (p, s2, w, comp):
        q.enqueue(t)
    assert q.try_start(p, now) and p.role == "primary"
    assert q.try_start(s2, now) and s2.role == "secondary"
    assert not q.try_start(w, now)  # two COMM subtasks at most
    assert q.try_start(comp, now)  # the CPU queue is independent
    q.finish(p)
    assert (q.primary, s2.role) == (s2, "primary")
    assert q.try_start(w, now) and w.role == "secondary"


def test_queue_holds_for_an_expected_earlier_subtask_cpu_for_a_while_network_strictly() -> None:
    q = NodeQueues(0, hold_s=0.2)
    now = time.monotonic()
    q.expect("a", 0, 5, now)  # released, kind unknown: holds both queues
    late = _ticket("b", K.PULL, 6)
    q.enqueue(late)
    assert not q.try_start(late, now + 10) and q.hold(late, now) == float("inf")  # network order is strict
    q.learn_kind("a", 5, comm=False)  # a's subtask is a COMP: the network queue may go on
    assert q.try_start(late, now)
    q.expect("a", 0, 7, now)
    comp = _ticket("c", K.COMP, 8)
    q.enqueue(comp)
    assert not q.try_start(comp, now) and q.hold(comp, now) == pytest.approx(0.2)
    assert q.try_start(comp, now + 0.21)  # the CPU queue holds at most hold_s
    q.expect("a", 0, 9, now)
    q.forget("a", 0)  # the worker left: nothing to wait for
    assert q.hold(_ticket("d", K.PUSH, 10), now) == 0.0


class FakeClock:
    """``time.monotonic`` for :mod:`cohabit.runtime.harmony.queues` that moves only when told: a link's
    waits are then exact (on the real clock, a loaded machine stretched the gap between two calls past
    the tolerance)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    import cohabit.runtime.harmony.queues as queues

    fake = FakeClock()
    monkeypatch.setattr(queues, "time", fake)
    return fake


def test_link_delivers_its_rate_and_serves_the_primary_first(clock: FakeClock) -> None:
    link = NodeLink(rate=1e6)
    assert link.try_take(100_000, high=True) is None
    assert link.drain_time() == pytest.approx(0.1)
    clock.now += 0.03
    wait = link.try_take(1000, high=True)
    assert wait == pytest.approx(0.07)  # in debt: wait out the rest of the 0.1 s
    link.high_waiting = 1
    clock.now += 0.08
    assert link.try_take(1000, high=False) is not None  # a primary is waiting: the secondary yields
    link.high_waiting = 0
    assert link.try_take(1000, high=False) is None and link.bytes_low == 1000
    with pytest.raises(ValueError, match="rate"):
        NodeLink(0)


def test_secondary_waits_out_the_primarys_grace_between_its_draws(clock: FakeClock) -> None:
    link = NodeLink(rate=1e7, grace_s=0.05)
    assert link.try_take(10_000, high=True) is None  # 1 ms of bytes, then 50 ms of grace
    clock.now += 0.0005
    wait = link.try_take(1000, high=False)
    assert wait == pytest.approx(0.0505)  # 0.051 after the primary's draw
    clock.now += 0.049
    assert link.try_take(1000, high=False) == pytest.approx(0.0015)  # still inside the grace
    clock.now += 0.002  # the primary drew nothing for longer than the grace: the secondary goes
    assert link.try_take(1000, high=False) is None
    assert NodeLink(rate=1e7, grace_s=0.0).try_take(1, high=True) is None
    with pytest.raises(ValueError, match="grace_s"):
        NodeLink(1e6, grace_s=-1)
