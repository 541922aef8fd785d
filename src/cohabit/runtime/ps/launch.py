"""What the LocalBackend needs to start a parameter-server job: checks, ports, per-task sections.

Placement order is the JobSpec's: the first ``len(slots) - ps.count`` slots of
an allocation are workers, the rest servers. Each task gets a ``ps`` section
in its configuration (:meth:`PSLaunch.section`): role and index, the layout,
every server's port and node, its own node and that node's bandwidth budget
(bytes/s and the bucket file shared by the node's processes, see
:mod:`.netlimit`).

A node's budget is, in order: the backend's ``bandwidth_mbps`` (one number for
every node, or one per node), else the node's ``net_gbps`` capacity, else
unlimited.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...engine.ledger import Allocation
from ...spec.cluster import ClusterSpec
from ...spec.job import JobSpec
from ..workloads import BUILTINS, WorkloadConfig
from .auth import new_secret
from .netlimit import bucket_path

#: PS workload name -> "module:callable": the built-ins whose factory lives in this package.
PS_WORKLOADS: dict[str, str] = {k: v for k, v in BUILTINS.items() if v.startswith("cohabit.runtime.ps.")}


def ps_job_problem(spec: JobSpec, config: WorkloadConfig) -> str | None:
    """Why ``spec`` cannot run with ``config`` (a PS workload needs ``architecture: ps`` and vice versa)."""
    ps_target = config.target in PS_WORKLOADS.values()
    if spec.architecture == "ps" and not ps_target:
        return (f"job {spec.id!r}: architecture 'ps' runs a parameter-server workload "
                f"({', '.join(PS_WORKLOADS)}); got workload {config.label!r}")
    if spec.architecture != "ps" and ps_target:
        return (f"job {spec.id!r}: workload {config.label!r} is a parameter-server workload: give the job "
                f"'architecture: ps' and 'ps: {{count: N, demand: ...}}' (got architecture {spec.architecture!r})")
    return None


def node_bandwidth(cluster: ClusterSpec, mbps: float | Sequence[float | None] | None) -> list[float | None]:
    """Bytes per second of every node's link (None: unlimited); see the module docstring."""
    n = len(cluster.nodes)
    if mbps is None:
        per: list[float | None] = [node.capacity.get("net_gbps", 0.0) * 1000.0 for node in cluster.nodes]
    elif isinstance(mbps, (int, float)):
        per = [float(mbps)] * n
    else:
        per = list(mbps)
        if len(per) != n:
            raise ValueError(f"bandwidth_mbps: expected one value per node ({n}), got {len(per)}")
    for i, r in enumerate(per):
        if r is not None and (not isinstance(r, (int, float)) or r < 0):
            raise ValueError(f"bandwidth_mbps[{i}]: expected a number of Mbit/s >= 0 (0 or None: unlimited), got {r!r}")
    return [None if not r else float(r) * 1e6 / 8.0 for r in per]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class PSLaunch:
    """Ports and nodes of one launch of a PS job."""

    n_workers: int
    n_servers: int
    nodes: tuple[int, ...]  # per task, workers first
    ports: tuple[int, ...]  # per server
    net_dir: Path
    rates: tuple[float | None, ...]  # bytes/s per cluster node
    secret: str = field(default_factory=new_secret, repr=False)  # authenticates workers to servers (.auth)

    @classmethod
    def plan(cls, spec: JobSpec, alloc: Allocation, *, net_dir: Path, rates: Sequence[float | None]) -> PSLaunch:
        nodes = tuple(s.node for s in alloc.slots)
        n_servers = spec.num_ps
        if not 1 <= n_servers < len(nodes):
            raise ValueError(f"job {spec.id!r}: allocation has {len(nodes)} slots, need >= 1 worker and "
                             f"{n_servers} server(s)")
        return cls(len(nodes) - n_servers, n_servers, nodes, tuple(_free_port() for _ in range(n_servers)),
                   Path(net_dir), tuple(rates))

    @property
    def n_tasks(self) -> int:
        return self.n_workers + self.n_servers

    def section(self, rank: int) -> dict[str, Any]:
        """The ``ps`` configuration of task ``rank`` (placement order)."""
        server = rank >= self.n_workers
        node = self.nodes[rank]
        return {
            "role": "server" if server else "worker",
            "index": rank - self.n_workers if server else rank,
            "n_workers": self.n_workers, "n_servers": self.n_servers, "node": node,
            "port": self.ports[rank - self.n_workers] if server else None,
            "servers": [[p, self.nodes[self.n_workers + k]] for k, p in enumerate(self.ports)],
            "bytes_per_s": self.rates[node], "bucket": str(bucket_path(self.net_dir, node)),
            "secret": self.secret,
        }
