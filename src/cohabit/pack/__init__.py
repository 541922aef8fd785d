"""Pack: train several models jointly on one device (Liu, ch. 2).

Primitives ``pack``/``load``/``free`` and :class:`PackedModel` (§2.1.2, §2.2),
the shared input stream with misaligned batch sizes (§2.2.2), the memory
estimate and guard (§2.3.4), ``pack_opt`` heuristics and pack-aware Hyperband
(§2.4, Alg. 1 and 2).
"""

from importlib import import_module
from typing import Any

# Lazy re-exports (PEP 562): importing ``cohabit.pack`` (e.g. for the CLI) must not pay for torch.
_HOME = {
    "Batch": "batching", "Cursor": "batching", "DataStream": "batching", "pad_rows": "batching",
    "MemoryGuard": "memory", "estimate_pack": "memory", "footprint": "memory", "measure_step_peak": "memory",
    "Checkpoint": "packed", "Member": "packed", "PackedModel": "packed", "free": "packed", "load": "packed",
    "pack": "packed", "signature": "packed",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(import_module(f".{_HOME[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Batch",
    "Checkpoint",
    "Cursor",
    "DataStream",
    "Member",
    "MemoryGuard",
    "PackedModel",
    "estimate_pack",
    "footprint",
    "free",
    "load",
    "measure_step_peak",
    "pack",
    "pad_rows",
    "signature",
]
