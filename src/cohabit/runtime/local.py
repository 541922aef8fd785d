"""LocalBackend: real training jobs as OS processes on this machine (the embedded default).

Each task of a job is a ``python -m cohabit.runtime.worker`` process
(:mod:`.worker`) linked to the backend by a socketpair carrying JSON lines.
The cluster's nodes are *logical*: node ``i`` is given a share of this
machine's cores in proportion to its ``cpu`` capacity (round-robin over the
cores the scheduler may use, wrapping when the nodes ask for more cores than
exist) and every task is pinned to its node's cores with
``os.sched_setaffinity``, so that a placement decision changes which jobs
compete for which cores. Each task runs ``ceil(worker cpu demand)`` BLAS /
torch threads.

Backend protocol (``cohabit.engine.backend.Backend``); times are seconds
since this backend was created (the wall clock):

* ``launch`` starts one process per worker task (restoring the job's newest
  good checkpoint when ``from_checkpoint``; a fresh start clears old
  checkpoints). A multi-worker job runs data-parallel: the ranks average
  gradients with gloo all-reduce on 127.0.0.1. A parameter-server job
  (``architecture: ps``) runs one process per worker and per server
  (:mod:`cohabit.runtime.ps`): servers on the nodes of the allocation's ps
  slots, workers on its worker slots, talking TCP on 127.0.0.1 under each
  node's bandwidth budget (``bandwidth_mbps``, else the node's ``net_gbps``);
  its checkpoints are per-task parts (:mod:`cohabit.runtime.ps.parts`).
* ``halt(checkpoint=True)`` asks every task to checkpoint at its next
  iteration boundary and exit, and waits for that (``halt_timeout``, then
  SIGKILL — the job then resumes from its last periodic checkpoint).
  ``checkpoint=False`` kills the tasks.
* ``advance(until)`` waits on the wall clock until ``until`` or the first
  events (progress reports, completions, failures) and returns them.
* A task that dies without finishing (crash, OOM kill, ``kill -9``) stops its
  job's other tasks; the job restarts from its newest good checkpoint after
  ``restart_backoff * backoff_factor**k`` seconds, up to ``max_restarts``
  times in its life; after that (or at once for a configuration error) the
  backend reports FAILED with the reason and the task's last log lines.
* ``launch_pack`` trains compatible torch jobs jointly in one process per
  device (Liu's Pack; :mod:`.packed`); each member still reports, halts and
  checkpoints as its own job.
* ``close`` terminates every process this backend started (by pid) and, if it
  made its own temporary directory, removes it.

How tasks' messages and deaths become events (and restarts) is :mod:`.taskevents`
(:class:`~.taskevents.TaskEvents`, mixed into :class:`LocalBackend`).

GPUs: each task gets ``CUDA_VISIBLE_DEVICES`` = the physical ids of the GPU
devices the ledger assigned to its slot (``""`` when it holds none), mapped by
:class:`~.devices.DeviceMap` (``gpu_ids`` / node labels / this machine's GPUs);
a pack host gets its one device. Torch workloads train on ``cuda:0`` when torch
sees it, else on the CPU with a note (:attr:`JobStatus.device_note`), and
report peak device memory (``device_mem_mb``) in progress on CUDA.

Warm spares (``prewarm=True``, the default): after the first launch of a
built-in workload of a kind (numpy, or torch — data-parallel jobs count as
torch), the backend keeps one idle worker of that kind that has already
imported its modules, and hands the next task of that kind to it (pinning it
to the task's node then). A resume, migration or resize of a torch job then
skips the ~1.3 s torch import. A spare runs one BLAS/torch thread, so tasks
asking for more threads, and users' own ``entry`` workloads (whose modules
may appear on ``sys.path`` later), always get a fresh process. Likewise,
after its first ``launch_pack`` the backend keeps one idle, niced pack host
for the next device that needs one (:mod:`.packed`, "Warm pack host").

Live state for dashboards is in :attr:`LocalBackend.status` (one
:class:`JobStatus` per job) and, if given, ``listener(job, message)`` is
called with every message a task sends. :attr:`LocalBackend.timings` keeps
how long starts, restores, checkpoints and halts took (pause overhead).
"""

from __future__ import annotations

import base64
import math
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..engine.backend import BackendEvent, BackendEventKind
from ..engine.ledger import Allocation
from ..ratchet.tiering import TieredStateStore
from ..spec.cluster import ClusterSpec
from ..spec.job import JobSpec
from .channel import Channel, ChannelClosed
from .checkpoint import CheckpointStore
from .devices import ENV as DEVICES_ENV
from .devices import DeviceMap
from .harmony.hook import HarmonyHook
from .procs import Run, Spare, SparePool, Task, free_port, kill_tasks, safe_name, spawn_worker, thread_env
from .packed import PackHost, launch_members, release_host, stop_warm_host
from .ps.launch import PSLaunch, node_bandwidth, ps_job_problem
from .ps.parts import checkpoint_iteration, clear_parts
from .status import JobStatus, update_status
from .taskevents import TaskEvents
from .usage import UsageMeter
from .worker import worker_config
from .workloads import BUILTINS, WorkloadConfig, WorkloadError, parse_config

Listener = Callable[[str, dict[str, Any]], None]


def node_cores(cluster: ClusterSpec, cores: list[int] | None = None) -> list[tuple[int, ...]]:
    """The physical cores each logical node's tasks are pinned to.

    Node ``i`` gets ``max(1, round(cpu_i))`` cores, handed out round-robin
    from ``cores`` (default: the cores this process may run on).
    """
    avail = sorted(cores if cores is not None else os.sched_getaffinity(0))
    if not avail:
        raise ValueError("no CPU cores available to pin tasks to")
    out: list[tuple[int, ...]] = []
    cursor = 0
    for node in cluster.nodes:
        k = min(max(1, int(round(node.capacity["cpu"]))), len(avail))
        out.append(tuple(sorted({avail[(cursor + j) % len(avail)] for j in range(k)})))
        cursor = (cursor + k) % len(avail)
    return out


_OPEN: weakref.WeakSet[LocalBackend] = weakref.WeakSet()


def share_threads(alloc: Allocation, spec: JobSpec) -> int:
    """Threads of each task: its CPU cores rounded up (at least 1); a single-task job's from its
    allocation (which ``SetShare`` may have raised), others' from their demand."""
    cpu = float(alloc.total.get("cpu", 0.0)) if len(alloc.slots) == 1 else float(spec.workers.demand["cpu"])
    return max(1, math.ceil(cpu - 1e-9)) if cpu > 0 else 1


def request_shutdown_all() -> None:
    """Every open backend of this process checkpoints its running jobs when it closes (signal handlers)."""
    for backend in list(_OPEN):
        backend.request_shutdown()


class LocalBackend(TaskEvents):
    """Runs jobs as local processes; see the module docstring.

    ``root``: directory for checkpoints (``root/checkpoints``) and task logs
    (``root/logs``); a temporary directory (removed by :meth:`close`) when
    None. ``report_interval`` / ``checkpoint_interval``: seconds between
    telemetry reports / periodic checkpoints of each task; ``checkpoint_policy="ratchet"`` spaces
    the periodic checkpoints by Ratchet's trigger instead (:mod:`cohabit.ratchet.trigger`).
    ``bandwidth_mbps``: per-node budget of parameter-server traffic in Mbit/s
    (one number or one per node; default: the nodes' ``net_gbps``; 0 or None:
    unlimited). ``subtask_gate``: the ``subtask_gate`` configuration given to
    every PS worker (:func:`cohabit.runtime.subtask.make_gate`), or a function
    of the job spec returning it; workers of a Harmony ``pipelined`` group get
    the Harmony gate instead (:mod:`cohabit.runtime.harmony.hook`).
    ``gpu_ids``: physical GPU ids of nodes' devices (node index or name -> ``"0,1"`` or a list),
    over the nodes' ``gpu_ids`` labels and the machine's GPUs (:class:`~.devices.DeviceMap`).
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        *,
        root: str | Path | None = None,
        max_restarts: int = 2,
        restart_backoff: float = 1.0,
        backoff_factor: float = 2.0,
        report_interval: float = 0.5,
        checkpoint_interval: float = 2.0,
        checkpoint_policy: str = "fixed",
        halt_timeout: float = 30.0,
        pin_cpus: bool = True,
        prewarm: bool = True,
        fsync: bool = True,
        listener: Listener | None = None,
        python: str = sys.executable,
        bandwidth_mbps: float | list[float | None] | None = None,
        subtask_gate: dict[str, Any] | Callable[[JobSpec], dict[str, Any] | None] | None = None,
        gpu_ids: Mapping[int | str, Any] | None = None,
        resume: bool = False,
        paused_memory_mb: float | None = None,
    ) -> None:
        for name, v in (("max_restarts", max_restarts), ("restart_backoff", restart_backoff),
                        ("checkpoint_interval", checkpoint_interval)):
            if v < 0:
                raise ValueError(f"{name} must be >= 0, got {v!r}")
        for name, v in (("backoff_factor", backoff_factor), ("report_interval", report_interval),
                        ("halt_timeout", halt_timeout)):
            if not v > 0:
                raise ValueError(f"{name} must be > 0, got {v!r}")
        self.cluster = cluster
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="cohabit-run-")) if root is None else Path(root)
        self.store = CheckpointStore(self.root / "checkpoints", fsync=fsync)
        self.log_dir = self.root / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.max_restarts = max_restarts
        self.restart_backoff = restart_backoff
        self.backoff_factor = backoff_factor
        self.report_interval = report_interval
        self.checkpoint_interval = checkpoint_interval
        if checkpoint_policy not in ("fixed", "ratchet"):
            raise ValueError(f"checkpoint_policy must be 'fixed' or 'ratchet', got {checkpoint_policy!r}")
        self.checkpoint_policy = checkpoint_policy
        if paused_memory_mb is not None and not paused_memory_mb >= 0:
            raise ValueError(f"paused_memory_mb must be >= 0 MB, got {paused_memory_mb!r}")
        #: Ratchet's tiers (ch. 4, resource-aware checkpointing): the states of paused single-task jobs
        #: are kept in this process up to the budget, the rest spilled to the checkpoint store (None: every
        #: pause writes to the store, the default)
        self.tiers = None if paused_memory_mb is None else TieredStateStore(self.store, int(paused_memory_mb * 2**20))
        self.halt_timeout = halt_timeout
        self.fsync = fsync
        self.prewarm = prewarm
        self.listener = listener
        self.python = python
        self.net_rates = node_bandwidth(cluster, bandwidth_mbps)
        self.subtask_gate = subtask_gate
        self.devices = DeviceMap.build(cluster, gpu_ids)  # ledger device -> physical GPU id (CUDA_VISIBLE_DEVICES)
        self.harmony = HarmonyHook(len(cluster.nodes), env=thread_env(1))  # pipelined groups' node queues
        self.cores = node_cores(cluster) if pin_cpus and hasattr(os, "sched_setaffinity") else None
        self.status: dict[str, JobStatus] = {}
        self.timings: list[dict[str, Any]] = []
        self._runs: dict[str, Run] = {}
        self._restarts: dict[str, int] = {}
        self._pending: list[BackendEvent] = []
        self.usage = UsageMeter()  # what jobs' processes use (USED events; metrics only)
        self._used: list[BackendEvent] = []  # USED events not yet returned by advance
        self._all_procs: dict[int, subprocess.Popen[bytes]] = {}
        self._spares = SparePool()
        self._pack_hosts: dict[tuple[int, int], PackHost] = {}  # device -> its pack process (runtime.packed)
        self._warm_pack_host: PackHost | None = None  # an idle pack host for the next device (prewarm)
        self._n_spawned = 0
        self._t0 = time.monotonic()
        self._closed = False
        self.resume = resume  # a job's first start continues from a checkpoint an earlier run left in ``root``
        self._first_launch_done: set[str] = set()
        self.checkpoint_on_close = False  # set by request_shutdown (SIGTERM / Ctrl-C of ``cohabit run``)
        _OPEN.add(self)

    # ------------------------------------------------------------------ clock
    def now(self) -> float:
        """Seconds since the backend was created."""
        return time.monotonic() - self._t0

    # ---------------------------------------------------------------- actions
    def begin_launch(self, spec: JobSpec, alloc: Allocation) -> WorkloadConfig | None:
        """The start of every launch (alone or into a pack): stop a run the job still has, mark it
        starting on ``alloc``, and parse its workload; a bad workload fails the job (None)."""
        if spec.id in self._runs:
            self.halt(spec.id, self.now(), checkpoint=False)
        st = self.status.setdefault(spec.id, JobStatus(spec.id))
        st.state, st.reason, st.nodes = "starting", "", alloc.nodes
        try:
            return parse_config(spec.id, spec.workload)
        except WorkloadError as exc:
            self._fail_now(spec.id, str(exc))
            return None

    def launch(self, spec: JobSpec, alloc: Allocation, now: float, *, from_checkpoint: bool) -> None:
        config = self.begin_launch(spec, alloc)
        if config is None:
            return
        problem = ps_job_problem(spec, config)
        if problem is not None:
            self._fail_now(spec.id, problem)
            return
        if not from_checkpoint and self._resume_point(spec, config) is not None:
            from_checkpoint = True
        if not from_checkpoint:
            self.store.clear(spec.id)
            clear_parts(self.store.root, spec.id)
            if self.tiers is not None:
                self.tiers.take_blob(spec.id)  # a state an earlier run of the job left paused is not this one's
        run = Run(spec, alloc, config)
        self._runs[spec.id] = run
        self._start_tasks(run, from_checkpoint=from_checkpoint)

    def _resume_point(self, spec: JobSpec, config: WorkloadConfig) -> int | None:
        """With ``resume``, at a job's first start (alone or into a pack): the iteration of the checkpoint
        an earlier run left (noted)."""
        if not self.resume or spec.id in self._first_launch_done:
            return None
        self._first_launch_done.add(spec.id)
        if spec.architecture == "ps":
            it = checkpoint_iteration(self.store.root, spec.id)
        else:
            ck = self.store.latest(spec.id)
            it = ck.iteration if ck is not None else None
        if it is not None:
            note = f"resumed from the earlier run's checkpoint at iteration {it}"
            self.status[spec.id].checkpoint_events.append(note)
            self.timings.append({"job": spec.id, "kind": "resumed", "at": self.now(), "checkpoint_iteration": it})
        return it

    def request_shutdown(self) -> None:
        """Checkpoint every running job when the backend closes (instead of killing it mid-iteration)."""
        self.checkpoint_on_close = True

    def launch_pack(self, device: tuple[int, int], specs: list[JobSpec], allocs: list[Allocation], now: float, *,
                    from_checkpoint: list[bool]) -> None:
        """Train ``specs`` jointly in the one pack process of ``device`` (see :mod:`.packed`)."""
        launch_members(self, device, specs, allocs, from_checkpoint=from_checkpoint)

    def _fail_now(self, job: str, reason: str) -> None:
        self.status[job].state, self.status[job].reason = "failed", reason
        self._pending.append(BackendEvent(self.now(), BackendEventKind.FAILED, job, {"reason": reason}))

    def _spawn(self, env: dict[str, str], log_path: Path, header: str, *args: str) -> tuple[
            subprocess.Popen[bytes], socket.socket]:
        self._n_spawned += 1
        return spawn_worker(self.python, env, log_path, header, *args)

    def _replenish(self, kind: str) -> None:
        """Keep one warm spare of ``kind`` (started now, importing in the background)."""
        if self._closed or self._spares.has(kind):
            return
        log_path = self.log_dir / f"spare-{kind}-{self._n_spawned}.log"
        proc, sock = self._spawn(thread_env(1), log_path, f"spare ({kind}) at t={self.now():.3f}", "--preload", kind)
        self._spares.add(Spare(kind, proc, sock, log_path))

    def _start_tasks(self, run: Run, *, from_checkpoint: bool) -> None:
        spec = run.spec
        ps = PSLaunch.plan(spec, run.alloc, net_dir=self.root / "net", rates=self.net_rates) if run.is_ps else None
        harmony_gate = self.harmony.gate_for(run.alloc, ps.n_workers) if ps is not None else None
        n = ps.n_tasks if ps is not None else len(run.alloc.slots) - spec.num_ps
        threads = share_threads(run.alloc, spec)
        port = free_port() if n > 1 and ps is None else None
        kind = "torch" if run.config.uses_torch or (n > 1 and ps is None) else "numpy"
        # warm spares run built-in workloads with one thread (their environment is fixed at spawn)
        warm = self.prewarm and threads == 1 and run.config.label in BUILTINS
        env = thread_env(threads)
        run.launched = self.now()
        run.restart_at = None
        run.first_progress = False
        run.tasks = []
        for rank in range(n):
            node = run.alloc.slots[rank].node
            slot = run.alloc.slots[rank]
            visible = self._visible_devices(slot)  # the ledger's devices of this task
            header = (f"launch at t={self.now():.3f} job {spec.id} rank {rank} node {node} "
                      f"{DEVICES_ENV}={visible!r} from_checkpoint={from_checkpoint}")
            task_env = env if visible is None else {**env, DEVICES_ENV: visible}
            proc, sock, log_path = self._spawn_task(spec.id, rank, node, task_env, header, warm=warm, kind=kind,
                                                    threads=threads, gpus=sum(share for _, share in slot.devices))
            self._all_procs[proc.pid] = proc
            task = Task(rank, node, proc, Channel(sock), log_path)
            run.tasks.append(task)
            cfg = worker_config(
                job=spec.id, rank=rank, world_size=n if ps is None else ps.n_workers, workload=run.config, iterations=spec.iterations,
                epochs=spec.epochs, batch_size=spec.batch_size, threads=threads, store_root=str(self.store.root),
                from_checkpoint=from_checkpoint, report_interval=self.report_interval,
                checkpoint_interval=self.checkpoint_interval, fsync=self.fsync, dist_port=port,
                cuda_visible_devices=visible, mem_gb=(spec.workers.demand["mem_gb"] or None),
                checkpoint_policy=self.checkpoint_policy, report_evaluations=spec.criteria is not None,
            )
            if ps is not None:
                gate = harmony_gate or (self.subtask_gate(spec) if callable(self.subtask_gate) else self.subtask_gate)
                cfg.update(ps=ps.section(rank), subtask_gate=gate)
            if from_checkpoint and self.tiers is not None and n == 1:
                blob = self.tiers.take_blob(spec.id)  # held in memory: sent along; spilled: the store has it
                if blob is not None:
                    cfg["state_b64"] = base64.b64encode(blob).decode("ascii")
            try:
                task.chan.send(cfg)
            except ChannelClosed:
                pass  # died at once: advance() sees the closed channel
        st = self.status[spec.id]
        st.pids = tuple(t.proc.pid for t in run.tasks)
        st.state = "starting"
        self.usage.start(spec.id, list(st.pids), run.launched)
        if warm:
            self._replenish(kind)

    def _visible_devices(self, slot: Any) -> str | None:
        """``CUDA_VISIBLE_DEVICES`` of a task on ``slot`` (the physical ids of its ledger devices; None:
        leave the task's environment as it is). Subclasses whose runtime assigns devices override this."""
        return self.devices.for_slot(slot)

    def _spawn_task(self, job: str, rank: int, node: int, env: dict[str, str], header: str, *, warm: bool,
                    kind: str, threads: int, gpus: float = 0.0) -> tuple[Any, socket.socket, Path]:
        """Start one task (a warm spare or a new process pinned to ``node``'s cores).

        ``gpus``: the GPU share the task holds in the ledger (its devices are already in ``env``).
        Returns its process (or an object with ``Popen``'s ``pid`` / ``poll`` / ``wait`` /
        ``terminate`` / ``kill``: the RayBackend's actors), the backend's end of its
        control socket, and its log file. Subclasses override this to run tasks elsewhere.
        """
        spare = self._spares.take(kind) if warm else None
        if spare is not None:
            proc, sock, log_path = spare.proc, spare.sock, spare.log_path
            with open(log_path, "ab") as log:
                log.write(f"--- {header} (warm spare)\n".encode())
        else:
            log_path = self.log_dir / f"{safe_name(job)}.{rank}.log"
            proc, sock = self._spawn(env, log_path, header, "--job", job, "--launched-at", repr(time.time()))
        if self.cores is not None:
            try:
                os.sched_setaffinity(proc.pid, self.cores[node])
            except OSError:
                pass  # the process may already be gone; its exit is handled by advance()
        return proc, sock, log_path

    def set_share(self, job: str, alloc: Allocation, now: float) -> None:
        """``SetShare``: the running single-task ``job`` gets ``alloc``'s CPU cores and memory; its worker
        applies them before its next step (a query: DuckDB's ``threads`` / ``memory_limit`` at the
        next batch boundary). A task restarted later starts with them."""
        run = self._runs.get(job)
        if run is None:
            raise ValueError(f"LocalBackend: job {job!r} is not running")
        run.alloc = alloc
        mem = float(alloc.total.get("mem_gb", 0.0))
        msg = {"type": "share", "threads": share_threads(alloc, run.spec), "mem_gb": mem or None}
        for t in run.tasks:
            try:
                t.chan.send(msg)
            except ChannelClosed:
                pass  # died: advance() sees it; a restart reads run.alloc
        self.timings.append({"job": job, "kind": "share", "at": self.now(), "threads": msg["threads"], "mem_gb": mem})

    def job_ended(self, job: str, now: float) -> None:
        """The scheduler ended ``job`` (finished, stopped, cancelled): a final state Ratchet's tiers hold in
        memory is written to the checkpoint store, where an ended job's state always is."""
        if self.tiers is not None:
            self.tiers.spill(job)

    def halt(self, job: str, now: float, *, checkpoint: bool) -> None:
        run = self._runs.pop(job, None)
        if run is None:
            return
        st = self.status[job]
        t0 = time.perf_counter()
        live = [t for t in run.tasks if t.proc.poll() is None]
        if checkpoint:
            to_tiers = self.tiers is not None and len(run.tasks) == 1 and not run.is_ps
            for t in live:
                try:
                    t.chan.send({"type": "halt", "checkpoint": True, "state_to_backend": to_tiers})
                except ChannelClosed:
                    pass
            deadline = time.monotonic() + self.halt_timeout
            save_s = tier = None
            held_at: int | None = None
            while any(t.proc.poll() is None for t in live) and time.monotonic() < deadline:
                for t in live:
                    for msg in t.chan.recv_ready():
                        self._notify(job, msg)
                        self.usage.read(job, t.proc.pid, self.now())
                        if msg.get("type") == "halted" and "save_s" in msg:
                            save_s = msg["save_s"]
                        if msg.get("type") == "halted" and msg.get("state_b64") and self.tiers is not None:
                            held_at = int(msg["iteration"])
                            tier = self.tiers.put_blob(job, base64.b64decode(msg["state_b64"]), iteration=held_at,
                                                       seconds=float(save_s or 0.0))
                        elif msg.get("type") == "progress":
                            update_status(st, msg)
                chans = [t.chan for t in live if not t.chan.closed]
                if chans:
                    select.select(chans, [], [], 0.05)
                else:
                    time.sleep(0.01)
            timed_out = any(t.proc.poll() is None for t in live)
            self._kill(run.tasks)
            st.checkpoint_iteration = held_at if held_at is not None else self._checkpoint_iteration(run)
            self.timings.append({"job": job, "kind": "halt", "at": self.now(), "seconds": time.perf_counter() - t0,
                                 "save_s": save_s, "timed_out": timed_out, "tier": tier or "disk",
                                 "checkpoint_iteration": st.checkpoint_iteration})
            if timed_out:
                st.reason = (f"halt timed out after {self.halt_timeout:g} s; killed; resumes from checkpoint "
                             f"iteration {st.checkpoint_iteration}")
        else:
            for t in live:
                self.usage.read(job, t.proc.pid, self.now())
            self._kill(run.tasks)
        self._sample_use(job, end=True)
        st.state = "halted"
        st.pids = ()

    # ------------------------------------------------------------------- time
    def next_event_time(self) -> float | None:
        return self.now() if self._pending else None

    def advance(self, until: float) -> tuple[float, list[BackendEvent]]:
        while True:
            events = self._poll()
            t = self.now()
            if events:
                return t, events
            if t >= until:
                return t, []
            if not self._runs and not self._pending:
                if until == math.inf:
                    raise RuntimeError("LocalBackend.advance(inf) with no running job: nothing can happen")
                time.sleep(max(until - t, 0.0))
                continue
            wake = until
            for run in self._runs.values():
                if run.restart_at is not None:
                    wake = min(wake, run.restart_at)
            timeout = min(max(wake - t, 0.0), 1.0)  # wake at least every second to notice stuck tasks
            chans = [task.chan for run in self._runs.values() for task in run.tasks if not task.chan.closed]
            if chans:
                select.select(chans, [], [], timeout)
            else:
                time.sleep(timeout)

    # -------------------------------------------------------------- cleanup
    def _kill(self, tasks: list[Task], grace: float = 2.0) -> None:
        """Make sure every process of ``tasks`` is gone (:func:`.procs.kill_tasks`) and forget them."""
        kill_tasks(tasks, grace)
        for t in tasks:
            self._all_procs.pop(t.proc.pid, None)

    def pids(self) -> list[int]:
        """Process ids of every task still alive that this backend started."""
        return [pid for pid, p in self._all_procs.items() if p.poll() is None]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        if self.checkpoint_on_close:
            for job in list(self._runs):
                try:
                    self.halt(job, self.now(), checkpoint=True)
                except Exception:  # noqa: BLE001 - shutting down: kill below whatever did not halt
                    pass
        tasks = [t for run in self._runs.values() for t in run.tasks]
        self._runs.clear()
        self._kill(tasks)
        for host in list(self._pack_hosts.values()):
            release_host(self, host)
        stop_warm_host(self)
        self.harmony.close()
        for pid, proc in list(self._all_procs.items()):
            if proc.poll() is None:
                try:
                    proc.kill()
                    proc.wait(timeout=5.0)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        self._all_procs.clear()
        self._spares.close()
        if self.tiers is not None and not self._own_root:
            self.tiers.flush()  # paused states held in memory go to the kept checkpoint store (--resume)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def _notify(self, job: str, msg: dict[str, Any]) -> None:
        if self.listener is not None:
            self.listener(job, msg)

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # last resort: never leave children behind
        try:
            if not self._closed:
                self.close()
        except Exception:  # noqa: BLE001
            pass

