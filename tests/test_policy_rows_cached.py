"""The learning-curve policies' per-round rows kept between rounds (issue 18): a paused job's snapshot
row made at its first round in that pause, pending jobs' rows from the per-job table in one numpy
pass, and greedy_by_value's back-filling scan on plain floats all give exactly what the reference
computes (every row in Python; the scan with numpy per entry)."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from cohabit.policies.optimus import JobModels, Optimus
from cohabit.policies.slaq import SLAQ
from cohabit.policies.themis import Themis
from cohabit.policies.targets import EPS, greedy_by_value
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster


def _workload(seed: int, elastic: bool = False) -> list[TraceJob]:
    """40 jobs of three models (some without a declared length: the finished jobs' mean is read) that
    queue on 8 GPUs, arriving over an hour; with ``elastic``, some may grow by a worker (Optimus' rounds
    with only rigid jobs make no rows: ``Optimus._rigid_round``)."""
    rng = random.Random(seed)
    out = []
    for i in range(40):
        gpus = rng.choice([1, 1, 2, 4])
        iters = rng.randint(300, 4000)
        grow = {"n_min": gpus, "n_max": gpus + 1} if elastic and rng.random() < 0.5 else {}
        spec = simple_job(f"j{i}", gpus, submit_time=rng.uniform(0, 3600), model=rng.choice(["a", "b", "c"]),
                          iterations=iters if rng.random() < 0.6 else None, **grow)
        curve = (rng.uniform(2, 40), 1.0, rng.uniform(0.05, 0.5))
        out.append(TraceJob(spec, JobTruth(iterations=iters, duration=iters * rng.uniform(0.5, 2.0),
                                           ref_workers=gpus, loss_curve=curve)))
    return out


POLICIES = {
    "slaq": lambda: SLAQ(epoch=120.0, report_interval=30.0),
    "themis": lambda: Themis(lease=120.0, report_interval=30.0, tick=30.0),
    "optimus": lambda: Optimus(interval=120.0, report_interval=60.0),
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_cached_rows_are_the_rows_made_afresh(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = JobModels.snapshot_of
    seen = {"rows": 0, "paused": 0, "pending": 0, "by id": 0}

    def checked(self, jobs, now, view, *, cached=True, waiting_tail=0):
        snap = real(self, jobs, now, view, cached=cached, waiting_tail=waiting_tail)
        seen["by id"] += waiting_tail > 0
        if cached and view is not None and len(snap):
            ref = real(self, jobs, now, view, cached=False)
            for f in dataclasses.fields(snap):
                a, b = getattr(snap, f.name), getattr(ref, f.name)
                if isinstance(a, np.ndarray):
                    assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), (f.name, now)
                else:
                    assert a == b, (f.name, now)
            seen["rows"] += len(snap)
            seen["paused"] += int((snap.state == 2).sum())
            seen["pending"] += int((snap.state == 0).sum())
        return snap

    monkeypatch.setattr(JobModels, "snapshot_of", checked)
    gather = JobModels._with_fresh

    def counted(self, n, ints, flts, fresh_pos, fresh_slot):
        seen["all from the table"] = seen.get("all from the table", 0) + (len(fresh_pos) == n)
        return gather(self, n, ints, flts, fresh_pos, fresh_slot)

    monkeypatch.setattr(JobModels, "_with_fresh", counted)
    for seed in range(3):
        out = simulate(_workload(seed, elastic=policy == "optimus"), small_cluster(2, 4), POLICIES[policy]())
        assert not out.result.unfinished
    assert seen["pending"] > 0  # the table's rows were compared
    assert seen["all from the table"] > 0  # also snapshots whose every row was gathered from the table at once
    if policy != "optimus":  # (optimus never pauses)
        assert seen["paused"] > 0  # and the kept rows of paused jobs
        assert seen["by id"] > 0  # and the queue's rows found by job id (waiting_tail)


def _greedy_reference(values, first_cost, unit_cost, free, *, floor=0.0, scan=512):
    """greedy_by_value as it was written first: the back-filling scan with a numpy test per entry."""
    n_jobs = values.shape[0]
    counts = np.zeros(n_jobs, dtype=np.int64)
    rem = free.astype(np.float64).copy()
    vals = np.minimum.accumulate(values, axis=1)
    jj, ii = np.nonzero(vals > floor)
    if jj.size == 0:
        return counts, rem
    order = np.argsort(-vals[jj, ii], kind="stable")
    jj, ii = jj[order], ii[order]
    cost = np.where((ii == 0)[:, None], first_cost[jj], unit_cost[jj])
    cum = np.cumsum(cost, axis=0)
    ok = (cum <= rem + EPS).all(axis=1)
    cut = int(jj.size if ok.all() else np.argmin(ok))
    if cut:
        counts += np.bincount(jj[:cut], minlength=n_jobs)
        rem -= cum[cut - 1]
    smallest = np.minimum(first_cost.min(axis=0), unit_cost.min(axis=0))
    blocked: set[int] = set()
    for e in range(cut, min(jj.size, cut + scan)):
        if not (smallest <= rem + EPS).all():
            break
        j, i = int(jj[e]), int(ii[e])
        if j in blocked:
            continue
        if i != counts[j]:
            blocked.add(j)
            continue
        c = first_cost[j] if i == 0 else unit_cost[j]
        if (c <= rem + EPS).all():
            rem -= c
            counts[j] += 1
        else:
            blocked.add(j)
    return counts, rem


@pytest.mark.parametrize("seed", range(40))
def test_the_backfill_scan_on_floats_is_the_numpy_scan(seed: int) -> None:
    rng = random.Random(seed)
    n, width, r = rng.randint(1, 30), rng.randint(1, 4), rng.randint(1, 3)
    values = np.array([[rng.choice([-np.inf, rng.uniform(-1, 5)]) for _ in range(width)] for _ in range(n)])
    first = np.array([[rng.choice([0.0, 1.0, 2.0, 4.0, rng.uniform(0, 3)]) for _ in range(r)] for _ in range(n)])
    unit = np.array([[rng.choice([0.0, 1.0, rng.uniform(0, 2)]) for _ in range(r)] for _ in range(n)])
    free = np.array([rng.uniform(0, 12) for _ in range(r)])
    scan = rng.choice([0, 1, 3, 512])
    got = greedy_by_value(values, first, unit, free, scan=scan)
    want = _greedy_reference(values, first, unit, free, scan=scan)
    assert np.array_equal(got[0], want[0])
    assert np.array_equal(got[1], want[1])  # the same floats: the same subtractions in the same order


@pytest.mark.parametrize("seed", range(30))
def test_the_backfill_past_a_long_queue_is_the_scan_of_every_entry(seed: int) -> None:
    """Long queues behind a nearly full cluster, multi-unit rows: the back-filling scan over only the entries
    that fit the capacity left when it starts (``_backfill_fitting``) gives what the scan of every entry gives
    (fails if an entry left out could still fit, or if leaving it out lets its job's later units through)."""
    rng = random.Random(1000 + seed)
    n, width, r = rng.randint(20, 200), rng.randint(1, 5), rng.randint(1, 3)
    values = np.array([[rng.choice([-np.inf, rng.uniform(-1, 5), 2.0]) for _ in range(width)] for _ in range(n)])
    first = np.array([[rng.choice([1.0, 2.0, 8.0, rng.uniform(0, 9)]) for _ in range(r)] for _ in range(n)])
    unit = np.array([[rng.choice([0.0, 1.0, 0.5, rng.uniform(0, 3)]) for _ in range(r)] for _ in range(n)])
    free = np.array([rng.uniform(0, 30) for _ in range(r)])
    scan = rng.choice([5, 40, 512])
    got = greedy_by_value(values, first, unit, free, scan=scan)
    want = _greedy_reference(values, first, unit, free, scan=scan)
    assert np.array_equal(got[0], want[0])
    assert np.array_equal(got[1], want[1])


@pytest.mark.parametrize("seed", range(30))
def test_admit_in_order_is_the_greedy_with_rows_valued_in_order(seed: int) -> None:
    """admit_in_order without the sort is greedy_by_value of one unit per row, valued in decreasing row order
    (its definition before issue 18's ninth session), bit for bit: the admitted rows and the capacity left."""
    from cohabit.policies.targets import admit_in_order

    rng = random.Random(2000 + seed)
    n, r = rng.randint(0, 120), rng.randint(1, 3)
    cost = np.array([[rng.choice([0.0, 1.0, 2.0, 8.0, rng.uniform(0, 9)]) for _ in range(r)] for _ in range(n)]).reshape(n, r)
    free = np.array([rng.uniform(0, 40) for _ in range(r)])
    scan = rng.choice([0, 1, 7, 512])
    ok, rem = admit_in_order(cost, free, scan=scan)
    values = (n - np.arange(n, dtype=np.float64))[:, None]
    counts, want_rem = _greedy_reference(values, cost, cost, free, scan=scan)
    assert np.array_equal(ok, counts > 0)
    assert np.array_equal(rem, want_rem)


def test_a_finished_jobs_table_slot_goes_to_the_next_job_with_a_fresh_row() -> None:
    """The per-job table holds the jobs alive, not every job seen: a dropped job's slot is reused, and the
    job given it reads its own constants and a pending job's row, nothing of the one before."""
    from cohabit.policies.job_table import StaticTable

    t = StaticTable()
    a = t.add("a", 0, 1, 4, 10.0, 500.0, "m1", 0, 0)
    b = t.add("b", 1, 2, 2, 20.0, float("nan"), "m2", 1, 0)
    t.freeze(a, 300.0, (1.0, 2.0, 3.0), (900.0, 0.1, 0.2, 0.3, 0.4), prior=False)
    t.drop("a")
    c = t.add("c", 2, 1, 8, 30.0, 700.0, "m1", 1, 1)
    assert c == a and t.used == 2 and t.slots == {"b": b, "c": c}
    assert (t.seq[c], t.lo[c], t.hi[c], t.submit[c], t.declared[c], t.code[c], t.prior[c]) == (2, 1, 8, 30.0, 700.0, 0, True)
    assert t.flts[0, c] == 0.0 and np.isnan(t.flts[6:9, c]).all() and t.models[t.model[c]] == "m1"
    assert (t.flts[3:6, c] == 0.0).all() and (t.flts[9:12, c] == 0.0).all()  # nothing of a's frozen row
    assert t.add("d", 3, 1, 1, 40.0, 1.0, "m3", 0, 0) == 2  # no free slot: a new one


def test_the_fit_numbers_of_many_jobs_are_each_jobs_fit_and_rates() -> None:
    """``JobModels._fits_of`` (a round's running jobs, read after ``LossFits.fit_many`` caught them up) gives per
    job its fitted curve's length estimate (capped by a declared count), ``beta0``, ``beta1``, and the track's
    largest and last loss drop per iteration; NaNs and zero rates for a job whose loss was never observed.
    Fails if two of the five numbers are swapped, the cap is dropped, or a job's memo is another job's."""
    import math

    models = JobModels(recency=0.95, rates=True)
    rng = random.Random(3)
    ids = [f"j{i}" for i in range(12)]
    for jid in ids[:-1]:  # (the last one never reported)
        b0, b1, b2 = rng.uniform(1e-4, 1e-2), rng.uniform(0.5, 2), rng.uniform(0, 0.3)
        n = rng.choice([3, 8, 30, 90])
        models.loss.follow(jid, [(60.0 * k, 1.0 / (b0 * 60.0 * k + b1) + b2 + rng.uniform(0, 1e-3)) for k in range(n)])
    declared = [rng.choice([math.nan, 50.0, 1e9]) for _ in ids]
    models.loss.fit_many(ids)
    got = models._fits_of(ids, declared)
    for i, (jid, d) in enumerate(zip(ids, declared)):
        row = got[5 * i:5 * i + 5]
        if jid not in models.loss.tracks:
            assert all(x != x for x in row[:3]) and row[3:] == [0.0, 0.0]
            continue
        t = models.loss.tracks[jid]
        if t.curve is None:
            assert all(x != x for x in row[:3])
        else:
            total = t.curve.iterations_to_converge(models.tolerance)
            assert row[:3] == [min(total, d) if d == d else total, t.curve.beta0, t.curve.beta1], jid
        assert row[3:] == [t.max_rate, t.last_rate] and t.max_rate != t.last_rate, jid
    assert sum(models.loss.tracks[j].curve is not None for j in ids[:-1]) >= 5
    assert any(d == 50.0 for d in declared) and got == models._fits_of(ids, declared)  # (read again: the memo)
