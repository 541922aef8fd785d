"""Ground-truth speed of parameter-server jobs in Harmony's world (Lee et al., "Harmony: A
Scheduling Framework Optimized for Multiple Distributed Machine Learning Jobs").

Every job of a group runs a worker and a server shard on each of the group's ``m`` machines;
all machines behave alike, so one machine is simulated. An iteration is PULL (network) ->
COMP (CPU) -> PUSH (network). Three ways of running, one per group mode:

* ``"pipelined"`` (Harmony's subtasks, §IV-A): each machine has a CPU queue that runs one COMP
  subtask at a time and a network queue that runs one COMM subtask at a time, both FIFO in
  the order subtasks become ready; a job's next subtask is released when its previous one
  ends. :func:`pipelined_cycle` simulates these queues event by event until they settle and
  measures each job's iteration time. Eq. 1 of the paper (``max(sum T_cpu, sum T_net,
  max_j T_itr_j)``) is a lower bound of this; FIFO ordering gaps, disk reloads and memory
  pressure make the truth differ from the model, which is what the scheduler's prediction
  error measures. The secondary network subtask of the paper is not modelled (COMM subtasks
  are serial on the link).
* ``"naive"`` (the naively co-located baseline): no coordination. Jobs run their phases
  whenever they like, so their phases drift independently; CPU and link are processor-shared
  by the jobs in that phase, with a contention loss per extra job (``cpu_contention``,
  ``net_contention``: cache and context-switch thrashing, TCP contention).
  :func:`naive_cycle` solves this mean-field model. No spilling: every job's input and model
  stay in memory.
* ``None`` (isolated: one job alone on dedicated machines): ``T_cpu/m + T_pull + T_push``,
  no spilling.

Memory and spill/reload (§IV-C): per machine, resident memory is the in-memory share of each
job's input, the server shards of the models, the active worker's pulled model copy and the
reload buffer; above ``gc_knee`` of the usable memory, garbage collection stretches COMP
subtasks (up to ``1 + gc_max`` at full memory), beyond it swapping stretches them steeply.
In pipelined groups the runtime keeps a ratio ``alpha_j`` of job j's input blocks on disk,
reloads them in the background (a disk queue per machine, one reload per job after its COMP
for the next iteration) and pays ``deser * alpha_j`` extra CPU to deserialise them. Alpha is
tuned per job by hill climbing from an initial estimate based on the data sizes
(:func:`tune_alphas`); when every block on disk is not enough, model shards of inactive jobs
are spilled too (reloaded before their subtasks: twice the shard through the disk).
``HarmonyWorld.spill`` switches this off (``"off"``: alpha = 0, the "no spill/reload"
ablation) or fixes one alpha for every job (a float, the paper's fixed-alpha baseline).

This module is simulator-only: policies never import it.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .truth import PSTruth

PIPELINED, NAIVE = "pipelined", "naive"
_CYCLES, _SKIP = 10, 4  # simulate this many iterations per job, measure after the first _SKIP


@dataclass(frozen=True)
class HarmonyWorld:
    """Knobs of Harmony's simulated machines (defaults: AWS m4.2xlarge, 8 vCPU / 32 GB / 1.1 Gbps)."""

    node_mem_gb: float = 32.0
    reserved_gb: float = 4.0  # OS and runtime
    disk_gbps: float = 0.125  # per-machine disk (EBS, 1,000 Mbps): spill reloads and checkpoints
    load_gbps: float = 0.1  # per-machine read of the input from the distributed store at (re)start
    gc_knee: float = 0.7  # fraction of usable memory where GC overhead starts
    gc_max: float = 1.5  # extra COMP time at full memory
    swap_slope: float = 8.0  # extra COMP time per unit of memory use beyond the usable memory
    spill: str | float = "adaptive"  # "adaptive" | "off" | a fixed alpha in [0, 1]
    cpu_contention: float = 0.15  # naive co-location: efficiency loss per extra concurrent COMP
    net_contention: float = 0.10  # naive co-location: efficiency loss per extra concurrent COMM

    def __post_init__(self) -> None:
        if isinstance(self.spill, str):
            if self.spill not in ("adaptive", "off"):
                raise ValueError(f"spill must be 'adaptive', 'off' or an alpha in [0, 1], got {self.spill!r}")
        elif not 0.0 <= float(self.spill) <= 1.0:
            raise ValueError(f"a fixed spill alpha must lie in [0, 1], got {self.spill!r}")
        if not self.node_mem_gb > self.reserved_gb >= 0:
            raise ValueError("node_mem_gb must exceed reserved_gb >= 0")
        for name in ("disk_gbps", "load_gbps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")

    @property
    def usable_gb(self) -> float:
        return self.node_mem_gb - self.reserved_gb


@dataclass(frozen=True)
class MemberSpeed:
    """What one job does in its group: seconds per iteration and the telemetry it reports."""

    iter_time: float
    compute_s: float  # measured COMP seconds per iteration (as the runtime's timers see them)
    comm_s: float  # measured PULL + PUSH seconds per iteration
    alpha: float  # share of input blocks kept on disk
    mem_gb: float  # resident memory per machine of the whole group


# --------------------------------------------------------------------------- memory


def gc_factor(resident_gb: float, world: HarmonyWorld) -> float:
    """COMP stretch from memory pressure: 1 below the knee, up to ``1 + gc_max`` at full memory,
    then steeply (swapping) beyond it."""
    rho = resident_gb / world.usable_gb
    if rho <= world.gc_knee:
        return 1.0
    if rho <= 1.0:
        return 1.0 + world.gc_max * (rho - world.gc_knee) / (1.0 - world.gc_knee)
    return 1.0 + world.gc_max + world.swap_slope * (rho - 1.0)


def resident_gb(truths: tuple[PSTruth, ...], m: int, mode: str | None, alphas: tuple[float, ...] | None = None,
                model_spill: tuple[bool, ...] | None = None) -> float:
    """Resident memory per machine. Without spilling (naive, isolated) every job keeps its input,
    its server shard and its worker's model copy. Pipelined: the in-memory share of each input,
    the server shards not spilled, plus the active job's pulled model copy and reload buffer."""
    if mode != PIPELINED:
        return sum(t.input_gb + 2.0 * t.model_gb for t in truths) / m
    a = alphas or (0.0,) * len(truths)
    ms = model_spill or (False,) * len(truths)
    held = sum((1.0 - aj) * t.input_gb + (0.0 if sj else t.model_gb) for t, aj, sj in zip(truths, a, ms))
    active = max(t.model_gb * (2.0 if sj else 1.0) + aj * t.input_gb / t.iters_per_epoch
                 for t, aj, sj in zip(truths, a, ms))
    return (held + active) / m


# --------------------------------------------------------------------------- subtask times


def _subtasks(truths: tuple[PSTruth, ...], m: int, mode: str | None, alphas: tuple[float, ...],
              model_spill: tuple[bool, ...], world: HarmonyWorld) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """(comp, pull, push, reload) seconds per job and the resident memory, for given alphas."""
    mem = resident_gb(truths, m, mode, alphas, model_spill)
    gc = gc_factor(mem, world)
    comp = np.array([t.t_cpu1 / m * (1.0 + t.deser * a) * gc for t, a in zip(truths, alphas)])
    pull = np.array([t.t_pull for t in truths])
    push = np.array([t.t_push for t in truths])
    reload = np.array([(a * t.input_gb / t.iters_per_epoch + (2.0 * t.model_gb if s else 0.0)) / m / world.disk_gbps
                       for t, a, s in zip(truths, alphas, model_spill)])
    return comp, pull, push, reload, mem


def _bound(comp: np.ndarray, pull: np.ndarray, push: np.ndarray, reload: np.ndarray) -> float:
    """Fluid lower bound of the pipelined cycle (Eq. 1 plus the disk queue)."""
    return float(max(comp.sum(), (pull + push).sum(), reload.sum(), (comp + pull + push).max()))


# --------------------------------------------------------------------------- spill / reload


def tune_alphas(truths: tuple[PSTruth, ...], m: int, world: HarmonyWorld) -> tuple[tuple[float, ...], tuple[bool, ...]]:
    """Per-job alpha (share of input blocks on disk) and model-spill flags of a pipelined group.

    Initial estimate (from the sampled data sizes): the smallest common alpha that brings the
    resident memory under the GC knee. Then hill climbing, job by job in steps of 0.05: a step
    is kept if the group's iteration time drops, or stays equal with fewer blocks on disk
    (the paper aims at the fewest disk blocks that avoid memory pressure). The runtime
    measures the group iteration to climb; the simulator climbs on the fluid bound of the
    cycle and jumps to where the climb converges. If even alpha = 1 leaves the machine over
    its memory, model shards are spilled too, largest first."""
    k = len(truths)
    if world.spill == "off":
        return (0.0,) * k, (False,) * k
    if not isinstance(world.spill, str):
        a0 = float(world.spill)
        return (a0,) * k, _model_spill(truths, m, (a0,) * k, world)
    target = world.gc_knee * world.usable_gb
    lo, hi = 0.0, 1.0
    if resident_gb(truths, m, PIPELINED, (0.0,) * k) <= target:
        hi = 0.0
    for _ in range(20):  # bisection on a common alpha
        if hi - lo < 1e-3:
            break
        mid = 0.5 * (lo + hi)
        if resident_gb(truths, m, PIPELINED, (mid,) * k) <= target:
            hi = mid
        else:
            lo = mid
    alphas = [round(min(hi + 0.025, 1.0) / 0.05) * 0.05 if hi > 0 else 0.0] * k
    spill = _model_spill(truths, m, tuple(alphas), world)

    def cost(a: list[float]) -> tuple[float, float]:
        comp, pull, push, reload, _ = _subtasks(truths, m, PIPELINED, tuple(a), spill, world)
        return _bound(comp, pull, push, reload), sum(x * t.input_gb for x, t in zip(a, truths))

    best = cost(alphas)
    order = sorted(range(k), key=lambda j: -truths[j].input_gb)
    for _ in range(40):  # rounds over the jobs
        moved = False
        for j in order:
            for step in (-0.05, 0.05):
                trial = list(alphas)
                trial[j] = min(max(round((trial[j] + step) * 20) / 20, 0.0), 1.0)
                if trial[j] == alphas[j]:
                    continue
                c = cost(trial)
                if c[0] < best[0] * (1 - 1e-9) or (c[0] <= best[0] * (1 + 1e-9) and c[1] < best[1] - 1e-9):
                    alphas, best, moved = trial, c, True
                    break
        if not moved:
            break
    return tuple(alphas), spill


def _model_spill(truths: tuple[PSTruth, ...], m: int, alphas: tuple[float, ...], world: HarmonyWorld) -> tuple[bool, ...]:
    spill = [False] * len(truths)
    if any(a < 1.0 for a in alphas):
        return tuple(spill)
    for j in sorted(range(len(truths)), key=lambda j: -truths[j].model_gb):
        if resident_gb(truths, m, PIPELINED, alphas, tuple(spill)) <= world.usable_gb:
            break
        spill[j] = True
    return tuple(spill)


# --------------------------------------------------------------------------- the queues


def pipelined_cycle(comp: np.ndarray, pull: np.ndarray, push: np.ndarray, reload: np.ndarray) -> np.ndarray:
    """Seconds per iteration of each job under Harmony's subtask queues (one machine stands for all).

    CPU queue: one COMP subtask at a time; network queue: one COMM subtask at a time; disk
    queue: one reload at a time. All FIFO in the order subtasks become ready (ties: job order).
    A job's COMP waits for the reload of its disk blocks, which starts when its previous COMP
    ends (the first iteration starts preloaded)."""
    k = len(comp)
    dur = {0: pull, 1: comp, 2: push, 3: reload}
    res_of = {0: "net", 1: "cpu", 2: "net", 3: "disk"}
    queues: dict[str, deque[tuple[int, int]]] = {"net": deque(), "cpu": deque(), "disk": deque()}
    busy = {"net": False, "cpu": False, "disk": False}
    events: list[tuple[float, int, int, int]] = []
    seq = 0
    reloaded = [True] * k
    waiting_reload = [False] * k
    ends: list[list[float]] = [[] for _ in range(k)]

    def start(res: str, t: float) -> None:
        nonlocal seq
        if busy[res] or not queues[res]:
            return
        j, kind = queues[res].popleft()
        busy[res] = True
        seq += 1
        heapq.heappush(events, (t + float(dur[kind][j]), seq, j, kind))

    def submit(j: int, kind: int, t: float) -> None:
        res = res_of[kind]
        queues[res].append((j, kind))
        start(res, t)

    for j in range(k):
        submit(j, 0, 0.0)
    while events:
        t, _, j, kind = heapq.heappop(events)
        busy[res_of[kind]] = False
        if kind == 0:  # PULL done -> COMP once the disk blocks are back
            if reloaded[j]:
                submit(j, 1, t)
            else:
                waiting_reload[j] = True
        elif kind == 1:  # COMP done -> PUSH, and reload the next iteration's disk blocks
            submit(j, 2, t)
            if reload[j] > 0:
                reloaded[j] = False
                submit(j, 3, t)
        elif kind == 2:  # PUSH done: an iteration ends; everyone runs on until all have enough
            ends[j].append(t)
            if min(len(e) for e in ends) < _CYCLES:
                submit(j, 0, t)
        else:  # reload done
            reloaded[j] = True
            if waiting_reload[j]:
                waiting_reload[j] = False
                submit(j, 1, t)
        start(res_of[kind], t)
    return np.array([(e[-1] - e[_SKIP - 1]) / (len(e) - _SKIP) for e in ends])


def naive_cycle(comp: np.ndarray, pull: np.ndarray, push: np.ndarray, world: HarmonyWorld) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-job (iteration, COMP, COMM) seconds of uncoordinated co-location (mean-field model).

    Without coordination, co-located jobs' phases drift independently: at any moment job ``i``
    computes with probability ``q_i = its COMP time / its iteration time`` (likewise for
    communication). A job's phase then runs alongside ``n`` others on the same resource on
    average ``E[n] = sum_{i != j} q_i``, which processor sharing stretches by ``1 + n`` and
    contention (cache / context-switch thrashing, TCP contention) by ``1 + c n``. The
    stretches and the ``q``s depend on each other: iterated to their fixed point."""
    k = len(comp)
    net = pull + push
    s_cpu = np.ones(k)
    s_net = np.ones(k)
    for _ in range(500):
        t = comp * s_cpu + net * s_net
        qc = comp * s_cpu / t
        qn = net * s_net / t
        oc = qc.sum() - qc
        on = qn.sum() - qn
        new_c = (1.0 + oc) * (1.0 + world.cpu_contention * oc)
        new_n = (1.0 + on) * (1.0 + world.net_contention * on)
        done = np.allclose(new_c, s_cpu, rtol=1e-10) and np.allclose(new_n, s_net, rtol=1e-10)
        s_cpu = 0.5 * (s_cpu + new_c)
        s_net = 0.5 * (s_net + new_n)
        if done:
            break
    return comp * s_cpu + net * s_net, comp * s_cpu, net * s_net


# --------------------------------------------------------------------------- entry point


@lru_cache(maxsize=65536)
def group_speeds(mode: str | None, truths: tuple[PSTruth, ...], m: int, world: HarmonyWorld) -> tuple[MemberSpeed, ...]:
    """Iteration time and reported telemetry of every job of a group on ``m`` machines.

    ``mode`` is ``"pipelined"``, ``"naive"`` or ``None`` (one job alone on dedicated machines)."""
    if m < 1 or not truths:
        raise ValueError(f"a group needs jobs and m >= 1 machines, got {len(truths)} jobs on {m}")
    k = len(truths)
    if mode == PIPELINED:
        alphas, spill = tune_alphas(truths, m, world)
        comp, pull, push, reload, mem = _subtasks(truths, m, mode, alphas, spill, world)
        it = pipelined_cycle(comp, pull, push, reload) if k > 1 or reload.any() else comp + pull + push
        return tuple(MemberSpeed(float(it[j]), float(comp[j]), float(pull[j] + push[j]), alphas[j], mem)
                     for j in range(k))
    zeros, no = (0.0,) * k, (False,) * k
    comp, pull, push, _, mem = _subtasks(truths, m, mode, zeros, no, world)
    if mode == NAIVE and k > 1:
        it, c, n = naive_cycle(comp, pull, push, world)
        return tuple(MemberSpeed(float(it[j]), float(c[j]), float(n[j]), 0.0, mem) for j in range(k))
    if k != 1 and mode not in (NAIVE, PIPELINED):
        raise ValueError(f"unknown group mode {mode!r}")
    return tuple(MemberSpeed(float(comp[j] + pull[j] + push[j]), float(comp[j]), float(pull[j] + push[j]), 0.0, mem)
                 for j in range(k))


def launch_delay(truth: PSTruth, m: int, from_checkpoint: bool, world: HarmonyWorld) -> float:
    """Seconds before a (re)started job makes progress: its input partition is read from the
    store, and on a move or resume its model shard is checkpointed and restored (Harmony moves
    only the model, §IV-B4)."""
    delay = truth.input_gb / m / world.load_gbps
    if from_checkpoint:
        delay += 2.0 * truth.model_gb / m / world.disk_gbps
    return delay
