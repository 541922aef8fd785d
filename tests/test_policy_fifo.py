"""FIFO and FIFO with backfilling: the queue head blocks, backfill skips it, an evicted job resumes first."""

from __future__ import annotations

import pytest

from cohabit.engine.backend import BackendEvent, BackendEventKind as K
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies import FIFO
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate

from conftest import small_cluster, trace_job
from test_engine_hand_cases import ScriptedBackend

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)


def starts(outcome) -> dict[str, float]:
    return {e.job: e.time for e in outcome.result.record if e.kind == EventKind.STARTED}


def _blocked_head():
    # 4 GPUs: A (2 GPUs, 100 s) at 0; B (4 GPUs, 10 s) at 1 cannot fit until A ends; C (1 GPU, 10 s) at 2 fits now
    return [trace_job("A", 2, 100, 0), trace_job("B", 4, 10, 1), trace_job("C", 1, 10, 2)]


def test_the_head_of_the_queue_blocks_those_behind_it() -> None:
    out = simulate(_blocked_head(), small_cluster(1, 4), FIFO(), config=NO_COST, strict=True)
    assert starts(out) == pytest.approx({"A": 0, "B": 100, "C": 110})


def test_backfill_starts_a_later_job_that_fits_past_a_blocked_head() -> None:
    out = simulate(_blocked_head(), small_cluster(1, 4), FIFO(backfill=True), config=NO_COST, strict=True)
    assert starts(out) == pytest.approx({"A": 0, "C": 2, "B": 100})


def test_evicted_job_is_resumed_from_its_checkpoint_before_pending_jobs() -> None:
    """One GPU: A is evicted at 4 while B (submitted at 2) waits; FIFO resumes A (a Resume of a paused
    job, from its checkpoint), not B."""
    for backfill in (False, True):
        backend = ScriptedBackend([
            BackendEvent(1.0, K.PROGRESS, "A", {"iterations": 1.0, "iter_time": 1.0}),
            BackendEvent(4.0, K.EVICTED, "A", {"iterations": 2.0, "reason": "node lost"}),
            BackendEvent(20.0, K.FINISHED, "A", {"iterations": 10.0}),
            BackendEvent(30.0, K.FINISHED, "B", {"iterations": 10.0}),
        ])
        sched = Scheduler(small_cluster(1, 1), FIFO(backfill=backfill), backend, strict=True)
        result = sched.run([trace_job("A", 1, 10, 0).spec, trace_job("B", 1, 10, 2).spec])
        assert [(e.job, e.time) for e in result.record if e.kind == EventKind.RESUMED] == [("A", 4.0)]
        assert [(e.job, e.time) for e in result.record if e.kind == EventKind.STARTED] == [("A", 0.0), ("B", 20.0)]
        assert all(j.state == "finished" for j in result.jobs.values())


def test_an_evicted_job_is_resumed_when_nothing_else_waits() -> None:
    backend = ScriptedBackend([
        BackendEvent(1.0, K.PROGRESS, "A", {"iterations": 1.0, "iter_time": 1.0}),
        BackendEvent(4.0, K.EVICTED, "A", {"iterations": 2.0, "reason": "node lost"}),
        BackendEvent(20.0, K.FINISHED, "A", {"iterations": 10.0}),
    ])
    result = Scheduler(small_cluster(1, 1), FIFO(), backend, strict=True).run([trace_job("A", 1, 10, 0).spec])
    assert [(e.job, e.time) for e in result.record if e.kind == EventKind.RESUMED] == [("A", 4.0)]
    assert result.jobs["A"].state == "finished"
