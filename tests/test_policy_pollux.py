"""The Pollux policy: exact count search, exploration limit, restart penalty, goodput model fit."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from cohabit.engine.record import EventKind
from cohabit.models.goodput import BatchLimits, GoodputModel, Observation, ThroughputParams, fit_throughput
from cohabit.policies import make_policy
from cohabit.policies.params import PolicyParamError
from cohabit.policies.pollux import Pollux, _knapsack
from cohabit.sim.physics import POLLUX_ARTIFACT
from cohabit.sim.runner import simulate
from cohabit.sim.traces._load import load_trace
from cohabit.spec.cluster import preset

from conftest import small_cluster


def test_knapsack_matches_brute_force() -> None:
    rng = random.Random(7)
    for _ in range(60):
        n, cap = rng.randint(1, 4), rng.randint(0, 7)
        choices, units = [], []
        for _ in range(n):
            counts = np.array([0, *sorted(rng.sample(range(1, 6), rng.randint(1, 3)))])
            choices.append((counts, np.array([rng.uniform(-5, 5) for _ in counts])))
            units.append(rng.randint(1, 2))
        picked = _knapsack(choices, units, cap)
        assert sum(k * u for k, u in zip(picked, units)) <= cap
        value = sum(float(u[list(c).index(k)]) for (c, u), k in zip(choices, picked))
        best = max(
            sum(float(u[i]) for (c, u), i in zip(choices, combo))
            for combo in itertools.product(*[range(len(c)) for c, _ in choices])
            if sum(int(c[i]) * un for (c, _), i, un in zip(choices, combo, units)) <= cap
        )
        assert value == pytest.approx(best)


def test_fit_recovers_the_throughput_model_it_was_sampled_from() -> None:
    # sync_time is the exposed part of a step (step - compute), as the profiles measure it
    truth = ThroughputParams(0.02, 0.001, 0.08, 0.004, 0.03, 0.002, 1.0)
    obs = [Observation(n, k, m, float(truth.iteration_time(n, k, m, 0)),
                       float(truth.sync_time(n, k)))
           for n, k in ((1, 1), (1, 2), (1, 4), (2, 4), (4, 8), (2, 8)) for m in (32, 64, 128)]
    fit = fit_throughput(obs)
    for n, k, m in ((1, 3, 100), (3, 12, 48), (1, 1, 256)):
        assert float(fit.iteration_time(n, k, m, 1)) == pytest.approx(float(truth.iteration_time(n, k, m, 1)),
                                                                         rel=1e-6)


def test_goodput_model_prefers_larger_batches_when_gradients_are_noisy() -> None:
    params = ThroughputParams(0.02, 0.001, 0.05, 0.0, 0.02, 0.0, 1.0)
    lim = BatchLimits(128, 4096, 32, 1024)
    noisy = GoodputModel(params, lim, grad_sqr=1.0, grad_var=1000.0)
    clean = GoodputModel(params, lim, grad_sqr=1000.0, grad_var=1.0)
    _, b_noisy = noisy.best(np.array([1]), np.array([4]))
    _, b_clean = clean.best(np.array([1]), np.array([4]))
    assert b_noisy[0] > 2 * b_clean[0]


def test_restart_penalty_formula() -> None:
    pol = Pollux(restart_penalty_s=30.0)

    class J:
        class spec:
            submit_time = 0.0
        preemptions, resizes, migrations = 1, 1, 0

    assert pol._penalty(J, 270.0) == pytest.approx((270.0 - 2 * 30.0) / 300.0)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises((ValueError, PolicyParamError)):
        make_policy("pollux:p=2")
    with pytest.raises((ValueError, PolicyParamError)):
        make_policy("pollux:max_growth=0.5")


def test_a_job_grows_at_most_twice_its_largest_size_per_round(tmp_path) -> None:
    p = tmp_path / "w.csv"
    p.write_text("name,time,application,num_replicas,batch_size\nb,0,bert,1,12\n")
    jobs = load_trace(p, "pollux").jobs
    out = simulate(jobs, small_cluster(2, 4), make_policy("pollux"), config=POLLUX_ARTIFACT, strict=True)
    sizes = [1]
    for e in out.result.record.of_kind(EventKind.RESIZED):
        if e.job == "b":
            sizes.append(len(e.data["nodes"]))
    assert max(sizes) > 1  # a lone job with noisy gradients grows
    assert all(b <= 2 * max(sizes[: i + 1]) for i, b in enumerate(sizes[1:], start=1))


def test_exploration_limit_is_twice_the_largest_size_seen() -> None:
    from types import SimpleNamespace

    from cohabit.policies.pollux import _Learned

    pol = Pollux()
    job = SimpleNamespace(id="j", n_workers=3, spec=SimpleNamespace(min_workers=1, max_workers=64))
    pol._jobs["j"] = st = _Learned()
    st.max_k = 3
    assert pol._allowed(job, 64).tolist() == [0, 1, 2, 3, 4, 5, 6]
    st.limits = BatchLimits(128, 256, 64, 128)  # the largest batch feeds at most 4 replicas
    assert pol._allowed(job, 64).max() == 4
    new = SimpleNamespace(id="n", n_workers=0, spec=SimpleNamespace(min_workers=1, max_workers=64))
    assert pol._allowed(new, 64).tolist() == [0, 1]


def test_pollux_beats_fixed_size_tiresias_on_a_pollux_workload() -> None:
    jobs = load_trace("pollux_workload-1", limit=12).jobs
    cl = preset("pollux")
    pol = simulate(jobs, cl, make_policy("pollux"), config=POLLUX_ARTIFACT)
    tir = simulate(jobs, cl, make_policy("tiresias:thresholds=[57600]:starve_limit=null"),
                   config=POLLUX_ARTIFACT, decision_period=60.0)
    assert not pol.result.unfinished
    assert pol.metrics.avg_jct < tir.metrics.avg_jct
