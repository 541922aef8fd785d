"""FIFO's quiet rounds (issue 18, speed21c): without backfill a round after one that planned nothing returns at
once while no room was given back, nothing is paused and the head of the queue is the same job
(``spread.QuietRounds``). These tests run each skipped round in full on the same view (it must plan nothing) and
compare whole runs with and without the shortcut."""

from __future__ import annotations

import random

import pytest

from cohabit.engine.view import ClusterView
from cohabit.policies import FIFO
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster, trace_job


def _workload(seed: int) -> list[TraceJob]:
    """60 jobs of 0.5 to 8 GPUs (some of two tenants, some arriving together) on 2 x 4 GPUs: the queue fills,
    blocks behind a large head and empties."""
    rng = random.Random(seed)
    out = []
    t = 0.0
    for i in range(60):
        t += rng.choice([0.0, rng.uniform(0, 400)])
        gpus: float = rng.choice([0.5, 1, 1, 2, 4, 8])
        dur = rng.uniform(50, 2000)
        spec = simple_job(f"j{i}", gpus, submit_time=t, tenant=rng.choice(["a", "b"]), iterations=int(dur))
        out.append(TraceJob(spec, JobTruth(iterations=int(dur), duration=dur, ref_workers=max(int(gpus), 1))))
    return out


class CheckedFIFO(FIFO):
    """FIFO that runs every round it skips as quiet in full on the same view and counts them."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped = 0

    def decide(self, view: ClusterView) -> list:  # type: ignore[override]
        quiet = self._quiet
        if quiet is not None and (view.pending or view.paused) and quiet.still(view):
            self.skipped += 1
            assert self._decide(view) == [], view.now  # (a full round on the same, unchanged view)
        return super().decide(view)


@pytest.mark.parametrize("seed", range(4))
def test_a_skipped_round_would_have_planned_nothing_and_runs_are_unchanged(seed: int) -> None:
    """Fails if the shortcut fires where a full round would start or resume a job (e.g. the room or the head
    check dropped from ``QuietRounds.still``), or if a run with it differs from one without it."""
    checked = CheckedFIFO()
    with_quiet = simulate(_workload(seed), small_cluster(2, 4), checked)
    plain = FIFO()
    plain._quiet = None  # every round in full
    without = simulate(_workload(seed), small_cluster(2, 4), plain)
    assert checked.skipped > 0  # the shortcut was taken (and checked)
    assert fingerprint(with_quiet.result.record, with_quiet.metrics) == fingerprint(without.result.record,
                                                                                     without.metrics)


def test_a_release_ends_the_quiet() -> None:
    """4 GPUs: A (4 GPUs) runs, B (4 GPUs) waits behind it, C arrives (a quiet round), then A ends and B starts
    at once: fails if a round after a release is skipped."""
    jobs = [trace_job("A", 4, 100, 0), trace_job("B", 4, 10, 1), trace_job("C", 1, 10, 2)]
    pol = CheckedFIFO()
    out = simulate(jobs, small_cluster(1, 4), pol, strict=True)
    starts = {e.job: e.time for e in out.result.record if e.kind == "started"}
    assert starts == pytest.approx({"A": 0.0, "B": 100.0, "C": 110.0})
    assert pol.skipped >= 1


def test_backfill_takes_no_quiet_rounds() -> None:
    """With backfill a new arrival behind a blocked head may start: no round is skipped."""
    assert FIFO(backfill=True)._quiet is None
