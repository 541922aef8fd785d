"""Ground truth of what a simulated job *uses*, as opposed to what the ledger *allocated* to it.

The ledger says what a job was given; this module says what it really consumes while it runs,
from what the simulator knows and policies never see. ``SimBackend`` turns these levels into
``USED`` backend events (``engine.record``: ``used`` events), from which
``report.metrics`` computes each resource's *used share* next to its *allocated share*.

Levels are amounts in capacity units (GPUs, cores, GB, Gbit/s) while the job computes:

* ``gpu`` (every job that is not a Harmony PS job): the GPUs its tasks run on times the share
  of time they compute. Off the most consolidated placement a trace-duration job waits longer
  for communication at the same compute per iteration, so that share is
  ``physics.consolidation_factor``; on a time-shared device it is also scaled by the measured
  co-location speed, and the jobs on one device together use at most the whole device
  (:func:`device_factor`). Members of a pack (Liu, Pack) share their one device equally.
* any resource named in the truth's ``used`` (``JobTruth.used``): that fraction of the job's
  allocation of it (a job that asked for 8 cores and keeps 2 busy has ``cpu: 0.25``).
* a Harmony parameter-server job (``JobTruth.ps``; :func:`ps_levels`): on each of its ``m``
  machines, CPU busy ``compute_s / iter_time`` of the time (the COMP subtask, GC stretch and
  deserialisation included), the link busy ``(T_pull + T_push) / iter_time`` (its bytes at the
  link's rate), and its part of the group's resident memory (``harmony_physics.resident_gb``),
  each capped so that a group never uses more than its machines.

While a job restores from a checkpoint or loads its input it holds memory but computes nothing
(:func:`restoring`). Resources with no ground truth (a GPU trace's CPU and memory, unless the
trace gives ``used``) are not reported: the used share is then unknown, not zero.

This module is simulator-only: policies never import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..engine.ledger import Allocation
from ..spec.job import JobSpec
from .harmony_physics import PIPELINED, MemberSpeed
from .truth import JobTruth, PSTruth

GPU, CPU, MEM, NET = "gpu", "cpu", "mem_gb", "net_gbps"


def job_gpus(spec: JobSpec, alloc: Allocation) -> float:
    """GPUs the job's tasks run on (owned or time-shared) on ``alloc``."""
    return spec.total_demand(len(alloc.slots) - spec.num_ps)[GPU]


def trace_level(spec: JobSpec, truth: JobTruth, alloc: Allocation, busy: float, *,
                gpus: float | None = None) -> dict[str, float]:
    """Level of a job that is not a Harmony PS job, computing ``busy`` of the time (<= 1) (``gpus``:
    :func:`job_gpus` if the caller has it already)."""
    used = truth.used or {}
    level = {GPU: (job_gpus(spec, alloc) if gpus is None else gpus) * busy * used.get(GPU, 1.0)}
    for name, frac in used.items():
        if name != GPU:
            level[name] = alloc.total[name] * frac
    return level


def device_factor(shares: Sequence[float]) -> float:
    """Scale of the GPU levels of the jobs time-sharing one device, each using ``shares`` of it
    alone (at its co-located speed), so that together they use at most the whole device."""
    total = sum(shares)
    return 1.0 / total if total > 1.0 else 1.0


def ps_levels(members: Sequence[tuple[JobSpec, PSTruth, Allocation, MemberSpeed]], mode: str | None
              ) -> list[dict[str, float]]:
    """Levels of the members of one Harmony group (or of one job alone: ``mode`` None).

    Every member runs a worker on each of the group's ``m`` machines, whose capacity is a
    worker's demand (Harmony's workers take whole machines)."""
    if not members:
        return []
    spec0, _, alloc0, speed0 = members[0]
    m = len(alloc0.slots) - spec0.num_ps
    machine = spec0.workers.demand
    cpu = [sp.compute_s / sp.iter_time for _, _, _, sp in members]
    net = [t.t_net / sp.iter_time for _, t, _, sp in members]
    cpu_scale = 1.0 / max(1.0, sum(cpu))  # one machine's CPU and link are busy at most all the time
    net_scale = 1.0 / max(1.0, sum(net))
    # the group's resident memory per machine, split by what each member keeps in memory
    weights = [((1.0 - sp.alpha) * t.input_gb + t.model_gb) if mode == PIPELINED else (t.input_gb + 2.0 * t.model_gb)
               for _, t, _, sp in members]
    resident = min(speed0.mem_gb, machine[MEM]) if machine[MEM] > 0 else speed0.mem_gb
    wsum = sum(weights) or 1.0
    out = []
    for c, n, w in zip(cpu, net, weights):
        level = {CPU: m * machine[CPU] * c * cpu_scale, MEM: m * resident * w / wsum}
        if machine[NET] > 0:
            level[NET] = m * machine[NET] * n * net_scale
        out.append(level)
    return out


def restoring(level: Mapping[str, float]) -> dict[str, float]:
    """The level while the job restores or loads its input: memory held, nothing computed."""
    return {name: (q if name == MEM else 0.0) for name, q in level.items()}
