"""The job repository (Rotary-DLT §3.3.1): SQLite storage of finished jobs, seeded from packaged curves."""

from __future__ import annotations

import pytest

from cohabit.repository import JobRecord, JobRepository, Timing, packaged_records


def rec(**kw) -> JobRecord:
    base = dict(model="resnet", dataset="cifar10", accuracy=(0.4, 0.5, 0.6), num_parameters=11_000_000,
                batch_size=32, optimizer="SGD", learning_rate=0.01, peak_mem_mb=1500.0,
                timings=(Timing("v100", 0.05, 80.0), Timing("k80", 0.2, 320.0)), name="r1")
    base.update(kw)
    return JobRecord(**base)


def test_repository_round_trips_records_through_a_sqlite_file(tmp_path) -> None:
    path = tmp_path / "repo.sqlite"
    with JobRepository(path) as repo:
        repo.add(rec())
        repo.add(rec(model="vgg", dataset="udtreebank", timings=()))
    assert path.exists()
    with JobRepository(path) as again:  # a new process would see the same rows
        got = again.records()
        assert len(again) == 2 and got[0] == rec()
        assert got[0].epoch_time("k80") == 320.0 and got[0].epoch_time("t4") is None
        assert [r.model for r in again.records(dataset="udtreebank")] == ["vgg"]
        assert again.datasets() == ["cifar10", "udtreebank"]


def test_repository_records_need_model_and_dataset() -> None:
    with pytest.raises(ValueError, match="model and a dataset"):
        JobRecord(model="", dataset="cifar10")


def test_packaged_curves_seed_the_repository() -> None:
    recs = packaged_records()
    assert len(recs) == 2214
    assert {r.dataset for r in recs} == {"cifar10", "udtreebank"}
    assert all(len(r.accuracy) == 20 and r.source == "seed" for r in recs)
    first = recs[0]  # alexnet.json, first run
    assert (first.model, first.batch_size, first.optimizer, first.learning_rate) == ("alexnet", 32, "SGD", 0.1)
    assert first.accuracy[0] == pytest.approx(0.4783, abs=1e-4)
    repo = JobRepository.packaged()
    assert len(repo) == 2214 + 54 and len(repo.records(model="lstm")) + len(repo.records(model="bilstm")) == 160


def test_one_reader_feeds_the_repository_and_mlfs_curves(monkeypatch) -> None:
    """The repository's seed and MLFS's curve library are two views of one parse of the files."""
    from cohabit.data import curve_files
    from cohabit.models import mlfs_curve
    from cohabit.repository import seed

    recs = packaged_records()
    curves = [run for runs in mlfs_curve.packaged_curves().values() for run in runs]
    assert [r.accuracy for r in recs] == [tuple(c.accuracy) for c in curves]
    assert [r.name.split("#")[0] for r in recs] == [c.family for c in curves]
    # swap the one reader: both views must follow it (neither reads the files on its own)
    row = {"model_name": "m", "num_parameters": 10, "batch_size": 8, "opt": "SGD", "learn_rate": 0.1,
           "training_data": "d", "classes": 3, "accuracy": [0.5, 0.6]}
    monkeypatch.setattr(seed, "packaged_curve_rows", lambda: (("fam", 0, row),))
    monkeypatch.setattr(mlfs_curve, "packaged_curve_rows", lambda: (("fam", 0, row),))
    for fn in (seed.packaged_records, mlfs_curve.packaged_curves):
        fn.cache_clear()
    try:
        assert [r.name for r in seed.packaged_records()] == ["fam#0"]
        assert [c.model for c in mlfs_curve.packaged_curves()["fam"]] == ["m"]
    finally:
        for fn in (seed.packaged_records, mlfs_curve.packaged_curves):
            fn.cache_clear()
    assert curve_files.packaged_curve_rows()[0][0] == "alexnet"
