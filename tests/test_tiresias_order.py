"""Tiresias's waiting order kept across rounds (issue 18): every round it must equal sorting every waiting
job by (queue, -Gittins index, queue entry, arrival), with each Gittins index as computed afresh; and the
shapes carried over from the last round must really not fit now."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cohabit.engine.view import ClusterView
from cohabit.policies.placement import Draft
from cohabit.policies.tiresias import Tiresias
from cohabit.policies.tiresias_order import Walk
from cohabit.policies.tiresias_preempt import Rec
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster, trace_job


class _Checked(Tiresias):
    """Checks the kept order against a full sort (and fresh indices) at every round."""

    rounds = 0

    def _waiting_order(self, view: ClusterView) -> list[tuple[bool, list[Rec]]]:
        lists = super()._waiting_order(view)
        for _, recs in lists:  # each list: one queue, one shape, sorted
            assert len({(r.key[0], r.q, r.shape) for r in recs}) == 1 and recs == sorted(recs, key=lambda r: r.key)
        order = list(Walk(lists))
        waiting = [r for table in self._wait for r in table.values()]
        if self.gittins:
            dist = self.distribution(view)
            a = np.array([self.service(r.job, view.now) for r in waiting])
            g = dist.index(a, self.gittins_delta)
            for r, gi in zip(waiting, g.tolist()):
                assert r.key == (r.q, -gi, r.entered, r.job.seq), (view.now, r.job.id)
        assert order == sorted(waiting, key=lambda r: r.key), view.now
        assert min(self._wait_sizes) == min(r.gpus for r in waiting)
        _Checked.rounds += 1
        return lists

    def _carried_failures(self, view: ClusterView) -> set[tuple[bytes, int, bool]]:
        carried = super()._carried_failures(view)
        for rec in self._recs.values():
            if rec.shape in carried and not rec.running:
                assert self.place(Draft(view), rec.job) is None, (view.now, rec.job.id)
        return carried


def _trace(seed: int) -> list:  # type: ignore[type-arg]
    rng = random.Random(seed)
    t, jobs = 0.0, []
    for i in range(70):
        t += rng.expovariate(1 / 50)
        jobs.append(trace_job(f"j{i}", rng.choice([1, 1, 2, 4, 8]), rng.choice([60.0, 400.0, 2000.0, 9000.0])
                              * rng.uniform(0.5, 1.5), submit=t, model=rng.choice(["resnet50", "vgg16"])))
    return jobs


@pytest.mark.parametrize("gittins", [False, True])
def test_kept_order_equals_a_full_sort_every_round(gittins: bool) -> None:
    _Checked.rounds = 0
    for seed in (1, 2):
        policy = _Checked(thresholds=(500.0, 4000.0), starve_limit=2.0, gittins=gittins, min_history=5,
                          min_run_time=30.0)
        out = simulate(_trace(seed), small_cluster(2, 8), policy, config=SimConfig(checkpoint_s=2.0, restore_s=2.0))
        assert out.metrics.preemptions > 0 and policy.promotions > 0  # demoted, paused, promoted and resumed
    assert _Checked.rounds > 200


class _CheckedQuiet(Tiresias):
    """Decides every round in full, and checks that each round the policy would have skipped as quiet
    (``_still_quiet``) indeed plans nothing."""

    skipped = 0

    def _still_quiet(self, view: ClusterView) -> bool:
        self._claimed = super()._still_quiet(view)
        return False

    def decide(self, view: ClusterView):  # type: ignore[no-untyped-def]
        self._claimed = False
        plan = super().decide(view)
        if self._claimed:
            assert plan == [], (view.now, plan)
            _CheckedQuiet.skipped += 1
        return plan


@pytest.mark.parametrize("gittins", [False, True])
def test_a_round_skipped_as_quiet_would_have_planned_nothing(gittins: bool) -> None:
    _CheckedQuiet.skipped = 0
    for seed in (3, 4):
        kw = dict(thresholds=(500.0, 4000.0), starve_limit=2.0, gittins=gittins, min_history=5, min_run_time=300.0)
        cfg = SimConfig(checkpoint_s=2.0, restore_s=2.0, report_interval_s=40.0)  # reports: rounds that change nothing
        checked = simulate(_trace(seed), small_cluster(2, 8), _CheckedQuiet(**kw), config=cfg)
        real = simulate(_trace(seed), small_cluster(2, 8), Tiresias(**kw), config=cfg)
        assert checked.metrics.preemptions > 0
        assert fingerprint(checked.result.record, checked.metrics) == fingerprint(real.result.record, real.metrics)
    assert _CheckedQuiet.skipped > 100


class _CheckedNothingStarts(Tiresias):
    """Walks every round in full, and checks that each round the policy would have ended without its walk
    (``_nothing_starts``) indeed plans nothing and leaves the same failures: those carried to the next round and
    the ledger's no-room index."""

    claimed = 0

    def _nothing_starts(self, view, lists, failed, free_gpus, min_need, lower):  # type: ignore[no-untyped-def]
        no_room = view.no_room_now()
        before, predicted = set(no_room), set(failed)
        self._claim = super()._nothing_starts(view, lists, predicted, free_gpus, min_need, lower)
        if self._claim:
            self._predicted = (predicted, set(no_room))
            no_room.intersection_update(before)  # (the walk below starts from the same state)
        else:
            assert predicted == failed and set(no_room) == before, view.now  # nothing changed
        return False

    def decide(self, view: ClusterView):  # type: ignore[no-untyped-def]
        self._claim = False
        plan = super().decide(view)
        if self._claim:
            assert plan == [], (view.now, plan)
            assert (self._nofit, set(view.no_room_now())) == self._predicted, view.now
            _CheckedNothingStarts.claimed += 1
        return plan


@pytest.mark.parametrize("gittins", [False, True])
def test_a_round_ended_before_its_walk_would_have_planned_nothing(gittins: bool) -> None:
    """The rounds ended without a walk (nobody below the highest waiting queue runs, and too few GPUs are free
    for the smallest waiting job, or no list's first job is tried) plan what the walk plans: nothing, with
    the same failures carried on."""
    cases = [(_crowded(6), (500.0, 4000.0), 30.0), (_cpu_bound(5), (500.0, 4000.0), 30.0),
             (_cpu_bound(6), (1e9,), 30.0)]
    _CheckedNothingStarts.claimed = 0
    for jobs, thresholds, min_run in cases:
        kw = dict(thresholds=thresholds, starve_limit=2.0, gittins=gittins, min_history=5, min_run_time=min_run)
        cfg = SimConfig(checkpoint_s=2.0, restore_s=2.0)
        checked = simulate(jobs, small_cluster(2, 8), _CheckedNothingStarts(**kw), config=cfg)
        real = simulate(jobs, small_cluster(2, 8), Tiresias(**kw), config=cfg)
        assert fingerprint(checked.result.record, checked.metrics) == fingerprint(real.result.record, real.metrics)
    assert _CheckedNothingStarts.claimed > 200


def _cpu_bound(seed: int) -> list[TraceJob]:
    """Mixed sizes on 16 GPUs, a third of the jobs needing 24 CPUs per GPU (a node has 64): rounds with free
    GPUs where every waiting shape failed on CPUs, and arrivals of such shapes."""
    rng = random.Random(seed)
    t, jobs = 0.0, []
    for i in range(120):
        t += rng.expovariate(1 / 15)
        g, dur = rng.choice([1, 1, 2, 4, 8]), rng.choice([60.0, 400.0, 2000.0]) * rng.uniform(0.5, 1.5)
        spec = simple_job(f"j{i}", g, submit_time=t, model=rng.choice(["resnet50", "vgg16"]), iterations=int(dur),
                          cpu_per_gpu=24.0 if rng.random() < 0.3 else 4.0)
        jobs.append(TraceJob(spec, JobTruth(iterations=int(dur), duration=dur, ref_workers=g)))
    return jobs


class _EveryJob(Tiresias):
    """Visits every waiting job each round (no list is parked)."""

    def _waiting_order(self, view: ClusterView) -> list[tuple[bool, list[Rec]]]:
        return [(False, recs) for _, recs in super()._waiting_order(view)]


def _crowded(seed: int) -> list:  # type: ignore[type-arg]
    """A long queue of mixed sizes on 16 GPUs: rounds with free GPUs that no waiting shape fits, failed
    and successful preemptions in the same round."""
    rng = random.Random(seed)
    t, jobs = 0.0, []
    for i in range(160):
        t += rng.expovariate(1 / 12)
        jobs.append(trace_job(f"j{i}", rng.choice([1, 1, 2, 3, 4, 8]), rng.choice([60.0, 400.0, 2000.0, 9000.0])
                              * rng.uniform(0.5, 1.5), submit=t, model=rng.choice(["resnet50", "vgg16", "bert"])))
    return jobs


@pytest.mark.parametrize("gittins", [False, True])
def test_parking_a_queue_and_shape_list_changes_no_decision(gittins: bool) -> None:
    """A round parks a (queue, shape) list whose job could neither be placed nor preempt, until a preemption
    succeeds; the plans are those of visiting every job. (The mechanism itself: the next test.)"""
    for seed, min_run in ((5, 0.0), (6, 30.0)):
        kw = dict(thresholds=(500.0, 4000.0), starve_limit=2.0, gittins=gittins, min_history=5, min_run_time=min_run)
        cfg = SimConfig(checkpoint_s=2.0, restore_s=2.0)
        real = simulate(_crowded(seed), small_cluster(2, 8), Tiresias(**kw), config=cfg)
        every = simulate(_crowded(seed), small_cluster(2, 8), _EveryJob(**kw), config=cfg)
        assert real.metrics.preemptions > 20
        assert fingerprint(real.result.record, real.metrics) == fingerprint(every.result.record, every.metrics)


def test_walk_merges_by_key_parks_and_takes_lists_up_again_after_the_current_key() -> None:
    from types import SimpleNamespace

    rng = random.Random(11)
    seqs = iter(rng.sample(range(1000), 400))
    lists = [sorted((SimpleNamespace(key=(rng.randrange(3), 0.0, float(rng.randrange(50)), next(seqs)), n=k)
                     for _ in range(rng.randrange(1, 40))), key=lambda r: r.key) for k in range(7)]
    everything = sorted((r for lst in lists for r in lst), key=lambda r: r.key)
    assert list(Walk([(True, list(lst)) for lst in lists])) == everything  # type: ignore[arg-type]

    walk = Walk([(k != 6, list(lst)) for k, lst in enumerate(lists)])  # type: ignore[arg-type]
    read, parked_at, gone, unparks = [], {}, set(), 0
    for rec in walk:
        read.append(rec)
        if rec.n != 6 and rec.n not in parked_at and rng.random() < 0.06:
            walk.park()
            parked_at[rec.n] = rec.key
        elif parked_at and rng.random() < 0.2:
            walk.unpark(rec.key)  # what the parked lists hold between their park and this key is passed over
            for n, since in parked_at.items():
                gone |= {id(r) for r in lists[n] if since < r.key < rec.key}
            parked_at.clear()
            unparks += 1
    for n, since in parked_at.items():  # still parked at the end
        gone |= {id(r) for r in lists[n] if r.key > since}
    assert unparks >= 3 and gone
    assert read == [r for r in everything if id(r) not in gone]
