"""Dorm on real processes (LocalBackend): an arrival shrinks a running application and its
departure grows it back — two checkpoint-kill-resume round trips that keep the model's state.

Every turn is driven by a condition, not a time or a length (a :class:`~cohabit.engine.live.JobSource`):
mlr arrives once mlp has reported training on two ranks; mlr leaves (cancelled) once mlp has reported
training on one rank past the checkpoint it was shrunk at; mlp is cancelled once it has reported
training on two ranks again past the checkpoint it was grown at. Neither job could finish first. With
fixed times and lengths a loaded machine broke the story each way: mlp's torch import and gloo set-up
outlasted a 6 s arrival (the first halt saved iteration 0); mlr's cold start let mlp finish on one
rank before mlr ended; and two ranks in step (a gloo all-reduce per iteration) ran so slowly that a
job finishing there took minutes.
"""

from __future__ import annotations

from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies import make_policy
from cohabit.policies.dorm import DormApp
from cohabit.runtime.runner import run_local
from cohabit.spec import Resources

from runtime_helpers import cluster, no_orphans  # noqa: F401

#: mlp's reported iterations (on two ranks) before mlr arrives
TRAINED_BEFORE_ARRIVAL = 20
#: longer than any test run: both jobs end by cancellation, once the story is told
ENDLESS = 10**7


def halts_of(sched: Scheduler, job: str) -> list[int]:
    """Checkpoint iterations of ``job``'s halts so far (the backend's timings)."""
    return [t["checkpoint_iteration"] for t in sched.backend.timings  # type: ignore[attr-defined]
            if t["kind"] == "halt" and t["job"] == job]


class Story:
    """Drives the run: submits ``mlr`` once ``mlp`` reported ``TRAINED_BEFORE_ARRIVAL`` iterations; after
    each of mlp's halts (the shrink, the growth) waits until mlp runs again and reported past that halt's
    checkpoint, then cancels mlr (first) or mlp (second); stops the run when every job ended."""

    def __init__(self, mlr: DormApp) -> None:
        self.mlr = mlr.to_spec()
        self.turns: list[float] = []  # scheduler times of: mlr's arrival, mlr's cancel, mlp's cancel

    def next_poll(self, now: float) -> float:
        return now + 0.1

    def poll(self, sched: Scheduler) -> bool:
        mlp = sched.jobs["mlp"]
        halts = halts_of(sched, "mlp")
        if not self.turns:
            if mlp.reported_iterations >= TRAINED_BEFORE_ARRIVAL:
                sched.submit_now(self.mlr)
                self.turns.append(sched.now)
        elif len(self.turns) == len(halts) < 3 and mlp.state is JobState.RUNNING and \
                mlp.reported_iterations > halts[-1]:
            gone = "mlr" if len(halts) == 1 else "mlp"
            assert sched.cancel(gone, f"the test saw mlp train after its halt {len(halts)}") is None
            self.turns.append(sched.now)
        return not all(j.state.terminal for j in sched.jobs.values())


def test_dorm_resizes_a_real_application_twice_and_it_resumes_where_it_was(tmp_path) -> None:
    mlp = DormApp(id="mlp", executor="cohabit", demand=Resources(cpu=1, mem_gb=0.5), n_min=1, n_max=2,
                  cmd={"name": "torch-mlp", "n_samples": 512}, iterations=ENDLESS).to_spec()
    story = Story(DormApp(id="mlr", executor="cohabit", demand=Resources(cpu=1, mem_gb=0.5), n_max=1,
                          cmd={"name": "mlr"}, iterations=ENDLESS))
    out = run_local([mlp], cluster(2), make_policy("dorm"), root=tmp_path, strict=True, report_interval=0.1,
                    source=story)
    rec = out.result.record
    told = [(round(e.time, 2), str(e.kind), e.job) for e in rec
            if e.job is not None and e.kind not in (EventKind.PROGRESS, EventKind.USED)]
    assert len(story.turns) == 3 and not out.result.unfinished, told
    assert {k: str(v.state) for k, v in out.result.jobs.items()} == {"mlp": "cancelled", "mlr": "cancelled"}, told
    sizes = [len(e.data["nodes"]) for e in rec if e.job == "mlp" and e.kind in (EventKind.STARTED,
                                                                                  EventKind.RESIZED)]
    assert sizes == [2, 1, 2], told  # alone: n_max; shares with mlr: 1; mlr gone: back to 2
    halts = [t["checkpoint_iteration"] for t in out.timings if t["kind"] == "halt" and t["job"] == "mlp"]
    restored = [t["restored_iteration"] for t in out.timings if t["kind"] == "start" and t["job"] == "mlp"
                and t["rank"] == 0 and t["restored_iteration"] is not None]
    # each resize's kill saved later progress (the first: at least what mlp had reported when mlr
    # arrived); the third halt is the cancel's
    assert len(halts) == 3 and TRAINED_BEFORE_ARRIVAL <= halts[0] < halts[1] < halts[2], (halts, told)
    assert restored == halts[:2], (restored, halts)  # each resume started from exactly what was saved
