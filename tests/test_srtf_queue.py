"""SRTF's incremental waiting order (issue 18): the same order and estimates as re-estimating and
sorting every waiting job each round, by hand and on whole simulations."""

from __future__ import annotations

import math
import random

from cohabit.engine.job import JobView
from cohabit.engine.record import EventKind
from cohabit.engine.view import ClusterView
from cohabit.policies import SRTF
from cohabit.policies.srtf_queue import MeanQueue, Streams
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate

from conftest import small_cluster, trace_job


def _brute(entries: dict[str, tuple[float, int]], mean: float | None) -> list[tuple[float, int, str]]:
    """Every estimate recomputed and sorted by (estimate, seq): what SRTF did before."""
    est = (lambda e: math.inf) if mean is None else (lambda e: max(mean - e, 0.0))
    return sorted(((est(e), seq, jid) for jid, (e, seq) in entries.items()), key=lambda x: (x[0], x[1]))


def test_mean_queue_reads_in_estimate_then_arrival_order_for_every_mean() -> None:
    rng = random.Random(7)
    q, entries = MeanQueue(), {}
    seqs = rng.sample(range(10_000), 400)  # arrival numbers are unique, in no particular order
    for step in range(400):
        jid = f"j{rng.randrange(120)}"
        if jid in entries and rng.random() < 0.4:
            q.discard(jid)
            del entries[jid]
        else:  # run times that tie, that exceed the mean (clamped to 0) and that collapse when subtracted
            e = rng.choice([0.0, 0.0, 5.0, float(rng.randrange(1, 50)), rng.uniform(0, 100)])
            seq = seqs[step]
            q.add(jid, e, seq)
            entries[jid] = (e, seq)
        for mean in (None, 0.0, 30.0, 1e17):  # at 1e17 every run time below 8 rounds to one estimate
            assert list(q.ordered(mean)) == _brute(entries, mean), (step, mean)
    assert set(q.ids) == set(entries)


def test_run_times_that_round_to_one_estimate_go_by_arrival() -> None:
    """1e17 - 1 and 1e17 - 3 are both 1e17 in floating point: the later-arriving job with the longer
    run time must not go first (ordering by run time alone would put it first)."""
    q = MeanQueue()
    q.add("early", 1.0, seq=1)
    q.add("late", 3.0, seq=2)
    assert [jid for _, _, jid in q.ordered(1e17)] == ["early", "late"]
    assert [jid for _, _, jid in q.ordered(10.0)] == ["late", "early"]


class _ReferenceSRTF(SRTF):
    """SRTF with every waiting job re-estimated (no cache) and sorted each round."""

    def _ordered(self, view: ClusterView, n_history: int) -> Streams[JobView]:
        waiting = [*view.pending.values(), *view.paused.values()]
        everything = sorted(((self.remaining(j, view), j.seq, j) for j in waiting), key=lambda x: (x[0], x[1]))
        return Streams([(False, iter(everything))])  # one stream that is never skipped

    def _running_bound(self, view: ClusterView, n_history: int) -> float:
        return math.inf  # no pruning: every round ranks the running jobs


class _CheckedBoundSRTF(SRTF):
    """SRTF that checks, every round, that its pruning bound (computed afresh or kept from an earlier round
    while nothing it reads moved) is at least every running job's estimate."""

    rounds_checked = 0

    def _bound_now(self, view: ClusterView, n_history: int) -> float:
        bound = super()._bound_now(view, n_history)
        for r in view.running.values():
            assert bound >= self.remaining(r, view), (view.now, r.id)
        if view.running:
            _CheckedBoundSRTF.rounds_checked += 1
        return bound


def _mixed_trace(seed: int) -> list:  # type: ignore[type-arg]
    """Jobs with and without a declared length: the declared ones preempt the others, so jobs
    without one are paused and come back with a run time (the incremental order's hard case)."""
    rng = random.Random(seed)
    t, jobs = 0.0, []
    for i in range(90):
        t += rng.expovariate(1 / 40)
        jobs.append(trace_job(f"j{i}", rng.choice([1, 1, 2, 4]), rng.choice([30.0, 200.0, 900.0, 3000.0]) *
                              rng.uniform(0.5, 1.5), submit=t, declare=rng.random() < 0.4))
    return jobs


def test_srtf_decides_as_if_it_resorted_everything_each_round() -> None:
    no_cost = SimConfig(checkpoint_s=0.0, restore_s=0.0)
    for seed in (1, 2, 3):
        jobs = _mixed_trace(seed)
        runs = [simulate(jobs, small_cluster(2, 4), pol(preempt_margin=0.0, min_run_time=0.0), config=no_cost)
                for pol in (SRTF, _ReferenceSRTF)]
        undeclared = {j.spec.id for j in jobs if j.spec.iterations is None}
        resumed = {e.job for e in runs[0].result.record if e.kind == EventKind.RESUMED}
        assert resumed & undeclared, "the trace must pause and resume jobs without a declared length"
        assert fingerprint(runs[0].result.record, runs[0].metrics) == \
            fingerprint(runs[1].result.record, runs[1].metrics), seed


def test_the_running_bound_bounds_every_running_estimate() -> None:
    """Jobs without a declared length are bounded by the mean finished run time, without per-job work."""
    for seed in (1, 2):
        simulate(_mixed_trace(seed), small_cluster(2, 4), _CheckedBoundSRTF(preempt_margin=0.0, min_run_time=0.0),
                 config=SimConfig(checkpoint_s=0.0, restore_s=0.0))
    assert _CheckedBoundSRTF.rounds_checked > 50


def test_streams_read_in_estimate_then_arrival_order_and_skip_only_the_last_droppable_stream() -> None:
    rng = random.Random(3)
    seqs = iter(rng.sample(range(1000), 300))
    lists = [sorted(((float(rng.randrange(20)), next(seqs), f"s{k}-{i}") for i in range(rng.randrange(1, 40))),
                    key=lambda x: (x[0], x[1])) for k in range(6)]
    everything = sorted((x for lst in lists for x in lst), key=lambda x: (x[0], x[1]))
    assert list(Streams([(True, iter(lst)) for lst in lists])) == everything

    streams = Streams([(k != 5, iter(lst)) for k, lst in enumerate(lists)])  # stream 5 cannot be dropped
    read, skipped_after = [], {}  # stream -> the item after which it was skipped
    for item in streams:
        read.append(item)
        stream = int(item[2][1:item[2].index("-")])
        if stream not in skipped_after and rng.random() < 0.15:
            streams.skip_rest()  # no effect on stream 5
            if stream != 5:
                skipped_after[stream] = item
    expected = [x for x in everything  # everything, less what follows each skip in its stream
                if (k := int(x[2][1:x[2].index("-")])) not in skipped_after or (x[0], x[1]) <= skipped_after[k][:2]]
    assert len(skipped_after) >= 2 and read == expected
    assert [x for x in read if x[2].startswith("s5-")] == lists[5]


def _shapes_trace(seed: int) -> list:  # type: ignore[type-arg]
    """Mostly declared lengths (the per-shape sorted lists), five GPU sizes on two 8-GPU nodes: preemptions
    fail for some shapes while others succeed in the same round."""
    rng = random.Random(seed)
    t, jobs = 0.0, []
    for i in range(120):
        t += rng.expovariate(1 / 25)
        jobs.append(trace_job(f"j{i}", rng.choice([1, 1, 2, 4, 8]),
                              rng.choice([30.0, 200.0, 900.0, 3000.0]) * rng.uniform(0.5, 1.5), submit=t,
                              declare=rng.random() < 0.7, model=rng.choice(["resnet50", "vgg16", "bert"])))
    return jobs


def test_a_shape_whose_preemption_failed_is_skipped_for_the_rest_of_the_round() -> None:
    """SRTF skips the rest of a shape's stream once its preemption failed (or was known to fail) in a round;
    the plans are those of trying every job (the reference). Fails if a shape is skipped as soon as it
    does not fit (a later job of it could still preempt)."""
    no_cost = SimConfig(checkpoint_s=0.0, restore_s=0.0)
    for seed in (1, 3):
        for min_run in (0.0, 60.0):
            jobs = _shapes_trace(seed)
            runs = [simulate(jobs, small_cluster(2, 8), pol(preempt_margin=0.0, min_run_time=min_run), config=no_cost)
                    for pol in (SRTF, _ReferenceSRTF)]
            assert sum(e.kind == EventKind.PAUSED for e in runs[1].result.record) > 20
            assert fingerprint(runs[0].result.record, runs[0].metrics) == \
                fingerprint(runs[1].result.record, runs[1].metrics), (seed, min_run)
