"""The scheduler loop fed live by a JobSource (the hook the service uses): submissions, cancels,
holds and a policy switch at given times, on the simulator, with hand-computed outcomes."""

from __future__ import annotations

import math

import pytest

from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies import FIFO, make_policy
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig

from conftest import small_cluster, trace_job


class Script:
    """A JobSource running ``steps`` (time, fn(sched)) in order; stops at ``end``."""

    def __init__(self, steps, end: float) -> None:
        self.steps = sorted(steps, key=lambda s: s[0])
        self.end = end
        self.polls = 0

    def next_poll(self, now: float) -> float:
        return self.steps[0][0] if self.steps else self.end

    def poll(self, sched) -> bool:
        self.polls += 1
        while self.steps and self.steps[0][0] <= sched.now + 1e-9:
            self.steps.pop(0)[1](sched)
        return sched.now < self.end


def run(jobs, steps, end=200.0, policy=None):
    backend = SimBackend(jobs, SimConfig(checkpoint_s=0.0, restore_s=0.0))
    sched = Scheduler(small_cluster(1, 1), policy or FIFO(), backend, strict=True)
    src = Script(steps, end)
    result = sched.run([], source=src)
    return sched, result, src


def times(result, kind):
    return {e.job: e.time for e in result.record if e.kind == kind}


def test_submit_now_and_cancel_running_job_hand_computed() -> None:
    # one GPU. t=0 A(100 s) submitted, t=5 B(10 s), t=10 cancel A -> B runs 10-20.
    a, b = trace_job("A", 1, 100), trace_job("B", 1, 10)
    sched, res, src = run([a, b], [(0, lambda s: s.submit_now(a.spec)), (5, lambda s: s.submit_now(b.spec)),
                                   (10, lambda s: s.cancel("A"))], end=50)
    assert times(res, EventKind.SUBMITTED) == {"A": 0, "B": 5}
    assert times(res, EventKind.CANCELLED) == {"A": 10}
    assert times(res, EventKind.STARTED) == {"A": 0, "B": 10}
    assert times(res, EventKind.FINISHED) == pytest.approx({"B": 20})
    assert sched.jobs["A"].state is JobState.CANCELLED
    assert res.end_time == pytest.approx(50)  # the loop ran on, idle, until the source stopped it


def test_cancel_pending_and_unknown_and_ended() -> None:
    a, b = trace_job("A", 1, 10), trace_job("B", 1, 10)
    out = {}
    sched, res, _ = run([a, b], [(0, lambda s: (s.submit_now(a.spec), s.submit_now(b.spec))),
                                 (1, lambda s: out.setdefault("b", s.cancel("B"))),
                                 (2, lambda s: out.setdefault("x", s.cancel("nope"))),
                                 (20, lambda s: out.setdefault("a", s.cancel("A")))], end=30)
    assert out["b"] is None and times(res, EventKind.CANCELLED) == {"B": 1}
    assert "unknown job" in out["x"] and "already ended" in out["a"]
    assert times(res, EventKind.FINISHED) == pytest.approx({"A": 10})


def test_hold_keeps_job_from_the_policy_until_released() -> None:
    # A(10) runs 0-10; B(10) submitted at 1 and held; released at 30 -> runs 30-40.
    a, b = trace_job("A", 1, 10), trace_job("B", 1, 10)
    sched, res, _ = run([a, b], [(0, lambda s: s.submit_now(a.spec)),
                                 (1, lambda s: (s.submit_now(b.spec), s.hold("B"))),
                                 (30, lambda s: s.unhold("B"))], end=60)
    assert times(res, EventKind.STARTED) == {"A": 0, "B": 30}
    assert times(res, EventKind.FINISHED) == pytest.approx({"A": 10, "B": 40})


def test_hold_running_job_pauses_it_and_release_resumes() -> None:
    a = trace_job("A", 1, 100)
    sched, res, _ = run([a], [(0, lambda s: s.submit_now(a.spec)), (10, lambda s: s.hold("A")),
                              (50, lambda s: s.unhold("A"))], end=200)
    assert times(res, EventKind.PAUSED) == {"A": 10} and times(res, EventKind.RESUMED) == {"A": 50}
    assert times(res, EventKind.FINISHED) == pytest.approx({"A": 140})  # 10 s done + 90 s after 50


def test_readmit_paused_resumes_with_known_progress() -> None:
    a = trace_job("A", 1, 100)
    sched, res, _ = run([a], [(0, lambda s: s.readmit_paused(a.spec, 40, "recovered"))], end=200)
    kinds = [e.kind for e in res.record if e.job == "A"]
    assert kinds[:3] == [EventKind.SUBMITTED, EventKind.PAUSED, EventKind.RESUMED]
    assert sched.jobs["A"].state is JobState.FINISHED


def test_set_policy_switches_live_and_new_policy_decides() -> None:
    # C(10) runs 0-10 (history for the model); A(100) starts at 10. At 11 the policy switches
    # FIFO -> SRTF (margin 0); B(10) arrives at 20: SRTF expects 10 s from history against A's 89 s
    # left and preempts A. Without the switch FIFO never pauses A.
    def jobs():
        return trace_job("C", 1, 10), trace_job("A", 1, 100), trace_job("B", 1, 10)

    def steps(c, a, b, switch):
        out = [(0, lambda s: s.submit_now(c.spec)), (10, lambda s: s.submit_now(a.spec)),
               (20, lambda s: s.submit_now(b.spec))]
        if switch:
            out.append((11, lambda s: s.set_policy(make_policy("srtf:preempt_margin=0"))))
        return out

    c, a, b = jobs()
    sched, res, _ = run([c, a, b], steps(c, a, b, True), end=300)
    assert sched.policy.name.startswith("srtf")
    assert times(res, EventKind.PAUSED) == {"A": 20}
    assert times(res, EventKind.FINISHED) == pytest.approx({"C": 10, "B": 30, "A": 120})
    c, a, b = jobs()
    _, res, _ = run([c, a, b], steps(c, a, b, False), end=300)
    assert times(res, EventKind.PAUSED) == {}


def test_without_source_the_loop_still_ends_by_itself() -> None:
    a = trace_job("A", 1, 10)
    backend = SimBackend([a], SimConfig(checkpoint_s=0.0, restore_s=0.0))
    res = Scheduler(small_cluster(1, 1), FIFO(), backend).run([a.spec])
    assert res.end_time == pytest.approx(10) and math.isfinite(res.end_time)
