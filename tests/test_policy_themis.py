"""Themis-style finish-time fairness (Mahajan et al., NSDI'20): worst rho first at lease expiry; properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.themis import Themis
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace

from conftest import small_cluster, trace_job
from test_policy_optimus import check_terminates

NO_COST = SimConfig(checkpoint_s=0.0, restore_s=0.0)


def test_the_job_with_the_worst_rho_gets_the_gpu() -> None:
    # One GPU, two new 1-GPU jobs, lease 100 s. Contention N = 2, so the exclusive share is half a
    # GPU: f_id = 0.5 iteration/s (prior: 1 s per iteration). With nothing, a job waits a lease and
    # then runs at f_id: rho(0) = (0 + 100 + W / 0.5) / (W / 0.5) = 1 + 50 / W.
    #   A: W = 1000 -> rho 1.05;   B: W = 200 -> rho 1.25.   Worst rho: B starts, A waits.
    jobs = [trace_job("A", 1, 1000, 0), trace_job("B", 1, 200, 0)]
    pol = Themis(lease=100.0, restart_cost=0.0)
    sched = Scheduler(small_cluster(1, 1), pol, SimBackend(jobs, NO_COST), horizon=0.0, strict=True)
    sched.run([j.spec for j in jobs])
    view = sched.view
    assert list(view.running) == ["B"] and list(view.pending) == ["A"]
    snap = pol.models.snapshot(view, [view.jobs["A"], view.jobs["B"]])
    table = pol.rho_table(view, snap, np.zeros((2, 1), dtype=np.int64))
    assert table[:, 0] == pytest.approx([1.05, 1.25])


def test_at_lease_expiry_a_job_holding_nothing_is_worse_off_than_any_running_one() -> None:
    # Continuing: at t=100 B's lease ends. B ran 100 of 200 s: T_sh = 100 + 100 = 200 against
    # T_id = 200 / 0.5 = 400 -> rho 0.5; A holds nothing, so its T_sh is unbounded: A takes the GPU.
    # A's lease ends at 200: A has rho (200 + 900) / 2000 = 0.55 but B, holding nothing, is worse off.
    jobs = [trace_job("A", 1, 1000, 0), trace_job("B", 1, 200, 0)]
    # (tick=1: leases are checked every second, so expiries land on the second)
    out = simulate(jobs, small_cluster(1, 1), Themis(lease=100.0, restart_cost=0.0, tick=1.0), config=NO_COST,
                   strict=True)
    paused = [(round(e.time), e.job) for e in out.result.record if e.kind == EventKind.PAUSED]
    assert paused[:2] == [(100, "B"), (200, "A")]
    # B finishes first (it needs 100 more seconds after 200): JCT 300; A: 1000 s of work by 1200
    jct = {e.job: e.time for e in out.result.record if e.kind == EventKind.FINISHED}
    assert jct["B"] == pytest.approx(300.0)
    assert jct["A"] == pytest.approx(1200.0)


def test_a_lease_is_renewed_unless_the_fairness_gain_pays_for_the_restart() -> None:
    # As above, but the policy charges a restart 10 s (lease 100: credit 1 x 10 / 100 = 0.1). At t=100, if
    # B lost the GPU it would wait a lease and restore: rho (100 + 100 + 10 + 100 / 0.5) / 400 = 1.025;
    # A's rho if it waits is 1.1. A is worse off by 0.075, less than the 0.1 a restart wastes of a lease:
    # B's lease is renewed and B finishes at 200 unpaused. Without the credit (restart_gain=0) A takes it.
    jobs = [trace_job("A", 1, 1000, 0), trace_job("B", 1, 200, 0)]

    def paused(gain: float) -> list[tuple[int, str]]:
        pol = Themis(lease=100.0, restart_cost=10.0, tick=1.0, restart_gain=gain)
        out = simulate(jobs, small_cluster(1, 1), pol, config=NO_COST, strict=True)
        return [(round(e.time), e.job) for e in out.result.record if e.kind == EventKind.PAUSED]

    assert paused(1.0) == []
    assert paused(0.0)[0] == (100, "B")


def test_running_jobs_keep_their_lease_until_it_expires() -> None:
    # C arrives at t=10 while A holds the only GPU with a lease until 100: C waits for the expiry.
    jobs = [trace_job("A", 1, 500, 0), trace_job("C", 1, 50, 10)]
    out = simulate(jobs, small_cluster(1, 1), Themis(lease=100.0, restart_cost=0.0, tick=1.0), config=NO_COST,
                   strict=True)
    first_c = min(e.time for e in out.result.record if e.kind == EventKind.STARTED and e.job == "C")
    assert first_c == pytest.approx(100.0)


def test_contention_is_the_time_average_of_active_jobs() -> None:
    # A alone from 0 to 100, then A and B: A's average number of active jobs is 1.5 at t=200
    # and 2 for B, which has always shared with A.
    jobs = [trace_job("A", 2, 1000, 0), trace_job("B", 2, 1000, 100)]
    pol = Themis(lease=50.0, tick=50.0)
    sched = Scheduler(small_cluster(1, 4), pol, SimBackend(jobs, NO_COST), horizon=150.0, strict=True)
    sched.run([j.spec for j in jobs])
    assert pol.contention(sched.view.jobs["A"], 200.0) == pytest.approx(1.5)
    assert pol.contention(sched.view.jobs["B"], 200.0) == pytest.approx(2.0)
    # the per-round array (rho_table): each job's contention, bit for bit, also at and before arrival
    for now in (100.0, 150.0, 200.0, 50.0):
        got = pol.contention_of(["A", "B", "unseen"], now).tolist()
        assert got == [pol.contention(sched.view.jobs[j], now) for j in ("A", "B")] + [float(max(pol._n, 1))]
        # and by arrival order (what rho_table reads): -1 and an order past the table are jobs not seen arrive
        seqs = np.array([sched.view.jobs["A"].seq, sched.view.jobs["B"].seq, -1, 10 ** 6])
        assert pol.contention_by_seq(seqs, now).tolist() == got + got[2:]


@pytest.mark.parametrize("kw,word", [({"lease": 0}, "lease"), ({"fairness": 1.0}, "fairness"),
                                     ({"fairness": -0.1}, "fairness"), ({"report_interval": 0.0}, "report_interval"),
                                     ({"restart_cost": -3}, "restart_cost"), ({"tick": -1.0}, "tick"),
                                     ({"restart_gain": -1.0}, "restart_gain")])
def test_constructor_rejects_bad_values(kw: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word) as err:
        Themis(**kw)
    assert repr(next(iter(kw.values()))) in str(err.value)


def test_registry_builds_it() -> None:
    assert make_policy("themis").name == "themis"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31), st.sampled_from([0.0, 0.5, 0.8]))
def test_property_no_over_allocation_and_every_job_terminates(seed: int, f: float) -> None:
    check_terminates(Themis(lease=60.0, fairness=f, report_interval=15.0, restart_cost=5.0, tick=20.0), seed)


# ------------------------------------------------------------ GPU types (heterogeneous clusters)
def _gavel_jobs(tmp_path, steps: list[int]):
    from cohabit.sim.traces import load_trace

    line = "ResNet-18 (batch size 64)\tpython3 x.py\tdir\t--num_steps\t1\t{steps}\t1\t1\t-1\t0"
    p = tmp_path / "t.trace"
    p.write_text("\n".join(line.format(steps=s) for s in steps) + "\n")
    return load_trace(p, "gavel").jobs


def test_a_renewed_lease_on_a_slow_gpu_type_moves_to_a_faster_free_one(tmp_path) -> None:
    # one V100 (node 0) and one K80 (node 1), three ResNet-18 jobs taking turns in 10-minute leases (so
    # each is seen on both types); when a job ends on the V100, the job renewing its lease on the K80
    # moves to the V100 (it measured it ~3x faster there, which saves more than the restart)
    from cohabit.sim.physics import physics_config
    from cohabit.spec.cluster import gavel_cluster

    jobs = _gavel_jobs(tmp_path, [72_000, 48_000, 48_000])
    out = simulate(jobs, gavel_cluster(1, 0, 1, gpus_per_server=1), make_policy("themis"),
                   config=physics_config("gavel"))
    assert out.metrics.jobs_finished == 3
    moved = [e for e in out.result.record.of_kind(EventKind.MIGRATED) if e.data.get("nodes") == [0]]
    assert moved, "no job moved from the K80 to the free V100"
    last = max(out.result.jobs.values(), key=lambda j: j.end_time)
    assert last.id == moved[-1].job  # the last job ended on the V100


def test_gpu_types_leave_a_one_type_cluster_type_blind(tmp_path, monkeypatch) -> None:
    from cohabit.policies.type_speeds import TypeSpeeds
    from cohabit.sim.physics import physics_config
    from cohabit.spec.cluster import gavel_cluster

    def never(*a, **k):
        raise AssertionError("type-aware step on a one-type cluster")

    monkeypatch.setattr(Themis, "faster_types", never)
    monkeypatch.setattr(TypeSpeeds, "place", never)
    monkeypatch.setattr(TypeSpeeds, "observe", never)
    out = simulate(_gavel_jobs(tmp_path, [72_000, 48_000, 48_000]), gavel_cluster(2, 0, 0, gpus_per_server=1),
                   make_policy("themis"), config=physics_config("gavel"))
    assert out.metrics.jobs_finished == 3


def test_type_speeds_estimate_an_unseen_type_from_other_jobs_ratios() -> None:
    from types import SimpleNamespace

    from cohabit.policies.type_speeds import TypeSpeeds

    ts = TypeSpeeds()
    ts._seen = {"a": {("v100", 1): 30.0, ("k80", 1): 10.0}, "b": {("v100", 1): 8.0, ("k80", 1): 2.0},
                "c": {("k80", 1): 5.0}}
    ts._model = {"a": "resnet", "b": "lm", "c": "resnet"}
    c = SimpleNamespace(id="c", spec=SimpleNamespace(model="resnet"))
    assert ts.ratio("v100", "k80", "resnet") == pytest.approx(3.0)  # the same model's ratio first
    assert ts.ratio("v100", "k80") == pytest.approx(3.5)  # the median over all jobs
    assert ts.speed(c, "v100", 1) == pytest.approx(15.0)
    assert ts.speed(c, "k80", 1) == 5.0 and ts.speed(c, "k80", 2) is None
    assert ts.relative("k80") == pytest.approx((10 / 30 + 2 / 8) / 2) and ts.relative("p100") is None
    ts._types = {"k80": [1], "v100": [0], "p100": [2]}
    assert ts.ranked(SimpleNamespace(), c, 1) == ["v100", "k80", "p100"]
    assert ts.ranked(SimpleNamespace(), SimpleNamespace(id="d", spec=SimpleNamespace(model="x")), 1) == \
        ["v100", "k80", "p100"]  # by the types' relative speeds
    # no job seen on two types: two jobs of one model, one on each type, give the ratio
    ts = TypeSpeeds()
    ts._seen = {"e": {("v100", 1): 24.0}, "f": {("k80", 1): 8.0}, "g": {("k80", 1): 9.0}}
    ts._model = {"e": "resnet", "f": "resnet", "g": "lm"}
    assert ts.ratio("k80", "v100", "resnet") == pytest.approx(8.0 / 24.0)
    assert ts.speed(SimpleNamespace(id="e", spec=SimpleNamespace(model="resnet")), "k80", 1) == pytest.approx(8.0)
    assert ts.ratio("p100", "v100", "resnet") is None


def test_only_running_jobs_hold_a_lease_after_a_round() -> None:
    """A round sets the lease of every job it gives workers that runs after its plan and removes the lease of
    every job it gives none or leaves waiting (a start that found no placement), looking only at the round's
    jobs (issue 18, eleventh session): at every decide, every job holding a lease is running. Fails when the
    lease of a waiting job given workers is kept, or a paused job's is."""
    jobs = load_trace("tiresias_480", "tiresias", limit=200).jobs
    seen = {"rounds": 0}

    class Checked(Themis):
        def decide(self, view):  # type: ignore[no-untyped-def]
            assert set(self._expiry) <= set(view.running), sorted(set(self._expiry) - set(view.running))[:5]
            seen["rounds"] += 1
            return super().decide(view)

    out = simulate(jobs, small_cluster(2, 4), Checked(lease=300.0))
    assert seen["rounds"] > 100 and out.metrics.preemptions > 0


def test_a_round_over_no_jobs_targets_nothing() -> None:
    """``targets`` over no jobs gives what a round's caller unpacks: no targets, nobody to place, nobody to
    shrink (three values; it gave two). Fails with the old two-value return."""
    jobs = [trace_job("A", 1, 100, 0)]
    pol = Themis(lease=100.0)
    sched = Scheduler(small_cluster(1, 1), pol, SimBackend(jobs, NO_COST), horizon=0.0, strict=True)
    sched.run([j.spec for j in jobs])
    assert pol.targets(sched.view, []) == ({}, [], [])
