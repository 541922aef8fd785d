"""A backend that loses a job's node reports EVICTED: the job is paused at its checkpoint and placed again."""

from __future__ import annotations

import pytest

from cohabit.engine.backend import BackendEvent, BackendEventKind as K
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies import FIFO

from conftest import small_cluster, trace_job
from test_engine_hand_cases import ScriptedBackend


class RecordingBackend(ScriptedBackend):
    def __init__(self, events) -> None:
        super().__init__(events)
        self.calls: list[tuple[str, str, bool]] = []
        self.sched: Scheduler | None = None
        self.iterations_at_launch: list[float] = []

    def launch(self, spec, alloc, now, *, from_checkpoint):
        self.calls.append(("launch", spec.id, from_checkpoint))
        assert self.sched is not None
        self.iterations_at_launch.append(self.sched.jobs[spec.id].reported_iterations)

    def halt(self, job, now, *, checkpoint):
        self.calls.append(("halt", job, checkpoint))


@pytest.mark.parametrize("backfill", [False, True])
def test_evicted_job_is_paused_without_a_halt_and_fifo_resumes_it_first(backfill) -> None:
    backend = RecordingBackend([
        BackendEvent(1.0, K.PROGRESS, "A", {"iterations": 1.0, "iter_time": 1.0}),
        BackendEvent(4.0, K.EVICTED, "A", {"iterations": 2.0, "reason": "Ray node lost"}),
        BackendEvent(20.0, K.FINISHED, "A", {"iterations": 10.0}),
        BackendEvent(30.0, K.FINISHED, "B", {"iterations": 10.0}),
    ])
    # one GPU: B (submitted at 2) waits behind A; after the eviction A goes back to the head of the queue
    jobs = [trace_job("A", 1, 10, 0).spec, trace_job("B", 1, 10, 2).spec]
    backend.sched = Scheduler(small_cluster(1, 1), FIFO(backfill=backfill), backend, strict=True)
    result = backend.sched.run(jobs)
    assert backend.calls == [("launch", "A", False), ("launch", "A", True), ("launch", "B", False)]
    paused = [e for e in result.record if e.kind == EventKind.PAUSED]
    assert [(e.job, e.time, e.data["reason"]) for e in paused] == [("A", 4.0, "Ray node lost")]
    a = result.jobs["A"]
    assert a.state == "finished" and a.preemptions == 1
    # progress rolled back to the checkpoint at the eviction (extrapolating 1 it/s would say 4)
    assert backend.iterations_at_launch[:2] == [0.0, pytest.approx(2.0)]
    resumed = [e for e in result.record if e.kind == EventKind.RESUMED]
    assert [(e.job, e.time) for e in resumed] == [("A", 4.0)]
    assert result.jobs["B"].state == "finished"
