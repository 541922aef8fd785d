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


def test_real_torch_jobs_get_their_parameter_count_and_a_tme_estimate() -> None:
    from cohabit.models.tme import TME
    from cohabit.policies.rotary import job_traits
    from cohabit.spec import Resources
    from cohabit.spec.job import JobSpec, TaskGroup

    recs = {(r.model, r.batch_size): r for r in packaged_memory_records()}
    for name, params, model in (("torch-cnn", {"channels": 16}, "torch-cnn-channels16"),
                                ("torch-mlp", {"hidden": 512}, "torch-mlp-hidden512")):
        spec = JobSpec(id="j", model=name, epochs=3, batch_size=256, workload={"name": name, **params},
                       workers=TaskGroup(count=1, demand=Resources(cpu=1)))
        traits = job_traits(spec)
        # the count the measurement took from the built model (torch's numel), here from the options alone
        assert traits.num_parameters == recs[(model, 256)].num_parameters
        others = [r for r in packaged_memory_records() if r.model != model]
        est = TME(others).estimate(traits)
        assert est is not None and abs(est - recs[(model, 256)].peak_mem_mb) / recs[(model, 256)].peak_mem_mb < 0.3


def test_parameter_count_matches_the_built_models() -> None:
    from cohabit.runtime.workloads.base import WorkloadContext
    from cohabit.runtime.workloads.torch_models import TorchCNN, TorchMLP

    ctx = WorkloadContext(job="t", iterations=1, batch_size=8)
    for cls, params in ((TorchMLP, {"n_samples": 64, "n_features": 10, "hidden": 7, "n_classes": 3}),
                        (TorchCNN, {"n_samples": 64, "channels": 5, "n_classes": 6, "image_size": 8})):
        w = cls(ctx, **params)
        assert cls.parameter_count(params) == sum(int(p.numel()) for p in w.model.parameters())
