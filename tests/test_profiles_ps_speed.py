"""DL2 parameter-server speeds: exact at measured points, bounded between them, clamped outside."""

from __future__ import annotations

import ast
import functools
from importlib.resources import files

import numpy as np
import pytest
from scipy.spatial import Delaunay

from cohabit.sim.profiles.ps_speed import (
    PS_MODELS,
    ps_cpu,
    ps_measured_points,
    ps_throughput,
    resolve_ps_model,
)


def _raw_rows() -> list[tuple]:
    text = files("cohabit.data").joinpath("profiles", "ps_speed_dl2.txt").read_text()
    return [ast.literal_eval(line) for line in text.splitlines() if line.strip()]


RAW = _raw_rows()


def _inside(points: dict[tuple[int, int], float], p: int, w: int) -> bool:
    """Whether lattice point (p, w) lies in the convex hull of ``points``."""
    return bool(_hull(tuple(points)).find_simplex((p, w), tol=1e-9) >= 0)


@functools.cache
def _hull(keys: tuple[tuple[int, int], ...]) -> Delaunay:
    return Delaunay(np.array(keys, dtype=float))


def _surrounding(points: dict[tuple[int, int], float], p: int, w: int) -> list[float]:
    """Values of the nearest measured points (growing square windows) whose hull holds (p, w)."""
    for radius in range(1, 6):
        near = {k: v for k, v in points.items() if abs(k[0] - p) <= radius and abs(k[1] - w) <= radius}
        if (p, w) in near:
            return [near[(p, w)]]
        spans_2d = len({k[0] for k in near}) > 1 and len({k[1] for k in near}) > 1
        if len(near) >= 3 and spans_2d and _inside(near, p, w):
            return list(near.values())
    raise AssertionError(f"no measured points surround {(p, w)}")


def test_ps_models_match_data_file() -> None:
    assert set(PS_MODELS) == {r[0] for r in RAW}
    assert len(PS_MODELS) == 8


def test_ps_throughput_hits_every_valid_measured_point_exactly() -> None:
    checked = 0
    for model, _mode, _batch, n_ps, n_workers, speeds, ps_load, w_load in RAW:
        if min(speeds) <= 0:
            continue
        assert ps_throughput(model, n_ps, n_workers) == pytest.approx(sum(speeds), rel=1e-9, abs=1e-9)
        assert ps_cpu(model, n_ps, n_workers) == pytest.approx((np.mean(ps_load), np.mean(w_load)))
        checked += 1
    assert checked == 794  # 804 measurements less 10 failed runs


def test_ps_failed_runs_are_dropped_and_filled_from_neighbours() -> None:
    points = ps_measured_points("vgg-16")
    assert (5, 6) not in points and (1, 11) not in points
    for hole in [(5, 6), (1, 11), (4, 8)]:
        near = [v for (p, w), v in points.items() if abs(p - hole[0]) <= 1 and abs(w - hole[1]) <= 1]
        value = ps_throughput("vgg-16", *hole)
        assert min(near) - 1e-9 <= value <= max(near) + 1e-9


@pytest.mark.parametrize("model", PS_MODELS)
def test_ps_interpolation_bounded_by_nearby_measurements(model: str) -> None:
    points = ps_measured_points(model)
    max_p = max(p for p, _ in points)
    max_w = max(w for _, w in points)
    inside = 0
    for p in range(1, max_p + 1):
        for w in range(1, max_w + 1):
            if not _inside(points, p, w):
                continue  # outside the measured hull: clamped, tested below
            near = _surrounding(points, p, w)
            value = ps_throughput(model, p, w)
            assert min(near) - 1e-9 <= value <= max(near) + 1e-9, (model, p, w)
            inside += 1
    assert inside >= len(points)


def test_ps_interpolation_is_linear_between_odd_lattice_points() -> None:
    points = ps_measured_points("dssm")
    assert (2, 1) not in points
    assert ps_throughput("dssm", 2, 1) == pytest.approx((points[(1, 1)] + points[(3, 1)]) / 2)
    assert ps_throughput("dssm", 1, 2) == pytest.approx((points[(1, 1)] + points[(1, 3)]) / 2)


@pytest.mark.parametrize("model", PS_MODELS)
def test_ps_clamps_beyond_measured_range(model: str) -> None:
    points = ps_measured_points(model)
    max_p = max(p for p, _ in points)
    max_w = max(w for _, w in points)
    assert ps_throughput(model, 500, 500) == ps_throughput(model, max_p, max_w)
    assert ps_throughput(model, 1, 10_000) == ps_throughput(model, 1, max_w)
    assert ps_throughput(model, 10_000, 1) == ps_throughput(model, max_p, 1)
    # beyond the triangle n_ps + n_workers <= 24, more PS for the same workers change nothing
    for w in range(1, max_w + 1):
        last_inside = max(p for p in range(1, max_p + 1) if _inside(points, p, w))
        for p in range(last_inside + 1, max_p + 1):
            assert ps_throughput(model, p, w) == ps_throughput(model, last_inside, w)


def test_ps_names_are_matched_loosely() -> None:
    assert resolve_ps_model("ResNet50") == "resnet-50"
    assert resolve_ps_model("VGG_16") == "vgg-16"
    assert ps_throughput("ResNet-50", 2, 2) == ps_throughput("resnet-50", 2, 2)


def test_ps_unknown_model_lists_known_models() -> None:
    with pytest.raises(ValueError, match="unknown parameter-server model 'gpt-9'.*resnet-50"):
        ps_throughput("gpt-9", 1, 1)


@pytest.mark.parametrize("n_ps,n_workers", [(0, 1), (1, 0), (-1, 3), (1.5, 2), (True, 2), ("2", 2)])
def test_ps_bad_counts_are_value_errors(n_ps: object, n_workers: object) -> None:
    with pytest.raises(ValueError, match="n_ps|n_workers"):
        ps_throughput("resnet-50", n_ps, n_workers)  # type: ignore[arg-type]


def test_ps_accepts_numpy_integers_and_returns_float() -> None:
    value = ps_throughput("wlm", np.int64(3), np.int32(5))
    assert type(value) is float and value > 0
