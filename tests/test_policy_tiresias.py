"""Tiresias (Gu et al., NSDI'19): hand-computed cases pinning each rule, and properties."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine.job import JobView
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies import make_policy
from cohabit.policies.tiresias import SizeDistribution, Tiresias, gittins_index, tensor_skew
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster, trace_job

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)

#: Every case here simulates in milliseconds. A broken demotion or promotion rule can make the
#: policy re-check the same job at the same simulated instant forever (one decision never returns)
#: or never finish a job; both are bounded -- CPU seconds per run, simulated seconds per run --
#: so such a break fails the test that names the rule instead of stalling until the 600 s limit.
CPU_LIMIT_S = 2.0
HORIZON_S = 100_000.0


class Runaway(BaseException):
    """A run exceeded :data:`CPU_LIMIT_S` (not an ``Exception``: nothing under test may swallow it)."""


@contextmanager
def cpu_bound(seconds: float = CPU_LIMIT_S) -> Iterator[None]:
    """Raise :class:`Runaway` once this process has spent ``seconds`` of CPU time inside the block
    (``ITIMER_VIRTUAL``: load on a shared machine does not count, and pytest-timeout's wall
    alarm is left alone)."""

    def stop(signum: int, frame: object) -> None:
        raise Runaway(f"still deciding after {seconds:g} s of CPU time: a queue rule loops")

    old = signal.signal(signal.SIGVTALRM, stop)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)


def run(jobs: list[TraceJob], cluster, pol, **kw):  # type: ignore[no-untyped-def]
    """``simulate`` bounded in CPU and simulated time; asserts that it ended and every job finished."""
    try:
        with cpu_bound():
            out = simulate(jobs, cluster, pol, config=NO_COST, strict=True, horizon=HORIZON_S, **kw)
    except Runaway as e:
        pytest.fail(str(e))
    assert out.result.unfinished == {}, out.result.unfinished
    return out


def jcts(outcome) -> dict[str, float]:
    sub = {e.job: e.time for e in outcome.result.record if e.kind == EventKind.SUBMITTED}
    return {e.job: e.time - sub[e.job] for e in outcome.result.record if e.kind == EventKind.FINISHED}


def events(outcome, kind: EventKind) -> list[tuple[float, str]]:
    return [(e.time, e.job) for e in outcome.result.record if e.kind == kind]


# --------------------------------------------------------------- 2D-LAS rules
def test_demotes_a_job_once_its_attained_service_crosses_the_threshold() -> None:
    # One GPU, Q1 < 95 GPU-s <= Q2, no ticks (the default). A (300 s) starts at 0; B (50 s) arrives at 10
    # in Q1 and cannot preempt A while A is in Q1 too. The policy asks for a decision when A's service
    # crosses 95 (next_decision_time; no event happens then): A is in Q2, so B preempts it at once:
    # B 95-145, then A resumes 145-350.
    jobs = [trace_job("A", 1, 300, 0), trace_job("B", 1, 50, 10)]
    pol = Tiresias(thresholds=(95,), min_run_time=0, starve_limit=None)
    assert pol.tick_interval is None
    out = run(jobs, small_cluster(1, 1), pol)
    assert events(out, EventKind.PAUSED) == [(pytest.approx(95), "A")]
    assert jcts(out) == pytest.approx({"A": 350, "B": 135})
    # a periodic tick adds rounds that change nothing: the same result
    out = run(jobs, small_cluster(1, 1), Tiresias(thresholds=(95,), min_run_time=0, starve_limit=None, tick_interval=10))
    assert events(out, EventKind.PAUSED) == [(pytest.approx(95), "A")]


def test_attained_service_counts_gpus_times_time() -> None:
    # 2D: a 4-GPU job crosses 100 GPU-s after 25 s, a 1-GPU job after 100 s.
    pol = Tiresias(thresholds=(100,))
    assert pol.queue_of(99.9) == 0 and pol.queue_of(100.0) == 1
    jobs = [trace_job("W", 4, 200, 0), trace_job("N", 4, 10, 5)]
    pol = Tiresias(thresholds=(100,), min_run_time=0, tick_interval=5, starve_limit=None)
    out = run(jobs, small_cluster(1, 4), pol)
    # ticks at 1 (progress), 5 (arrival), 10, 15, 20, 25: W has 4 x 25 = 100 GPU-s at t=25 -> demoted
    assert events(out, EventKind.PAUSED) == [(pytest.approx(25), "W")]
    assert jcts(out) == pytest.approx({"N": 30, "W": 210})


def test_min_run_time_protects_a_freshly_started_job() -> None:
    # A (100 s) is demoted at t=10, but it started at 0 and may not be preempted before t=50; no event
    # happens at 50: the policy asks for a decision when A becomes a possible victim.
    jobs = [trace_job("A", 1, 100, 0), trace_job("B", 1, 20, 5)]
    pol = Tiresias(thresholds=(10,), min_run_time=50, starve_limit=None)
    out = run(jobs, small_cluster(1, 1), pol)
    assert events(out, EventKind.PAUSED) == [(pytest.approx(50), "A")]
    assert jcts(out) == pytest.approx({"A": 120, "B": 65})


def _stream(with_promotion: bool):
    # One GPU, Q1 < 50 GPU-s. A (90 s) runs 0-50 and is demoted; short jobs (40 s) keep Q1 busy:
    # B1 at 45, B2 at 85, B3 at 125, B4 at 165.
    jobs = [trace_job("A", 1, 90, 0)] + [trace_job(f"B{i}", 1, 40, 45 + 40 * (i - 1)) for i in range(1, 5)]
    pol = Tiresias(thresholds=(50,), min_run_time=0, starve_limit=1.0 if with_promotion else None)
    return run(jobs, small_cluster(1, 1), pol), pol


def test_promotes_a_starved_job_back_to_the_top_queue() -> None:
    # With STARVELIMIT 1: A waits from 50; at t=100 it has waited 50 >= 1 x 50 s run, so it goes back
    # to Q1 (entering it at 100, before B3 arrives at 125); the policy asks for that decision (no event
    # happens at 100). B2 ends at 130 -> A resumes first, needs 40 s (its service restarts at 0, no
    # demotion): A 130-170, B3 170-210, B4 210-250.
    out, pol = _stream(with_promotion=True)
    assert pol.promotions == 1
    assert 100.0 in {e.time for e in out.result.record if e.kind == EventKind.DECISION}
    assert jcts(out) == pytest.approx({"A": 170, "B1": 45, "B2": 45, "B3": 85, "B4": 85})
    # Without promotion A waits for the whole stream: B1..B4 run back to back, A 210-250.
    out, pol = _stream(with_promotion=False)
    assert pol.promotions == 0
    assert jcts(out)["A"] == pytest.approx(250)


# --------------------------------------------------------------- Gittins index
def test_gittins_index_hand_computed() -> None:
    # Sizes {100, 1000}. G(0) = max(1/(100+100), 2/(100+1000)) = 1/200; G(150) = 1/850;
    # fixed quantum 500 at 0: P = 1/2, E = (100 + 500)/2 -> 1/600; beyond every sample: 0.
    assert gittins_index([100, 1000], 0) == pytest.approx(1 / 200)
    assert gittins_index([1000, 100], 150) == pytest.approx(1 / 850)
    assert gittins_index([100, 1000], 0, delta=500) == pytest.approx(1 / 600)
    assert gittins_index([100, 1000], 1000) == 0.0
    d = SizeDistribution([100, 1000])
    assert list(d.index([0, 150, 5000])) == pytest.approx([1 / 200, 1 / 850, 0.0])


def _gittins_case(gittins: bool):
    # One GPU, Q1 < 10 GPU-s; the known size distribution is {70, 70} (prior_samples, no history yet).
    # X (70 s) at 0 is demoted at t=10; Y (70 s, arrived at 2) preempts it (X paused at 10 GPU-s).
    # Y is demoted at 20; Z (5 s) arrives at 30 and preempts Y (paused at 20 GPU-s); Z ends at 35.
    # Both X and Y wait in Q2 then: FIFO (LAS) resumes X (entered Q2 first); the Gittins index from
    # {70, 70} is 1/60 for X and 1/50 for Y, so Gittins resumes Y first.
    jobs = [trace_job("X", 1, 70, 0), trace_job("Y", 1, 70, 2), trace_job("Z", 1, 5, 30)]
    pol = Tiresias(thresholds=(10,), gittins=gittins, prior_samples=[70, 70], min_history=100,
                   min_run_time=0, starve_limit=None)
    return run(jobs, small_cluster(1, 1), pol)


def test_gittins_orders_jobs_by_the_index_of_a_known_distribution() -> None:
    out = _gittins_case(gittins=True)
    assert events(out, EventKind.RESUMED) == [(pytest.approx(35), "Y"), (pytest.approx(85), "X")]
    assert jcts(out) == pytest.approx({"X": 145, "Y": 83, "Z": 5})
    out = _gittins_case(gittins=False)
    assert events(out, EventKind.RESUMED) == [(pytest.approx(35), "X"), (pytest.approx(95), "Y")]
    assert jcts(out) == pytest.approx({"X": 95, "Y": 143, "Z": 5})


def test_gittins_learns_from_finished_jobs_after_min_history() -> None:
    pol = Tiresias(gittins=True, min_history=2)
    jobs = [trace_job(f"j{i}", 1, 10 * (i + 1), 0) for i in range(4)]
    run(jobs, small_cluster(1, 1), pol)
    # the last distribution used: attained services of the jobs finished so far (10, 20, 30 GPU-s)
    assert pol._dist_key == ("history", 3)
    assert list(pol._dist.x) == pytest.approx([10, 20, 30])


def test_oracle_variant_needs_the_oracle_and_says_so() -> None:
    pol = make_policy("tiresias-gittins", oracle=True)
    assert pol.name == "tiresias-gittins[oracle]" and pol.uses_oracle
    with pytest.raises(ValueError, match="oracle"):
        simulate([trace_job("a", 1, 10)], small_cluster(1, 1), pol, config=NO_COST)
    out = run([trace_job("a", 1, 10)], small_cluster(1, 1), pol, oracle=True)
    assert jcts(out) == pytest.approx({"a": 10})


# --------------------------------------------------------------- placement
def test_consolidates_skewed_models_and_spreads_the_others() -> None:
    assert tensor_skew("vgg16") > 0.5 and tensor_skew("AlexNet") > 0.5
    assert tensor_skew("resnet50") < 0.5 and tensor_skew("inception3") < 0.5 and tensor_skew("nope") is None
    # 2 nodes x 4 GPUs; 3-GPU blockers take one node each (best fit), leaving 1 + 1 GPUs free.
    # vgg16 on 2 GPUs must be consolidated: it waits until the blockers end at 100.
    # resnet50 on 2 GPUs may spread: it starts at once across both nodes.
    jobs = [trace_job("B1", 3, 100, 0), trace_job("B2", 3, 100, 0),
            trace_job("V", 2, 50, 1, model="vgg16"), trace_job("R", 2, 50, 2, model="resnet50")]
    out = run(jobs, small_cluster(2, 4), Tiresias())
    starts = {e.job: (e.time, e.data["nodes"]) for e in out.result.record if e.kind == EventKind.STARTED}
    assert starts["R"][0] == pytest.approx(2) and sorted(starts["R"][1]) == [0, 1]
    assert starts["V"][0] == pytest.approx(100) and len(set(starts["V"][1])) == 1
    # "at least skew_threshold": a model exactly at the threshold is consolidated, just below it is not
    at = tensor_skew("resnet50")
    assert Tiresias(skew_threshold=at).needs_consolidation(JobView(simple_job("r", 2, model="resnet50"), 0))
    assert not Tiresias(skew_threshold=at + 1e-6).needs_consolidation(JobView(simple_job("r", 2, model="resnet50"), 0))
    # unknown models are consolidated unless told otherwise
    assert Tiresias().needs_consolidation(JobView(simple_job("u", 2, model="x"), 0))
    assert not Tiresias(consolidate_unknown=False).needs_consolidation(JobView(simple_job("u", 2, model="x"), 0))


@pytest.mark.parametrize("kw, bad", [
    ({"thresholds": (100, 50)}, "(100, 50)"), ({"thresholds": (0,)}, "(0,)"), ({"starve_limit": -1}, "-1"),
    ({"min_history": 0}, "0"), ({"prior_median": 0}, "0"), ({"prior_sigma": float("nan")}, "nan"),
    ({"prior_samples": []}, "[]"), ({"prior_samples": ["x"]}, "['x']"), ({"gittins_delta": -5}, "-5"), ({"skew_threshold": 1.5}, "1.5"),
    ({"skew_table": {"vgg": 2}}, "2"), ({"min_run_time": -1}, "-1"), ({"tick_interval": 0}, "0"),
    ({"use_oracle": True}, "True"),
])
def test_constructor_rejects_bad_values_naming_them(kw, bad) -> None:
    with pytest.raises(ValueError, match=bad.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        Tiresias(**kw)


def test_constructor_accepts_prior_sizes_under_one_gpu_second() -> None:
    pol = Tiresias(gittins=True, prior_samples=[0.5, 1.0, 30.0])  # > 0 is the rule, not >= 1
    assert list(pol.distribution(SimpleNamespace(history=[])).x) == pytest.approx([0.5, 1.0, 30.0])  # type: ignore[arg-type]


# --------------------------------------------------------------- properties
class Audited(Scheduler):
    """Checks the ledger after every applied action."""

    def _apply(self, action):  # type: ignore[override]
        super()._apply(action)
        self.ledger.check()


@st.composite
def workloads(draw: st.DrawFn) -> list[TraceJob]:
    n = draw(st.integers(1, 20))
    out, t = [], 0.0
    for i in range(n):
        t += draw(st.floats(0, 60))
        g = draw(st.sampled_from([1, 1, 1, 2, 4, 8]))
        dur = draw(st.floats(1, 400))
        model = draw(st.sampled_from(["resnet50", "vgg16", "bert", "unknown"]))
        spec = simple_job(f"j{i}", g, submit_time=t, model=model, iterations=max(int(dur), 1))
        out.append(TraceJob(spec, JobTruth(iterations=max(int(dur), 1), duration=dur, ref_workers=g)))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from([0.5, 2.0, 8.0]), st.booleans())
def test_with_promotion_every_job_terminates_and_nothing_over_allocates(jobs, knob, gittins) -> None:
    pol = Tiresias(thresholds=(200, 800), starve_limit=knob, gittins=gittins, min_history=3,
                   min_run_time=30, tick_interval=20)
    backend = SimBackend(jobs, SimConfig(checkpoint_s=3, restore_s=4, gpus_per_node=4))
    with cpu_bound():  # Runaway is a BaseException: it ends the search at once, no shrinking of a hang
        result = Audited(small_cluster(2, 4), pol, backend, strict=True, horizon=HORIZON_S).run([j.spec for j in jobs])
    assert result.unfinished == {}
    assert all(j.state is JobState.FINISHED for j in result.jobs.values())
    assert [e for e in result.record if e.kind == EventKind.ACTION_REJECTED] == []


def _starving_long_job(basis: str) -> tuple[list[tuple[float, float]], list[float]]:
    """One GPU; A (1 GPU, 60,000 s) at 0 and a stream of 3,000-s jobs (below Q1's 3,250 GPU-s, so they
    stay in Q1 and run to completion) arriving back to back from t = 10. A is demoted at 3,250 and
    starves; each promotion gives it one Q1 quantum. Returns A's (pause, resume) times and its
    executed seconds at each pause."""
    jobs = [trace_job("A", 1, 60_000, 0)] + [trace_job(f"B{i:03d}", 1, 3000, 10 + 3000 * i) for i in range(70)]
    pol = Tiresias(min_run_time=0, starve_limit=8.0, promote_basis=basis)
    out = simulate(jobs, small_cluster(1, 1), pol, config=SimConfig(checkpoint_s=0, restore_s=0))
    pauses, resumes, ran, since = [], [], [], 0.0
    for e in out.result.record:
        if e.job != "A":
            continue
        if e.kind is EventKind.PAUSED:
            pauses.append(e.time)
            ran.append((ran[-1] if ran else 0.0) + e.time - since)
        elif e.kind in (EventKind.STARTED, EventKind.RESUMED):
            since = e.time
            if e.kind is EventKind.RESUMED:
                resumes.append(e.time)
    stream_end = 10 + 3000 * 70  # later resumes come from the stream ending, not from promotion
    cycles = [(p, r) for p, r in zip(pauses, resumes) if r < stream_end]
    return cycles, ran[: len(cycles)]


def test_promotion_waits_grow_with_total_service_so_a_starved_job_does_not_ping_pong() -> None:
    """Default ``promote_basis="total"``: a job is promoted again only after waiting STARVELIMIT x its
    whole executed time, so each round-trip waits longer than the one before (no fixed-period
    promotion/demotion cycle). The authors' simulator's rule (``since_promotion``: executed time
    since the last promotion) makes every cycle as long as the first: the ping-pong behind the
    263,000 preemptions of Muri's trace1 (issue 19)."""
    cycles, ran = _starving_long_job("total")
    waits = [r - p for p, r in cycles]
    assert len(waits) >= 2
    for (p, r), executed in zip(cycles, ran):
        # promoted once it waited 8 x its total executed time (counted from its promotion, so it may
        # resume a stream job's length sooner)
        assert r - p >= 8.0 * executed - 3000 - 1e-6
    assert all(b > a + 20_000 for a, b in zip(waits, waits[1:]))  # each quantum run adds 8 x 3,250 s
    old_cycles, _ = _starving_long_job("since_promotion")
    old_waits = [r - p for p, r in old_cycles]
    assert len(old_cycles) > len(cycles) + 2
    # the old rule: a constant period, ping-pong (the promoted job then waits for the running stream job
    # to end: at most one stream job's 3,000 s more)
    assert max(old_waits[1:]) <= min(old_waits[1:]) + 3000 + 1e-6


def test_gittins_index_of_a_few_services_equals_the_batch_exactly() -> None:
    """A few services (tiresias-gittins' usual round) are indexed one by one over the sample points above each;
    the values must be the batch's to the last bit (the waiting order compares them)."""
    import numpy as np

    from cohabit.policies import gittins

    for seed in range(12):
        rng = np.random.default_rng(seed)
        dist = SizeDistribution(rng.lognormal(8, 2, int(rng.integers(1, 3000))))
        top = dist.x[-gittins.FEW_POINTS - 4:]  # (services with a few points above: indexed in Python floats)
        a = np.concatenate([rng.uniform(0, 3 * dist.x.max(), 40), dist.x[:20], [0.0, float(dist.x[-1])],
                            top, top * 0.999])
        whole = dist.index(a)  # (more than SMALL_BATCH: one matrix)
        assert a.size > gittins.SMALL_BATCH
        few = np.concatenate([dist.index(a[i:i + 3]) for i in range(0, a.size, 3)])
        assert np.array_equal(few, whole) and (whole > 0).any() and (whole == 0).any()


def test_gittins_index_scanned_past_the_python_points_equals_the_batch_exactly() -> None:
    """A service's index is scanned in Python over the first ``FEW_POINTS`` sample points above it (stopping once no
    later term can win) and over the rest in numpy: where the supremum lies past those points (a run of equal
    sizes just above the service: the denominator stays flat while the numerator grows) the value is still the
    batch's to the last bit, and so is it where the scan stops early (sizes spread out)."""
    import numpy as np

    from cohabit.policies import gittins

    rng = np.random.default_rng(7)
    run = gittins.FEW_POINTS + 9
    for spread in (False, True):
        tail = rng.lognormal(8, 2, 150) + 20.0
        sizes = np.concatenate([np.full(run, 10.0) + (rng.uniform(0, 1e-9, run) if spread else 0.0), tail])
        dist = SizeDistribution(sizes)
        a = np.concatenate([[5.0, 9.999, 0.0], rng.uniform(0, 12.0, 12)])
        whole = dist.index(a)
        assert np.array_equal(np.concatenate([dist.index(a[i:i + 1]) for i in range(a.size)]), whole)
    # (the supremum past the scanned points: the numpy part decides it)
    dist = SizeDistribution(np.concatenate([np.full(run, 10.0), rng.lognormal(8, 2, 150) + 20.0]))
    j0 = int(np.searchsorted(dist.x, 5.0, side="right"))
    m = dist.x.size - j0
    terms = np.arange(1.0, m + 1.0) / np.maximum(dist.d[j0:] - dist.prefix[j0] - m * 5.0, 1e-300)
    assert int(terms.argmax()) >= gittins.FEW_POINTS and dist.index(np.array([5.0]))[0] == terms.max()
