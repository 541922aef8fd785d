"""The Harmony policy in simulation: twin replacement, strict runs with ledger checks, profiling,
baselines, and the prediction error of the model."""

from __future__ import annotations

import pytest

from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies import REGISTRY, make_policy
from cohabit.policies.harmony.baselines import Isolated, NaiveGroups
from cohabit.policies.harmony.policy import Harmony
from cohabit.sim.backend import SimBackend
from cohabit.sim.harmony_workload import generate, harmony_cluster, ps_job
from cohabit.sim.physics import SimConfig
from cohabit.sim.truth import PSTruth, TraceJob

CFG = SimConfig(checkpoint_s=0, restore_s=0)


def job(id: str, c1: float, net: float, iters: int, submit: float = 0.0, m: int = 8) -> TraceJob:
    t = PSTruth(t_cpu1=c1, t_pull=net / 2, t_push=net / 2, input_gb=0.1, model_gb=0.1)
    return ps_job(id, t, iters, n_machines=m, submit=submit)


class Checked:
    """Wraps a policy; checks the ledger's invariants before every decision (test-side only)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[attr-defined]
        self.ledger = None
        self.checks = 0

    def decide(self, view):  # type: ignore[no-untyped-def]
        assert self.ledger is not None
        self.ledger.check()
        self.checks += 1
        return self.inner.decide(view)  # type: ignore[attr-defined]

    def on_progress(self, job, view):  # type: ignore[no-untyped-def]
        if hasattr(self.inner, "on_progress"):
            self.inner.on_progress(job, view)

    def on_finish(self, job, view):  # type: ignore[no-untyped-def]
        if hasattr(self.inner, "on_finish"):
            self.inner.on_finish(job, view)


def run(jobs: list[TraceJob], policy: object, machines: int, config: SimConfig = CFG):  # type: ignore[no-untyped-def]
    wrapped = Checked(policy)
    sched = Scheduler(harmony_cluster(machines), wrapped, SimBackend(jobs, config), strict=True)
    wrapped.ledger = sched.ledger
    result = sched.run([j.spec for j in jobs])
    sched.ledger.check()
    assert sched.ledger.groups == {}
    return sched, result


def test_a_finishing_job_is_replaced_by_its_similar_twin_without_moving_others() -> None:
    """a + b fill 8 machines exactly (Eq. 1: 12 s of CPU and of network); c, a's twin within 5%,
    waits. When a finishes, c takes its slot in the same group and b is not touched."""
    jobs = [job("a", 80, 2, iters=60), job("b", 16, 10, iters=600), job("c", 82, 2.05, iters=60)]
    policy = Harmony()
    sched, result = run(jobs, policy, 8)
    assert all(j.state == "finished" for j in result.jobs.values())
    a_end = next(e.time for e in sched.record if e.job == "a" and e.kind is EventKind.FINISHED)
    c_back = [e for e in sched.record if e.job == "c" and e.kind is EventKind.RESUMED]
    assert len(c_back) == 1 and c_back[0].time == pytest.approx(a_end)
    b_group = [e.data["group_nodes"] for e in sched.record if e.job == "b" and "group_nodes" in e.data][-1]
    assert c_back[0].data["group_nodes"] == b_group
    b_after = [e.kind for e in sched.record if e.job == "b" and e.time >= a_end - 1e-9]
    assert b_after[-1] is EventKind.FINISHED
    assert set(b_after) <= {EventKind.PROGRESS, EventKind.USED, EventKind.REALLOCATED, EventKind.FINISHED}  # stays put
    assert EventKind.MIGRATED not in b_after and EventKind.RESIZED not in b_after and EventKind.PAUSED not in b_after
    assert policy.stats.replaced_similar == 1
    assert policy.stats.full_schedules == 1


@pytest.mark.parametrize("gap", [0.0, 300.0])
def test_no_over_allocation_and_every_job_finishes(gap: float) -> None:
    jobs = generate(n_machines=24, seed=3, mean_gap_s=gap, hyper=2)  # 16 jobs on 24 machines
    policy = Harmony()
    sched, result = run(jobs, policy, 24, SimConfig())
    assert not result.unfinished, result.unfinished
    assert sum(j.state == "finished" for j in result.jobs.values()) == 16
    assert not [e for e in sched.record if e.kind is EventKind.ACTION_REJECTED]
    assert policy.stats.profiled == 16
    errors = policy.log.summary()
    assert errors["n"] > 0 and errors["mean"] < 0.15  # Eq. 1 against the simulated subtask queues


def test_new_job_is_profiled_in_the_smallest_group() -> None:
    jobs = [job("a", 80, 2, iters=400), job("b", 16, 10, iters=400), job("late", 40, 5, iters=20, submit=2000.0)]
    sched, result = run(jobs, Harmony(), 8)
    started = next(e for e in sched.record if e.job == "late" and e.kind is EventKind.STARTED)
    assert len(started.data["group_nodes"]) == 8  # the only group there is
    assert set(started.data["colocated_with"]) == {"a", "b"}
    assert result.jobs["late"].state == "finished"


def test_baselines_run_ps_jobs_without_over_allocation() -> None:
    jobs = generate(n_machines=24, seed=3, hyper=2)
    for policy in (Isolated(), NaiveGroups(), NaiveGroups(mode="pipelined", name="subtasks")):
        sched, result = run(jobs, policy, 24, SimConfig())
        assert not result.unfinished and not [e for e in sched.record if e.kind is EventKind.ACTION_REJECTED]
    iso = [e for e in sched.record if e.kind is EventKind.STARTED]
    assert iso


def test_registered_and_gpu_jobs_left_alone() -> None:
    for name in ("harmony", "harmony-isolated", "harmony-naive"):
        assert name in REGISTRY and make_policy(name).name == name


def test_harmony_beats_isolated_and_naive_on_makespan() -> None:
    jobs = generate(n_machines=24, seed=3, hyper=2)
    spans = {}
    for policy in (Harmony(), Isolated(), NaiveGroups()):
        _, result = run(jobs, policy, 24, SimConfig())
        ends = [j.end_time for j in result.jobs.values()]
        spans[policy.name] = max(e for e in ends if e is not None)
    assert spans["harmony"] < spans["harmony-isolated"]
    assert spans["harmony"] < spans["harmony-naive"]


@pytest.mark.parametrize("scale, replaced", [(1.04, 1), (1.07, 0)])
def test_only_a_waiting_job_within_five_percent_takes_the_finished_jobs_slot(scale: float, replaced: int) -> None:
    """As the twin test, with c's iteration time 4% (a twin) or 7% (not one: §IV-B4 (2)'s 5%) off a's."""
    jobs = [job("a", 80, 2, iters=60), job("b", 16, 10, iters=600), job("c", 80 * scale, 2 * scale, iters=60)]
    policy = Harmony()
    _, result = run(jobs, policy, 8)
    assert all(j.state == "finished" for j in result.jobs.values())
    assert policy.stats.replaced_similar == replaced


def test_a_new_job_waits_while_other_profiled_jobs_wait() -> None:
    """§IV-B4 (1): c (a's twin) waits after the first schedule; late is profiled in the a + b group
    and, once profiled, must wait behind c even though keeping it there would not lower U."""
    jobs = [job("a", 80, 2, iters=400), job("b", 16, 10, iters=400), job("c", 82, 2.05, iters=400),
            job("late", 40, 5, iters=20, submit=2000.0)]
    policy = Harmony()
    sched, result = run(jobs, policy, 8)
    assert not result.unfinished
    late = [(e.time, e.kind) for e in sched.record if e.job == "late" and e.kind is not EventKind.PROGRESS]
    kinds = [k for _, k in late]
    assert kinds[:3] == [EventKind.SUBMITTED, EventKind.STARTED, EventKind.PAUSED]
    c_paused = [e.time for e in sched.record if e.job == "c" and e.kind is EventKind.PAUSED]
    c_resumed = [e.time for e in sched.record if e.job == "c" and e.kind is EventKind.RESUMED]
    assert c_paused and c_resumed and c_paused[0] < late[0][0] < c_resumed[0]  # c was waiting all along
    assert policy.stats.arrivals_waiting == 1 and policy.stats.arrivals_placed == 0


def test_new_job_is_profiled_in_the_group_with_fewest_machines() -> None:
    """Two groups of different sizes run when late arrives: it is profiled in the smaller one."""
    jobs = [job(n, c1, net, iters=400, m=12) for n, c1, net in
            (("a", 80, 2), ("b", 16, 10), ("d", 40, 2), ("e", 8, 10))]
    jobs.append(job("late", 20, 5, iters=20, submit=2000.0, m=12))
    sched, result = run(jobs, Harmony(), 12)
    assert not result.unfinished
    where: dict[str, tuple[int, ...]] = {}
    for e in sched.record:
        if e.time >= 2000.0:
            break
        if e.kind in (EventKind.STARTED, EventKind.RESUMED) and "group_nodes" in e.data:
            where[e.job] = tuple(e.data["group_nodes"])
        elif e.kind in (EventKind.PAUSED, EventKind.FINISHED):
            where.pop(e.job, None)
    sizes = sorted({len(g) for g in where.values()})
    assert len(set(where.values())) == 2 and sizes[0] < sizes[1]  # two groups of different sizes
    started = next(e for e in sched.record if e.job == "late" and e.kind is EventKind.STARTED)
    assert len(started.data["group_nodes"]) == sizes[0]
