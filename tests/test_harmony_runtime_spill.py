"""Harmony spill/reload (§VI) in the runtime: identical training, measurable memory, alpha hill climbing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cohabit.runtime.harmony.spill import AlphaTuner, BlockSpill, NodeMemory, attach, initial_alpha
from cohabit.runtime.workloads import WorkloadContext, build, parse_config

WORKLOADS = {
    "mlr": {"name": "mlr", "data": "synthetic", "n_samples": 2000, "n_features": 30, "n_classes": 5, "batch_size": 64},
    "lasso": {"name": "lasso", "data": "synthetic", "n_samples": 2000, "n_features": 40, "batch_size": 64},
}


def _train(name: str, iterations: int, alpha: float | None, tmp_path: Path, switch: dict[int, float] | None = None):
    cfg = parse_config("j", WORKLOADS[name])
    w = build(cfg, WorkloadContext(job="j", seed=3, iterations=iterations, rank=0, world_size=1))
    spill = attach(w, n_blocks=16, alpha=alpha, spill_dir=tmp_path / f"s{alpha}") if alpha is not None else None
    metrics = []
    for i in range(iterations):
        if spill is not None and switch and i in switch:
            spill.set_alpha(switch[i])
        w.iteration = i
        metrics.append(w.step())
        w.iteration = i + 1
    params = {k: np.array(v) for k, v in vars(w).items() if k in ("W", "b", "w")}
    return params, metrics, spill


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_spill_reload_trains_exactly_like_all_in_memory(tmp_path: Path, name: str, alpha: float) -> None:
    ref, ref_metrics, _ = _train(name, 120, None, tmp_path)
    got, metrics, spill = _train(name, 120, alpha, tmp_path)
    assert ref.keys() == got.keys() and ref
    for k in ref:
        assert np.array_equal(ref[k], got[k]), k  # bit for bit
    assert metrics == ref_metrics  # losses and the epoch-end evaluations (full data read through the spill)
    assert spill is not None
    full = spill.n_rows * (spill._meta["X"][0][0] * 8 + 8)
    if alpha > 0:
        assert spill.reload_bytes > 0
    assert spill.peak_resident <= (1 - alpha) * full + 64 * (spill._meta["X"][0][0] * 8 + 8) + 1
    spill.close()


def test_changing_alpha_mid_training_keeps_results_identical(tmp_path: Path) -> None:
    ref, _, _ = _train("mlr", 100, None, tmp_path)
    got, _, spill = _train("mlr", 100, 0.25, tmp_path, switch={30: 0.75, 60: 0.0, 80: 1.0})
    assert all(np.array_equal(ref[k], got[k]) for k in ref)
    assert spill is not None and spill.alpha == 1.0 and spill.resident_bytes < 64 * 8 * 40
    spill.close()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), blocks=st.integers(1, 8), alpha=st.floats(0, 1), data=st.data())
def test_rows_equal_plain_indexing(tmp_path_factory: pytest.TempPathFactory, n: int, blocks: int, alpha: float,
                                   data: st.DataObject) -> None:
    blocks = min(blocks, n)
    rng = np.random.default_rng(n)
    X, y = rng.normal(size=(n, 3)), rng.integers(0, 9, size=n)
    sp = BlockSpill({"X": X, "y": y}, n_blocks=blocks, alpha=alpha, spill_dir=tmp_path_factory.mktemp("b"))
    for _ in range(3):
        idx = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=20)), dtype=np.int64)
        nxt = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=20)), dtype=np.int64)
        got = sp.rows(idx, nxt)
        assert np.array_equal(got["X"], X[idx]) and np.array_equal(got["y"], y[idx])
    assert np.array_equal(sp.full("X"), X)
    sp.close()


def test_initial_alpha_from_sizes_and_node_memory() -> None:
    assert initial_alpha(100.0, 10.0, 200.0) == 0.0  # fits
    assert initial_alpha(100.0, 10.0, 100.0, reserve=0.0) == pytest.approx(0.1)
    assert initial_alpha(100.0, 95.0, 100.0) == 1.0
    mem = NodeMemory(1000)
    mem.account("a", 600)
    mem.account("b", 300)
    assert mem.fits() and mem.used == 900
    mem.account("b", 500)
    assert not mem.fits()
    assert mem.floor_alpha(input_bytes=800, other_bytes=600) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="capacity_bytes"):
        NodeMemory(0)


def _climb(tuner: AlphaTuner, time_of) -> float:  # type: ignore[no-untyped-def]
    for _ in range(50):
        if tuner.done:
            break
        tuner.observe(time_of(tuner.alpha))
    return tuner.alpha


def test_alpha_tuner_climbs_to_the_knee_from_either_side() -> None:
    knee = lambda a: 1.0 if a <= 0.5 + 1e-9 else 1.0 + 4 * (a - 0.5)  # reload hidden up to alpha = 0.5
    assert _climb(AlphaTuner(0.2, step=0.1), knee) == pytest.approx(0.5)  # up while free
    assert _climb(AlphaTuner(0.9, step=0.1), knee) == pytest.approx(0.5)  # down while faster
    assert _climb(AlphaTuner(0.2, step=0.1, floor=0.7), knee) == pytest.approx(0.7)  # memory floor wins
    t = AlphaTuner(0.0, step=0.25)
    assert _climb(t, lambda a: 1.0) == 1.0 and t.done  # flat: all the way up (frees the most memory)
    with pytest.raises(ValueError, match="step"):
        AlphaTuner(0.0, step=0)
