"""SimBackend: the trace-driven simulated world (ground truth hidden from policies).

Each running job accrues iterations at a rate from ``physics``; the backend
keeps a heap of future events (first measured iteration -> a progress report;
completion) and jumps time between them. With ``report_interval_s`` set, every running job
also reports on one shared grid (global multiples of the interval, after its first-iteration
report): the reports due at a grid time come out of one pass as one ``REPORTS`` batch, so a
policy that learns from periodic reports decides once per grid time, not once per job's clock. Pause checkpoints all progress;
resume and migrate pay ``checkpoint_s + restore_s`` before progress continues.
When jobs join or leave a shared GPU, the speeds of everyone on it change and
their events are rescheduled. Parameter-server jobs with a ``PSTruth`` (Harmony)
run in groups: the members of one pipelined or naive group (same
``Allocation.group``), or alone on dedicated machines; when a member joins or
leaves, ``harmony_physics.group_speeds`` gives every member its new speed and
the telemetry it reports (computation and communication seconds per iteration).
Packed jobs (``launch_pack``, Liu's Pack) advance together at the speed of their
packed step from the measured profile ``profiles.pack``; when a member leaves
(finishes, is paused or moved) the others continue at the smaller pack's speed.

What each job really *uses* (``sim.usage``: GPU busy time, a PS job's CPU, network and
memory, the truth's ``used`` fractions) changes whenever its speed does; each interval at
one level is reported as a ``USED`` event when it ends (a speed change, halt, finish, or
``drain_usage`` at the end of the run). The scheduler only records these for metrics.

The truth (``JobTruth`` per job) lives only here. The scheduler receives
specs; a policy receives a ``ClusterView``, which has no path to this object.

The event heap, ``next_event_time`` / ``advance`` and what events report are in :mod:`.backend_time`, the usage
levels in :mod:`.backend_usage` (mixins of :class:`SimBackend`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..engine.backend import BackendEventKind
from ..engine.ledger import Allocation
from ..engine.oracle import Oracle
from ..spec.job import JobSpec
from . import drl_physics, host_physics
from .harmony_physics import MemberSpeed, group_speeds, launch_delay
from .physics import (SimConfig, colocation_factor, consolidation_factor, graph_traffic_mb,
                      replicas_per_node, restart_delay, shared_speed, solo_rate, uses_goodput)
from .pollux_goodput import PolluxWork, RunConfig, run_config
from .profiles.pack import pack_step_time
from .profiles.pollux import POLLUX_APPS
from .report_grid import ReportGrid
from .backend_time import _BACKGROUND, _EPS, _FINISH, _PROGRESS, _RATE, EventClock
from .backend_usage import UsageLevels
from .truth import JobTruth, TraceJob

_USED = BackendEventKind.USED


class _Run:
    __slots__ = ("spec", "truth", "alloc", "solo", "rate", "done", "t0", "version", "devices", "group", "speed",
                 "pack", "level", "busy", "use_since", "consolidation", "goodput", "epoch_end", "traffic", "placed",
                 "host", "split", "host_factors", "gpus", "unit", "shared")

    def __init__(self, spec: JobSpec, truth: JobTruth, alloc: Allocation, solo: float, done: float, t0: float):
        self.spec = spec
        self.truth = truth
        self.alloc = alloc
        self.solo = solo
        self.rate = solo
        self.done = done  # iterations done at time t0
        self.t0 = t0  # progress accrues from here (after any restore delay)
        self.version = 0
        self.devices = alloc.devices
        self.group: tuple = ()  # parameter-server jobs: the key of the group of jobs sharing its machines
        self.speed: MemberSpeed | None = None
        self.pack: tuple[int, int] | None = None  # the device of the pack the job trains in
        self.level: dict[str, float] = {}  # what it uses while computing (sim.usage)
        self.busy = 1.0  # share of time its GPUs compute (before the per-device cap)
        self.consolidation: float | None = None  # physics.consolidation_factor on alloc (cached)
        self.use_since = t0  # use not yet reported starts here (the launch time: set by the launcher)
        self.goodput: RunConfig | None = None  # Pollux goodput physics: the run in the current epoch
        self.epoch_end = math.inf  # progress at which the current epoch ends (goodput physics)
        self.traffic: float | None = None  # task-graph jobs: cross-node MB per iteration (cached)
        self.placed: drl_physics.Placed | None = None  # set when server-level interference applies
        self.host: host_physics.Placed | None = None  # set when LocalBackend's sharing applies (physics local)
        self.split: tuple[float, float] | None = None  # physics local: (compute_s, comm_s) per iteration now
        self.host_factors: tuple[float, float] | None = None  # physics local: (f_cpu, f_link) now
        self.gpus: float | None = None  # usage.job_gpus on alloc (cached)
        self.unit = min(spec.workers.demand["gpu"], 1.0)  # share of a device one worker uses alone at full speed
        #: (level, its shared copy, the shared copy of its restoring level or None): see SimBackend._shared_level
        self.shared: tuple[dict[str, float], dict[str, float], dict[str, float] | None] | None = None

    def done_at(self, t: float) -> float:
        return self.done + max(t - self.t0, 0.0) * self.rate


def _placed(spec: JobSpec, model: str, alloc: Allocation) -> drl_physics.Placed:
    """The job's workers and parameter servers per server (workers first in ``alloc.slots``)."""
    n_workers = len(alloc.slots) - spec.num_ps
    workers: dict[int, int] = {}
    ps: dict[int, int] = {}
    for i, slot in enumerate(alloc.slots):
        side = workers if i < n_workers else ps
        side[slot.node] = side.get(slot.node, 0) + 1
    return drl_physics.Placed(model, spec.architecture == "allreduce", workers, ps)


class SimBackend(EventClock, UsageLevels):
    #: the ``used`` dicts of its USED events are shared between events and never changed after they are handed
    #: out (one per distinct level): read them, never change them; a record may keep them as they are
    shares_used_levels = True
    #: a plain run launched alone on its devices takes its events and level without ``_reschedule``'s dispatch
    #: (:meth:`launch`); False: every launch goes through ``_reschedule`` (the tests' general path)
    launch_shortcut = True
    #: a time-shared run's usage level is kept per its inputs and its devices' cap (``_levels``, ``_kept_level``);
    #: False: made step by step at every speed change (the tests' general path)
    kept_shared_levels = True

    def __init__(self, jobs: Iterable[TraceJob], config: SimConfig | None = None) -> None:
        self.cfg = config or SimConfig()
        self._truth: dict[str, JobTruth] = {}
        self._batch: dict[str, int] = {}  # the trace's batch size, where it gives one (the oracle's work models)
        for tj in jobs:
            self._truth[tj.spec.id] = tj.truth
            if tj.spec.batch_size is not None:
                self._batch[tj.spec.id] = tj.spec.batch_size
        self._runs: dict[str, _Run] = {}
        self._checkpoint: dict[str, float] = {}  # iterations saved at the last checkpoint
        self._heap: list[tuple[float, int, int, str, int]] = []
        self._top: tuple[float, int, int, str, int] | None = None  # the heap's top, last found valid (see advance)
        self._seq = 0
        self._device_jobs: dict[tuple[int, int], set[str]] = {}
        self._ps_groups: dict[tuple, set[str]] = {}
        self._packs: dict[tuple[int, int], set[str]] = {}
        self._node_jobs: dict[int, set[str]] = {}  # interference world: server -> jobs with tasks there
        self._host_jobs: dict[int, set[str]] = {}  # physics local: node -> jobs with tasks there
        self._halting_until = 0.0  # blocking_halts: launches wait until the halts in progress are done
        #: parameter-server work done (machine-seconds): "cpu" = iterations x T_cpu on one machine,
        #: "net" = iterations x T_net x machines (what Harmony's utilisation counts as useful),
        #: "cpu_busy" = iterations x measured COMP seconds x machines (with GC, deserialisation;
        #: for naive co-location it counts stretched, overlapping phases)
        self.ps_work: dict[str, float] = {"cpu": 0.0, "net": 0.0, "cpu_busy": 0.0}
        #: use samples not yet handed out, ``(time, job, used, since, until)``: as ``USED`` events of ``advance``,
        #: or raw through :meth:`take_used` once a scheduler opened that channel (:meth:`open_usage_channel`)
        self._used: list[tuple[float, str, dict[str, float], float, float]] = []
        self._raw_used = False
        #: jobs reporting on the shared grid (after their first-iteration report at their current speed),
        #: and the grid time of the one heap entry standing for them (None: none)
        self._grid: ReportGrid | None = None  # made at the first join (``cfg`` may be replaced until then)
        self._grid_next: float | None = None
        #: megabytes task-graph jobs sent between nodes (MLFS's bandwidth cost), per job
        self.net_mb: dict[str, float] = {}
        #: job -> (tasks, nodes its workers span, consolidation factor, solo rate, config) of its last launch (_rates_of)
        self._rates: dict[str, tuple[int, int, float, float, SimConfig]] = {}
        #: one dict per distinct usage level (content and value types): the ``used`` of USED events (see _shared_level)
        self._levels_seen: dict[tuple, dict[str, float]] = {}
        #: (GPUs, busy, unit, holds devices, id(used), id(total)) -> (used, total, level, restoring level): _plain_level
        self._plain_levels: dict[tuple, tuple[Any, Any, dict[str, float], dict[str, float]]] = {}
        #: (GPUs, busy, device cap, holds devices, id(used), id(total)) -> the same, of time-shared runs: _levels
        self._shared_levels: dict[tuple, tuple[Any, Any, dict[str, float], dict[str, float]]] = {}
        #: (model, the models it time-shares with, in job-id order) -> Lucid's speed factor (_share_factor)
        self._mix_factors: dict[tuple[str, ...], float] = {}
        self.now = 0.0

    # ------------------------------------------------------------ oracle
    def oracle(self) -> Oracle:
        """The ground truth oracle policies may read: lengths, and the work model of Pollux jobs."""
        models = {j: PolluxWork(t.app, b, goodput=uses_goodput(t, self.cfg))  # type: ignore[arg-type]
                  for j, t in self._truth.items()
                  if t.app in POLLUX_APPS and t.ps is None and (b := self._batch.get(j))}
        return Oracle(
            {j: t.iterations for j, t in self._truth.items()},
            {j: t.duration for j, t in self._truth.items()},
            models,
        )

    # ------------------------------------------------------------ actions
    def launch(self, spec: JobSpec, alloc: Allocation, now: float, *, from_checkpoint: bool) -> None:
        truth = self._truth.get(spec.id)
        if truth is None:
            raise ValueError(f"SimBackend has no ground truth for job {spec.id!r}; submit it through a trace")
        done = self._checkpoint.get(spec.id, 0.0) if from_checkpoint else 0.0
        touched: set[str] = {spec.id}
        if truth.ps is not None:
            m = len(set(alloc.nodes[: len(alloc.slots) - spec.num_ps]))
            run = _Run(spec, truth, alloc, 0.0, done, now + launch_delay(truth.ps, m, from_checkpoint,
                                                                          self.cfg.harmony))
            run.use_since = now
            run.group = alloc.group if alloc.group is not None else ("solo", spec.id)
            members = self._ps_groups.setdefault(run.group, set())
            touched |= members
            members.add(spec.id)
            self._runs[spec.id] = run
            self._reschedule(touched, now)
            return
        cfg = self.cfg
        delay = restart_delay(spec, cfg, from_checkpoint=from_checkpoint, truth=truth)
        if cfg.blocking_halts and self._halting_until > now:
            delay += self._halting_until - now
        if cfg.pollux_goodput and uses_goodput(truth, cfg):
            run = _Run(spec, truth, alloc, 0.0, done, now + delay)
            self._goodput(run)
        elif cfg.host_sharing and truth.host is not None:
            run = _Run(spec, truth, alloc, 1.0 / truth.host.iter_s, done, now + delay)
            run.host = host_physics.placed(spec, alloc, truth.host)
            for node in set(alloc.nodes):
                occ = self._host_jobs.setdefault(node, set())
                touched |= occ
                occ.add(spec.id)
        else:
            c, solo = self._rates_of(spec, truth, alloc)
            run = _Run(spec, truth, alloc, solo, done, now + delay)
            run.consolidation = c
        run.use_since = now
        jid = spec.id
        self._runs[jid] = run
        on_device = self._device_jobs
        for dev in run.devices:
            occ = on_device.get(dev)
            if occ is None:
                on_device[dev] = {jid}
            else:
                touched |= occ
                occ.add(jid)
        if cfg.interference is not None and drl_physics.is_profiled(truth.app):
            run.placed = _placed(spec, truth.app or "", alloc)
            for node in set(alloc.nodes):
                occ = self._node_jobs.setdefault(node, set())
                touched |= occ
                occ.add(spec.id)
        if (len(touched) == 1 and run.placed is None and run.goodput is None and run.host is None and run.t0 >= now
                and self.launch_shortcut):
            # alone on its devices (every one new to the occupancy, or held by itself only): what _reschedule
            # does for this one run launched now (nothing to report or fold yet, no group, no one to slow it:
            # factor 1.0), without its dispatch, then _levels' one-run branch (_alone holds)
            run.rate = run.solo * 1.0
            self._new_events(run, jid, now)
            self._plain_level(run)
            return
        self._reschedule(touched, now)

    def _rates_of(self, spec: JobSpec, truth: JobTruth, alloc: Allocation) -> tuple[float, float]:
        """``(consolidation_factor, solo_rate)`` of ``spec`` on ``alloc``. For a trace-duration job whose speed
        depends on its placement only through its task count and the nodes its workers span (no task graph,
        profile app, per-GPU-model speeds or CPU parallel fraction), kept per job for its last (tasks, nodes):
        a preempted job mostly resumes in the same shape, and both are pure functions of those."""
        cfg = self.cfg
        if (spec.graph is not None or truth.app is not None or truth.duration is None or truth.parallel_fraction
                is not None or (truth.gpu_speed and cfg.gpu_models)):
            c = consolidation_factor(spec, truth, alloc, cfg)  # once: the speed and the usage level need it
            return c, solo_rate(spec, truth, alloc, cfg, consolidation=c)
        slots = alloc.slots
        n = len(slots)
        n_nodes = 1 if n == 1 else len({s.node for s in slots[:n - spec.num_ps]})
        hit = self._rates.get(spec.id)
        if hit is not None and hit[0] == n and hit[1] == n_nodes and hit[4] is cfg:  # (cfg may be replaced)
            return hit[2], hit[3]
        c = consolidation_factor(spec, truth, alloc, cfg)
        solo = solo_rate(spec, truth, alloc, cfg, consolidation=c)
        self._rates[spec.id] = (n, n_nodes, c, solo, cfg)
        return c, solo

    def launch_pack(self, device: tuple[int, int], specs: Sequence[JobSpec], allocs: Sequence[Allocation],
                    now: float, *, from_checkpoint: Sequence[bool]) -> None:
        """Add ``specs`` to the pack on ``device``; every member's speed becomes the pack's."""
        members = self._packs.setdefault(device, set())
        touched = set(members)
        for spec, alloc, restore in zip(specs, allocs, from_checkpoint, strict=True):
            truth = self._truth.get(spec.id)
            if truth is None or truth.ps is not None:
                raise ValueError(f"SimBackend cannot pack job {spec.id!r}: "
                                 f"{'no ground truth' if truth is None else 'parameter-server job'}")
            done = self._checkpoint.get(spec.id, 0.0) if restore else 0.0
            delay = restart_delay(spec, self.cfg, from_checkpoint=restore, truth=truth)
            run = _Run(spec, truth, alloc, solo_rate(spec, truth, alloc, self.cfg), done, now + delay)
            run.devices = frozenset()  # the pack holds its device: no time-sharing with anyone
            run.pack = device
            run.use_since = now
            self._runs[spec.id] = run
            members.add(spec.id)
            touched.add(spec.id)
        self._reschedule(touched, now)

    def halt(self, job: str, now: float, *, checkpoint: bool) -> None:
        run = self._runs.pop(job, None)
        if run is None:
            return
        self._top = None  # (its entries are stale now)
        if self._grid is not None:
            self._grid.leave(job)
        if self.cfg.blocking_halts and checkpoint and run.t0 > now:  # still starting: it must come up first
            self._halting_until = max(self._halting_until, now) + (run.t0 - now)
        self._report_use(run, now)
        self._fold(run, now)
        if checkpoint:
            self._checkpoint[job] = min(run.done_at(now), float(run.truth.iterations))
        else:  # (it finished: it will not launch again)
            self._rates.pop(job, None)
        touched: set[str] = set()
        if run.group:
            members = self._ps_groups.get(run.group)
            if members is not None:
                members.discard(job)
                touched |= members
                if not members:
                    del self._ps_groups[run.group]
        if run.pack is not None:  # unpack: the other members continue at the smaller pack's speed
            members = self._packs[run.pack]
            members.discard(job)
            touched |= members
            if not members:
                del self._packs[run.pack]
        _leave(self._device_jobs, run.devices, job, touched)
        if run.host is not None:
            _leave(self._host_jobs, set(run.alloc.nodes), job, touched)
        if run.placed is not None:
            _leave(self._node_jobs, set(run.alloc.nodes), job, touched)
        if touched:  # (a job that ran alone left nobody behind)
            self._reschedule(touched, now)

    def set_share(self, job: str, alloc: Allocation, now: float) -> None:
        """``job`` continues on ``alloc`` (its new CPU share, ``SetShare``) at the speed that share gives
        (``physics.cores_factor``); no restart, no checkpoint."""
        run = self._runs.get(job)
        if run is None:
            raise ValueError(f"SimBackend: job {job!r} is not running")
        if run.speed is not None or run.pack is not None or run.goodput is not None:
            raise ValueError(f"SimBackend: job {job!r} takes its speed from a profile; its share cannot change")
        self._report_use(run, now)
        self._fold(run, now)
        run.alloc = alloc
        run.gpus = None
        run.solo = solo_rate(run.spec, run.truth, alloc, self.cfg)
        self._reschedule({job}, now)

    def progress(self, job: str, now: float) -> float:
        """Ground-truth iterations done (for tests and the record-invariant checks only)."""
        run = self._runs.get(job)
        return run.done_at(now) if run is not None else self._checkpoint.get(job, 0.0)

    # ---------------------------------------------------------- physics
    def _goodput(self, run: _Run) -> None:
        """Pollux goodput physics: the run's configuration and speed in the epoch it is in now."""
        app = run.truth.app
        assert app is not None
        per_node = replicas_per_node(run.alloc, len(run.alloc.slots) - run.spec.num_ps)
        cfg, run.epoch_end = run_config(app, per_node, run.spec.batch_size, run.done,
                                        adaptive=self.cfg.adaptive_batch)
        run.goodput = cfg
        run.solo = cfg.rate

    def _fold(self, run: _Run, now: float) -> None:
        """Fold progress up to ``now`` at the current rate (and count parameter-server work)."""
        if now > run.t0:
            done = min(run.done_at(now), float(run.truth.iterations))
            ps = run.truth.ps
            if ps is not None and done > run.done:
                m = len(run.alloc.slots) - run.spec.num_ps
                self.ps_work["cpu"] += (done - run.done) * ps.t_cpu1
                self.ps_work["net"] += (done - run.done) * ps.t_net * m
                if run.speed is not None:  # COMP subtask time incl. GC and deserialisation
                    self.ps_work["cpu_busy"] += (done - run.done) * run.speed.compute_s * m
            if run.spec.graph is not None and done > run.done:
                if run.traffic is None:
                    run.traffic = sum(graph_traffic_mb(run.spec, run.alloc).values())
                self.net_mb[run.spec.id] = self.net_mb.get(run.spec.id, 0.0) + (done - run.done) * run.traffic
            run.done = done
            run.t0 = now

    def _ps_speeds(self, jobs: set[str]) -> None:
        """New speeds of every parameter-server group that ``jobs`` belong to."""
        for key in {self._runs[j].group for j in jobs if j in self._runs and self._runs[j].group}:
            members = sorted(self._ps_groups.get(key, ()))
            if not members:
                continue
            runs = [self._runs[j] for j in members]
            mode = key[0] if key[0] != "solo" else None
            m = len(runs[0].alloc.slots) - runs[0].spec.num_ps
            speeds = group_speeds(mode, tuple(r.truth.ps for r in runs), m, self.cfg.harmony)  # type: ignore[misc]
            for r, sp in zip(runs, speeds):
                r.speed = sp

    def _reschedule(self, jobs: set[str], now: float) -> None:
        """Recompute speeds of ``jobs`` (their GPU sharing or group may have changed) and their next events.

        In job-id order: the order fixes the sequence numbers that break ties between events due at
        the same time, and the order of the use reports; a set's own order depends on the process's
        string-hash seed (``PYTHONHASHSEED``), and results must not."""
        if not jobs:
            return  # (a job that ran alone left nobody behind)
        order = sorted(jobs) if len(jobs) > 1 else jobs
        for jid in order:
            run = self._runs.get(jid)
            if run is not None:
                if now > run.use_since:  # (a run launched now has nothing to report or fold yet)
                    self._report_use(run, now)  # use up to now at the old level
                if now > run.t0:
                    self._fold(run, now)  # progress up to now at the old rate
        if self._ps_groups:  # (a run has a group only while it is in _ps_groups)
            self._ps_speeds(jobs)
        for jid in order:
            run = self._runs.get(jid)
            if run is None:
                continue
            if run.speed is not None:
                run.rate = 1.0 / run.speed.iter_time
            elif run.pack is not None:
                run.rate = self._pack_rate(run.pack)
            elif run.placed is not None:
                run.rate = self._interference_rate(run)
            elif run.host is not None:
                run.rate = self._host_rate(run, now)
            else:
                if run.goodput is not None:
                    self._goodput(run)  # the epoch may have changed since the last speed
                on_device = self._device_jobs
                others = None
                for dev in run.devices:
                    occ = on_device.get(dev)
                    if occ is not None and (len(occ) > 1 or jid not in occ):  # (someone else holds it)
                        others = {o for dev in run.devices for o in on_device.get(dev, ()) if o != jid}
                        break
                run.rate = run.solo * (self._share_factor(run, others) if others else 1.0)  # (1 without others)
            self._new_events(run, jid, now)
        self._levels(jobs)

    def _share_factor(self, run: _Run, others: set[str]) -> float:
        """``shared_speed`` of ``run`` time-sharing its GPUs with ``others`` (job ids, taken in id order). Where it
        is Lucid's ``colocation_factor`` of the models (any mix but a Gavel pair), kept per the models in that
        order: the same few mixes come back at every speed change of a time-shared GPU."""
        runs, cfg = self._runs, self.cfg
        if cfg.pair_speeds == "gavel" and len(others) == 1 and cfg.gpu_models:
            return shared_speed(run.spec, [runs[o].spec for o in others], run.alloc.nodes, cfg)
        key = (run.spec.model, *[runs[o].spec.model for o in sorted(others)])
        factor = self._mix_factors.get(key)
        if factor is None:
            if len(self._mix_factors) > 4096:
                self._mix_factors.clear()
            factor = self._mix_factors[key] = colocation_factor(key[0], list(key[1:]))
        return factor

    def _new_events(self, run: _Run, jid: str, now: float) -> None:
        """The run's events at its new rate (a new version: its older heap entries go stale): its finish, its
        first iteration, and where they apply its epoch's end, its next evaluation, its machine's next load
        change."""
        self._seq += 1
        run.version = self._seq  # globally unique: a relaunched job never matches stale entries
        if self._grid is not None:
            self._grid.leave(jid)  # it reports again after its first iteration at the new speed
        remaining = max(run.truth.iterations - run.done, 0.0)
        finish = run.t0 + remaining / run.rate
        self._push(finish, _FINISH, jid, run.version)
        first_iter = run.t0 + min(1.0 / run.rate, remaining / run.rate)
        if first_iter < finish - _EPS:
            self._push(first_iter, _PROGRESS, jid, run.version)
        if run.goodput is not None and run.done < run.epoch_end < run.truth.iterations:
            epoch_end = run.t0 + (run.epoch_end - run.done) / run.rate
            if epoch_end < finish - _EPS:
                self._push(epoch_end, _RATE, jid, run.version)  # Pollux goodput: the speed changes with the epoch
        if run.truth.accuracy:  # (iters_per_epoch is None without an accuracy curve)
            self._push_epoch(run, finish)
        if run.host is not None and self.cfg.host_background_series:
            change = host_physics.next_change(self.cfg.host_background_series, now)
            if change is not None and change < finish - _EPS:
                self._push(change, _BACKGROUND, jid, run.version)  # the machine's load changes: a new speed

    def _interference_rate(self, run: _Run) -> float:
        """Samples/s of an interference-world job next to every job on its servers (``drl_physics``)."""
        others = sorted({o for node in set(run.alloc.nodes) for o in self._node_jobs.get(node, ()) if o != run.spec.id})
        placed = [run.placed] + [self._runs[o].placed for o in others]
        servers = {s for p in placed for s in (*p.workers, *p.ps)}  # type: ignore[union-attr]
        world = self.cfg.interference
        assert world is not None
        return drl_physics.speeds(placed, {s: world.cores(s) for s in servers}, world)[0]  # type: ignore[arg-type]

    def _host_rate(self, run: _Run, now: float) -> float:
        """Iterations/s of a job in LocalBackend's world next to every job on its nodes and the machine's
        background load at ``now`` (``host_physics``)."""
        assert run.host is not None
        others = sorted({o for node in set(run.alloc.nodes) for o in self._host_jobs.get(node, ()) if o != run.spec.id})
        jobs = [run.host] + [self._runs[o].host for o in others]
        cores = dict(enumerate(self.cfg.node_cores))
        background = host_physics.background_at(self.cfg.host_background_series, self.cfg.host_background, now)
        f_cpu, f_link = host_physics.factors(jobs, cores, background)[0]  # type: ignore[arg-type]
        cost = run.host.cost
        run.split = (cost.cpu_s / f_cpu, host_physics.link_time(cost, f_link))
        run.host_factors = (f_cpu, f_link)
        return 1.0 / sum(run.split)

    def _pack_rate(self, device: tuple[int, int]) -> float:
        """Iterations/s of every member of the pack on ``device``: 1 / its packed step time."""
        runs = [self._runs[j] for j in sorted(self._packs[device])]
        batches = [r.spec.batch_size for r in runs if r.spec.batch_size is not None]
        step = pack_step_time([r.spec.model for r in runs], [1.0 / r.solo for r in runs],
                              max(batches) if batches else None)
        return 1.0 / step

    def open_usage_channel(self) -> bool:
        """From now on ``advance`` leaves the use samples out of its events: the caller takes them right after each
        ``advance`` with :meth:`take_used`, as ``(time, job, used, since, until)`` tuples in the order the
        ``USED`` events would have come (first in ``advance``'s list), without an event object per sample.
        Refused (False, nothing changes) for a subclass that overrides ``advance`` or ``drain_usage`` (it may
        filter or change what it hands out: it keeps the event path). ``drain_usage`` still returns events."""
        cls = type(self)
        if cls.advance is SimBackend.advance and cls.drain_usage is SimBackend.drain_usage:
            self._raw_used = True
        return self._raw_used

    def close(self) -> None:
        pass


def _leave(occupancy: dict[Any, set[str]], keys: Iterable[Any], job: str, touched: set[str]) -> None:
    """Take ``job`` out of each key's set of co-located jobs (devices or nodes), dropping emptied keys;
    the jobs it leaves behind join ``touched`` (their speed is re-evaluated)."""
    for key in keys:
        occ = occupancy.get(key)
        if occ is not None:
            occ.discard(job)
            if occ:
                touched |= occ
            else:
                del occupancy[key]
