"""Tetris: alignment picks the aligned machine and job; the SRTF blend and the fairness knob."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine.actions import Start
from cohabit.engine.loop import Scheduler
from cohabit.engine.state import JobState
from cohabit.engine.view import ClusterView
from cohabit.policies import make_policy
from cohabit.policies.srtf import SRTF
from cohabit.policies.tetris import Tetris, aligned_chooser, alignment
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.traces.synthetic import generate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources, preset
from cohabit.spec.job import JobSpec, TaskGroup

NODE = Resources(gpu=4, cpu=32, mem_gb=128)


def job(id: str, gpu: float, cpu: float, mem: float, *, submit: float = 0.0, duration: float = 100.0,
        tenant: str = "default", workers: int = 1) -> TraceJob:
    spec = JobSpec(id=id, tenant=tenant, submit_time=submit, iterations=int(duration),
                   architecture="single" if workers == 1 else "allreduce",
                   workers=TaskGroup(count=workers, demand=Resources(gpu=gpu, cpu=cpu, mem_gb=mem)))
    return TraceJob(spec, JobTruth(iterations=int(duration), duration=duration, ref_workers=workers))


class Scripted:
    """Starts the t=0 jobs on fixed nodes and nothing else (sets up a view to decide on)."""

    name = "scripted"
    uses_oracle = False

    def __init__(self, where: dict[str, int]) -> None:
        self.where = where

    def decide(self, view: ClusterView):
        return [Start(j, (n,)) for j, n in self.where.items() if j in view.pending]


def view_with(fillers: dict[str, TraceJob], where: dict[str, int], pending: list[TraceJob],
              nodes: int = 2) -> tuple[ClusterView, Scheduler]:
    jobs = list(fillers.values()) + pending
    backend = SimBackend(jobs, SimConfig(gpus_per_node=4))
    sched = Scheduler(ClusterSpec.homogeneous("t", nodes, NODE), Scripted(where), backend, strict=True,
                      horizon=1.0, oracle=backend.oracle())
    sched.run([j.spec for j in jobs])
    return sched.view, sched


FILLERS = {  # node 0 left CPU-rich <2 GPU, 30 CPU, 120 GB>, node 1 GPU-rich <3 GPU, 4 CPU, 120 GB>
    "F0": job("F0", 2, 2, 8, duration=1e5), "F1": job("F1", 1, 28, 8, duration=1e5)}


def test_alignment_is_the_capacity_normalised_dot_product() -> None:
    cap = np.array([[4.0, 32, 128], [4.0, 32, 128]])
    free = np.array([[2.0, 30, 120], [3.0, 4, 120]])
    g = np.array([1.0, 2, 8])  # a GPU-heavy task
    # node 0: 1/4*2/4 + 2/32*30/32 + 8/128*120/128 = .125 + .05859 + .05859
    # node 1: 1/4*3/4 + 2/32*4/32  + 8/128*120/128 = .1875 + .00781 + .05859
    assert alignment(free, cap, g) == pytest.approx([0.2421875, 0.25390625])


def test_prefers_the_aligned_machine() -> None:
    gpu_heavy = job("G", 1, 2, 8, submit=1.0)  # aligns with node 1 (GPU-rich): .254 vs .242
    cpu_heavy = job("C", 1, 4, 8, submit=1.0)  # node 0: .125+.1172+.0586 = .301; node 1: .1875+.0156+.0586 = .262
    for pending, node in ((gpu_heavy, 1), (cpu_heavy, 0)):
        view, _ = view_with(FILLERS, {"F0": 0, "F1": 1}, [pending])
        plan = Tetris(epsilon=0.0).decide(view)
        assert plan == [Start(pending.spec.id, (node,))]


def test_prefers_the_aligned_job_over_arrival_order() -> None:
    # Only node 0 has room, for one more GPU: <1 GPU, 30 CPU, 120 GB> free.
    fillers = {"F0": job("F0", 3, 2, 8, duration=1e5), "F1": job("F1", 4, 4, 8, duration=1e5)}
    g = job("G", 1, 2, 8, submit=1.0)  # arrived first; alignment 1/16 + 2/32*30/32 + .0586 = .180
    c = job("C", 1, 8, 8, submit=1.0)  # 1/16 + 8/32*30/32 + .0586 = .355
    view, _ = view_with(fillers, {"F0": 0, "F1": 1}, [g, c])
    assert Tetris(epsilon=0.0).decide(view) == [Start("C", (0,))]
    assert make_policy("fifo").decide(view) == [Start("G", (0,))]


def test_srtf_blend_favours_less_remaining_work() -> None:
    fillers = {"F0": job("F0", 3, 2, 8, duration=1e5), "F1": job("F1", 4, 4, 8, duration=1e5)}
    g = job("G", 1, 2, 8, submit=1.0, duration=10.0)   # less aligned, but 1/100 of C's length
    c = job("C", 1, 8, 8, submit=1.0, duration=1000.0)
    view, sched = view_with(fillers, {"F0": 0, "F1": 1}, [g, c])
    oracle = sched.backend.oracle()  # type: ignore[attr-defined]
    pure, blended = Tetris(epsilon=0.0, use_oracle=True), Tetris(epsilon=2.0, use_oracle=True)
    for p in (pure, blended):
        p.bind_oracle(oracle)
    # p(G) = 1 - work_G / work_C ~ 0.99, p(C) = 0; eps' = 2 * mean(a) / mean(p):
    # G: .180 + 2 * .267 / .495 * .99 = 1.25 > C: .355
    assert pure.decide(view) == [Start("C", (0,))]
    assert blended.decide(view) == [Start("G", (0,))]
    assert blended.name == "tetris[oracle]" and blended.uses_oracle


def test_observed_remaining_matches_srtf_estimate() -> None:
    jobs = generate(80, seed=3, mean_interarrival=5.0, max_duration=3000.0)  # a queue builds up
    seen = []

    class Probe(Tetris):
        def decide(self, view):  # type: ignore[override]
            waiting = list(view.pending.values())
            if waiting and len(view.history):
                self._info(view, waiting[0])
                ours = self._remaining(view, waiting)
                ref = [SRTF().remaining(j, view) for j in waiting]
                seen.append((ours, np.array(ref)))
            return super().decide(view)

    simulate(jobs, preset("tiresias"), Probe(), strict=True)
    assert seen
    for ours, ref in seen:
        assert ours == pytest.approx(ref)


def test_fairness_knob_restricts_to_tenants_below_their_share() -> None:
    # Tenant "rich" holds node 1; "poor" nothing. Both have a job waiting for node 0; rich's is
    # better aligned. fairness=0.5 keeps the ceil(0.5 * 2) = 1 job furthest below its share.
    fillers = {"F0": job("F0", 3, 2, 8, duration=1e5, tenant="other"),
               "F1": job("F1", 4, 4, 8, duration=1e5, tenant="rich")}
    r = job("R", 1, 8, 8, submit=1.0, tenant="rich")
    p = job("P", 1, 2, 8, submit=1.0, tenant="poor")
    view, _ = view_with(fillers, {"F0": 0, "F1": 1}, [r, p])
    assert Tetris(epsilon=0.0).decide(view) == [Start("R", (0,))]
    assert Tetris(epsilon=0.0, fairness=0.5).decide(view) == [Start("P", (0,))]


def test_gang_tasks_go_one_by_one_to_the_best_aligned_node() -> None:
    cap = np.array([[4.0, 32, 128]] * 3)
    free = np.array([[4.0, 32, 128], [1.0, 32, 128], [2.0, 32, 128]])
    d = np.array([1.0, 4, 16])
    fit = np.array([4, 1, 2])
    # alignment = gpu_free/16 + cpu_free/256 + mem_free/1024: node 0 .5, node 1 .3125, node 2 .375.
    # Task 1 -> node 0 (now .406), task 2 -> node 0 (now .3125), task 3 -> node 2 (.375).
    assert aligned_chooser(fit, free, cap, d, 3) == [0, 0, 2]
    assert aligned_chooser(fit, free, cap, d, 8) is None


def test_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 0, got -1"):
        Tetris(epsilon=-1)
    with pytest.raises(ValueError, match=r"fairness must lie in \[0, 1\), got 1"):
        Tetris(fairness=1)
    with pytest.raises(ValueError, match="use_oracle"):
        Tetris(use_oracle="no")  # type: ignore[arg-type]
    assert make_policy("tetris").name == "tetris"
    assert make_policy("tetris", oracle=True).name == "tetris[oracle]"


@st.composite
def workloads(draw: st.DrawFn) -> list[TraceJob]:
    out, t = [], 0.0
    for i in range(draw(st.integers(1, 20))):
        t += draw(st.floats(0, 40))
        gpu = draw(st.sampled_from([0.25, 0.5, 1.0, 1.0, 2.0]))
        n = 1 if gpu < 1 else draw(st.integers(1, 4))
        out.append(job(f"j{i}", gpu, draw(st.sampled_from([1.0, 4.0, 12.0])), draw(st.sampled_from([4.0, 64.0])),
                       submit=t, duration=draw(st.floats(1, 300)), tenant=draw(st.sampled_from("ab")), workers=n))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from([0.0, 1.0, 5.0]), st.sampled_from([0.0, 0.5]))
def test_never_over_allocates_and_every_job_ends(jobs, epsilon, fairness) -> None:
    out = simulate(jobs, ClusterSpec.homogeneous("h", 2, NODE), Tetris(epsilon=epsilon, fairness=fairness),
                   strict=True)
    assert out.result.unfinished == {}
    assert all(j.state in (JobState.FINISHED, JobState.REJECTED) for j in out.result.jobs.values())
