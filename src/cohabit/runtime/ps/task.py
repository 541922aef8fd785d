"""Entry point of a parameter-server task process, and what its worker and server halves share.

The LocalBackend starts every task of an ``architecture: ps`` job as the usual
task process (:mod:`cohabit.runtime.worker`); its configuration carries a
``ps`` section (built by :mod:`.launch`) saying whether the task is a server or
a worker, its index, the servers' ports and nodes, and its node's bandwidth
budget. :func:`run_task` builds the workload and hands over to
:class:`~.server.ParameterServer` or :class:`~.client.PSWorker`.

Which budget a task's cross-node traffic is charged to (:func:`node_budget`):
ONE per node, so that no link is charged twice. Normally the node's file
bucket (:mod:`.netlimit`). On the nodes of a Harmony pipelined group (the
task's ``subtask_gate`` is ``harmony``) it is the Harmony server's link of the
node instead: a worker charges through its gate (``gate.throttle``: the
secondary COMM subtask yields to the primary, Lee et al. Sec. 4.1), a server
through a link-only client (no subtasks, full priority). A Harmony group holds
whole machines, so every PS process on such a node is a group member and draws
from that one link. Charging both budgets would meter each byte twice, in
series: the node would run at about half its rate, and the secondary would
still take half of the file bucket whatever its role.

The backend protocol is the one of every task: ``ready`` after restoring,
``progress`` (workers), ``halted`` / ``finished`` at the end, ``error`` with
``fatal`` for configuration mistakes.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass
from typing import Any

from ..channel import Channel, ChannelClosed
from ..harmony.gate import LinkClient
from ..subtask import GateConfigError
from ..workloads import WorkloadConfig, WorkloadContext, WorkloadError, build
from .models import PSWorkload
from .netlimit import NodeBucket
from .parts import parts_store
from .wire import Budget, PeerGone, Throttled

EXIT_OK, EXIT_FAIL, EXIT_CONFIG = 0, 1, 3
CKPT, STOP = 1, 2  # bits of the flag the workers agree on at each push (see server.py)
PEER_LOSS_DELAY_S = 1.0


class PeerLost(RuntimeError):
    """A server lost a worker's connection in the middle of training."""


@dataclass
class PSTask:
    """What both halves of a PS job need: the channel, the configuration, the workload, the node's budget
    (a worker whose gate meters the link sets ``link`` to it, see :func:`node_budget`)."""

    chan: Channel
    cfg: dict[str, Any]
    workload: PSWorkload
    link: Budget | None

    @property
    def sec(self) -> dict[str, Any]:
        return self.cfg["ps"]

    @property
    def job(self) -> str:
        return str(self.cfg["job"])

    @property
    def node(self) -> int:
        return int(self.sec["node"])

    @property
    def rate(self) -> float | None:
        """The node's bandwidth in bytes/s (None: unlimited)."""
        r = self.sec.get("bytes_per_s")
        return float(r) if r else None

    @property
    def n_workers(self) -> int:
        return int(self.sec["n_workers"])

    @property
    def n_servers(self) -> int:
        return int(self.sec["n_servers"])

    def link_to(self, peer_node: int) -> Budget | None:
        """The budget a connection to ``peer_node`` is charged to (none within a node)."""
        return self.link if peer_node != self.node else None

    def parts(self) -> Any:
        return parts_store(self.cfg["store_root"], self.job, fsync=bool(self.cfg["fsync"]))

    def send(self, msg: dict[str, Any]) -> None:
        msg.setdefault("rank", self.cfg["rank"])
        msg.setdefault("role", self.sec["role"])
        try:
            self.chan.send(msg)
        except ChannelClosed:
            pass  # the scheduler is gone; the loops notice it at the next boundary

    def control(self) -> int:
        """The stop bits asked for by the backend since the last call (channel closed: stop)."""
        flag = 0
        for msg in self.chan.recv_ready():
            if msg.get("type") == "halt":
                flag |= (CKPT | STOP) if msg.get("checkpoint", True) else STOP
        if self.chan.closed:
            flag |= STOP
        return flag


def _build(cfg: dict[str, Any]) -> PSWorkload:
    sec, w = cfg["ps"], cfg["workload"]
    wc = WorkloadConfig(w["target"], w["label"], int(w["seed"]), dict(w["params"]))
    rank = int(sec["index"]) if sec["role"] == "worker" else 0
    ctx = WorkloadContext(job=cfg["job"], seed=wc.seed, iterations=cfg["iterations"], epochs=cfg["epochs"],
                          batch_size=cfg["batch_size"], rank=rank, world_size=int(sec["n_workers"]),
                          threads=max(int(cfg["threads"]), 1))
    workload = build(wc, ctx)
    if not isinstance(workload, PSWorkload):
        raise WorkloadError(f"job {cfg['job']!r}: workload {wc.label!r} is not a parameter-server workload; "
                            f"architecture 'ps' runs ps-mlr, ps-lasso, ps-nmf or ps-lda")
    return workload


def via_harmony(cfg: dict[str, Any]) -> bool:
    """Whether the task's node is metered by the Harmony server's link (a pipelined group with a budget)."""
    gate = cfg.get("subtask_gate") or {}
    return bool(cfg["ps"].get("bytes_per_s")) and gate.get("kind") == "harmony"


def node_budget(cfg: dict[str, Any]) -> NodeBucket | Throttled | None:
    """The budget this task opens for its node (see the module docstring); None for a worker metered
    by its gate (it opens none: the gate is its budget) and on unlimited nodes."""
    sec = cfg["ps"]
    rate = sec.get("bytes_per_s")
    if not rate:
        return None
    if not via_harmony(cfg):
        return NodeBucket(sec["bucket"], float(rate))
    if sec["role"] == "worker":
        return None
    return Throttled(LinkClient(str(cfg["subtask_gate"]["socket"]), int(sec["node"]), float(rate)))


def run_task(chan: Channel, cfg: dict[str, Any], startup: dict[str, float] | None = None) -> int:
    """Run one PS task to its end; returns the process exit status."""
    from .client import PSWorker
    from .server import ParameterServer

    sec = cfg["ps"]
    t0 = time.perf_counter()
    try:
        workload = _build(cfg)
    except WorkloadError as exc:
        _report(chan, cfg, {"type": "error", "fatal": True, "reason": str(exc)})
        return EXIT_CONFIG
    except Exception as exc:  # noqa: BLE001 - report anything a workload raises while building
        _report(chan, cfg, {"type": "error", "fatal": True, "traceback": traceback.format_exc(limit=4),
                            "reason": f"building workload {cfg['workload']['label']!r} failed: "
                                      f"{type(exc).__name__}: {exc}"})
        return EXIT_CONFIG
    link: NodeBucket | Throttled | None = None
    info = {"build_s": time.perf_counter() - t0, "pid": os.getpid(), **(startup or {})}
    try:
        link = node_budget(cfg)
        task = PSTask(chan, cfg, workload, link)
        if sec["role"] == "server":
            return ParameterServer(task).run(info)
        return PSWorker(task).run(info)
    except (GateConfigError, WorkloadError) as exc:  # a configuration mistake: restarting cannot help
        _report(chan, cfg, {"type": "error", "fatal": True, "reason": f"worker {sec['index']}: {exc}"})
        return EXIT_CONFIG
    except Exception as exc:  # noqa: BLE001 - a crash: report it, let the backend restart from checkpoint
        traceback.print_exc()
        if isinstance(exc, (PeerGone, PeerLost)):
            # a consequence of another task's death: give the backend time to see that death first,
            # so the job's failure reason names the task that died, not its peers
            time.sleep(PEER_LOSS_DELAY_S)
        _report(chan, cfg, {"type": "error", "fatal": False, "reason": f"{sec['role']} {sec['index']}: "
                            f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=6)})
        return EXIT_FAIL
    finally:
        if isinstance(link, NodeBucket):
            link.close()
        elif link is not None:
            link.target.close()
        chan.close()


def _report(chan: Channel, cfg: dict[str, Any], msg: dict[str, Any]) -> None:
    msg.setdefault("rank", cfg["rank"])
    try:
        chan.send(msg)
    except ChannelClosed:
        pass
