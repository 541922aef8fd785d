"""Ground-truth physics of the simulator, from measured public profiles.

Simulator-only: policies never import this package (a test enforces it).
Every module reads its data once, from ``cohabit/data/profiles`` (package
data), builds lookup tables and answers each query in about a microsecond.

* :mod:`.ps_speed` -- parameter-server jobs: samples/s for (#PS, #workers)
  (DL2's MXNet profile);
* :mod:`.colocation` -- jobs sharing one GPU: normalised speeds (Lucid's
  1,388 measured pairs);
* :mod:`.pollux` -- the six Pollux applications: samples/s for a placement
  and global batch (Pollux's step/sync-time profiles);
* :mod:`.placement` -- jobs spread over nodes: per-model speed factor.
"""

from .colocation import COLOCATION_MODELS, colocated_speed, resolve_colocation_model, shared_gpu_speed
from .placement import DEFAULT_SPREAD_FACTORS, SpreadModel
from .pollux import (
    POLLUX_APPS,
    pollux_iteration_time,
    pollux_max_local_bsz,
    pollux_step_time,
    pollux_throughput,
)
from .ps_speed import PS_MODELS, ps_cpu, ps_throughput, resolve_ps_model

__all__ = [
    "COLOCATION_MODELS",
    "DEFAULT_SPREAD_FACTORS",
    "POLLUX_APPS",
    "PS_MODELS",
    "SpreadModel",
    "colocated_speed",
    "pollux_iteration_time",
    "pollux_max_local_bsz",
    "pollux_step_time",
    "pollux_throughput",
    "ps_cpu",
    "ps_throughput",
    "resolve_colocation_model",
    "resolve_ps_model",
    "shared_gpu_speed",
]
