"""Rotary-DLT's estimators (§3.3.1): TEE against held-back real curves, TME, TTR, similarity."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cohabit.models import TEE, TME, TTR, JobTraits
from cohabit.models.similar import size_similarity, tee_similarity, top_k
from cohabit.repository import JobRecord, packaged_records


def traits(r: JobRecord) -> JobTraits:
    return JobTraits(r.model, r.dataset, r.batch_size, r.optimizer, r.learning_rate, r.num_parameters)


def test_similarity_follows_the_dissertation() -> None:
    assert size_similarity(100, 50) == 0.5 and size_similarity(7, 7) == 1.0 and size_similarity(None, 3) == 0.0
    job = JobTraits("resnet", "cifar10", 32, "SGD", 0.01, 1000)
    same = JobRecord("resnet", "cifar10", batch_size=32, optimizer="sgd", learning_rate=0.01, num_parameters=1000)
    other_ds = JobRecord("resnet", "udtreebank", batch_size=32, optimizer="SGD", learning_rate=0.01)
    half = JobRecord("vgg", "cifar10", batch_size=32, optimizer="Adam", learning_rate=0.1, num_parameters=2000)
    assert tee_similarity(job, same) == 5.0 and tee_similarity(job, other_ds) is None
    assert tee_similarity(job, half) == pytest.approx(1.5)
    assert [r for r, _ in top_k(job, [half, other_ds, same], 2)] == [same, half]


def test_tee_with_own_points_beats_history_alone_on_held_back_curves() -> None:
    """Leave one real curve out, give TEE its first 3 epochs, predict epochs 4..20 (error reported)."""
    recs = list(packaged_records())
    picks = np.random.default_rng(1).choice(len(recs), 30, replace=False)
    joint, hist_only = [], []
    for i in picks:
        held = recs[i]
        tee = TEE(recs[:i] + recs[i + 1:])
        own = [(e + 1.0, a) for e, a in enumerate(held.accuracy[:3])]
        later = np.arange(4.0, 21.0)
        truth = np.asarray(held.accuracy[3:])
        joint.append(np.mean(np.abs(tee.fit(traits(held), own).raw(later) - truth)))
        hist_only.append(np.mean(np.abs(tee.fit(traits(held), ()).raw(later) - truth)))
    mae_joint, mae_hist = float(np.mean(joint)), float(np.mean(hist_only))
    print(f"TEE MAE on 30 held-back curves, epochs 4-20: joint {mae_joint:.4f}, history only {mae_hist:.4f}")
    assert mae_joint < 0.08
    assert mae_joint < mae_hist  # the job's own points must improve the fit


def test_tee_gives_own_points_half_the_weight() -> None:
    flat = JobRecord("m", "d", accuracy=(0.2,) * 20, batch_size=8)
    tee = TEE([flat], k=1, degree=1)
    job = JobTraits("m", "d", 8)
    curve = tee.fit(job, [(float(e), 0.8) for e in range(1, 21)])
    # history (0.2) and own (0.8) weigh the same in total: the fit sits halfway
    assert curve.raw(np.array([1.0, 20.0])) == pytest.approx([0.5, 0.5], abs=1e-9)
    # four own points weigh as much as the 20 historical ones together: with those weights
    # (0.5 / 20 each, 0.5 / 4 each) the weighted residuals of a least-squares fit sum to zero
    own_x = [1.0, 5.0, 10.0, 20.0]
    few = tee.fit(job, [(e, 0.8) for e in own_x])
    x = np.asarray(list(range(1, 21)) + own_x, dtype=float)
    y = np.asarray([0.2] * 20 + [0.8] * 4)
    w = np.asarray([0.5 / 20] * 20 + [0.5 / 4] * 4)
    assert float(np.sum(w * (y - few.raw(x)))) == pytest.approx(0.0, abs=1e-9)
    assert tee.fit(job, ()).predict(5) == pytest.approx(0.2)
    assert TEE([], k=1).fit(job, ()) is None


def test_tee_epochs_to_reach_and_to_converge() -> None:
    rising = JobRecord("m", "d", accuracy=tuple(0.5 + 0.1 * math.log(e) for e in range(1, 21)))
    curve = TEE([rising], k=1).fit(JobTraits("m", "d"))
    assert curve.epochs_to_reach(0.5 + 0.1 * math.log(10) - 1e-9) == 10
    assert curve.epochs_to_reach(5.0, limit=500) == math.inf
    # gain from e-1 to e is 0.1 * ln(e / (e - 1)) < 0.01 first at e = 11
    assert curve.epochs_to_converge(0.01) == 11


def test_tme_weighted_regression_plus_five_percent_on_held_back_points() -> None:
    """Memory = 200 + 10 * batch (+ size term); hold one job back and estimate it."""
    def mem(params: int, b: int) -> float:
        return 200.0 + params / 1e5 + 10.0 * b

    hist = [JobRecord("m", "cifar10", batch_size=b, num_parameters=p, peak_mem_mb=mem(p, b))
            for p in (1_000_000, 1_100_000) for b in (8, 16, 32, 64)]
    hist.append(JobRecord("huge", "cifar10", batch_size=8, num_parameters=100_000_000, peak_mem_mb=9e9))
    tme = TME(hist, k=8)
    job = JobTraits("m", "cifar10", 128, num_parameters=1_050_000)
    est, raw = tme.estimate(job), tme.unpadded(job)
    truth = mem(1_050_000, 128)
    assert raw == pytest.approx(truth, rel=0.01) and est == pytest.approx(raw * 1.05)
    assert all(r.model != "huge" for r, _ in tme.similar(job))  # the dissimilar giant is not in the top 8
    assert TME(hist).estimate(JobTraits("m", "udtreebank", 8, num_parameters=1)) is None


def test_ttr_discards_the_first_step_after_each_launch() -> None:
    ttr = TTR()
    ttr.launched("j", "v100")
    assert not ttr.record("j", "v100", 5.0)  # warm-up step
    assert ttr.record("j", "v100", 0.1) and ttr.record("j", "v100", 0.3)
    assert ttr.step_time("j", "v100") == pytest.approx(0.2)
    assert ttr.epoch_time("j", "v100", 100) == pytest.approx(20.0)
    ttr.launched("j", "k80")
    ttr.record("j", "k80", 9.0)
    assert ttr.step_time("j", "k80") is None and ttr.devices("j") == ["v100"]
