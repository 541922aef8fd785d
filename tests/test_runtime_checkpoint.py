"""CheckpointStore: atomic writes, checksums, keeping the last good checkpoint, fallback on corruption."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cohabit.runtime.checkpoint import CheckpointError, CheckpointStore


def test_checkpoint_round_trip_keeps_arrays_and_header(tmp_path) -> None:
    store = CheckpointStore(tmp_path)
    w = np.arange(12.0).reshape(3, 4)
    info = store.save("job-a", {"w": w, "step": 7}, iteration=7, workload="mlr")
    state, got = store.load("job-a")
    assert np.array_equal(state["w"], w) and state["step"] == 7
    assert got.seq == info.seq == 1 and got.iteration == 7
    header, _ = store.read_header(info.path)
    assert header["workload"] == "mlr" and header["size"] == info.size


def test_checkpoint_keeps_only_the_newest_two(tmp_path) -> None:
    store = CheckpointStore(tmp_path, keep=2)
    for i in range(5):
        store.save("j", {"i": i}, iteration=i)
    paths = store.paths("j")
    assert [p.name for p in paths] == ["ckpt-00000005.ckpt", "ckpt-00000004.ckpt"]
    assert store.load("j")[0] == {"i": 4}


def test_checkpoint_corrupt_newest_falls_back_to_previous_good(tmp_path) -> None:
    store = CheckpointStore(tmp_path)
    store.save("j", {"i": 1}, iteration=10)
    newest = store.save("j", {"i": 2}, iteration=20).path
    data = bytearray(newest.read_bytes())
    data[-3] ^= 0xFF  # flip bits inside the payload
    newest.write_bytes(bytes(data))
    state, info = store.load("j")
    assert state == {"i": 1} and info.iteration == 10
    assert any("sha256 mismatch" in e for e in store.last_errors)
    assert not newest.exists() and newest.with_suffix(".corrupt").exists()  # never read again
    # the next save continues the numbering and the store is healthy again
    assert store.save("j", {"i": 3}, iteration=30).seq == 2
    assert store.load("j")[0] == {"i": 3}


def test_checkpoint_truncated_file_is_detected(tmp_path) -> None:
    store = CheckpointStore(tmp_path)
    store.save("j", {"i": 1}, iteration=1)
    p = store.save("j", {"i": 2, "pad": b"x" * 1000}, iteration=2).path
    p.write_bytes(p.read_bytes()[:-500])
    with pytest.raises(CheckpointError, match="truncated"):
        store.verify(p)
    assert store.load("j")[0] == {"i": 1}


def test_checkpoint_all_corrupt_gives_none(tmp_path) -> None:
    store = CheckpointStore(tmp_path)
    p = store.save("j", {"i": 1}, iteration=1).path
    p.write_bytes(b"garbage")
    assert store.load("j") is None
    assert store.load("never-saved") is None


def test_checkpoint_write_is_atomic_when_the_writer_dies(tmp_path, monkeypatch) -> None:
    store = CheckpointStore(tmp_path)
    store.save("j", {"i": 1}, iteration=1)

    def crash(src, dst):  # the process dies between writing the temporary file and renaming it
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        store.save("j", {"i": 2}, iteration=2)
    monkeypatch.undo()
    assert store.load("j")[0] == {"i": 1}
    assert [p.name for p in store.job_dir("j").iterdir()] == ["ckpt-00000001.ckpt"]  # no temporary left


def test_checkpoint_job_ids_cannot_escape_the_root(tmp_path) -> None:
    store = CheckpointStore(tmp_path / "store")
    store.save("../evil", {"x": 1}, iteration=1)
    assert store.job_dir("../evil").parent == store.root
    assert store.load("../evil")[0] == {"x": 1}
    assert not (tmp_path / "evil").exists()


def test_checkpoint_clear_and_bad_keep(tmp_path) -> None:
    store = CheckpointStore(tmp_path)
    store.save("j", {"i": 1}, iteration=1)
    store.clear("j")
    assert store.load("j") is None and store.latest("j") is None
    with pytest.raises(ValueError, match="keep must be >= 1"):
        CheckpointStore(tmp_path, keep=0)
