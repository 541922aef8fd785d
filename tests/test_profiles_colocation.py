"""Lucid co-location pairs: symmetric lookups, bounded speeds, documented fallbacks."""

from __future__ import annotations

import csv
import io
import itertools
from importlib.resources import files
from statistics import fmean

import pytest

from cohabit.sim.profiles.colocation import (
    COLOCATION_MODELS,
    colocated_speed,
    colocation_runs,
    resolve_colocation_model,
    shared_gpu_speed,
)


def _rows() -> list[dict[str, str]]:
    text = files("cohabit.data").joinpath("profiles", "colocation_pairs_lucid.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


ROWS = _rows()
TRACE_NAMES = [
    "resnet50", "resnet-50", "vgg16", "vgg19", "inception3", "googlenet", "alexnet", "bert", "lstm",
    "deepspeech2", "yolov3", "ncf", "cifar10", "imagenet", "transformer", "resnet152", "inception4",
    "vgg11", "resnet101",
]
NAMES = [*COLOCATION_MODELS, *TRACE_NAMES, "unknown", "cnn-text-classification"]


def _measured_mean(victim: str, aggressor: str) -> float:
    values = [float(r["speed1"]) for r in ROWS if (r["model1"], r["model2"]) == (victim, aggressor)]
    values += [float(r["speed2"]) for r in ROWS if (r["model2"], r["model1"]) == (victim, aggressor)]
    return fmean(values)


def test_colocation_models_match_data() -> None:
    assert set(COLOCATION_MODELS) == {r["model1"] for r in ROWS} | {r["model2"] for r in ROWS}
    assert len(ROWS) == 1388


def test_colocated_speed_is_symmetric() -> None:
    for a, b in itertools.product(NAMES, repeat=2):
        sa, sb = colocated_speed(a, b)
        assert colocated_speed(b, a) == (sb, sa)
        assert colocated_speed(b, a, cap=None) == tuple(reversed(colocated_speed(a, b, cap=None)))


def test_colocated_speed_is_bounded() -> None:
    for a, b in itertools.product(NAMES, repeat=2):
        assert all(0.0 < s <= 1.0 for s in colocated_speed(a, b))
        assert all(0.0 < s <= 1.5 for s in colocated_speed(a, b, cap=None))


def test_colocated_speed_is_the_mean_over_measured_configurations() -> None:
    for a, b in [("ResNet18", "VGG"), ("MobileNetV3", "LSTM"), ("DCGAN", "PPO"), ("VGG", "PointNet")]:
        raw = colocated_speed(a, b, cap=None)
        assert raw == pytest.approx((_measured_mean(a, b), _measured_mean(b, a)))
        assert colocated_speed(a, b) == pytest.approx(tuple(min(x, 1.0) for x in raw))
    assert colocation_runs("ResNet18", "VGG") == 36


def test_colocated_speed_self_pair_pools_both_jobs() -> None:
    sa, sb = colocated_speed("LSTM", "LSTM")
    assert sa == sb == pytest.approx(_measured_mean("LSTM", "LSTM"))
    assert sa < 0.7  # the most interfering measured pair


def test_colocation_caps_measured_speed_ups_at_one() -> None:
    raw = colocated_speed("VGG", "PointNet", cap=None)
    assert raw[0] > 1.2
    assert colocated_speed("VGG", "PointNet")[0] == 1.0


@pytest.mark.parametrize("name", TRACE_NAMES)
def test_trace_names_resolve_to_a_measured_model(name: str) -> None:
    assert resolve_colocation_model(name) in COLOCATION_MODELS


def test_alias_families() -> None:
    assert resolve_colocation_model("VGG-16") == "VGG"
    assert resolve_colocation_model("alexnet") == "VGG"
    assert resolve_colocation_model("ResNet-50") == "ResNet18"
    assert resolve_colocation_model("bert-large") == "LSTM"
    assert resolve_colocation_model("mobilenet_v3") == "MobileNetV3"
    assert resolve_colocation_model("unknown") is None
    assert colocated_speed("resnet50", "vgg16") == colocated_speed("ResNet18", "VGG")


def test_unknown_models_use_the_mean_over_all_pairs() -> None:
    overall = fmean([float(r["speed1"]) for r in ROWS] + [float(r["speed2"]) for r in ROWS])
    assert colocated_speed("unknown", "mystery") == pytest.approx((overall, overall))


def test_unmeasured_pair_uses_the_victims_mean_over_partners() -> None:
    assert colocation_runs("NeuMF", "VGG") == 0
    neumf_mean = _measured_mean("NeuMF", "NeuMF")  # NeuMF was only run next to itself
    vgg_all = [float(r["speed1"]) for r in ROWS if r["model1"] == "VGG"]
    vgg_all += [float(r["speed2"]) for r in ROWS if r["model2"] == "VGG"]
    sa, sb = colocated_speed("NeuMF", "VGG", cap=None)
    assert sa == pytest.approx(neumf_mean)
    assert sb == pytest.approx(fmean(vgg_all))
    # a known model next to an unknown one: its mean over partners as well
    assert colocated_speed("VGG", "unknown", cap=None)[0] == pytest.approx(fmean(vgg_all))


def test_shared_gpu_speed_small_cases() -> None:
    assert shared_gpu_speed(["vgg16"]) == [1.0]
    assert shared_gpu_speed(["resnet50", "lstm"]) == list(colocated_speed("resnet50", "lstm"))
    with pytest.raises(ValueError, match="at least one model"):
        shared_gpu_speed([])


def test_shared_gpu_speed_three_jobs_is_product_of_pairs() -> None:
    models = ["ResNet18", "LSTM", "DCGAN"]
    got = shared_gpu_speed(models)
    for i, victim in enumerate(models):
        expected = 1.0
        for j, other in enumerate(models):
            if i != j:
                expected *= colocated_speed(victim, other)[0]
        assert got[i] == pytest.approx(max(expected, 1 / 3))


def test_shared_gpu_speed_never_below_time_slicing() -> None:
    for k in range(2, 12):
        speeds = shared_gpu_speed(["LSTM"] * k)
        assert all(1.0 / k - 1e-12 <= s <= 1.0 for s in speeds)
        assert sum(speeds) >= 1.0 - 1e-9
    assert shared_gpu_speed(["LSTM"] * 8) == [1 / 8] * 8
