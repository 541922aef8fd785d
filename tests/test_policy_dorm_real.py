"""Dorm on real processes (LocalBackend): an arrival shrinks a running application and its
departure grows it back — two checkpoint-kill-resume round trips that keep the model's state.

Both turns are driven by conditions, not times (a :class:`~cohabit.engine.live.JobSource`): mlr
arrives once mlp has reported training on two ranks, and leaves (cancelled) once mlp has reported
training on one rank past the checkpoint it was shrunk at. With fixed times and lengths, a loaded
machine broke the story both ways: mlp's torch import and gloo set-up outlasted a 6 s arrival (the
first halt saved iteration 0), and mlr's cold start let mlp finish on one rank before mlr ended.
"""

from __future__ import annotations

from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies import make_policy
from cohabit.policies.dorm import DormApp
from cohabit.runtime.runner import run_local
from cohabit.spec import Resources
from cohabit.spec.job import JobSpec

from runtime_helpers import cluster, no_orphans  # noqa: F401

#: mlp's reported iterations (on two ranks) before mlr arrives
TRAINED_BEFORE_ARRIVAL = 20
#: mlp's length: on one rank it ran ~860 iterations/s (quiet), on two ~65 (a gloo all-reduce per step); it
#: is at a few hundred when mlr leaves, so the rest runs on two ranks (~10 s quiet)
MLP_ITERATIONS = 1500


def halts_of(sched: Scheduler, job: str) -> list[int]:
    """Checkpoint iterations of ``job``'s halts so far (the backend's timings)."""
    return [t["checkpoint_iteration"] for t in sched.backend.timings  # type: ignore[attr-defined]
            if t["kind"] == "halt" and t["job"] == job]


class ArriveThenLeave:
    """Submits ``visitor`` once ``host`` has reported ``TRAINED_BEFORE_ARRIVAL`` iterations; cancels it
    once ``host``, halted once for it, has reported progress past that halt's checkpoint (it trained
    after its resume); stops the run when every job ended."""

    def __init__(self, visitor: JobSpec, host: str) -> None:
        self.visitor, self.host = visitor, host
        self.arrived_at: float | None = None
        self.left_at: float | None = None

    def next_poll(self, now: float) -> float:
        return now + 0.1

    def poll(self, sched: Scheduler) -> bool:
        host = sched.jobs[self.host]
        if self.arrived_at is None:
            if host.reported_iterations >= TRAINED_BEFORE_ARRIVAL:
                sched.submit_now(self.visitor)
                self.arrived_at = sched.now
        elif self.left_at is None:
            halts = halts_of(sched, self.host)
            if len(halts) == 1 and host.state is JobState.RUNNING and host.reported_iterations > halts[0]:
                assert sched.cancel(self.visitor.id, "leaves: the test saw mlp train on one rank") is None
                self.left_at = sched.now
        return not all(j.state.terminal for j in sched.jobs.values())


def test_dorm_resizes_a_real_application_twice_and_it_resumes_where_it_was(tmp_path) -> None:
    elastic = DormApp(id="mlp", executor="cohabit", demand=Resources(cpu=1, mem_gb=0.5), n_min=1, n_max=2,
                      cmd={"name": "torch-mlp", "n_samples": 512}, iterations=MLP_ITERATIONS).to_spec()
    visitor = DormApp(id="mlr", executor="cohabit", demand=Resources(cpu=1, mem_gb=0.5), n_max=1,
                      cmd={"name": "mlr"}, iterations=10**7).to_spec()  # (never finishes: it is cancelled)
    source = ArriveThenLeave(visitor, "mlp")
    out = run_local([elastic], cluster(2), make_policy("dorm"), root=tmp_path, strict=True,
                    report_interval=0.1, source=source)
    rec = out.result.record
    story = [(round(e.time, 2), str(e.kind), e.job) for e in rec
             if e.job is not None and e.kind not in (EventKind.PROGRESS, EventKind.USED)]
    assert source.arrived_at is not None and source.left_at is not None, story
    assert not out.result.unfinished, story
    assert {k: str(v.state) for k, v in out.result.jobs.items()} == {"mlp": "finished", "mlr": "cancelled"}, story
    sizes = [len(e.data["nodes"]) for e in rec if e.job == "mlp" and e.kind in (EventKind.STARTED,
                                                                                  EventKind.RESIZED)]
    assert sizes == [2, 1, 2], story  # alone: n_max; shares with mlr: 1; mlr gone: back to 2
    assert out.status["mlp"].iterations == MLP_ITERATIONS
    halts = [t["checkpoint_iteration"] for t in out.timings if t["kind"] == "halt" and t["job"] == "mlp"]
    restored = [t["restored_iteration"] for t in out.timings if t["kind"] == "start" and t["job"] == "mlp"
                and t["rank"] == 0 and t["restored_iteration"] is not None]
    # each kill saved later progress (the first: at least what mlp had reported when mlr arrived)
    assert len(halts) == 2 and TRAINED_BEFORE_ARRIVAL <= halts[0] < halts[1] < MLP_ITERATIONS, (halts, story)
    assert restored[-2:] == halts, (restored, halts)  # and each resume started from exactly what was saved
