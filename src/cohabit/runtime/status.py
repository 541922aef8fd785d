"""What the local runtime knows of a job's real execution, read from its tasks' messages.

:class:`JobStatus` is the live state dashboards show (:attr:`LocalBackend.status`); the helpers turn a
worker's ``progress`` / ``finished`` message into that state and into the metrics of a backend event,
keeping the held-out metrics (measured on data the scheduler must not see) apart from the ones
policies may read (engine/criteria.py: false attainment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class JobStatus:
    """What the backend knows about one job's real execution (for progress displays)."""

    job: str
    state: str = "starting"  # starting | running | halted | restarting | finished | failed
    iterations: int = 0
    total: int | None = None
    iter_time: float | None = None
    compute_s: float | None = None
    comm_s: float | None = None
    mem_mb: float | None = None
    device: str | None = None  # where rank 0 trains ("cuda:0", "cpu"), as it reported
    cuda_visible_devices: str | None = None  # rank 0's physical GPU ids ("" none)
    device_note: str | None = None  # why it trains on the CPU although given GPUs
    device_mem_mb: float | None = None  # peak device memory (torch.cuda.max_memory_allocated), on CUDA
    metrics: dict[str, float] = field(default_factory=dict)
    checkpoint_iteration: int | None = None
    restarts: int = 0
    nodes: tuple[int, ...] = ()
    pids: tuple[int, ...] = ()
    reason: str = ""
    #: restores that fell back past corrupt checkpoints or started over from iteration 0
    checkpoint_events: list[str] = field(default_factory=list)


def update_status(st: JobStatus, msg: dict[str, Any]) -> None:
    st.state = "running"
    st.iterations = int(msg["iterations"])
    st.total = msg.get("total", st.total)
    st.iter_time = msg.get("iter_time")
    st.compute_s = msg.get("compute_s")
    st.comm_s = msg.get("comm_s")
    st.mem_mb = msg.get("mem_mb")
    if msg.get("device_mem_mb") is not None:
        st.device_mem_mb = float(msg["device_mem_mb"])
    st.metrics.update(msg.get("metrics") or {})
    if msg.get("checkpoint_iteration") is not None:
        st.checkpoint_iteration = int(msg["checkpoint_iteration"])


def finite_metrics(metrics: dict[str, Any] | None) -> dict[str, float]:
    """Metrics as floats, leaving out non-numbers (a NaN loss arrives as null)."""
    out = {}
    for k, v in (metrics or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[k] = float(v)
    return out


def split_heldout(metrics: dict[str, Any] | None) -> dict[str, dict[str, float]]:
    """``{"metrics": ..., "heldout": ...}``: a workload's ``heldout_<name>`` metrics (measured on data the
    scheduler must not see, for false-attainment accounting: engine/criteria.py) go under ``heldout``
    as ``<name>``, out of the metrics the policies see."""
    shown: dict[str, float] = {}
    held: dict[str, float] = {}
    for k, v in finite_metrics(metrics).items():
        if k.startswith("heldout_"):
            held[k[len("heldout_"):]] = v
        else:
            shown[k] = v
    return {"metrics": shown, "heldout": held} if held else {"metrics": shown}

