"""Real parameter-server jobs: servers holding model partitions, workers pulling and pushing over TCP.

Layout of the package:

* :mod:`.models` — the four PS workloads (``ps-mlr``, ``ps-lasso``, ``ps-nmf``,
  ``ps-lda``) and how a model is partitioned over servers;
* :mod:`.wire` — the message format and the throttled, counted connection;
* :mod:`.netlimit` — the per-node bandwidth budget shared across processes;
* :mod:`.server` / :mod:`.client` — the server and worker loops (BSP);
* :mod:`.parts` — per-task checkpoint parts and consistent restore points;
* :mod:`.launch` — what the LocalBackend needs to start a PS job;
* :mod:`.task` — the task-process entry point.
"""

from __future__ import annotations

from .launch import PS_WORKLOADS, PSLaunch, ps_job_problem
from .parts import checkpoint_iteration, clear_parts, load_model

__all__ = ["PSLaunch", "PS_WORKLOADS", "checkpoint_iteration", "clear_parts", "load_model", "ps_job_problem"]
