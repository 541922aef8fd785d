"""The PS computation without processes or sockets: the same workers and servers, in one loop.

:func:`run_in_process` builds ``n_workers`` worker halves and one server half
of a PS workload and runs the BSP iterations of :mod:`.server` /
:mod:`.client` directly (pull = assemble the blocks, push = split the update,
apply in worker-rank order). A real run with the same seed and layout ends
with the same model up to floating-point noise (BLAS thread counts may
differ); tests and benchmarks use it as the uninterrupted reference.
"""

from __future__ import annotations

from typing import Any

from ..workloads import WorkloadContext, build, parse_config
from .models import PSWorkload
from .parts import Arrays, assemble, partition


def _make(workload: dict[str, Any], rank: int, n_workers: int, iterations: int, job: str) -> PSWorkload:
    cfg = parse_config(job, workload)
    ctx = WorkloadContext(job=job, seed=cfg.seed, iterations=iterations, rank=rank, world_size=n_workers)
    w = build(cfg, ctx)
    if not isinstance(w, PSWorkload):
        raise ValueError(f"workload {cfg.label!r} is not a parameter-server workload")
    return w


def run_in_process(workload: dict[str, Any], *, iterations: int, n_workers: int = 1, n_servers: int = 1,
                   job: str = "reference") -> tuple[Arrays, list[PSWorkload], list[float]]:
    """Final full model, the worker halves (with their local state), and the per-iteration mean loss."""
    workers = [_make(workload, r, n_workers, iterations, job) for r in range(n_workers)]
    server = _make(workload, 0, n_workers, iterations, job)
    blocks = partition(server.init_model(), n_servers)
    losses = []
    for it in range(iterations):
        model = assemble(blocks)
        outs = []
        for w in workers:
            w.iteration = it
            outs.append(w.compute(model))
        losses.append(sum(m.get("loss", 0.0) for _, m in outs) / n_workers)
        per_server = [partition(u, n_servers) for u, _ in outs]
        blocks = [server.apply(blocks[k], [per_server[r][k] for r in range(n_workers)], it)
                  for k in range(n_servers)]
    for w in workers:
        w.iteration = iterations
    return assemble(blocks), workers, losses
