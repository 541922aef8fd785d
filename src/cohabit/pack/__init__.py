"""Pack: train several models jointly on one device (Liu, ch. 2).

Primitives ``pack``/``load``/``free`` and :class:`PackedModel` (§2.1.2, §2.2),
the shared input stream with misaligned batch sizes (§2.2.2), the memory
estimate and guard (§2.3.4), ``pack_opt`` heuristics and pack-aware Hyperband
(§2.4, Alg. 1 and 2).
"""

from .batching import Batch, Cursor, DataStream, pad_rows
from .memory import MemoryGuard, estimate_pack, footprint, measure_step_peak
from .packed import Checkpoint, Member, PackedModel, free, load, pack, signature

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
