"""TME (Rotary-DLT §3.3.1) on real peak-memory measurements of cohabit's torch workloads, held back."""

from __future__ import annotations

from cohabit.models.tme import TME, SizeBlindTME, held_back_errors
from cohabit.repository import JobRepository, packaged_memory_records

# every model size is held back in turn, at all its batch sizes (leave one model out)
HELD = tuple(sorted({r.model for r in packaged_memory_records()}))
MAX_REL_ERROR = 0.25  # mean |estimate - measured| / measured (measured: 0.179)
MAX_SHORTFALL = 0.16  # mean max(measured - estimate, 0) / measured (measured: 0.144)


def test_measurements_are_seeded_into_the_repository() -> None:
    recs = packaged_memory_records()
    assert {r.dataset for r in recs} == {"torch-mlp", "torch-cnn"}
    assert len(recs) == 9 * 6 and all(r.peak_mem_mb and r.peak_mem_mb > 0 and r.source == "measured" for r in recs)
    assert {r.batch_size for r in recs} == {32, 64, 128, 256, 512, 1024}
    repo = JobRepository.packaged()
    assert len(repo.records(dataset="torch-cnn")) == 4 * 6 and len(repo.records(dataset="cifar10")) > 2000


def test_tme_error_on_held_back_real_measurements_needs_similar_jobs_and_the_pad() -> None:
    recs = list(packaged_memory_records())
    tme = held_back_errors(recs, HELD)
    assert len(HELD) == 9 and tme["n"] == 9 * 6
    assert tme["mean_rel_error"] <= MAX_REL_ERROR
    assert tme["mean_shortfall"] <= MAX_SHORTFALL
    # the bounds are not loose: ignoring model-size similarity breaks the first, dropping the +5% the second
    blind = held_back_errors(recs, HELD, SizeBlindTME)
    assert blind["mean_rel_error"] > MAX_REL_ERROR
    no_pad = held_back_errors(recs, HELD, lambda h: TME(h, pad=0.0))
    assert no_pad["mean_shortfall"] > MAX_SHORTFALL


def test_probe_measures_the_training_steps_peak_in_a_fresh_process() -> None:
    from cohabit.repository.measure import measure, memory_records

    small = measure({"name": "torch-cnn", "channels": 16, "n_samples": 600}, 8, steps=2)
    big = measure({"name": "torch-cnn", "channels": 16, "n_samples": 600}, 400, steps=2)
    assert small["num_parameters"] == big["num_parameters"] == 4932  # the packaged channels-16 model
    # activations of 400 images of 16 channels at 12x12 (and their gradients) are megabytes more than 8
    assert 0 < small["peak_mem_mb"] < big["peak_mem_mb"] - 2.0
    rec = memory_records([big])[0]
    assert (rec.dataset, rec.model, rec.batch_size) == ("torch-cnn", "torch-cnn-channels16-n_samples600", 400)
