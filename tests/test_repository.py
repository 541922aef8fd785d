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
    assert len(repo) == 2214 and len(repo.records(model="lstm")) + len(repo.records(model="bilstm")) == 160
