"""Rotary-DLT's synthetic workload (Table 3.2) as a cohabit trace, and its repository."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from typer.testing import CliRunner

from cohabit.cli import app
from cohabit.repository import JobRepository
from cohabit.sim import rotary_workload as W
from cohabit.sim.traces import load_trace
from cohabit.spec.cluster import preset
from cohabit.spec.criteria import Convergence, MetricTarget, RunFor


def test_the_mix_follows_table_3_2() -> None:
    jobs = W.generate(400, seed=0)
    kinds = Counter(type(j.spec.criteria) for j in jobs)
    assert abs(kinds[Convergence] / 400 - 0.6) < 0.07
    assert abs(kinds[MetricTarget] / 400 - 0.2) < 0.06 and abs(kinds[RunFor] / 400 - 0.2) < 0.06
    for j in jobs:
        c, s, t = j.spec.criteria, j.spec, j.truth
        if isinstance(c, Convergence):
            assert c.delta in W.CONVERGENCE_DELTAS and c.within.amount in W.MAX_EPOCHS
        elif isinstance(c, MetricTarget):
            assert c.value in W.ACCURACY_TARGETS and c.within.amount in W.MAX_EPOCHS
        else:
            assert c.budget.amount in W.RUNTIME_EPOCHS and c.budget.unit == "epochs"
        assert len(t.accuracy) == len(t.heldout_accuracy) == s.epochs and t.iterations == s.iterations
        assert s.workload["dataset"] == ("udtreebank" if s.model in ("lstm", "bilstm") else "cifar10")
        assert s.batch_size in (32, 64, 128, 256) and s.num_gpus == 1
    models = Counter(j.spec.model for j in jobs)
    assert len(models) == 13 and min(models.values()) > 10  # model families drawn uniformly


def test_reported_accuracy_is_the_held_out_curve_plus_validation_noise() -> None:
    jobs = W.generate(200, seed=1)
    diffs = np.concatenate([np.subtract(j.truth.accuracy, j.truth.heldout_accuracy) for j in jobs])
    assert abs(diffs.mean()) < 0.002 and 0.005 < diffs.std() < 0.02  # sd sqrt(p(1-p)/1000) <= 0.016
    first = jobs[0]
    assert first.spec.workload["curve"] and first.truth.heldout_accuracy[0] > 0


def test_generation_is_reproducible_and_arrivals_optional() -> None:
    a, b = W.generate(10, seed=5), W.generate(10, seed=5)
    assert [j.spec for j in a] == [j.spec for j in b] and [j.truth for j in a] == [j.truth for j in b]
    assert all(j.spec.submit_time == 0 for j in a)
    spread = W.generate(10, seed=5, mean_gap_s=60.0)
    times = [j.spec.submit_time for j in spread]
    assert times == sorted(times) and times[-1] > 0
    with pytest.raises(ValueError, match="n_jobs"):
        W.generate(0)


def test_step_times_come_from_the_gavel_profile() -> None:
    assert W.step_time("resnet", "cifar10", 32) == pytest.approx(1 / 29.947157347732464)
    assert W.step_time("vgg", "cifar10", 64) == pytest.approx(0.7 / 24.093231895382736)
    lm40, lm80 = 1 / 45.23737155222392, 1 / 28.239955054085122
    assert lm40 < W.step_time("lstm", "udtreebank", 64) < lm80  # interpolated between 40 and 80
    job = W.generate(1, seed=2)[0]
    spec = job.spec
    assert job.truth.duration == pytest.approx(spec.iterations * W.step_time(spec.model, "cifar10" if
                                               spec.model not in ("lstm", "bilstm") else "udtreebank",
                                               spec.batch_size))


def test_history_leaves_out_the_curves_the_jobs_were_drawn_from() -> None:
    jobs = W.generate(20, seed=3)
    hist = W.history(jobs)
    used = {j.spec.workload["curve"] for j in jobs}
    assert used and not used & {r.name for r in hist}
    assert len(hist) == 2214 - len(used)
    r = hist[0]
    assert r.peak_mem_mb == pytest.approx(W.peak_mem_mb(r.model, r.num_parameters, r.batch_size), rel=0.3)
    assert r.timings[0].device == "v100" and r.timings[0].epoch_s > r.timings[0].step_s


def test_cli_writes_trace_and_repository_and_simulate_runs_the_chapter_policies(tmp_path) -> None:
    trace, repo = tmp_path / "w.yaml", tmp_path / "w.sqlite"
    W.main([str(trace), "--jobs", "8", "--seed", "4", "--repo", str(repo)])
    loaded = load_trace(trace, "cohabit")
    assert len(loaded.jobs) == 8 and loaded.default_cluster == "rotary"
    assert preset("rotary").capacity["gpu"] == 4
    with JobRepository(repo) as r:
        assert len(r) > 2000
    out = tmp_path / "o.json"
    res = CliRunner().invoke(app, ["simulate", "--trace", str(trace), "--policy",
                                   f"rotary:repo={repo},srf,bcf,laf,rr", "--json", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    for name, pol in doc["policies"].items():
        att = pol["attainment"]
        assert att["jobs_with_criteria"] == 8 and att["attained"] + att["not_attained"] == 8, name
