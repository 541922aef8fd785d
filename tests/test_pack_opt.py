"""pack_opt heuristics and (pack-aware) Hyperband (Liu ch. 2, §2.4, Alg. 1 and 2, Table 2.3)."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cohabit.pack.hyperband import ConfigFits, Workload, brackets, hyperband, make_chooser, make_packer  # noqa: E402
from cohabit.pack.models import make_digits, split  # noqa: E402
from cohabit.pack.pack_opt import (  # noqa: E402
    TABLE_2_3,
    SearchSpace,
    TimeDistance,
    batch_size_pack,
    index_distance,
    knn_pack,
    no_pack,
    random_pack,
)


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _cfg(bs: int, opt: str, lr: float, act: str):
    s = TABLE_2_3
    return s.config(s.batch_sizes.index(bs), s.optimizers.index(opt), s.learning_rates.index(lr), s.activations.index(act))


def test_table_2_3_space_and_the_papers_distance_example() -> None:
    assert len(TABLE_2_3) == 1056 == len(TABLE_2_3.all())
    a, b = _cfg(20, "sgd", 0.01, "relu"), _cfg(40, "adagrad", 0.01, "relu")
    assert index_distance(a, b) == 5  # the worked example of §2.4.2
    assert index_distance(a, b, "euclid") == pytest.approx(17**0.5)
    with pytest.raises(ValueError, match="unknown metric 'cos'"):
        index_distance(a, b, "cos")
    with pytest.raises(ValueError, match="cannot sample 2000"):
        TABLE_2_3.sample(2000, random.Random(0))
    with pytest.raises(ValueError, match="unknown optimizers \\['lion'\\]"):
        SearchSpace(optimizers=("lion",))


def test_hyperband_brackets_r81_eta3() -> None:
    b = brackets(81, 3)
    assert [r[0] for r in b] == [(81, 1), (34, 3), (15, 9), (8, 27), (5, 81)]
    assert b[0] == [(81, 1), (27, 3), (9, 9), (3, 27), (1, 81)]
    with pytest.raises(ValueError, match="eta must be >= 2, got 1"):
        brackets(81, 1)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 5), cap=st.integers(1, 6), th=st.floats(0, 12))
def test_heuristics_partition_and_respect_memory(n, seed, cap, th) -> None:
    configs = TABLE_2_3.sample(n, random.Random(seed))
    configs += [TABLE_2_3.config(*c.index) for c in configs[: n // 3]]  # equal configs from another bracket
    fits = lambda g: len(g) <= cap  # noqa: E731
    for groups in (
        knn_pack(configs, threshold=th, rng=random.Random(seed), fits=fits),
        random_pack(configs, rng=random.Random(seed), fits=fits),
        batch_size_pack(configs, fits=fits),
        no_pack(configs),
    ):
        flat = [c for g in groups for c in g]
        assert sorted(map(id, flat)) == sorted(map(id, configs))  # a partition of the trials
        assert all(1 <= len(g) <= cap for g in groups)
    for g in knn_pack(configs, threshold=th, rng=random.Random(seed), fits=fits):
        assert all(index_distance(g[0], c) <= th for c in g)
    for g in batch_size_pack(configs, fits=fits):
        assert len({c.batch_size for c in g}) == 1


def test_knn_threshold_zero_packs_only_identical_neighbours() -> None:
    a = _cfg(20, "sgd", 0.01, "relu")
    b = _cfg(20, "sgd", 0.1, "relu")  # one lr step away
    assert len(knn_pack([a, b], threshold=0, rng=random.Random(0))) == 2
    assert len(knn_pack([a, b], threshold=1, rng=random.Random(0))) == 1
    assert len(knn_pack([a, b], threshold=1, rng=random.Random(0), max_size=1)) == 2


def test_time_distance_is_cached_and_normalised() -> None:
    calls = []
    d = TimeDistance(lambda a, b: (calls.append(1), (3.0, 4.0))[1])
    a, b = _cfg(20, "sgd", 0.01, "relu"), _cfg(20, "sgd", 0.1, "relu")
    assert d(a, b) == 0.75 and d(b, a) == 0.75 and len(calls) == 1  # lr does not change step time


def _workload(n: int = 400) -> Workload:
    x, y = make_digits(n, seed=0)
    xt, yt, xv, yv = split(x, y)
    return Workload("mlp3", xt, yt, xv, yv, unit_samples=24, seed=0, model_kwargs={"hidden": 16})


@pytest.mark.parametrize("schedule", ["alg2", "interleave+refill", "async-knn", "async-batch-size"])
def test_pack_aware_hyperband_finds_the_same_best_as_hyperband(schedule: str) -> None:
    plain = hyperband(_workload(), 9, 3, seed=1)
    w = _workload()
    extra = schedule == "interleave+refill"
    chooser = make_chooser(schedule.split("-", 1)[1]) if schedule.startswith("async") else None
    packed = hyperband(w, 9, 3, packer=make_packer("knn", w, memory_limit=2 << 20), memory_limit=2 << 20, seed=1,
                       interleave=extra, refill=extra, chooser=chooser)
    assert plain.trials == packed.trials == 17
    assert plain.steps == packed.steps
    assert plain.best.config == packed.best.config
    assert plain.best.val_loss == pytest.approx(packed.best.val_loss, abs=1e-4)
    assert packed.mean_pack > 1
    assert packed.loaded_samples < plain.loaded_samples  # the shared stream loads less


def test_config_fits_and_time_packer_run() -> None:
    w = _workload(200)
    fits = ConfigFits(w, 10**9)
    cs = TABLE_2_3.sample(6, random.Random(0))
    assert fits(cs) and fits.estimate(cs) > fits.estimate(cs[:1])
    assert not ConfigFits(w, fits.estimate(cs) - 1)(cs)
    res = hyperband(w, 3, 3, packer=make_packer("knn-time", w, memory_limit=None), seed=0)
    assert res.trials == 5
    with pytest.raises(ValueError, match="unknown packer 'best'"):
        make_packer("best", w, memory_limit=None)


def test_pack_profile_interpolates_measured_impv(tmp_path) -> None:
    import json

    from cohabit.pack.profile import PackProfile

    rows = [{"model": "mlp3", "n": n, "batch": b, "IMPV": v}
            for n, b, v in [(2, 32, 0.2), (2, 128, 0.4), (4, 32, 0.5), (4, 128, 0.6)]]
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"impv": rows}))
    p = PackProfile.load(path)
    assert p.impv("mlp3", 1, 64) == 0.0
    assert p.impv("mlp3", 2, 80) == pytest.approx(0.3)
    assert p.impv("mlp3", 3, 32) == pytest.approx(0.35)
    assert p.impv("mlp3", 8, 500) == pytest.approx(0.6)  # clamped to the measured range
    assert p.speed("mlp3", 2, 32) == pytest.approx(1 / (0.8 * 2))
    with pytest.raises(ValueError, match="no profile for model 'gpt'"):
        p.impv("gpt", 2, 32)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        p.impv("mlp3", 0, 32)


def test_pack_profile_from_csv_and_measurement_aware_pack_size() -> None:
    from cohabit.pack.profile import PackProfile

    text = ("# measured\nmodel,n,batch,IMPV\nmlp3,2,32,0.2\nmlp3,4,32,0.4\nmlp3,8,32,0.3\n"
            "cnn,2,32,0.05\ncnn,4,32,0.08\ncnn,8,32,-0.2\nslow,2,32,-0.1\n")
    p = PackProfile.from_csv(text, "t.csv")
    assert p.best_n("mlp3") == 4 and p.best_n("cnn") == 4 and p.best_n("slow") == 1
    assert p.best_n("mlp3", max_n=2) == 2
    with pytest.raises(ValueError, match=r"t.csv: data row 3: expected"):
        PackProfile.from_csv("model,n,batch,IMPV\nmlp3,2,32,0.1\nmlp3,x,32,0.1\n", "t.csv")


def test_measurement_aware_packer_caps_packs_at_the_profiles_best_size() -> None:
    from cohabit.pack.profile import PackProfile

    profile = PackProfile.from_csv("model,n,batch,IMPV\nmlp3,2,32,0.3\nmlp3,4,32,0.1\nmlp3,8,32,-0.1\n")
    w = _workload()
    res = hyperband(w, 9, 3, packer=make_packer("knn", w, memory_limit=2 << 20, threshold=20, profile=profile),
                    memory_limit=2 << 20, seed=1)
    plain = hyperband(_workload(), 9, 3, seed=1)
    assert 1 < res.mean_pack <= 2  # the profile says pairs gain most
    assert res.best.config == plain.best.config
