"""Real execution: run the scheduler's decisions on real training processes.

* :mod:`.checkpoint` — on-disk checkpoint store (atomic, checksummed, with fallback);
* :mod:`.workloads` — real trainable workloads (numpy MLR and Lasso, PyTorch
  MLP and CNN) and the interface a user's own workload follows;
* :mod:`.worker` — the task process (trains, checkpoints, reports telemetry);
* :mod:`.local` — :class:`LocalBackend`, the embedded default backend (tasks
  as processes on this machine);
* :mod:`.cli` — ``cohabit run``.

Nothing here imports torch until a torch workload is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checkpoint import CheckpointStore
    from .local import LocalBackend
    from .status import JobStatus

__all__ = ["CheckpointStore", "JobStatus", "LocalBackend"]


def __getattr__(name: str) -> Any:
    if name == "CheckpointStore":
        from .checkpoint import CheckpointStore

        return CheckpointStore
    if name == "LocalBackend":
        from .local import LocalBackend

        return LocalBackend
    if name == "JobStatus":
        from .status import JobStatus

        return JobStatus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
