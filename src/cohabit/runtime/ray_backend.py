"""RayBackend: the same real training jobs as :class:`LocalBackend`, each task a Ray actor.

Semantics are LocalBackend's (this class is a subclass and only changes where
a task runs): ``launch`` / ``halt`` / ``advance`` / ``close``, pause =
checkpoint at an iteration boundary then kill the actor, resume / migrate /
resize = new actors restoring the newest good checkpoint, a crashed task
restarts its job from checkpoint with the same ``max_restarts`` /
``restart_backoff`` / ``backoff_factor``. The task's code is the same too:
the actor runs :func:`cohabit.runtime.worker.serve_task` (the training loop of
:mod:`.worker`) and talks to the backend in the same JSON lines, over a TCP
connection back to the driver that :class:`~.relay.Relay` splices onto a local
socketpair.

Placement. Logical node ``i`` of the cluster the policy sees is mapped to one
Ray node: the alive node that advertises the custom resource
``cohabit_node_<i>`` if there is one (``ray start --resources
'{"cohabit_node_0": 1}'``), otherwise the alive nodes round-robin. Each actor
is pinned there with ``NodeAffinitySchedulingStrategy(soft=False)`` and
reserves ``num_cpus=0``: admission is the scheduler's ledger's job, not Ray's.

Warm actors (``warm_actors``, default 1; 0 disables): as LocalBackend keeps
warm spares, after the first launch of a built-in workload of a kind (numpy,
or torch: data-parallel jobs count as torch) the backend keeps ``warm_actors``
idle actors of that kind on every Ray node a logical node maps to, started in
the background and already past the workload imports
(:meth:`TaskActor.preload`). A task of that kind asking for one thread takes
one on its Ray node (then the pool of that node and kind is topped up again),
so a resume, migration or resize skips the actor start and the ~1.3 s torch
import. Pooled actors are killed at :meth:`close` and when their node is gone.

Lost nodes. Every ``node_check_interval`` seconds, and whenever an actor
dies, the backend asks Ray which nodes are alive. A job with an actor on a
node that died is *evicted*: its other actors are killed and the backend
reports :attr:`BackendEventKind.EVICTED` with the checkpoint iteration it will
resume from; the scheduler pauses it and the policy places it again. The dead
node's logical nodes are remapped onto the surviving Ray nodes (the ledger
still counts their capacity: the survivors are then oversubscribed).

Cluster. ``address`` connects to an existing cluster (``ray.shutdown`` at
:meth:`close` only disconnects); without it, if this process is not already
connected, a one-node local Ray instance is started with the object store
capped (``object_store_mb``), no dashboard and usage statistics off, and
:meth:`close` stops it. Checkpoints and task logs go to ``root`` like
LocalBackend's: on one machine any directory works; on a multi-machine
cluster ``root`` must be a directory every node mounts at the same path (NFS
or similar), the driver's ``host`` must be reachable from every node, and
data-parallel jobs whose ranks span machines need rank 0's address instead of
127.0.0.1 for gloo (not done: such jobs run only when all ranks share a host).

GPUs. A task whose ledger slot holds GPU devices on a logical node whose Ray
node has GPUs asks Ray for ``num_gpus`` = its share of them; Ray picks the
physical GPUs and sets the actor's ``CUDA_VISIBLE_DEVICES`` (its accelerator
ids, reported in the task's ``ready`` message), and such a task never takes a
warm actor (those hold no GPU). On a Ray node without GPUs the task gets
LocalBackend's mapping (:class:`~.devices.DeviceMap`) and trains on the CPU.
A time-sharing guest (share 0) gets the mapped id of its device, which need
not be the id Ray gave the device's owner on a multi-GPU node (not yet
reconciled).

Parameter-server jobs run too (their servers and workers are tasks like any
other, talking TCP on 127.0.0.1 as under LocalBackend, with the per-node
bandwidth budget kept in files under ``root``): on one machine only, for the
same reasons. Packs (:mod:`.packed`) are not run under Ray.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.backend import BackendEvent, BackendEventKind
from ..spec.cluster import ClusterSpec, NodeSpec
from ..spec.resources import Resources
from .local import LocalBackend
from .procs import Run, Task, safe_name, thread_env
from .relay import Relay

NODE_RESOURCE = "cohabit_node_{}"
_ENV_KEYS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "PYTHONPATH")


def connect(address: str | None = None, *, host: str = "127.0.0.1", object_store_mb: int = 100,
            num_cpus: int | None = None) -> bool:
    """Connect this process to Ray unless it already is; True if this call connected (or started Ray).

    ``address``: an existing cluster (``"auto"``, ``"HOST:PORT"``). Without it a
    one-node Ray instance is started on ``host`` with the object store capped at
    ``object_store_mb`` MB, no dashboard, usage statistics off; ``ray.shutdown()``
    stops it (and only disconnects from a cluster given by ``address``).
    """
    import ray

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address is not None:
        check_reachable(address)
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    else:
        ray.init(num_cpus=num_cpus, object_store_memory=object_store_mb * 2**20, include_dashboard=False,
                 log_to_driver=False, configure_logging=False, _node_ip_address=host)
    return True


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast (ConnectionError) when nothing accepts TCP at a ``HOST:PORT`` Ray address.

    ``ray.init`` itself retries an address that refuses connections for
    minutes. ``"auto"`` and ``ray://`` addresses are left to Ray; a malformed
    address raises ValueError.
    """
    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected a Ray address HOST:PORT (or 'auto'), got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"nothing accepts connections at {address} ({exc.strerror or exc}); "
                              f"is a Ray head node running there?") from None


def node_order(alive: dict[str, dict[str, float]]) -> list[str]:
    """Alive Ray node ids (with their resources) in logical-node order.

    Position ``i`` is the node advertising ``cohabit_node_<i>`` if one does,
    else the next unlabelled node by node id.
    """
    if not alive:
        raise RuntimeError("the Ray cluster has no alive node")
    labelled: dict[int, str] = {}
    for nid in sorted(alive):
        for key, amount in alive[nid].items():
            if key.startswith("cohabit_node_") and key[13:].isdigit() and amount > 0:
                labelled.setdefault(int(key[13:]), nid)
    free = iter(nid for nid in sorted(alive) if nid not in labelled.values())
    out: list[str] = []
    for i in range(len(alive)):
        nid = labelled.get(i) or next(free, None)
        if nid is not None and nid not in out:
            out.append(nid)
    return out + [nid for nid in sorted(alive) if nid not in out]  # labels past the end, leftovers


def ray_cluster_spec(name: str = "ray") -> ClusterSpec:
    """One logical node per alive Ray node, in :func:`node_order` (the order RayBackend maps them in).

    Capacity from the node's Ray resources: ``cpu`` = its ``CPU``, ``mem_gb``
    = its ``memory`` (bytes Ray may use for tasks), ``gpu`` = its ``GPU`` if
    any. The caller must already be connected (:func:`connect`).
    """
    import ray

    alive = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
    nodes = []
    for i, nid in enumerate(node_order({k: dict(n.get("Resources", {})) for k, n in alive.items()})):
        n = alive[nid]
        res = n.get("Resources", {})
        cap = {"cpu": float(res.get("CPU", 0.0)), "mem_gb": round(float(res.get("memory", 0.0)) / 2**30, 1)}
        if res.get("GPU"):
            cap["gpu"] = float(res["GPU"])
        nodes.append(NodeSpec(name=f"{name}-{i}", capacity=Resources(**cap), labels={"ray_node": n["NodeID"][:12]}))
    return ClusterSpec(name=name, nodes=tuple(nodes))


class TaskActor:
    """The Ray actor of one task: connects back to the driver and runs the worker loop."""

    def __init__(self, log_path: str) -> None:
        # one actor per worker process: make its output the task log, as for a local task
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)

    def preload(self, kind: str) -> str:
        """Import the modules of the built-in workloads of ``kind`` (``numpy`` or ``torch``) now: a warm actor."""
        if kind == "torch":
            import torch  # noqa: F401

            from .workloads import torch_models  # noqa: F401
        from .workloads import numpy_models  # noqa: F401

        return kind

    def info(self) -> tuple[int, str]:
        """This actor's process id and Ray node id."""
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    def run(self, host: str, port: int, token: str, timeout: float) -> int:
        """Serve one task (:func:`cohabit.runtime.worker.serve_task`); its exit code."""
        from .channel import Channel
        from .worker import serve_task

        import ray

        sock = socket.create_connection((host, port), timeout=timeout)
        sock.sendall(token.encode() + b"\n")
        # start-up is not split into interpreter and imports here (Ray started the process):
        # the backend's "start" timing still has the time from launch to ready. The ready message
        # carries the GPU ids Ray assigned to this actor (its num_gpus), if any.
        gpu_ids = ray.get_runtime_context().get_accelerator_ids().get("GPU", [])
        return serve_task(Channel(sock), timeout, {"accelerator_ids": [str(g) for g in gpu_ids]})


class ActorProcess:
    """A task's Ray actor seen through the part of ``subprocess.Popen`` LocalBackend uses.

    ``pid`` is the actor's process id once it has started (:attr:`os_pid`),
    before that a negative handle unique within the backend. ``poll`` / ``wait``
    follow the actor's ``run`` call; a dead actor's error is in :attr:`died`.
    """

    _next = 0

    def __init__(self, actor: Any, run_ref: Any, info_ref: Any, ray_node: str) -> None:
        ActorProcess._next += 1
        self._handle = -ActorProcess._next  # never a real pid: nothing may signal it by mistake
        self.actor = actor
        self.ray_node = ray_node
        self.returncode: int | None = None
        self.died: str | None = None
        self._run_ref, self._info_ref = run_ref, info_ref
        self._os_pid: int | None = None
        self.settled_at = float("inf")  # when poll/wait first saw the actor end

    @property
    def pid(self) -> int:
        return self.os_pid or self._handle

    @property
    def os_pid(self) -> int | None:
        """The actor's process id, once known (None before it started or if it never did)."""
        import ray

        if self._os_pid is None:
            ready, _ = ray.wait([self._info_ref], timeout=0)
            if ready:
                try:
                    self._os_pid = int(ray.get(self._info_ref)[0])
                except Exception:  # noqa: BLE001 - the actor died before answering
                    return None
        return self._os_pid

    def _settle(self) -> None:
        import ray

        try:
            self.returncode = int(ray.get(self._run_ref))
        except Exception as exc:  # noqa: BLE001 - RayActorError, ActorUnschedulableError, RayTaskError...
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            why = [ln for ln in lines if "died" in ln or "node" in ln.lower()] or lines[:1]
            self.died = f"Ray actor failed ({type(exc).__name__}): {' '.join(why)[:300]}"
            self.returncode = -9
        self.settled_at = time.monotonic()

    def poll(self) -> int | None:
        import ray

        if self.returncode is None:
            ready, _ = ray.wait([self._run_ref], timeout=0)
            if ready:
                self._settle()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import ray

        if self.returncode is None:
            ready, _ = ray.wait([self._run_ref], timeout=timeout)
            if not ready:
                raise subprocess.TimeoutExpired(f"ray actor {self.pid}", timeout or 0.0)
            self._settle()
        assert self.returncode is not None
        return self.returncode

    def terminate(self) -> None:
        import ray

        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    kill = terminate


@dataclass
class _WarmActor:
    """An idle pooled actor of one kind on one Ray node (``ready``: its :meth:`TaskActor.preload` call)."""

    actor: Any
    info_ref: Any
    ready: Any
    log_path: Path


class RayBackend(LocalBackend):
    """Runs jobs as Ray actors on the Ray nodes the logical nodes map to; see the module docstring.

    Keyword arguments not listed here are LocalBackend's (``root``,
    ``max_restarts``, ``restart_backoff``, ``backoff_factor``,
    ``checkpoint_interval``, ``halt_timeout``, ``listener``...).
    """

    #: Packs (one host process receiving its members' sockets over a unix socket) do not run as
    #: Ray actors: without ``launch_pack`` the scheduler rejects Pack actions as unsupported.
    launch_pack = None  # type: ignore[assignment]

    def __init__(
        self,
        cluster: ClusterSpec,
        *,
        address: str | None = None,
        host: str = "127.0.0.1",
        object_store_mb: int = 100,
        num_cpus: int | None = None,
        node_check_interval: float = 1.0,
        connect_timeout: float = 120.0,
        warm_actors: int = 1,
        **options: Any,
    ) -> None:
        import ray

        options.setdefault("pin_cpus", False)
        options.setdefault("prewarm", False)
        if options["pin_cpus"] or options["prewarm"]:
            raise ValueError("RayBackend places tasks with Ray: pin_cpus and prewarm are LocalBackend options")
        if not node_check_interval > 0:
            raise ValueError(f"node_check_interval must be > 0, got {node_check_interval!r}")
        if isinstance(warm_actors, bool) or not isinstance(warm_actors, int) or warm_actors < 0:
            raise ValueError(f"warm_actors must be an int >= 0 (idle actors per Ray node and kind), got {warm_actors!r}")
        super().__init__(cluster, **options)
        # LocalBackend's warm-spare hooks (_start_tasks' ``warm``, _replenish) drive the actor pool
        self.prewarm = warm_actors > 0
        self.warm_actors = warm_actors
        self._pool: dict[tuple[str, str], list[_WarmActor]] = {}
        try:
            self._owns_ray = connect(address, host=host, object_store_mb=object_store_mb, num_cpus=num_cpus)
        except Exception:
            super().close()
            raise
        self._ray = ray
        self.host = host
        self.node_check_interval = node_check_interval
        self.connect_timeout = connect_timeout
        self._relay = Relay(host)
        self._actor_cls = ray.remote(TaskActor)
        self._alive: dict[str, dict[str, float]] = {}
        self.node_map: list[str] = []
        self._last_check = -float("inf")
        try:
            self._refresh_nodes()
        except Exception:
            self.close()
            raise

    # ------------------------------------------------------------- placement
    def _refresh_nodes(self) -> set[str]:
        """Ask Ray which nodes are alive; remap logical nodes whose Ray node is gone. The alive ids."""
        self._last_check = time.monotonic()
        alive = {n["NodeID"]: dict(n.get("Resources", {})) for n in self._ray.nodes() if n.get("Alive")}
        order = node_order(alive)
        self._alive = alive
        for key in [k for k in self._pool if k[0] not in alive]:
            self._drop_pool(self._pool.pop(key))
        old = self.node_map
        new: list[str] = []
        for i in range(len(self.cluster.nodes)):
            labelled = [nid for nid in order if alive[nid].get(NODE_RESOURCE.format(i), 0) > 0]
            if labelled:
                new.append(labelled[0])
            elif i < len(old) and old[i] in alive:
                new.append(old[i])
            else:
                new.append(order[i % len(order)])
        if old and new != old:
            moved = {i: (old[i][:8], new[i][:8]) for i in range(len(new)) if old[i] != new[i]}
            self.timings.append({"kind": "remap", "at": self.now(), "moved": moved})
        self.node_map = new
        return set(alive)

    def ray_node_of(self, node: int) -> str:
        """The Ray node id logical node ``node`` runs on now."""
        return self.node_map[node]

    def _ray_gpus(self, node: int) -> float:
        """GPUs Ray manages on the Ray node logical node ``node`` maps to (0: none)."""
        return float(self._alive.get(self.node_map[node], {}).get("GPU", 0.0))

    def _visible_devices(self, slot: Any) -> str | None:
        """On a Ray node with GPUs Ray assigns the task's GPU ids itself (``num_gpus``; it sets
        ``CUDA_VISIBLE_DEVICES`` in the actor): leave them. Elsewhere LocalBackend's mapping applies."""
        if self._ray_gpus(slot.node) > 0 and sum(share for _, share in slot.devices) > 0:
            return None
        return super()._visible_devices(slot)

    def _spawn_task(self, job: str, rank: int, node: int, env: dict[str, str], header: str, *, warm: bool,
                    kind: str, threads: int, gpus: float = 0.0) -> tuple[Any, socket.socket, Path]:

        ray_node = self.node_map[node]
        num_gpus = gpus if self._ray_gpus(node) > 0 else 0.0  # the ledger's share, reserved in Ray too
        spare = self._take_warm(ray_node, kind) if warm and not num_gpus else None  # warm actors hold no GPU
        if spare is not None:
            actor, info_ref, log_path = spare.actor, spare.info_ref, spare.log_path
            with open(log_path, "ab") as log:
                log.write(f"--- {header} ray node {ray_node[:12]} (warm actor)\n".encode())
        else:
            log_path = self.log_dir / f"{safe_name(job)}.{rank}.log"
            with open(log_path, "ab") as log:
                log.write(f"--- {header} ray node {ray_node[:12]}\n".encode())
            actor, info_ref = self._new_actor(ray_node, env, log_path, num_gpus=num_gpus)
        token, sock = self._relay.expect()
        run_ref = actor.run.remote(self.host, self._relay.address[1], token, self.connect_timeout)
        return ActorProcess(actor, run_ref, info_ref, ray_node), sock, log_path

    def _new_actor(self, ray_node: str, env: dict[str, str], log_path: Path, *,
                   num_gpus: float = 0.0) -> tuple[Any, Any]:
        """Start a :class:`TaskActor` pinned to ``ray_node`` (zero CPUs and ``num_gpus`` GPUs reserved);
        it and its ``info`` call."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = self._actor_cls.options(
            num_cpus=0, num_gpus=num_gpus, max_restarts=0, max_task_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(ray_node, soft=False),
            runtime_env={"env_vars": {k: env[k] for k in _ENV_KEYS if k in env}},
        ).remote(str(log_path))
        return actor, actor.info.remote()

    # ----------------------------------------------------------- warm actors
    def _take_warm(self, ray_node: str, kind: str) -> _WarmActor | None:
        """A pooled actor of ``kind`` on ``ray_node`` that has not died (it may still be importing)."""
        pool = self._pool.get((ray_node, kind), [])
        while pool:
            spare = pool.pop(0)
            ready, _ = self._ray.wait([spare.ready], timeout=0)
            if not ready:
                return spare  # still importing: its run call queues behind preload, sooner than a new actor
            try:
                self._ray.get(spare.ready)
                return spare
            except Exception:  # noqa: BLE001 - it died (node gone, killed): try the next one
                self._drop_pool([spare])
        return None

    def _replenish(self, kind: str) -> None:
        """Top up the pool of ``kind`` to ``warm_actors`` on every alive Ray node a logical node maps to.

        Called by LocalBackend after a launch that may have used a warm task. Actor
        creation and the imports run in the background (Ray calls are asynchronous).
        """
        if self._closed or self.warm_actors <= 0:
            return
        env = thread_env(1)  # warm actors run one BLAS/torch thread, like LocalBackend's spares
        for ray_node in dict.fromkeys(self.node_map):
            if ray_node not in self._alive:
                continue
            pool = self._pool.setdefault((ray_node, kind), [])
            while len(pool) < self.warm_actors:
                log_path = self.log_dir / f"warm-{kind}-{ray_node[:8]}-{self._n_spawned}.log"
                self._n_spawned += 1
                with open(log_path, "ab") as log:
                    log.write(f"--- warm actor ({kind}) at t={self.now():.3f} ray node {ray_node[:12]}\n".encode())
                actor, info_ref = self._new_actor(ray_node, env, log_path)
                pool.append(_WarmActor(actor, info_ref, actor.preload.remote(kind), log_path))

    def warm_pids(self) -> dict[tuple[str, str], list[int]]:
        """Process ids of the pooled actors per (Ray node id, kind), waiting until each has started."""
        return {key: [int(self._ray.get(w.info_ref)[0]) for w in pool] for key, pool in self._pool.items()}

    def _drop_pool(self, pool: list[_WarmActor]) -> None:
        for spare in pool:
            try:
                self._ray.kill(spare.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    # ------------------------------------------------------------ lost nodes
    def _poll(self) -> list[BackendEvent]:
        if time.monotonic() - self._last_check >= self.node_check_interval:
            try:
                alive = self._refresh_nodes()
            except Exception as exc:  # noqa: BLE001 - no alive node, or the cluster's control store is gone
                return self._cluster_lost(exc)
            for job, run in list(self._runs.items()):
                lost = _lost_tasks(run, alive)
                if lost:
                    self._pending.append(self._evict(job, run, lost))
        now = time.monotonic()
        for run in self._runs.values():
            for t in run.tasks:
                # an actor that died before connecting (e.g. it could not be placed) never closes its
                # channel: close it a moment after Ray reported the death, so advance() handles it
                if not t.chan.closed and t.proc.poll() is not None and t.proc.died is not None:
                    if now - t.proc.settled_at > 1.0:
                        t.chan.close()
        events = super()._poll()
        for job, run in self._runs.items():
            pids = tuple(p for p in (t.proc.os_pid for t in run.tasks) if p is not None)
            if pids:
                self.status[job].pids = pids
        return events

    def _on_task_death(self, job: str, run: Run, task: Task) -> BackendEvent | None:
        try:
            alive = self._refresh_nodes()
        except Exception as exc:  # noqa: BLE001 - see _poll
            lost = self._cluster_lost(exc)
            return next((e for e in lost if e.job == job), None)
        lost = _lost_tasks(run, alive)
        if lost:
            return self._evict(job, run, lost)
        try:
            task.proc.wait(timeout=2.0)  # its channel closed first: let Ray say why the actor ended
        except subprocess.TimeoutExpired:
            pass
        if task.error is None and task.proc.died is not None:
            task.error = task.proc.died
        return super()._on_task_death(job, run, task)

    def _evict(self, job: str, run: Run, lost: list[Task]) -> BackendEvent:
        """Stop ``job`` (its node is gone) and report it for the scheduler to place again."""
        del self._runs[job]
        self._kill(run.tasks)
        ck = self.store.latest(job)
        it = ck.iteration if ck is not None else 0
        gone = ", ".join(f"task {t.rank} on node {t.node} (Ray node {t.proc.ray_node[:8]})" for t in lost)
        st = self.status[job]
        st.state, st.pids, st.iterations, st.checkpoint_iteration = "halted", (), it, it
        st.reason = f"Ray node lost: {gone}; evicted, resumes from checkpoint iteration {it}"
        self.timings.append({"job": job, "kind": "evicted", "at": self.now(), "reason": st.reason,
                             "checkpoint_iteration": it})
        self._notify(job, {"type": "evicted", "reason": st.reason})
        return BackendEvent(self.now(), BackendEventKind.EVICTED, job, {"reason": st.reason, "iterations": float(it)})

    def _cluster_lost(self, exc: BaseException) -> list[BackendEvent]:
        """The whole Ray cluster is gone (no alive node, or Ray cannot be asked): every running job
        fails with the reason instead of the scheduler crashing; its checkpoints stay on disk, so a
        new run can resume it."""
        events: list[BackendEvent] = []
        for job, run in list(self._runs.items()):
            del self._runs[job]
            try:
                self._kill(run.tasks)
            except Exception:  # noqa: BLE001 - the actors went with the cluster
                pass
            ck = self.store.latest(job)
            it = ck.iteration if ck is not None else None
            st = self.status[job]
            st.state, st.pids = "failed", ()
            st.reason = (f"Ray cluster lost ({type(exc).__name__}: {exc}); "
                         f"checkpoint kept at iteration {it}" if it is not None else
                         f"Ray cluster lost ({type(exc).__name__}: {exc}); no checkpoint yet")
            self.timings.append({"job": job, "kind": "cluster_lost", "at": self.now(), "reason": st.reason})
            events.append(BackendEvent(self.now(), BackendEventKind.FAILED, job, {"reason": st.reason}))
        return events

    # ---------------------------------------------------------------- cleanup
    def pids(self) -> list[int]:
        """Process ids of the live actors this backend started (those that reported one)."""
        return [p.os_pid for p in self._all_procs.values()  # type: ignore[attr-defined]
                if p.poll() is None and p.os_pid is not None]

    def close(self) -> None:
        if self._closed:
            return
        for pool in self._pool.values():
            self._drop_pool(pool)
        self._pool.clear()
        super().close()
        self._relay.close()
        if self._owns_ray:
            self._ray.shutdown()


def _lost_tasks(run: Run, alive: set[str]) -> list[Task]:
    return [t for t in run.tasks if isinstance(t.proc, ActorProcess) and t.proc.ray_node not in alive]
