"""Spread-versus-consolidated factor: 1 on one node, decreasing with spread, configurable."""

from __future__ import annotations

import statistics

import pytest

from cohabit.sim.profiles.placement import DEFAULT_SPREAD, DEFAULT_SPREAD_FACTORS, SpreadModel
from cohabit.sim.profiles.pollux import pollux_measured_rows

MODELS = ["vgg16", "vgg19", "alexnet", "resnet50", "inception3", "bert", "unknown", "ResNet-152", None]


@pytest.mark.parametrize("model", MODELS)
def test_spread_factor_is_one_on_one_node(model: str | None) -> None:
    assert SpreadModel().speed_factor(model, 1) == 1.0


@pytest.mark.parametrize("model", MODELS)
def test_spread_factor_in_unit_interval_and_non_increasing(model: str | None) -> None:
    spread = SpreadModel()
    values = [spread.speed_factor(model, n) for n in range(1, 65)]
    assert all(0.0 < v <= 1.0 for v in values)
    assert all(b <= a for a, b in zip(values, values[1:]))


@pytest.mark.parametrize("model", ["vgg16", "vgg19", "vgg11", "alexnet", "bert"])
def test_sensitive_models_slow_down_strictly_with_spread(model: str) -> None:
    spread = SpreadModel()
    values = [spread.speed_factor(model, n) for n in range(1, 17)]
    assert all(b < a for a, b in zip(values, values[1:]))
    assert values[1] <= 0.5


def test_sensitive_models_lose_more_than_insensitive_ones() -> None:
    spread = SpreadModel()
    for n in (2, 4, 8):
        for sensitive in ("vgg16", "alexnet"):
            for mild in ("resnet50", "inception3", "googlenet"):
                assert spread.speed_factor(sensitive, n) < spread.speed_factor(mild, n)


def test_spread_growth_is_mild_and_bounded() -> None:
    spread = SpreadModel()
    f2 = spread.speed_factor("vgg16", 2)
    assert f2 == pytest.approx(0.5)
    far = spread.speed_factor("vgg16", 10_000)
    penalty = 1 / f2 - 1
    assert far == pytest.approx(1 / (1 + penalty * 1.5), rel=1e-3)
    flat = SpreadModel(growth=0.0)
    assert flat.speed_factor("vgg16", 2) == flat.speed_factor("vgg16", 64)


def test_spread_name_resolution() -> None:
    spread = SpreadModel()
    assert spread.factor_at_two_nodes("VGG-16") == 0.50
    assert spread.factor_at_two_nodes("resnet101") == 0.90  # family prefix
    assert spread.factor_at_two_nodes("resnet18") == 0.88  # exact beats prefix
    assert spread.factor_at_two_nodes("deepspeech2") == 0.91
    assert spread.factor_at_two_nodes("unknown") == DEFAULT_SPREAD
    assert spread.factor_at_two_nodes(None) == DEFAULT_SPREAD


def test_spread_from_dict_merges_over_defaults() -> None:
    spread = SpreadModel.from_dict({"default": 0.8, "growth": 0.2, "factors": {"VGG16": 0.3}})
    assert spread.factor_at_two_nodes("vgg16") == 0.3
    assert spread.factor_at_two_nodes("vgg19") == 0.5  # inherited family default
    assert spread.factor_at_two_nodes("mystery") == 0.8
    assert spread.growth == 0.2
    alone = SpreadModel.from_dict({"factors": {"vgg16": 0.3}, "inherit": False})
    assert alone.factor_at_two_nodes("resnet50") == DEFAULT_SPREAD
    assert SpreadModel.from_dict(None) == SpreadModel()
    assert SpreadModel.from_dict({}) == SpreadModel()


@pytest.mark.parametrize(
    "config,match",
    [
        ({"factor": {}}, "unknown spread-model key"),
        ({"default": 0}, "default must be in"),
        ({"default": 1.5}, "default must be in"),
        ({"factors": {"vgg16": 2}}, "factors\\['vgg16'\\]"),
        ({"factors": {"vgg16": "fast"}}, "factors\\['vgg16'\\]"),
        ({"factors": [1, 2]}, "factors must be a mapping"),
        ({"growth": -1}, "growth"),
        ({"inherit": "yes"}, "inherit"),
    ],
)
def test_spread_bad_config_is_value_error(config: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SpreadModel.from_dict(config)


@pytest.mark.parametrize("n", [0, -2, 1.5, "2"])
def test_spread_bad_node_count_is_value_error(n: object) -> None:
    with pytest.raises(ValueError, match="n_nodes"):
        SpreadModel().speed_factor("vgg16", n)  # type: ignore[arg-type]


def test_spread_model_is_frozen_and_hashable() -> None:
    spread = SpreadModel()
    assert hash(spread) == hash(SpreadModel())
    with pytest.raises(AttributeError):
        spread.default = 0.5  # type: ignore[misc]


def _pollux_factor_at_two_nodes(app: str, growth: float = 0.5) -> float:
    """Refit the documented least-squares penalty from Pollux's placement profiles."""
    rows = {(p, b): s for p, b, s, _ in pollux_measured_rows(app)}
    pairs = [((2,), (1, 1)), ((3,), (1, 2)), ((3,), (1, 1, 1)), ((4,), (2, 2)), ((4,), (1, 3)),
             ((4,), (1, 1, 2)), ((4,), (1, 1, 1, 1))]
    xs, ys = [], []
    for consolidated, spread in pairs:
        ratios = [rows[(spread, b)] / s for (p, b), s in rows.items() if p == consolidated and (spread, b) in rows]
        xs.append(1 + growth * (1 - 2 / len(spread)))
        ys.append(statistics.median(ratios) - 1)
    penalty = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    return 1 / (1 + penalty)


@pytest.mark.parametrize(
    "app,key", [("imagenet", "resnet50"), ("cifar10", "resnet18"), ("deepspeech2", "deepspeech"),
                ("bert", "bert"), ("ncf", "ncf"), ("yolov3", "yolo")]
)
def test_default_factors_match_pollux_measurements(app: str, key: str) -> None:
    assert DEFAULT_SPREAD_FACTORS[key] == pytest.approx(_pollux_factor_at_two_nodes(app), abs=0.01)
