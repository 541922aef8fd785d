"""PS workloads in one process: the same math as the single-process models, any layout, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.runtime.ps.reference import run_in_process
from cohabit.runtime.workloads import WorkloadContext, WorkloadError, build, parse_config
from cohabit.runtime.workloads import data as D

LDA_SMALL = {"name": "ps-lda", "data": "synthetic", "n_docs": 200, "vocab_size": 400, "doc_len": 40, "n_topics": 5}


def _single(workload: dict, iterations: int):
    w = build(parse_config("single", workload), WorkloadContext("single", iterations=iterations))
    while not w.done:
        w.step()
    return w


def test_ps_mlr_with_one_worker_is_the_mlr_workload() -> None:
    model, _, losses = run_in_process({"name": "ps-mlr"}, iterations=200, n_workers=1, n_servers=3)
    ref = _single({"name": "mlr"}, 200)
    np.testing.assert_allclose(model["W"], ref.W, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(model["b"][0], ref.b, rtol=1e-12, atol=1e-14)
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:5])


def test_ps_lasso_with_one_worker_is_the_lasso_workload_and_finds_the_sparse_support() -> None:
    model, _, _ = run_in_process({"name": "ps-lasso"}, iterations=400, n_workers=1, n_servers=2)
    ref = _single({"name": "lasso"}, 400)
    np.testing.assert_allclose(model["w"][:, 0], ref.w, rtol=1e-12, atol=1e-14)
    beta = np.array([1.0, 0.0, -2.0, 0.0, 3.0, 0.0, -4.0, 0.0, 5.0, 0.0])
    assert np.linalg.norm(model["w"][:, 0] - beta) < 1.0


def test_ps_nmf_is_independent_of_the_layout_and_reduces_the_error() -> None:
    a, _, la = run_in_process({"name": "ps-nmf"}, iterations=40, n_workers=1, n_servers=1)
    b, workers, lb = run_in_process({"name": "ps-nmf"}, iterations=40, n_workers=3, n_servers=2)
    np.testing.assert_allclose(a["Ht"], b["Ht"], rtol=1e-9)  # full-pass MU: sums over row blocks
    assert (a["Ht"] >= 0).all() and all((w.W >= 0).all() for w in workers)
    assert lb[-1] < 0.5 * lb[0]
    # resharding: three workers' local rows rebuild any other worker count's rows
    other = build(parse_config("j", {"name": "ps-nmf"}), WorkloadContext("j", iterations=40, rank=1, world_size=2))
    other.load_local_states([w.local_state() for w in workers])
    full = np.vstack([w.W for w in workers])
    np.testing.assert_array_equal(other.W, full[other.rows])


def test_ps_lda_online_vb_lowers_the_per_word_loss_on_the_sample_and_synthetic() -> None:
    _, _, syn = run_in_process(LDA_SMALL, iterations=40, n_workers=2, n_servers=2)
    assert np.mean(syn[-5:]) < np.mean(syn[:3]) - 0.3
    _, _, real = run_in_process({"name": "ps-lda", "batch_size": 8}, iterations=12, n_workers=1, n_servers=1)
    assert real[0] == pytest.approx(np.log(D.LDA_SAMPLE_VOCAB), abs=0.6)  # ~uniform at the start
    assert np.mean(real[-3:]) < real[0] - 0.3


def test_ps_samples_load_with_their_documented_shapes() -> None:
    V = D.load_nmf_sample()
    assert V.shape == (100, 100) and V.min() >= 0 and V.max() <= 5
    docs, vocab = D.load_lda_sample()
    assert len(docs) == 500 and vocab == 17935 and sum(len(d) for d in docs) == 157885


@pytest.mark.parametrize("workload, fragment", [
    ({"name": "ps-lda", "kappa": 0.3}, "workload.kappa must lie in (0.5, 1]"),
    ({"name": "ps-lda", "n_topics": 1}, "workload.n_topics must be an integer >= 2"),
    ({"name": "ps-nmf", "rank": 0}, "workload.rank must be a positive integer"),
    ({"name": "ps-nmf", "data": "movielens"}, "workload.data must be one of sample, synthetic"),
    ({"name": "ps-nmf", "data": "synthetic", "n_rows": -3}, "n must be a positive integer"),
    ({"name": "ps-mlr", "lr": -1.0}, "workload.lr must be a positive number"),
])
def test_ps_bad_workload_params_name_the_field(workload, fragment) -> None:
    with pytest.raises(WorkloadError, match="job 'j'") as err:
        build(parse_config("j", workload), WorkloadContext("j", iterations=5))
    assert fragment in str(err.value)


def test_ps_unknown_param_is_caught_before_any_process_starts() -> None:
    with pytest.raises(WorkloadError, match="workload.topics is not a parameter of 'ps-lda'"):
        parse_config("j", {"name": "ps-lda", "topics": 3})
