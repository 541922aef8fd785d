"""Checkpoint payloads that cannot run code when read: JSON for structure, ``.npz`` without pickle for arrays.

A training state (``state_dict()`` of a workload, a parameter server's block)
is a tree of dicts, lists, tuples, strings, numbers, ``None``, bytes, numpy
arrays and scalars and torch tensors. :func:`dumps` writes it as::

    COHSTATE1 <8-byte big-endian length of the JSON> <JSON skeleton> <npz archive>

The JSON skeleton holds every plain value; each array or tensor is a
reference ``{"__a__": i}`` (``"__t__"`` for a torch tensor) to entry ``a<i>``
of the ``.npz`` archive, which :func:`loads` opens with
``numpy.load(..., allow_pickle=False)``: object arrays are refused, so the
file holds data only. Dicts keep non-string keys (torch optimizer states use
ints) as ``{"__d__": [[key, value], ...]}``; tuples stay tuples.

This replaces pickle (issue 12: a pickled checkpoint rewritten with a
recomputed checksum ran a shell command in the worker on resume). Any other
type raises :class:`TypeError` naming where it is in the tree, at save time.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

import numpy as np

MAGIC = b"COHSTATE1"
_LEN = 8
_TAGS = ("__a__", "__t__", "__d__", "__tuple__", "__bytes__", "__float__", "__np__")


class StateFormatError(ValueError):
    """A payload that is not a valid safe-state payload (truncated, tampered, or another format)."""


def dumps(state: Any) -> bytes:
    """Serialise ``state`` (see the module docstring); raises TypeError for a type it cannot hold."""
    arrays: list[np.ndarray] = []
    skeleton = _enc(state, arrays, "state")
    text = json.dumps(skeleton, separators=(",", ":"), allow_nan=False).encode()
    buf = io.BytesIO()
    np.savez(buf, **{f"a{i}": a for i, a in enumerate(arrays)})
    return MAGIC + len(text).to_bytes(_LEN, "big") + text + buf.getvalue()


def loads(payload: bytes) -> Any:
    """The state :func:`dumps` wrote; raises :class:`StateFormatError` for anything else (never runs code)."""
    if not payload.startswith(MAGIC) or len(payload) < len(MAGIC) + _LEN:
        raise StateFormatError("not a cohabit state payload (bad magic)")
    n = int.from_bytes(payload[len(MAGIC):len(MAGIC) + _LEN], "big")
    start = len(MAGIC) + _LEN
    if n > len(payload) - start:
        raise StateFormatError("truncated state payload")
    try:
        skeleton = json.loads(payload[start:start + n])
        with np.load(io.BytesIO(payload[start + n:]), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (ValueError, OSError, EOFError, KeyError) as exc:  # zip/npy errors, object arrays refused
        raise StateFormatError(f"unreadable state payload: {exc}") from None
    return _dec(skeleton, arrays)


def _enc(x: Any, arrays: list[np.ndarray], where: str) -> Any:
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return x if math.isfinite(x) else {"__float__": repr(x)}
    if isinstance(x, np.ndarray):
        if x.dtype.hasobject:
            raise TypeError(f"{where}: object arrays cannot be checkpointed safely")
        arrays.append(x)
        return {"__a__": len(arrays) - 1}
    if isinstance(x, np.generic):
        arrays.append(np.asarray(x))
        return {"__np__": len(arrays) - 1}
    if isinstance(x, (bytes, bytearray)):
        arrays.append(np.frombuffer(bytes(x), dtype=np.uint8))
        return {"__bytes__": len(arrays) - 1}
    if isinstance(x, dict):
        if all(isinstance(k, str) and k not in _TAGS for k in x):
            return {k: _enc(v, arrays, f"{where}.{k}") for k, v in x.items()}
        return {"__d__": [[_enc(k, arrays, f"{where}[key]"), _enc(v, arrays, f"{where}[{k!r}]")]
                          for k, v in x.items()]}
    if isinstance(x, list):
        return [_enc(v, arrays, f"{where}[{i}]") for i, v in enumerate(x)]
    if isinstance(x, tuple):
        return {"__tuple__": [_enc(v, arrays, f"{where}[{i}]") for i, v in enumerate(x)]}
    torch_ref = _enc_tensor(x, arrays)
    if torch_ref is not None:
        return torch_ref
    raise TypeError(f"{where}: cannot checkpoint a {type(x).__module__}.{type(x).__qualname__} safely "
                    f"(use dicts, lists, numbers, strings, numpy arrays or torch tensors)")


def _enc_tensor(x: Any, arrays: list[np.ndarray]) -> dict[str, Any] | None:
    """A torch tensor as an array reference (bfloat16 kept bit-exact through its int16 view)."""
    torch = _torch_if_loaded()
    if torch is None or not isinstance(x, torch.Tensor):
        return None
    t = x.detach().cpu().contiguous()
    dtype = str(t.dtype).removeprefix("torch.")
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    arrays.append(t.numpy())
    return {"__t__": len(arrays) - 1, "dtype": dtype}


def _torch_if_loaded() -> Any:
    import sys

    return sys.modules.get("torch")  # a state holding tensors was built by torch, so it is imported


def _dec(x: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(x, list):
        return [_dec(v, arrays) for v in x]
    if not isinstance(x, dict):
        return x
    if len(x) == 1:
        (tag, v), = x.items()
        if tag == "__a__":
            return _array(arrays, v)
        if tag == "__np__":
            return _array(arrays, v)[()]
        if tag == "__bytes__":
            return _array(arrays, v).tobytes()
        if tag == "__float__":
            return float(v) if v in ("inf", "-inf", "nan") else _bad(f"float {v!r}")
        if tag == "__tuple__":
            return tuple(_dec(e, arrays) for e in v)
        if tag == "__d__":
            return {_hashable(_dec(k, arrays)): _dec(val, arrays) for k, val in v}
    if set(x) == {"__t__", "dtype"}:
        return _tensor(_array(arrays, x["__t__"]), str(x["dtype"]))
    return {k: _dec(v, arrays) for k, v in x.items()}


def _array(arrays: dict[str, np.ndarray], i: Any) -> np.ndarray:
    if not isinstance(i, int) or f"a{i}" not in arrays:
        _bad(f"array reference {i!r}")
    return arrays[f"a{i}"]


def _hashable(k: Any) -> Any:
    if isinstance(k, (list, dict)):
        _bad("a list or dict as a dict key")
    return k


def _tensor(a: np.ndarray, dtype: str) -> Any:
    import torch

    want = getattr(torch, dtype, None)
    if not isinstance(want, torch.dtype):
        _bad(f"tensor dtype {dtype!r}")
    t = torch.from_numpy(a.copy())
    return t.view(torch.bfloat16) if want == torch.bfloat16 else t.to(want)


def _bad(what: str) -> Any:
    raise StateFormatError(f"invalid state payload: {what}")
