"""Workloads in-process: data, registry errors, learning, and exact resume from a state dict."""

from __future__ import annotations

import pickle
import sys
import textwrap

import numpy as np
import pytest

from cohabit.runtime.workloads import WorkloadContext, WorkloadError, build, parse_config
from cohabit.runtime.workloads import data as D


@pytest.fixture(scope="module", autouse=True)
def _restore_torch_threads():
    yield
    if _saved_threads:
        import torch

        torch.set_num_threads(_saved_threads[0])


_saved_threads: list[int] = []


def make(workload: dict, iterations: int | None = None, epochs: int | None = None, job: str = "j"):
    cfg = parse_config(job, workload)
    if cfg.uses_torch:
        # one thread, as in a task process: tiny models on a busy 2-core machine run far slower
        # (and less predictably) with several spinning OpenMP threads
        import torch

        if not _saved_threads:
            _saved_threads.append(torch.get_num_threads())
        torch.set_num_threads(1)
    return build(cfg, WorkloadContext(job, seed=workload.get("seed", 0), iterations=iterations, epochs=epochs))


def run_to_end(w) -> dict:
    m = {}
    while not w.done:
        m = w.step()
    return m


# ------------------------------------------------------------------ data
def test_workloads_packaged_samples_have_the_documented_shapes() -> None:
    X, y = D.load_sample("sample_mlr")
    Xt, yt = D.load_sample("sample_mlr_test")
    assert X.shape == (540, 784) and Xt.shape == (60, 784)
    assert set(np.unique(y)) == set(range(10)) and 0.0 <= X.min() and X.max() <= 1.0
    Xl, yl = D.load_sample("sample_lasso")
    assert Xl.shape == (450, 10) and len(D.load_sample("sample_lasso_test")[1]) == 50
    beta = np.array([1, 0, -2, 0, 3, 0, -4, 0, 5, 0.0])
    assert np.allclose(Xl @ beta, yl)  # the header's generating model holds exactly
    with pytest.raises(ValueError, match="unknown sample"):
        D.load_sample("nope")


def test_workloads_generators_are_seeded() -> None:
    a = D.classification(100, 5, 3, seed=1)
    assert all(np.array_equal(x, y) for x, y in zip(a, D.classification(100, 5, 3, seed=1)))
    assert not np.array_equal(a[0], D.classification(100, 5, 3, seed=2)[0])
    X, y, beta = D.sparse_regression(50, 20, nnz=3, noise=0.0, seed=0)
    assert np.count_nonzero(beta) == 3 and np.allclose(X @ beta, y)
    imgs, labels = D.images(10, 8, 2, seed=0)
    assert imgs.shape == (10, 1, 8, 8) and imgs.dtype == np.float32
    with pytest.raises(ValueError, match="n must be a positive integer"):
        D.classification(0, 5, 3, seed=0)


# -------------------------------------------------------------- registry
@pytest.mark.parametrize("workload, message", [
    (None, "no workload"),
    ({"name": "resnet"}, "workload.name 'resnet' is not a built-in"),
    ({"name": "mlr", "entry": "a:b"}, "exactly one of 'name'"),
    ({"name": "mlr", "learning_rate": 0.1}, "workload.learning_rate is not a parameter of 'mlr'"),
    ({"entry": "no_colon"}, "must look like 'package.module:callable'"),
    ({"entry": "surely_not_a_module_xyz:make"}, "module 'surely_not_a_module_xyz' is not importable"),
    ({"name": "mlr", "seed": -1}, "workload.seed must be a non-negative integer"),
])
def test_workloads_bad_config_names_the_field(workload, message) -> None:
    with pytest.raises(WorkloadError, match=message):
        parse_config("j", workload)


def test_workloads_bad_parameter_values_name_the_field() -> None:
    with pytest.raises(WorkloadError, match="workload.data must be one of sample, synthetic; got 'mnist'"):
        make({"name": "mlr", "data": "mnist"}, iterations=10)
    with pytest.raises(WorkloadError, match="give 'iterations' or 'epochs'"):
        make({"name": "lasso"})
    with pytest.raises(WorkloadError, match="exceeds the 450 training instances"):
        make({"name": "lasso", "batch_size": 1000}, iterations=5)


def test_workloads_parse_config_does_not_import_torch() -> None:
    # the scheduler process validates torch jobs without paying for torch
    had = "torch" in sys.modules
    cfg = parse_config("j", {"name": "torch-cnn", "channels": 4})
    assert cfg.uses_torch and cfg.params == {"channels": 4}
    assert had or "torch" not in sys.modules


# -------------------------------------------------------------- learning
@pytest.mark.parametrize("workload, epochs, metric", [
    ({"name": "mlr"}, 3, "train_loss"),
    ({"name": "mlr", "data": "synthetic", "n_samples": 2000, "n_features": 20}, 3, "train_loss"),
    ({"name": "lasso"}, 5, "train_loss"),
    ({"name": "lasso", "data": "synthetic", "n_samples": 1000, "n_features": 30}, 3, "train_loss"),
    ({"name": "torch-mlp", "n_samples": 1024}, 3, "test_loss"),
    ({"name": "torch-cnn", "n_samples": 512}, 3, "test_loss"),
])
def test_workloads_train_to_a_lower_loss(workload, epochs, metric) -> None:
    w = make(workload, epochs=epochs)
    start = w.evaluate()[metric]
    end = run_to_end(w)
    assert end[metric] < 0.8 * start
    assert w.iteration == w.total_iterations == epochs * w.iters_per_epoch


@pytest.mark.parametrize("workload", [
    {"name": "mlr", "seed": 3},
    {"name": "lasso", "data": "synthetic", "n_samples": 600, "n_features": 20},
    {"name": "torch-mlp", "n_samples": 512, "seed": 1},
    {"name": "torch-cnn", "n_samples": 160, "channels": 4},
])
def test_workloads_resume_from_state_dict_equals_uninterrupted(workload) -> None:
    ref = make(workload, iterations=40)
    run_to_end(ref)
    first = make(workload, iterations=40)
    for _ in range(17):  # stop in the middle of an epoch
        first.step()
    saved = pickle.loads(pickle.dumps(first.state_dict()))  # what the checkpoint store does
    second = make(workload, iterations=40)
    second.load_state_dict(saved)
    run_to_end(second)
    _assert_same_model(ref.state_dict(), second.state_dict())


def _assert_same_model(a, b) -> None:
    assert a["iteration"] == b["iteration"]
    flat_a, flat_b = _leaves(a["model"]), _leaves(b["model"])
    assert len(flat_a) == len(flat_b) > 0
    for x, y in zip(flat_a, flat_b):
        assert np.allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-9)


def _leaves(obj) -> list:
    if isinstance(obj, dict):
        return [leaf for k in sorted(obj) for leaf in _leaves(obj[k])]
    if isinstance(obj, (list, tuple)):
        return [leaf for v in obj for leaf in _leaves(v)]
    return [obj.detach().numpy() if hasattr(obj, "detach") else obj]


# ---------------------------------------------------------- user entry
def test_workloads_user_entry_without_counters_is_wrapped(tmp_path, monkeypatch) -> None:
    (tmp_path / "my_trainer.py").write_text(textwrap.dedent("""
        class Halver:
            def __init__(self, start):
                self.x = float(start)
            def step(self):
                self.x /= 2
                return {"loss": self.x}
            def state_dict(self):
                return {"x": self.x}
            def load_state_dict(self, s):
                self.x = s["x"]

        def make(ctx, start=8.0):
            return Halver(start)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    w = make({"entry": "my_trainer:make", "start": 16.0}, iterations=3)
    assert [w.step()["loss"] for _ in range(3)] == [8.0, 4.0, 2.0] and w.done
    assert w.state_dict() == {"iteration": 3, "user": {"x": 2.0}}
