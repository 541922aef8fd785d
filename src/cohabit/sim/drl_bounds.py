"""Lower bounds on the average JCT any placement can reach in Bao et al.'s world
(:mod:`cohabit.sim.drl_physics`), to say how much room a placement policy has.

**Solo bound** (:func:`solo_runtime`): a job runs no faster than alone on an empty cluster,
placed as locally as the servers allow. In the physics every co-location factor ``f_js`` and
the processor-sharing factor are at most 1, so a job's speed is at most
``base / (1 + A_SPREAD * k_m * x_min)``, where ``x_min`` is the least cross-server share
(:func:`~cohabit.sim.drl_physics.cross_share`) of any placement that respects the servers'
GPU, CPU and memory: a job with more workers than a server has GPUs must spread. Its JCT is
at least its work over that speed (no queueing, no interference): :func:`solo_bound` averages
that over a workload. It is a true lower bound for every policy.

``x_min``: an all-reduce ring of ``w`` workers on ``h`` servers crosses ``h / w`` of its
traffic when ``h > 1``; the fewest servers hold ``g`` workers each (``g`` = how many fit on one
server). A PS job's local share is ``sum_s w_s p_s / (w p)``: for each way to spread the
workers (``a`` servers with ``g`` workers, the rest fewer), the parameter servers go first to
the servers holding most workers, as many as each server's remaining CPU and memory allow
(greedy is exact: every parameter server on server ``s`` adds ``w_s`` local pairs). A server
has 2 GPUs, so ``g`` is 1 or 2 and the ways to spread the workers are ``a`` servers with ``g``
workers and one worker on each of the others.

The other reference point, what queueing alone costs, is a simulation with the co-location
coefficients set to 0 (:func:`no_interference_world`: jobs still pay for spreading); it is not
a bound for every policy (another order of placements could queue less) but it is the same
policy's JCT with interference taken away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .drl_physics import InterferenceWorld, base_speed, comm_share
from .drl_workload import DEMANDS, INTERVAL_S, SERVER
from .truth import TraceJob


def _per_server(cpu: float, mem: float, gpu: float = 0.0) -> int:
    """How many tasks of this demand fit on one empty server."""
    fits = [SERVER["cpu"] / cpu if cpu > 0 else float("inf"), SERVER["mem_gb"] / mem if mem > 0 else float("inf")]
    if gpu > 0:
        fits.append(SERVER["gpu"] / gpu)
    return int(min(fits) + 1e-9)


def min_cross_share(model: str, allreduce: bool, n_workers: int, n_ps: int) -> float:
    """The least cross-server share of any feasible placement of the job on empty servers."""
    w_cpu, w_mem, p_cpu, p_mem = DEMANDS[model]
    if allreduce:
        g = _per_server(w_cpu + 1, w_mem, 1)
        hosts = -(-n_workers // g)
        return hosts / n_workers if hosts > 1 else 0.0
    g = _per_server(w_cpu, w_mem, 1)
    best_local = 0
    for full in range(n_workers // g + 1):  # ``full`` servers with g workers, one worker on each other one
        counts = [g] * full + [1] * (n_workers - g * full)
        left, local = n_ps, 0
        for c in sorted(counts, reverse=True):
            room_cpu, room_mem = SERVER["cpu"] - c * w_cpu, SERVER["mem_gb"] - c * w_mem
            cap = int(min(room_cpu / p_cpu, room_mem / p_mem) + 1e-9)
            put = min(left, max(cap, 0))
            local += c * put
            left -= put
        best_local = max(best_local, local)
    return 1.0 - best_local / (n_workers * n_ps)


def solo_runtime(job: TraceJob, world: InterferenceWorld | None = None) -> float:
    """Seconds the job needs at least: its work over its best solo speed (module doc)."""
    spec = job.spec
    allreduce = spec.architecture == "allreduce"
    w = spec.workers.count
    p = 0 if allreduce or spec.ps is None else spec.ps.count
    model = job.truth.app
    a_spread = (world or InterferenceWorld()).a_spread
    speed = base_speed(model, allreduce, w, p) / (1.0 + a_spread * comm_share(model) *
                                                  min_cross_share(model, allreduce, w, p))
    return job.truth.iterations / speed


def solo_bound(jobs: Sequence[TraceJob], world: InterferenceWorld | None = None) -> float:
    """Average over ``jobs`` of :func:`solo_runtime`, in 20-minute intervals: no policy's average
    JCT can be lower."""
    return sum(solo_runtime(j, world) for j in jobs) / len(jobs) / INTERVAL_S


def no_interference_world(n_servers: int) -> InterferenceWorld:
    """The default world with the co-location coefficients (CPU, bus, NIC) at 0; spreading a job
    still slows it."""
    return replace(InterferenceWorld(node_cores=(float(SERVER["cpu"]),) * n_servers), a_cpu=0.0, a_bus=0.0,
                   a_net=0.0)
