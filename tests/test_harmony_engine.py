"""Pipelined job groups in the engine and simulator: Colocate(mode="pipelined"/"naive") semantics,
the ledger holding machines for a group, telemetry, and the physics seen through a run."""

from __future__ import annotations

import pytest

from cohabit.engine import actions as A
from cohabit.engine.ledger import AllocationError
from cohabit.engine.loop import ActionError, Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies.base import BasePolicy
from cohabit.sim.backend import SimBackend
from cohabit.sim.harmony_workload import harmony_cluster, ps_job
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import PSTruth, TraceJob

CFG = SimConfig(checkpoint_s=0, restore_s=0)


def job(id: str, c1: float, net: float, iters: int = 100, submit: float = 0.0, m: int = 8,
        input_gb: float = 0.1, model_gb: float = 0.1) -> TraceJob:
    t = PSTruth(t_cpu1=c1, t_pull=net / 2, t_push=net / 2, input_gb=input_gb, model_gb=model_gb)
    return ps_job(id, t, iters, n_machines=m, submit=submit)


class Script(BasePolicy):
    """Plays ``steps[i]`` at the i-th decision (a callable of the view, or a list of actions)."""

    name = "script"

    def __init__(self, *steps: object) -> None:
        self.steps = list(steps)
        self.calls = 0

    def decide(self, view):  # type: ignore[override]
        step = self.steps[self.calls] if self.calls < len(self.steps) else []
        self.calls += 1
        return step(view) if callable(step) else list(step)


def run(jobs: list[TraceJob], policy: BasePolicy, machines: int = 8, strict: bool = True) -> Scheduler:
    sched = Scheduler(harmony_cluster(machines), policy, SimBackend(jobs, CFG), strict=strict)
    sched.result = sched.run([j.spec for j in jobs])  # type: ignore[attr-defined]
    return sched


def events(sched: Scheduler, job: str) -> list[tuple[EventKind, dict]]:
    return [(e.kind, e.data) for e in sched.record if e.job == job]


def test_a_group_holds_its_machines_and_members_share_them() -> None:
    seen = {}

    def check(view):  # second decision: both run in one group on nodes 0-3
        seen["free"] = view.free[:4].copy()
        seen["alloc"] = (view.allocation_of("a"), view.allocation_of("b"))
        return []

    jobs = [job("a", 80, 2, iters=50), job("b", 16, 10, iters=200)]
    sched = run(jobs, Script([A.Colocate(("a", "b"), (0, 1, 2, 3), mode="pipelined")], check))
    assert (seen["free"] == 0).all()  # the group took machines 0-3 whole
    a, b = seen["alloc"]
    assert a.group == b.group == ("pipelined", (0, 1, 2, 3))
    assert a.total["cpu"] == 32 and b.total["cpu"] == 0  # the first member owns, the other joins
    # when "a" finishes, "b" inherits the machines; when "b" finishes, they are free again
    kinds = [k for k, _ in events(sched, "b")]
    assert EventKind.REALLOCATED in kinds
    assert sched.ledger.groups == {} and (sched.ledger.free == sched.ledger.capacity).all()
    assert sched.result.jobs["a"].state == "finished" and sched.result.jobs["b"].state == "finished"


def test_members_report_compute_and_communication_time() -> None:
    got = {}

    class Watch(Script):
        def on_progress(self, j, view):  # noqa: ANN001
            got.setdefault(j.id, (j.comp_time, j.comm_time, j.iter_time))

    jobs = [job("a", 80, 2, iters=50), job("b", 16, 10, iters=50)]
    run(jobs, Watch([A.Colocate(("a", "b"), (0, 1, 2, 3, 4, 5, 6, 7), mode="pipelined")]))
    assert got["a"][:2] == pytest.approx((10.0, 2.0))  # T_cpu = c1 / m (Eq. 2), T_net
    assert got["b"][:2] == pytest.approx((2.0, 10.0))
    assert got["a"][2] == pytest.approx(12.0)  # complementary: sum T_cpu = sum T_net = 12


def test_overlapping_groups_are_refused_and_nothing_changes() -> None:
    jobs = [job("a", 80, 2), job("b", 16, 10)]
    bad = [A.Colocate(("a",), (0, 1), mode="pipelined"), A.Colocate(("b",), (1, 2), mode="pipelined")]
    with pytest.raises(AllocationError, match="node 1 is held"):
        run(jobs, Script(bad))
    sched = run(jobs, Script(bad), strict=False)
    rejected = [e for e in sched.record if e.kind is EventKind.ACTION_REJECTED]
    assert len(rejected) == 1 and "node 1 is held" in rejected[0].data["reason"]


def test_ordinary_starts_and_migrations_cannot_touch_a_group() -> None:
    jobs = [job("a", 80, 2), job("b", 16, 10)]
    with pytest.raises(AllocationError, match="held by the pipelined group"):
        run(jobs, Script([A.Colocate(("a",), (0, 1), mode="pipelined"), A.Start("b", (1, 1))]))
    with pytest.raises(ActionError, match="move it with Colocate"):
        run(jobs, Script([A.Colocate(("a",), (0, 1), mode="pipelined")], [A.Migrate("a", (2, 3, 2))]))


def test_colocate_moves_running_jobs_and_resizes() -> None:
    jobs = [job("a", 80, 2, iters=400), job("b", 16, 10, iters=400)]
    steps = [
        [A.Colocate(("a", "b"), (0, 1), mode="pipelined")],
        [A.Colocate(("a",), (2, 3), mode="pipelined"),  # same DoP elsewhere: a migration
         A.Colocate(("b",), (4, 5, 6), mode="pipelined")],  # larger DoP: a resize
    ]
    sched = run(jobs, Script(*steps))
    ka = [k for k, _ in events(sched, "a")]
    kb = [k for k, _ in events(sched, "b")]
    assert EventKind.MIGRATED in ka and EventKind.RESIZED in kb
    assert sched.result.jobs["a"].migrations == 1 and sched.result.jobs["b"].resizes == 1
    moved = next(d for k, d in events(sched, "b") if k is EventKind.RESIZED)
    assert moved["group_nodes"] == [4, 5, 6] and moved["mode"] == "pipelined"


def test_a_whole_group_can_move_onto_part_of_its_machines() -> None:
    """Members listed together leave their old group first, so its machines can be reused."""
    jobs = [job("a", 80, 2, iters=400), job("b", 16, 10, iters=400), job("c", 40, 4, iters=400)]
    steps = [
        [A.Colocate(("a", "b", "c"), (0, 1, 2), mode="pipelined")],
        [A.Pause("c"), A.Colocate(("a", "b"), (0, 1), mode="pipelined"),
         A.Colocate(("c",), (2, 3), mode="pipelined")],
    ]
    sched = run(jobs, Script(*steps))
    assert all(sched.result.jobs[j].state == "finished" for j in "abc")


def test_naive_mode_uses_the_same_groups() -> None:
    jobs = [job("a", 80, 2, iters=50), job("b", 16, 10, iters=50)]
    sched = run(jobs, Script([A.Colocate(("a", "b"), (0, 1, 2, 3), mode="naive")]))
    started = next(d for k, d in events(sched, "a") if k is EventKind.STARTED)
    assert started["mode"] == "naive"


def _two_jobs_makespan(mode: str) -> float:
    jobs = [job("a", 80, 2, iters=300), job("b", 16, 10, iters=300)]
    out = simulate(jobs, harmony_cluster(8), Script([A.Colocate(("a", "b"), tuple(range(8)), mode=mode)]),
                   config=CFG, strict=True)
    assert out.metrics.jobs_finished == 2
    return float(out.metrics.makespan)


def test_pipelined_beats_naive_co_location_on_makespan() -> None:
    pipelined, naive = _two_jobs_makespan("pipelined"), _two_jobs_makespan("naive")
    assert pipelined < naive
    assert pipelined == pytest.approx(300 * 12.0 + 0.1 / 8 / 0.1, rel=1e-6)  # Eq. 1 exactly + input load


def test_isolated_ps_job_runs_its_subtasks_in_sequence() -> None:
    jobs = [job("a", 80, 2, iters=100)]
    out = simulate(jobs, harmony_cluster(8), Script([A.Start("a", (0, 1, 2, 3, 0))]), config=CFG, strict=True)
    assert out.metrics.makespan == pytest.approx(100 * (80 / 4 + 2) + 0.1 / 4 / 0.1)
