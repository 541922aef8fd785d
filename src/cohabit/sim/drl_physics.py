"""Ground-truth interference between co-located distributed training jobs (Bao et al.'s world).

Bao, Peng and Wu ("Deep Learning-Based Job Placement in Distributed ML Clusters With
Heterogeneous Workloads", ToN'22, §III-A) measure that jobs whose workers and parameter
servers share a server slow each other down even when no resource is over-allocated
(CPU caches, PCIe/QPI buses, the NIC), by an amount that depends on the pair of models, and
that spreading a job over servers costs communication time. This module gives the simulator
that behaviour for jobs whose ``truth.app`` is one of the DL2-profiled models (the same
models as the paper's Table I: ResNet-50, VGG-16, ResNeXt-110, Seq2Seq, CTC, WLM, plus
DSSM and Inception-BN). It is switched on per cluster (:func:`enabled_for`: every node
labelled ``interference: drl``), so other traces keep their physics.

For a job ``j`` of model ``m`` with ``w`` workers and ``p`` parameter servers placed with
``w_s`` workers and ``p_s`` servers on server ``s``:

* **Base speed** (samples/s, alone and consolidated): DL2's measured speed
  ``ps_throughput(m, p, w)`` (``profiles.ps_speed``). An all-reduce job is a bundle of a
  worker and a server shard per worker, as the paper's §VII-A treats it:
  ``ps_throughput(m, w, w)``.
* **Communication share** ``k_m`` in [0, 1): ``1 - s(1, 1) / max_p s(p, 1)``, the share of a
  one-worker iteration that more parameter servers take away, i.e. time spent waiting on the
  parameter exchange (DL2's speeds; VGG-16 high, CTC low).
* **CPU use** per task: DL2's measured cores per PS and per worker at (p, w)
  (``profiles.ps_speed.ps_cpu``; an all-reduce worker uses both, being a bundle).
* **Pair sensitivity** ``b(m | n)`` = ``1 - colocated_speed(m, n)``: how much one task of
  model ``n`` slows ``m`` through the shared buses, from Lucid's measured pairs
  (``profiles.colocation``; models resolved through its aliases).

A task of ``j`` on server ``s`` runs at::

    f_js = 1 / (1 + A_CPU * (1 - k_m) * U_s^-j + A_BUS * sum_{tasks t of others on s} b(m | n_t)
                  + A_NET * k_m * X_s^-j)  x  min(1, C_s / U_s)

with ``U_s^-j`` the other jobs' CPU use on ``s`` over its cores ``C_s`` (CPU contention hurts
the compute share ``1 - k_m``), ``X_s^-j`` the other jobs' cross-server traffic on ``s``'s
NIC (sum of ``k_n`` over their tasks on ``s`` whose job spans several servers; it hurts the
communication share), and ``min(1, C_s / U_s)`` processor sharing when the tasks' real CPU
use exceeds the cores. A synchronous job runs at the pace of its slowest task::

    speed_j = base_j * min_s f_js / (1 + A_SPREAD * k_m * x_j)

with ``x_j`` the share of its parameter traffic that crosses servers: for a PS job
``1 - sum_s w_s p_s / (w p)`` (worker-server pairs on different servers); for a ring
all-reduce job ``h / w`` when its ring crosses ``h > 1`` servers (``h`` of its ``w`` hops leave
a server), else 0. The coefficients (:class:`InterferenceWorld`) are ours, chosen so that
packing six 1-PS/1-worker jobs on three servers slows them by about a third on average (the
paper's Fig. 1 measured 33%) and so that neither bin packing nor load balancing is best for
every model mix (Fig. 4). Policies never read this module (``tests/test_barrier.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from ..spec.cluster import ClusterSpec
from .profiles.colocation import colocated_speed
from .profiles.ps_speed import PS_MODELS, _surface, ps_cpu, ps_throughput, resolve_ps_model

LABEL, VALUE = "interference", "drl"


@dataclass(frozen=True)
class InterferenceWorld:
    """Coefficients of the interference model (see the module docstring)."""

    a_cpu: float = 2.0  # slowdown of the compute share per unit of others' CPU load on the server
    a_bus: float = 0.8  # weight of Lucid's pair slowdown per co-located task of another job
    a_net: float = 0.5  # slowdown of the communication share per unit of others' cross-server traffic
    a_spread: float = 1.0  # slowdown of the communication share when all its traffic crosses servers
    node_cores: tuple[float, ...] = ()  # CPU cores per server (``C_s``); 8 for servers not listed

    def cores(self, server: int) -> float:
        return self.node_cores[server] if server < len(self.node_cores) else 8.0

    def __post_init__(self) -> None:
        for name in ("a_cpu", "a_bus", "a_net", "a_spread"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and v >= 0):
                raise ValueError(f"InterferenceWorld.{name} must be a number >= 0, got {v!r}")


@dataclass(frozen=True, slots=True)
class Placed:
    """One job as the interference model sees it: model, architecture and tasks per server."""

    model: str
    allreduce: bool
    workers: Mapping[int, int]  # server -> workers there
    ps: Mapping[int, int]  # server -> parameter servers there (empty for all-reduce)

    @property
    def n_workers(self) -> int:
        return sum(self.workers.values())

    @property
    def n_ps(self) -> int:
        return sum(self.ps.values())


def enabled_for(cluster: ClusterSpec) -> bool:
    """Whether ``cluster`` asks for this world: every node labelled ``interference: drl``."""
    return bool(cluster.nodes) and all(n.labels.get(LABEL) == VALUE for n in cluster.nodes)


def world_for(cluster: ClusterSpec) -> InterferenceWorld:
    """The default world with ``cluster``'s CPU cores per server."""
    return InterferenceWorld(node_cores=tuple(max(float(n.capacity["cpu"]), 1.0) for n in cluster.nodes))


def is_profiled(model: str | None) -> bool:
    """Whether ``model`` is one of DL2's profiled models (the jobs this world simulates)."""
    if not model:
        return False
    try:
        return resolve_ps_model(model) in PS_MODELS
    except ValueError:
        return False


@cache
def comm_share(model: str) -> float:
    """``k_m``: share of a one-worker iteration spent on the parameter exchange (DL2's speeds)."""
    s = _surface(resolve_ps_model(model))
    best = max(s.speed[p][1] for p in range(1, s.max_ps + 1))
    return max(0.0, min(0.95, 1.0 - s.speed[1][1] / best))


@cache
def pair_sensitivity(victim: str, aggressor: str) -> float:
    """``b(m | n)``: slowdown of ``victim`` per co-located task of ``aggressor`` (Lucid's pairs)."""
    return max(0.0, 1.0 - colocated_speed(victim, aggressor)[0])


def base_speed(model: str, allreduce: bool, n_workers: int, n_ps: int) -> float:
    """Samples/s alone and consolidated (DL2's measured speed; all-reduce as worker+shard bundles)."""
    if allreduce:
        return ps_throughput(model, n_workers, n_workers)
    return ps_throughput(model, max(n_ps, 1), n_workers)


def task_cpu(model: str, allreduce: bool, n_workers: int, n_ps: int) -> tuple[float, float]:
    """Cores one worker and one parameter server of the job really use (DL2's measured CPU)."""
    if allreduce:
        c_ps, c_w = ps_cpu(model, n_workers, n_workers)
        return c_w + c_ps, 0.0
    c_ps, c_w = ps_cpu(model, max(n_ps, 1), n_workers)
    return c_w, c_ps


def cross_share(job: Placed) -> float:
    """``x_j``: the share of the job's parameter traffic that crosses servers."""
    w = job.n_workers
    if job.allreduce:
        hosts = sum(1 for c in job.workers.values() if c > 0)
        return hosts / w if hosts > 1 and w > 0 else 0.0
    p = job.n_ps
    if w == 0 or p == 0:
        return 0.0
    local = sum(c * job.ps.get(s, 0) for s, c in job.workers.items())
    return 1.0 - local / (w * p)


def speeds(jobs: Sequence[Placed], cores: Mapping[int, float], world: InterferenceWorld) -> list[float]:
    """Samples/s of every job in ``jobs`` (all the jobs on the servers involved), co-located as placed.

    ``cores``: server -> CPU cores (``C_s``)."""
    info = []
    cpu_on: dict[int, float] = {}
    net_on: dict[int, float] = {}
    for job in jobs:
        w, p = job.n_workers, job.n_ps
        c_w, c_p = task_cpu(job.model, job.allreduce, w, p)
        k = comm_share(job.model)
        x = cross_share(job)
        servers = set(job.workers) | set(job.ps)
        per_server_cpu = {s: job.workers.get(s, 0) * c_w + job.ps.get(s, 0) * c_p for s in servers}
        per_server_net = {s: (k * (job.workers.get(s, 0) + job.ps.get(s, 0)) if x > 0 else 0.0) for s in servers}
        for s in servers:
            cpu_on[s] = cpu_on.get(s, 0.0) + per_server_cpu[s]
            net_on[s] = net_on.get(s, 0.0) + per_server_net[s]
        info.append((job, k, x, servers, per_server_cpu, per_server_net))
    out: list[float] = []
    for i, (job, k, x, servers, my_cpu, my_net) in enumerate(info):
        worst = 1.0
        for s in servers:
            if job.workers.get(s, 0) + job.ps.get(s, 0) == 0:
                continue
            c = max(float(cores.get(s, 1.0)), 1e-9)
            others_cpu = (cpu_on[s] - my_cpu[s]) / c
            others_net = net_on[s] - my_net[s]
            bus = 0.0
            for j, (other, *_rest) in enumerate(info):
                if j == i:
                    continue
                n = other.workers.get(s, 0) + other.ps.get(s, 0)
                if n:
                    bus += n * pair_sensitivity(job.model, other.model)
            f = 1.0 / (1.0 + world.a_cpu * (1.0 - k) * others_cpu + world.a_bus * bus + world.a_net * k * others_net)
            f *= min(1.0, c / cpu_on[s]) if cpu_on[s] > 0 else 1.0
            worst = min(worst, f)
        base = base_speed(job.model, job.allreduce, job.n_workers, job.n_ps)
        out.append(base * worst / (1.0 + world.a_spread * k * x))
    return out
