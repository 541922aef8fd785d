"""Checkpoint payloads cannot run code (issue 12): JSON + npz without pickle, round trips of real states."""

from __future__ import annotations

import hashlib
import json
import os
import pickle

import numpy as np
import pytest

from cohabit.runtime import safestate
from cohabit.runtime.checkpoint import MAGIC, CheckpointStore
from cohabit.runtime.workloads import build, parse_config
from cohabit.runtime.workloads.base import WorkloadContext


def _same(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return type(a) is type(b) and a == b


def test_round_trip_of_every_kind_of_value() -> None:
    import torch

    state = {
        "w": np.arange(6.0).reshape(2, 3), "i": np.int64(7), "f32": np.float32(0.5), "none": None,
        "flags": [True, False], "t": (1, "a", 2.5), "inf": float("inf"), "nan": float("nan"), "big": 2**80,
        "raw": b"\x00\xff", "by_int": {0: {"step": 3}, 1: [1.0]}, "__a__": "a key that looks like a tag",
        "tensor": torch.arange(4, dtype=torch.float32), "bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
        "rng": torch.get_rng_state(), "ints": np.array([1, 2], dtype=np.int32),
    }
    assert _same(state, safestate.loads(safestate.dumps(state)))


def test_unsupported_types_fail_at_save_naming_the_place() -> None:
    with pytest.raises(TypeError, match=r"state\.model\[1\]"):
        safestate.dumps({"model": [1, object()]})
    with pytest.raises(TypeError, match="object arrays"):
        safestate.dumps({"a": np.array([{}, 1], dtype=object)})


@pytest.mark.parametrize("kind, params", [("mlr", {}), ("lasso", {}), ("torch-mlp", {}), ("torch-cnn", {})])
def test_builtin_workload_states_round_trip(kind: str, params: dict) -> None:
    ctx = WorkloadContext(job="j", seed=1, iterations=3, epochs=None, batch_size=None, rank=0, world_size=1,
                          threads=1)
    cfg = parse_config("j", {"name": kind, "seed": 1, **params})
    w = build(cfg, ctx)
    for _ in range(2):
        w.step()
    state = w.state_dict()
    back = safestate.loads(safestate.dumps(state))
    assert _same(state, back)
    w2 = build(cfg, ctx)
    w2.load_state_dict(back)
    assert w2.iteration == w.iteration


def _forge(path, payload: bytes) -> None:
    """Rewrite a checkpoint's payload with a recomputed checksum (what an attacker with write access can do)."""
    line = path.read_bytes().split(b"\n", 1)[0]
    header = json.loads(line[len(MAGIC):])
    header.update(size=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    path.write_bytes(MAGIC + json.dumps(header).encode() + b"\n" + payload)


class _Boom:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_forged_pickle_checkpoint_runs_nothing_and_falls_back(tmp_path) -> None:
    store = CheckpointStore(tmp_path / "store")
    store.save("j", {"i": 1}, iteration=1)
    newest = store.save("j", {"i": 2}, iteration=2).path
    marker = tmp_path / "pwned"
    _forge(newest, pickle.dumps(_Boom(str(marker))))
    state, info = store.load("j")
    assert not marker.exists()  # the command in the pickle never ran
    assert state == {"i": 1} and info.iteration == 1
    assert any("bad magic" in e for e in store.last_errors)


def test_a_forged_npz_with_an_object_array_is_refused(tmp_path) -> None:
    import io

    store = CheckpointStore(tmp_path)
    p = store.save("j", {"i": 1}, iteration=1).path
    buf = io.BytesIO()
    np.save(buf, np.array([_Boom(str(tmp_path / "pwned"))], dtype=object), allow_pickle=True)
    import zipfile

    z = io.BytesIO()
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("a0.npy", buf.getvalue())
    text = b'{"x":{"__a__":0}}'
    _forge(p, safestate.MAGIC + len(text).to_bytes(8, "big") + text + z.getvalue())
    assert store.load("j") is None and not (tmp_path / "pwned").exists()
    assert any("unreadable state payload" in e for e in store.last_errors)
