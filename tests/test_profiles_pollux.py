"""Pollux application throughput: measured rates reproduced, fallbacks sane."""

from __future__ import annotations

import csv
import io
import math
import random
from importlib.resources import files

import pytest

from cohabit.sim.profiles.pollux import (
    POLLUX_APPS,
    pollux_iteration_time,
    pollux_max_local_bsz,
    pollux_measured_rows,
    pollux_step_time,
    pollux_throughput,
    smallest_rotation,
)

APPS_DIR = files("cohabit.data").joinpath("profiles", "pollux_apps")


def _scalability(app: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(APPS_DIR.joinpath(app, "scalability.csv").read_text())))


def test_pollux_apps_match_data_directories() -> None:
    on_disk = {p.name for p in APPS_DIR.iterdir() if p.joinpath("placements.csv").is_file()}
    assert set(POLLUX_APPS) == on_disk


@pytest.mark.parametrize("app", POLLUX_APPS)
def test_pollux_throughput_at_measured_placements_equals_measured_rate(app: str) -> None:
    rows = pollux_measured_rows(app)
    assert len({r[0] for r in rows}) == 108
    for placement, local_bsz, step, _sync in rows:
        assert placement == smallest_rotation(placement)  # data stores one rotation per ring
        global_batch = local_bsz * sum(placement)
        assert pollux_throughput(app, placement, global_batch) == pytest.approx(global_batch / step, rel=1e-12)


@pytest.mark.parametrize("app", POLLUX_APPS)
def test_pollux_scalability_rows_are_reproduced(app: str) -> None:
    for row in _scalability(app):
        n, r, b = int(row["num_nodes"]), int(row["num_replicas"]), int(row["local_bsz"])
        per_node = [r // n + (1 if i < r % n else 0) for i in range(n)]
        step, sync = pollux_step_time(app, per_node, b)
        assert step == pytest.approx(float(row["step_time"]), rel=1e-9)
        assert sync == pytest.approx(float(row["sync_time"]), rel=1e-9)


def test_pollux_placement_order_and_empty_nodes_do_not_matter() -> None:
    base = pollux_throughput("cifar10", (1, 1, 2), 512)
    assert pollux_throughput("cifar10", (2, 1, 1), 512) == base
    assert pollux_throughput("cifar10", [1, 0, 2, 1], 512) == base
    assert pollux_throughput("cifar10", (0, 4), 512) == pollux_throughput("cifar10", (4,), 512)


def test_pollux_local_batch_is_interpolated_between_measured_sizes() -> None:
    rows = {(p, b): s for p, b, s, _ in pollux_measured_rows("imagenet") if p == (2, 2)}
    lo, hi = rows[((2, 2), 57)], rows[((2, 2), 81)]
    step, _ = pollux_step_time("imagenet", (2, 2), 69)
    assert step == pytest.approx(lo + (hi - lo) * (69 - 57) / (81 - 57))
    # below the smallest measured size the smallest size's time is kept
    assert pollux_step_time("imagenet", (2, 2), 1) == pollux_step_time("imagenet", (2, 2), 20)


def test_pollux_local_batch_is_ceil_of_global_over_replicas() -> None:
    # 4 replicas, global 130 -> local 33 per replica
    assert pollux_iteration_time("cifar10", (4,), 130) == pytest.approx(pollux_step_time("cifar10", (4,), 33)[0])
    assert pollux_throughput("cifar10", (4,), 130) == pytest.approx(130 / pollux_step_time("cifar10", (4,), 33)[0])


def test_pollux_gradient_accumulation_beyond_max_local_batch() -> None:
    top = pollux_max_local_bsz("cifar10")
    assert top == 1024
    step, sync = pollux_step_time("cifar10", (1,), 1024)
    assert pollux_iteration_time("cifar10", (1,), 2048) == pytest.approx(step + (step - sync))
    # 2500 samples: 2 accumulation steps of ceil(2500 / 3) = 834 samples
    s834, y834 = pollux_step_time("cifar10", (1,), 834)
    assert pollux_iteration_time("cifar10", (1,), 2500) == pytest.approx(s834 + 2 * (s834 - y834))


@pytest.mark.parametrize("app", POLLUX_APPS)
def test_pollux_unmeasured_placements_are_positive_and_finite(app: str) -> None:
    rng = random.Random(7)
    single_step = pollux_step_time(app, (1,), pollux_max_local_bsz(app))[0]
    for _ in range(300):
        nodes = rng.randint(1, 24)
        placement = tuple(rng.randint(1, 8) for _ in range(nodes))
        global_batch = rng.randint(1, 40_000)
        value = pollux_throughput(app, placement, global_batch)
        assert math.isfinite(value) and value > 0
        step, sync = pollux_step_time(app, placement, 16)
        assert 0 <= sync < step
    assert single_step > 0


def test_pollux_fitted_model_charges_sync_for_a_crowded_node() -> None:
    # 8 replicas on one node is outside the measured hull (at most 4 per node)
    step8, sync8 = pollux_step_time("bert", (8,), 8)
    step1, sync1 = pollux_step_time("bert", (1,), 8)
    assert sync1 < 0.02 and sync8 > 0.1
    assert step8 == pytest.approx(step1 - sync1 + sync8)


def test_pollux_unknown_app_lists_known_apps() -> None:
    with pytest.raises(ValueError, match="unknown Pollux application 'gpt3'.*cifar10"):
        pollux_throughput("gpt3", (1,), 32)


@pytest.mark.parametrize("placement", [(), (0, 0), (-1, 2), (1.5,), "abc"])
def test_pollux_bad_placement_is_value_error(placement: object) -> None:
    with pytest.raises(ValueError, match="replica"):
        pollux_throughput("ncf", placement, 64)  # type: ignore[arg-type]


@pytest.mark.parametrize("batch", [0, -5, 3.5])
def test_pollux_bad_global_batch_is_value_error(batch: object) -> None:
    with pytest.raises(ValueError, match="global_batch"):
        pollux_throughput("ncf", (1,), batch)  # type: ignore[arg-type]
