"""The action path's shared node lists (speed19a): a start or resume hands the record one list per distinct
placement (``ActionHandlers._node_list``), which the record takes by identity (``Record.append_alloc``).

Every ``started``/``resumed`` row must still read back the placement it was made on, whatever the memo holds."""

from __future__ import annotations

from cohabit.engine import actions as A
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind, Record
from cohabit.policies.base import BasePolicy
from cohabit.sim.backend import SimBackend
from cohabit.sim.runner import config_for
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.job import JobSpec, TaskGroup


class _Shuffle(BasePolicy):
    """Starts, pauses and resumes each job in turn on placements from a fixed list (tuples and lists)."""

    name = "shuffle"
    PLACES = [(0, 0), (1,), [1, 0], (0, 0), (1,), [1, 0], (0,), (1, 1)]

    def __init__(self) -> None:
        self.turn = 0

    def decide(self, view):  # type: ignore[no-untyped-def]
        self.turn += 1
        shuffle = self.turn <= 12  # (then every job runs to its end where it is)
        plan: list[A.Action] = [A.Pause(j.id) for j in view.running.values()] if shuffle else []
        i = self.turn
        for j in [*view.pending.values(), *view.paused.values()]:
            n = j.spec.workers.count
            place = next(p for k in range(len(self.PLACES)) if len(p := self.PLACES[(i + k) % len(self.PLACES)]) == n)
            i += 1
            plan.append((A.Start if j.id in view.pending else A.Resume)(j.id, place))  # type: ignore[arg-type]
            if shuffle:
                break  # (one job per turn: the room is always there)
            plan[-1] = (A.Start if j.id in view.pending else A.Resume)(j.id, tuple(range(n)))  # type: ignore[arg-type]
        return plan

    def next_decision_time(self) -> float | None:
        return float(self.turn) * 5.0 if self.turn <= 12 else None


def _jobs() -> list[TraceJob]:
    out = []
    for i, workers in enumerate((1, 2, 2, 1, 2)):
        spec = JobSpec(id=f"j{i}", model="vgg16", architecture="allreduce", submit_time=float(i),
                       workers=TaskGroup(count=workers, demand=Resources(gpu=1.0, cpu=1, mem_gb=1)))
        out.append(TraceJob(spec, JobTruth(iterations=400, duration=60.0, ref_workers=workers)))
    return out


def test_started_and_resumed_rows_read_back_their_placements() -> None:
    cluster = ClusterSpec.homogeneous("c", 2, Resources(gpu=4, cpu=8, mem_gb=64))
    jobs = _jobs()
    placed: list[tuple[str, list[int]]] = []
    sched = Scheduler(cluster, _Shuffle(), SimBackend(jobs, config_for(cluster)), strict=True)
    real = sched._place

    def spy(job, placement, kind, **kw):  # type: ignore[no-untyped-def]
        placed.append((job.id, list(placement)))
        return real(job, placement, kind, **kw)

    sched._place = spy  # type: ignore[method-assign]
    sched._handlers[A.Start] = sched._start
    result = sched.run([j.spec for j in jobs])
    rows = [(e.job, e.data["nodes"]) for e in result.record if e.kind in (EventKind.STARTED, EventKind.RESUMED)]
    assert len(rows) > 10 and any(e.kind is EventKind.RESUMED for e in result.record)
    assert rows == placed
    # a tuple placement's rows hold the scheduler's one list of it (the record took it by identity)
    memo = sched._node_lists
    held = [(e.data["nodes"], tuple(e.data["nodes"])) for e in result.record
            if e.kind in (EventKind.STARTED, EventKind.RESUMED)]
    assert len(memo) >= 3
    assert all(nodes is memo[key] for nodes, key in held if key in memo)
    assert sum(key in memo for _, key in held) > len(memo)


class _Counting(Record):
    """A record that counts the contents it hashes (``_share`` past the identity check) for start/resume rows."""

    __slots__ = ("hashed", "_in_alloc")

    def __init__(self) -> None:
        super().__init__()
        self.hashed = 0
        self._in_alloc = False

    def append_alloc(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self._in_alloc = True
        try:
            return super().append_alloc(*args, **kwargs)
        finally:
            self._in_alloc = False

    def _share(self, v, copy=False):  # type: ignore[no-untyped-def]
        if self._in_alloc:
            self.hashed += 1
        return super()._share(v, copy)


def test_start_and_resume_rows_hash_no_contents_once_their_lists_and_dicts_are_kept() -> None:
    """The scheduler hands the record its own instances (``Record.shared``) of each placement's node list and each
    allocation's dict, also where an equal dict came first in another row (each job's demand in its ``submitted``
    row): after the first row of each, the record takes them by identity."""
    cluster = ClusterSpec.homogeneous("c", 2, Resources(gpu=4, cpu=8, mem_gb=64))
    jobs = _jobs()
    rec = _Counting()
    sched = Scheduler(cluster, _Shuffle(), SimBackend(jobs, config_for(cluster)), strict=True, record=rec)
    result = sched.run([j.spec for j in jobs])
    rows = [e for e in result.record if e.kind in (EventKind.STARTED, EventKind.RESUMED)]
    submitted = {e.job: e.data["demand"] for e in result.record if e.kind is EventKind.SUBMITTED}
    assert len(rows) > 10
    assert any(e.data["alloc"] == submitted[e.job] for e in rows)  # (the equal dict stored first)
    assert rec.hashed == 0
