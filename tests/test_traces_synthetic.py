"""Synthetic workloads: determinism per seed, arrival statistics, defaults, save and reload."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from cohabit.sim.traces import load_trace
from cohabit.sim.traces.synthetic import (
    PHILLY_GPU_SIZES, default_models, generate, iteration_time, seconds_per_iteration, write_tiresias_csv,
)
from cohabit.spec import JobSpec, simple_job

N = 8000
MEAN = 50.0


def _gaps(jobs: list) -> np.ndarray:
    return np.diff([j.spec.submit_time for j in jobs])


@pytest.fixture(scope="module")
def arrivals() -> dict[str, np.ndarray]:
    return {a: _gaps(generate(N, seed=11, arrival=a, mean_interarrival=MEAN)) for a in ("poisson", "uniform",
                                                                                            "bursty")}


def test_same_seed_same_jobs_other_seed_other_jobs() -> None:
    a = generate(300, seed=7, arrival="bursty")
    assert a == generate(300, seed=7, arrival="bursty")
    assert a != generate(300, seed=8, arrival="bursty")


def test_arrival_process_changes_only_submit_times() -> None:
    poisson, uniform = generate(200, seed=3), generate(200, seed=3, arrival="uniform")
    strip = lambda jobs: [(j.spec.model, j.spec.workers.count, j.truth) for j in jobs]  # noqa: E731
    assert strip(poisson) == strip(uniform)
    assert [j.spec.submit_time for j in poisson] != [j.spec.submit_time for j in uniform]


def test_jobs_are_valid_sorted_and_start_at_start_time() -> None:
    jobs = generate(500, seed=1, start_time=100.0)
    assert jobs[0].spec.submit_time == 100.0
    times = [j.spec.submit_time for j in jobs]
    assert times == sorted(times)
    assert [j.spec.id for j in jobs[:2]] == ["syn-000", "syn-001"]
    for j in jobs:
        assert JobSpec.model_validate(j.spec.model_dump()) == j.spec
        assert j.spec == simple_job(j.spec.id, j.spec.workers.count, submit_time=j.spec.submit_time,
                                    model=j.spec.model, iterations=j.spec.iterations)
        assert j.truth.iterations == j.spec.iterations and j.truth.ref_workers == j.spec.workers.count
        assert j.truth.duration is not None and j.truth.duration >= 1.0


def test_poisson_interarrivals_are_exponential(arrivals: dict[str, np.ndarray]) -> None:
    g = arrivals["poisson"]
    assert g.mean() == pytest.approx(MEAN, rel=0.05)
    assert g.std() / g.mean() == pytest.approx(1.0, abs=0.06)
    # memoryless: P(gap > mean) = 1/e
    assert (g > MEAN).mean() == pytest.approx(np.exp(-1), abs=0.02)


def test_uniform_interarrivals_are_steadier(arrivals: dict[str, np.ndarray]) -> None:
    g = arrivals["uniform"]
    assert g.mean() == pytest.approx(MEAN, rel=0.03)
    assert g.std() / g.mean() == pytest.approx(1 / np.sqrt(3), abs=0.03)
    assert g.max() <= 2 * MEAN + 1e-3


def test_bursty_arrivals_keep_the_mean_but_cluster(arrivals: dict[str, np.ndarray]) -> None:
    g = arrivals["bursty"]
    assert g.mean() == pytest.approx(MEAN, rel=0.15)
    assert g.std() / g.mean() > 1.3
    # Counts per window: variance far above the mean (a Poisson process has ratio 1).
    times = np.concatenate([[0.0], np.cumsum(g)])
    counts = np.histogram(times, bins=np.arange(0.0, times[-1], 20 * MEAN))[0]
    assert counts.var() / counts.mean() > 5
    poisson_times = np.concatenate([[0.0], np.cumsum(arrivals["poisson"])])
    pc = np.histogram(poisson_times, bins=np.arange(0.0, poisson_times[-1], 20 * MEAN))[0]
    assert pc.var() / pc.mean() < 1.5


def test_philly_defaults_mostly_one_gpu_heavy_tailed() -> None:
    jobs = generate(N, seed=5)
    sizes = Counter(j.spec.workers.count for j in jobs)
    assert sizes[1] / N == pytest.approx(PHILLY_GPU_SIZES[1], abs=0.015)
    assert set(sizes) <= set(PHILLY_GPU_SIZES)
    d = np.array([j.truth.duration for j in jobs])
    assert np.median(d) == pytest.approx(np.exp(6.79), rel=0.1)
    assert d.mean() > 4 * np.median(d)  # heavy right tail
    assert {j.spec.model for j in jobs} == set(default_models())
    gaps = _gaps(jobs)
    assert gaps.mean() == pytest.approx(114.4, rel=0.05)


def test_custom_mixes_and_durations() -> None:
    jobs = generate(2000, seed=2, model_mix={"vgg16": 3, "alexnet": 1}, gpu_sizes={2: 1.0, 4: 0.0},
                    duration_dist=("uniform", 100, 200))
    assert {j.spec.workers.count for j in jobs} == {2}
    share = Counter(j.spec.model for j in jobs)["vgg16"] / 2000
    assert share == pytest.approx(0.75, abs=0.04)
    d = [j.truth.duration for j in jobs]
    assert 100 <= min(d) and max(d) <= 200
    const = generate(3, seed=0, duration_dist=("constant", 42), model_mix={"mystery": 1})
    assert [j.truth.duration for j in const] == [42.0] * 3
    assert [j.spec.iterations for j in const] == [42] * 3  # unknown model: nominal 1 s iterations
    capped = generate(500, seed=0, duration_dist=("exponential", 1000), max_duration=1500)
    assert max(j.truth.duration for j in capped) <= 1500


def test_iterations_follow_measured_iteration_times() -> None:
    table = seconds_per_iteration()
    assert len({m for m, _ in table}) == 10
    assert iteration_time("resnet50", 1) == pytest.approx(0.153, abs=0.001)
    assert iteration_time("resnet50", 6) == table["resnet50", 4]  # nearest measured size below
    assert iteration_time("unknown-model", 4) == 1.0
    for j in generate(200, seed=4):
        expected = j.truth.duration / iteration_time(j.spec.model, j.spec.workers.count)
        assert abs(j.truth.iterations - expected) <= 0.5 + 1e-9 or j.truth.iterations == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_jobs": -1}, "n_jobs"),
        ({"arrival": "gamma"}, "known: poisson, uniform, bursty"),
        ({"mean_interarrival": 0}, "mean_interarrival"),
        ({"model_mix": {}}, "model_mix"),
        ({"model_mix": {"a": -1}}, "model_mix\\['a'\\]"),
        ({"gpu_sizes": {0: 1.0}}, "gpu_sizes"),
        ({"gpu_sizes": {1: 0.0}}, "must not all be 0"),
        ({"duration_dist": ("weibull", 1)}, "lognormal, exponential, uniform, constant"),
        ({"duration_dist": ("lognormal", 1)}, "takes \\(mu, sigma\\)"),
        ({"duration_dist": ("uniform", 5, 1)}, "low <= high"),
        ({"burst_rate_ratio": 1.0}, "burst_rate_ratio"),
        ({"burst_time_fraction": 1.0}, "burst_time_fraction"),
        ({"seed": -3}, "seed"),
    ],
)
def test_bad_arguments_name_the_value(kwargs: dict, message: str) -> None:
    args = {"n_jobs": 10, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        generate(**args)


def test_zero_jobs() -> None:
    assert generate(0, seed=0) == []


def test_write_tiresias_csv_round_trips(tmp_path: Path) -> None:
    jobs = generate(400, seed=9, arrival="bursty")
    path = write_tiresias_csv(jobs, tmp_path / "syn.csv")
    load = load_trace(path, "tiresias")
    assert load.jobs == jobs and load.skipped == []
    header = path.read_text().splitlines()[0]
    assert header == "job_id,num_gpu,submit_time,iterations,model_name,duration,interval"


def test_write_tiresias_csv_round_trips_the_embedded_trace(tmp_path: Path) -> None:
    jobs = load_trace("tiresias_480").jobs
    assert load_trace(write_tiresias_csv(jobs, tmp_path / "t.csv"), "tiresias").jobs == jobs


def test_write_tiresias_csv_refuses_what_the_format_cannot_hold(tmp_path: Path) -> None:
    pollux = load_trace("pollux_workload-1", limit=1).jobs
    with pytest.raises(ValueError, match="has no duration"):
        write_tiresias_csv(pollux, tmp_path / "p.csv")
    shared = [j for j in load_trace("alibaba_openb").jobs if 0 < j.spec.workers.demand["gpu"] < 1][:1]
    with pytest.raises(ValueError, match="whole GPUs"):
        write_tiresias_csv(shared, tmp_path / "a.csv")
