"""Speed of real jobs sharing this machine's cores and bandwidth budgets (physics ``local``).

The world of ``LocalBackend`` (``runtime/local.py``): logical node ``n`` owns ``cores[n]``
cores and every task of a job placed there is a process pinned to them, running
``threads`` BLAS / torch threads; a parameter-server job's bytes between a worker and a
server on different nodes are charged to both nodes' bandwidth budgets (token buckets,
``runtime/ps/netlimit.py``). A job's measured costs are a :class:`~.truth.HostTruth`:
``cpu_s`` computing and ``link_s`` on the links per iteration when it has both to itself.

The model (first order, no queueing beyond fair shares):

* CPU: the kernel shares a node's cores fairly among runnable threads. A thread of a job
  computing on node ``n`` competes with itself, the other jobs' threads there (each worker
  task's ``threads`` times the share of its iteration it computes, ``cpu_s / (cpu_s + link_s)``)
  and the machine's other processes, ``background`` thread-equivalents per core (measured
  from the CPU time the jobs got, ``sim.calibrate``; 0 on a machine of its own): it gets
  ``min(1, cores / (own threads + others' demand + background x cores))`` of a core.
  A synchronous job (data-parallel ranks, a PS worker waiting for its servers) goes at its
  slowest worker's node. Parameter servers' CPU is not counted
  (they apply updates: a small share of an iteration on the workloads here).
* Links: a node's budget is shared by the parameter-server jobs whose traffic crosses it. Of
  a job's ``link_s``, only ``wire_s`` (its bytes per iteration at the budget's rate) holds the
  budget; the rest (serialising, waiting for the server's reply) does not. While its bytes
  move, a job's own stream asks for the whole budget and each other job there for the share
  of its iteration its bytes are on the wire; over-asked, the job gets ``1 / demand`` of it
  (those shares are found together: a slowed job's bytes are on the wire a larger share of
  its longer iteration; :data:`LINK_ROUNDS` rounds of that). A job's traffic goes at its most
  loaded node's rate. (Measured on LocalBackend's token buckets: two ps-mlr jobs through
  one node's 20 Mbps took 0.113-0.119 s per iteration against 0.067-0.069 s alone, with
  ``wire_s`` 0.052 s: this rule says 0.113, sharing all of ``link_s`` fairly said 0.137.)
* An iteration then takes ``cpu_s / f_cpu + (link_s - wire_s) + wire_s / f_link``.

:func:`factors` is used in both directions: by ``SimBackend`` to run jobs, and by
``sim.calibrate`` to take the sharing out of the step times a real run reported.
"""

from __future__ import annotations

import bisect

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..engine.ledger import Allocation
from ..spec.job import JobSpec
from .truth import HostTruth


@dataclass(frozen=True, slots=True)
class Placed:
    """One running job as the host model sees it: where its tasks are and what it costs alone."""

    job: str
    workers: tuple[int, ...]  # node of each worker task
    servers: tuple[int, ...]  # node of each parameter-server task
    threads: int  # threads of each worker task
    cost: HostTruth

    @property
    def busy(self) -> float:
        """Share of an iteration its workers compute when alone."""
        return self.cost.cpu_s / self.cost.iter_s

    def link_nodes(self) -> frozenset[int]:
        """Nodes whose bandwidth budget its traffic is charged to (worker-server pairs on two nodes)."""
        if self.cost.link_s <= 0:
            return frozenset()
        return frozenset(n for w in set(self.workers) for s in set(self.servers) if w != s for n in (w, s))


def threads_of(spec: JobSpec) -> int:
    """Threads of each worker task, as ``LocalBackend`` starts them: ``ceil(cpu demand)``, at least 1."""
    cpu = spec.workers.demand["cpu"]
    return max(1, -int(-(cpu - 1e-9) // 1)) if cpu > 0 else 1


def placed(spec: JobSpec, alloc: Allocation | Sequence[int], cost: HostTruth) -> Placed:
    """``spec`` on ``alloc`` (or its slots' nodes, workers first then servers, as the ledger orders them)."""
    nodes = alloc.nodes if isinstance(alloc, Allocation) else tuple(alloc)
    n_workers = len(nodes) - spec.num_ps
    return Placed(spec.id, tuple(nodes[:n_workers]), tuple(nodes[n_workers:]), threads_of(spec), cost)


#: Rounds of finding the jobs' link shares together (each from the iteration times of the round before).
LINK_ROUNDS = 4


def factors(jobs: Sequence[Placed], cores: Mapping[int, float], background: float = 0.0) -> list[tuple[float, float]]:
    """``(f_cpu, f_link)`` of each job in ``jobs`` running together: the share of a core each of its
    threads gets at its slowest worker's node, and the share of a budget its bytes get at its most
    loaded link (both 1 when nothing is over-asked). ``cores``: node -> cores (1 if absent);
    ``background``: other processes' runnable threads per core."""
    cpu_load: dict[int, float] = {}
    for p in jobs:
        for n in p.workers:
            cpu_load[n] = cpu_load.get(n, 0.0) + p.threads * p.busy
    f_cpus = []
    for p in jobs:
        own = p.threads * (1.0 - p.busy)  # while it computes, its threads are all runnable
        f_cpus.append(min((cpu_share(cores.get(n, 1.0), cpu_load[n] + own, background) for n in set(p.workers)),
                          default=1.0))
    f_links = [1.0] * len(jobs)
    nodes = [p.link_nodes() for p in jobs]
    if any(nodes):
        for _ in range(LINK_ROUNDS):
            duty = [p.cost.wire / f_l / iter_time(p.cost, f_c, f_l) if ns else 0.0  # share of its iteration on the wire
                    for p, ns, f_c, f_l in zip(jobs, nodes, f_cpus, f_links)]
            load: dict[int, float] = {}
            for ns, d in zip(nodes, duty):
                for n in ns:
                    load[n] = load.get(n, 0.0) + d
            f_links = [min((min(1.0, 1.0 / (1.0 + load[n] - d)) for n in ns), default=1.0)
                       for ns, d in zip(nodes, duty)]
    return list(zip(f_cpus, f_links))


def cpu_share(cores: float, runnable: float, background: float = 0.0) -> float:
    """Share of a core each of ``runnable`` threads gets on ``cores`` cores beside ``background``
    other runnable threads per core (fair sharing, at most a whole core)."""
    return min(1.0, cores / (runnable + background * cores)) if runnable > 0 else 1.0


def background_at(series: Sequence[tuple[float, float]], default: float, t: float) -> float:
    """The background load at time ``t`` of a piecewise-constant ``series`` ``((t0, b0), (t1, b1), ...)``
    (``b_k`` from ``t_k`` on, ``b0`` before ``t0``); ``default`` when the series is empty."""
    if not series:
        return default
    k = bisect.bisect_right([s for s, _ in series], t) - 1
    return series[max(k, 0)][1]


def next_change(series: Sequence[tuple[float, float]], t: float) -> float | None:
    """The first time after ``t`` at which ``series`` changes, or None."""
    k = bisect.bisect_right([s for s, _ in series], t)
    return series[k][0] if k < len(series) else None


def iter_time(cost: HostTruth, f_cpu: float, f_link: float) -> float:
    """Seconds per iteration with a ``f_cpu`` share of a core per thread and ``f_link`` of its links'
    budgets while its bytes move."""
    return cost.cpu_s / f_cpu + link_time(cost, f_link)


def link_time(cost: HostTruth, f_link: float) -> float:
    """Seconds per iteration on the links with ``f_link`` of the budgets: ``link_s - wire_s + wire_s / f_link``."""
    if cost.link_s <= 0:
        return 0.0
    return cost.link_s - cost.wire + cost.wire / f_link


def rates(jobs: Sequence[Placed], cores: Mapping[int, float], background: float = 0.0) -> list[float]:
    """Iterations per second of each job in ``jobs`` running together."""
    return [1.0 / iter_time(p.cost, fc, fl) for p, (fc, fl) in zip(jobs, factors(jobs, cores, background))]


def cpu_used(p: Placed, f_cpu: float, f_link: float) -> float:
    """Cores its worker tasks use at these shares: each thread computes ``cpu_s / f_cpu`` of each
    iteration at ``f_cpu`` of a core."""
    return len(p.workers) * p.threads * p.cost.cpu_s / iter_time(p.cost, f_cpu, f_link)


def net_used(p: Placed, f_cpu: float, f_link: float, budget_gbps: float) -> float:
    """Gbit/s its traffic puts on the links, counted as LocalBackend's usage meter does (out of one node
    and into another: twice the worker's rate): ``wire_s`` of each iteration at ``budget_gbps``."""
    return 2.0 * p.cost.wire * budget_gbps / iter_time(p.cost, f_cpu, f_link) if p.link_nodes() else 0.0
