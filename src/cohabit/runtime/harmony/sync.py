"""Harmony's subtask synchronizer (Lee et al., §IV-A, Fig. 7 steps 1-3).

Every worker of a parameter-server job runs the same sequence of subtasks
(PULL, COMP, PUSH, PULL, ...), numbered 0, 1, 2, ... per worker. Subtask
``k`` of a job is *released* only when every worker of the job has finished
subtask ``k - 1``; subtask 0 is released once every worker has joined. Each
release takes the next number of one global sequence shared by all jobs, and
the node queues (:mod:`.queues`) order waiting subtasks by that number, so
co-located jobs interleave in the same order on every node.

A worker that leaves (it finished, was paused, moved or died) stops counting:
the job's later subtasks wait only for the workers still in, so a departure
never deadlocks the others. Not thread-safe on its own: the server calls it
under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class SyncError(ValueError):
    """A worker broke the protocol (unknown job, rank out of range, subtask out of order)."""


@dataclass
class _JobSteps:
    world: int
    joined: set[int] = field(default_factory=set)
    left: set[int] = field(default_factory=set)
    done: dict[int, int] = field(default_factory=dict)  # rank -> subtasks finished
    released: int = 0  # subtasks 0 .. released-1 are released
    seq: dict[int, int] = field(default_factory=dict)  # released subtask -> global sequence number
    kinds: dict[int, str] = field(default_factory=dict)  # subtask -> kind, from the first worker that asks

    @property
    def members(self) -> set[int]:
        return set(range(self.world)) - self.left


class SubtaskSynchronizer:
    """Releases each job's subtask ``k`` when all its workers finished ``k - 1``; numbers releases globally."""

    def __init__(self) -> None:
        self._jobs: dict[str, _JobSteps] = {}
        self._next_seq = 0
        self.releases: list[tuple[str, int, int, tuple[int, ...]]] = []
        """(job, subtask, sequence number, member ranks) of every release not yet taken by the server."""

    def join(self, job: str, rank: int, world: int) -> None:
        """Worker ``rank`` of ``world`` workers joins ``job`` (``job`` names one incarnation of the job)."""
        if world < 1 or not 0 <= rank < world:
            raise SyncError(f"job {job!r}: rank must be in [0, {world}) with world >= 1, got rank {rank}")
        st = self._jobs.setdefault(job, _JobSteps(world))
        if st.world != world:
            raise SyncError(f"job {job!r}: rank {rank} says world {world}, earlier workers said {st.world}")
        if rank in st.joined:
            raise SyncError(f"job {job!r}: rank {rank} joined twice")
        st.joined.add(rank)
        st.done[rank] = 0
        self._advance(job, st)

    def leave(self, job: str, rank: int) -> None:
        """Worker ``rank`` leaves: it no longer holds back the job's other workers."""
        st = self._jobs.get(job)
        if st is None:
            return
        st.left.add(rank)
        st.done.pop(rank, None)
        if not st.members:
            del self._jobs[job]
            return
        self._advance(job, st)

    def release_seq(self, job: str, rank: int, step: int, kind: str) -> int | None:
        """The global sequence number of ``job``'s subtask ``step`` if released, else None."""
        st = self._get(job, rank)
        if step != st.done.get(rank):
            raise SyncError(f"job {job!r} rank {rank}: asks for subtask {step} but has finished {st.done.get(rank)}")
        expected = st.kinds.setdefault(step, kind)
        if expected != kind:
            raise SyncError(f"job {job!r} rank {rank}: subtask {step} is {kind!r} here but {expected!r} "
                            f"on another worker (workers of a job must run the same subtasks)")
        return st.seq.get(step)

    def finished(self, job: str, rank: int, step: int) -> None:
        """Worker ``rank`` finished subtask ``step``."""
        st = self._get(job, rank)
        if step != st.done[rank] or step >= st.released:
            raise SyncError(f"job {job!r} rank {rank}: finished subtask {step} out of order")
        st.done[rank] = step + 1
        st.seq.pop(step - 1, None)
        st.kinds.pop(step - 1, None)
        self._advance(job, st)

    def kind_of(self, job: str, step: int) -> str | None:
        """The kind of ``job``'s subtask ``step`` once one of its workers asked for it."""
        st = self._jobs.get(job)
        return st.kinds.get(step) if st is not None else None

    def released(self, job: str) -> int:
        """Number of subtasks of ``job`` released so far (0 for an unknown job)."""
        st = self._jobs.get(job)
        return st.released if st is not None else 0

    def _get(self, job: str, rank: int) -> _JobSteps:
        st = self._jobs.get(job)
        if st is None or rank not in st.joined or rank in st.left:
            raise SyncError(f"job {job!r}: rank {rank} has not joined (or has left)")
        return st

    def _advance(self, job: str, st: _JobSteps) -> None:
        members = st.members
        if not members <= st.joined:
            return  # subtask 0 waits for every worker
        while all(st.done[r] >= st.released for r in members):
            st.seq[st.released] = self._next_seq
            self.releases.append((job, st.released, self._next_seq, tuple(sorted(members))))
            self._next_seq += 1
            st.released += 1
