"""A parameter-server worker: PULL the model blocks, COMPute an update on its shard, PUSH it.

Each iteration is three subtasks, each wrapped in the job's subtask gate
(:func:`cohabit.runtime.subtask.make_gate`, from the ``subtask_gate`` key of
the task configuration; no coordination by default) so that Harmony can
order them across co-located jobs (Lee et al., Sec. 4.1). (De)serialisation
(:func:`~.wire.encode` / :func:`~.wire.decode`, splitting and assembling the
blocks) runs OUTSIDE the PULL and PUSH blocks; the COMP block holds only
:meth:`PSWorkload.compute`. The push includes waiting for the servers' ack,
i.e. the BSP barrier (see :mod:`.server`).

Telemetry (``progress``, every ``report_interval`` s after a first report
once three iterations are done): ``iter_time`` (wall time per iteration),
``compute_s`` (time inside COMP), ``comm_s`` (time inside PULL + PUSH), both
read from the gate's ``spent`` counters: the time after the gate admitted the
subtask, so that waiting in Harmony's queues is not taken for work (the
profiles Harmony groups jobs by, Lee et al. Sec. 5, are COMP and COMM times
measured alone); ``loss`` (the
mean over the workers, as returned in the servers' acks), ``net_bytes_s``
(bytes this worker sent and received per second; ``net_remote_bytes_s``: those
with servers on other nodes, which cross node links), resident memory and the
iteration of the newest checkpoint; with the ``spill`` option (:mod:`.spilling`)
also ``alpha`` and the spill's resident input, reload volume and stall time,
and ``alpha: auto`` takes one hill-climbing step per report. Worker 0 asks for a checkpoint every
``checkpoint_interval`` seconds; every worker saves its part (position and
local state) at each agreed checkpoint boundary, after the servers saved
theirs. At the end worker 0 pulls the final model and evaluates it.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from ..subtask import SubtaskKind, make_gate
from ..worker import rss_mb
from .auth import answer
from .parts import Arrays, assemble, partition, restore_point, save_part
from .spilling import WorkerSpill
from .task import CKPT, EXIT_OK, STOP, PSTask, via_harmony
from .wire import Conn, Throttled, decode, encode

CONNECT_TIMEOUT_S = 30.0


class _Window:
    """Per-iteration times accumulated between two progress reports."""

    def __init__(self, now: float, counts: tuple[int, int]) -> None:
        self.start, (self.bytes0, self.remote0) = now, counts
        self.steps, self.compute, self.comm = 0, 0.0, 0.0
        self.losses: list[float] = []

    def report(self, now: float, counts: tuple[int, int]) -> dict[str, Any]:
        wall = now - self.start
        out: dict[str, Any] = {"iter_time": wall / self.steps, "compute_s": self.compute / self.steps,
                               "comm_s": self.comm / self.steps, "net_bytes_s": (counts[0] - self.bytes0) / wall,
                               "net_remote_bytes_s": (counts[1] - self.remote0) / wall}
        if self.losses:
            out["loss"] = sum(self.losses) / len(self.losses)
        return out


class PSWorker:
    """One worker task (see the module docstring)."""

    def __init__(self, task: PSTask) -> None:
        self.t = task
        self.index = int(task.sec["index"])
        self.conns: list[Conn] = []
        self.remote: list[bool] = []  # per connection: is its server on another node
        self.gate = make_gate(task.cfg.get("subtask_gate"), job=task.job, rank=self.index, node=task.node,
                              link_rate=task.rate)
        if via_harmony(task.cfg):
            task.link = Throttled(self.gate)  # the gate's link is the node's budget (see .task)
        self.last_ckpt: int | None = None
        self.spill: WorkerSpill | None = None

    @property
    def byte_counts(self) -> tuple[int, int]:
        """Bytes sent and received so far: in all, and with servers on other nodes."""
        moved = [c.sent + c.received for c in self.conns]
        return sum(moved), sum(b for b, far in zip(moved, self.remote) if far)

    def _connect(self) -> None:
        w = self.t.workload
        hello = {"type": "hello", "worker": self.index, "node": self.t.node, "iteration": w.iteration}
        for port, node in self.t.sec["servers"]:
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            while True:
                try:
                    sock = socket.create_connection(("127.0.0.1", int(port)), timeout=CONNECT_TIMEOUT_S)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"worker {self.index}: no server on 127.0.0.1:{port} after "
                                           f"{CONNECT_TIMEOUT_S:g} s") from None
                    time.sleep(0.02)
            sock.settimeout(None)
            conn = Conn(sock, self.t.link_to(int(node)))
            self.remote.append(int(node) != self.t.node)
            answer(conn, str(self.t.sec["secret"]), hello)
            self.conns.append(conn)

    def _pull(self) -> Arrays:
        req = encode({"type": "pull", "iteration": self.t.workload.iteration})
        with self.gate.subtask(SubtaskKind.PULL):
            for c in self.conns:
                c.send(req)
            raws = [c.recv() for c in self.conns]
        return assemble([decode(raw, hl)[1] for raw, hl in raws])

    def _save(self) -> float:
        t0 = time.perf_counter()
        w = self.t.workload
        save_part(self.t.parts(), "worker", self.index, {"local": w.local_state()}, iteration=w.iteration,
                  n_workers=self.t.n_workers, n_servers=self.t.n_servers)
        self.last_ckpt = w.iteration
        return time.perf_counter() - t0

    def run(self, info: dict[str, Any]) -> int:
        t, w = self.t, self.t.workload
        restored = None
        if t.cfg["from_checkpoint"]:
            rp = restore_point(t.parts())
            if rp is not None:
                w.iteration = restored = self.last_ckpt = rp.iteration
                w.load_local_states(rp.workers())
            else:
                info = {**info, "from_scratch": True}
        opt = getattr(w, "spill_option", None)
        if opt is not None:
            self.spill = WorkerSpill(w, opt, t.parts().root.parent / "spill" / f"worker-{self.index}")
        self._connect()
        t.send({"type": "ready", "iteration": w.iteration, "total": w.total_iterations,
                "restored_iteration": restored, **info})
        try:
            return self._loop()
        finally:
            self.gate.close()
            for c in self.conns:
                c.close()
            self._drop_spill()

    def _drop_spill(self) -> None:
        """Remove the spilled blocks (before the last message: the backend may kill the process after it)."""
        if self.spill is not None:
            self.spill.close()
            self.spill = None

    def _loop(self) -> int:
        t, w = self.t, self.t.workload
        report_every, ckpt_every = float(t.cfg["report_interval"]), float(t.cfg["checkpoint_interval"])
        win: _Window | None = None  # None during the first (warm-up) iteration
        first_report, last_ckpt = True, time.perf_counter()
        latest: dict[str, float] = {}
        while True:
            flag = t.control()
            if self.index == 0 and ckpt_every > 0 and time.perf_counter() - last_ckpt >= ckpt_every:
                flag |= CKPT
            before = dict(self.gate.spent)
            model = self._pull()
            with self.gate.subtask(SubtaskKind.COMP):
                update, metrics = w.compute(model)
            msgs = [encode({"type": "push", "iteration": w.iteration, "flag": flag, "metrics": metrics}, blk)
                    for blk in partition(update, t.n_servers)]
            with self.gate.subtask(SubtaskKind.PUSH):
                for c, m in zip(self.conns, msgs, strict=True):
                    c.send(m)
                acks = [c.recv() for c in self.conns]
            inside = {k: v - before[k] for k, v in self.gate.spent.items()}
            ack, _ = decode(*acks[0])
            agreed = int(ack["flag"])
            w.iteration = int(ack["iteration"])
            if agreed & CKPT or w.done:
                self._save()
                last_ckpt = time.perf_counter()
            if self.index == 0 and (w.iteration % w.iters_per_epoch == 0 or w.done):
                w.observe(model)
                latest.update(w.evaluate())
                latest["epoch"] = w.iteration / w.iters_per_epoch
            if w.done:
                return self._finish(latest, ack.get("metrics") or {})
            if agreed & STOP:
                self._drop_spill()
                t.send({"type": "halted", "iteration": w.iteration, "checkpoint_seq": self.last_ckpt})
                return EXIT_OK
            if win is None:
                win = _Window(time.perf_counter(), self.byte_counts)
                continue
            win.steps += 1
            win.compute += inside[SubtaskKind.COMP]
            win.comm += inside[SubtaskKind.PULL] + inside[SubtaskKind.PUSH]
            if "loss" in (ack.get("metrics") or {}):
                win.losses.append(float(ack["metrics"]["loss"]))
            now = time.perf_counter()
            if now - win.start >= report_every or (first_report and win.steps >= 3 and now - win.start >= 0.1):
                rep = win.report(now, self.byte_counts)
                metrics = dict(latest)
                if "loss" in rep:
                    metrics["loss"] = rep.pop("loss")
                if self.spill is not None:
                    rep.update(self.spill.report())
                    self.spill.observe(rep["iter_time"])
                t.send({"type": "progress", "iterations": w.iteration, "total": w.total_iterations, **rep,
                        "metrics": metrics, "mem_mb": rss_mb(), "checkpoint_iteration": self.last_ckpt})
                win = _Window(now, self.byte_counts)
                first_report = False

    def _finish(self, latest: dict[str, float], last: dict[str, float]) -> int:
        t, w = self.t, self.t.workload
        metrics = dict(latest)
        if self.index == 0:
            w.observe(self._pull_final())
            metrics.update(w.evaluate())
        if "loss" in last:
            metrics["loss"] = float(last["loss"])
        self._drop_spill()
        t.send({"type": "finished", "iterations": w.iteration, "metrics": metrics, "mem_mb": rss_mb(),
                "checkpoint_seq": self.last_ckpt})
        return EXIT_OK

    def _pull_final(self) -> Arrays:
        """The final model (not a training subtask: no gate)."""
        req = encode({"type": "pull", "iteration": self.t.workload.iteration})
        for c in self.conns:
            c.send(req)
        return assemble([decode(*c.recv())[1] for c in self.conns])
