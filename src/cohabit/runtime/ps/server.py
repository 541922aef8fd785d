"""A parameter server: holds row blocks of a job's model and applies the workers' updates (BSP).

Server ``k`` of ``S`` listens on ``127.0.0.1:<port>`` (loopback only) and
holds block ``k`` of every model array (:func:`~.parts.partition`). Workers
connect once (``hello`` with their index, node and restored iteration, which
must equal the server's, signed with the job's secret in answer to the
server's challenge: :mod:`.auth`; any other peer only loses its connection)
and then, every iteration ``t``:

* ``pull`` — the server replies with its block (encoded once per iteration);
* ``push`` — the worker's update block, its metrics and its stop flag. When
  all workers pushed ``t``, the server applies them in worker-rank order
  (:meth:`PSWorkload.apply`), moves to ``t + 1`` and answers every worker with
  an ``ack`` carrying the OR of their flags and the mean of their metrics.

Synchronous (bulk-synchronous parallel) iterations: no worker can pull
``t + 1`` before every worker pushed ``t``, since it waits for the ack.

Agreement on stopping: a worker puts the bits it was asked for (``CKPT`` for a
checkpoint, ``STOP`` for a halt) in its push; every worker sends the same
flag to every server, so all servers compute the same OR and all tasks act on
it at the same boundary. With ``CKPT`` (or at the last iteration) the server
saves its block (:mod:`.parts`) BEFORE acking, so a worker that saw the ack
knows the servers' parts exist. After ``STOP`` or the last iteration the
server keeps answering pulls (worker 0 evaluates the final model) and exits
once every worker closed its connection, reporting ``halted`` or
``finished``. A worker that disconnects at any other time is a failure: the
server exits non-zero and the backend restarts the job from its checkpoint.
"""

from __future__ import annotations

import selectors
import socket
from typing import Any

import numpy as np

from .auth import Rejected, accept_hello
from .parts import Arrays, assemble, partition, restore_point, save_part
from .task import CKPT, EXIT_OK, STOP, PeerLost, PSTask
from .wire import Conn, PeerGone, decode, encode


class ParameterServer:
    """One server task (see the module docstring)."""

    def __init__(self, task: PSTask) -> None:
        self.t = task
        self.index = int(task.sec["index"])
        self.conns: dict[int, Conn] = {}
        self.pending: dict[int, Arrays] = {}
        self.metrics: dict[int, dict[str, float]] = {}
        self.flag = 0
        self.ending: str | None = None  # "halted" | "finished" once the workers agreed to stop
        self._pull_reply: bytes | None = None

    def _restore(self) -> tuple[int, Arrays]:
        t, S = self.t, self.t.n_servers
        rp = restore_point(t.parts()) if t.cfg["from_checkpoint"] else None
        if rp is None:
            return 0, partition(t.workload.init_model(), S)[self.index]
        blocks = rp.servers() if rp.n_servers == S else partition(assemble(rp.servers()), S)
        return rp.iteration, blocks[self.index]

    def run(self, info: dict[str, Any]) -> int:
        t = self.t
        listener = socket.create_server(("127.0.0.1", int(t.sec["port"])), backlog=max(8, t.n_workers))
        self.iteration, block = self._restore()
        self.part = {k: np.array(v, dtype=np.float64) for k, v in block.items()}
        self.total = t.workload.total_iterations
        t.send({"type": "ready", "iteration": self.iteration, "total": self.total, "restored_iteration":
                self.iteration if t.cfg["from_checkpoint"] else None, **info})
        sel = selectors.DefaultSelector()
        sel.register(listener, selectors.EVENT_READ, "listen")
        sel.register(t.chan, selectors.EVENT_READ, "control")
        try:
            while not (self.ending and not self.conns):
                for key, _ in sel.select(timeout=1.0):
                    if key.data == "listen":
                        self._accept(listener, sel)
                    elif key.data == "control":
                        t.control()  # halts reach the servers through the workers' flags
                        if t.chan.closed:
                            return EXIT_OK  # the scheduler went away
                    else:
                        self._serve(int(key.data), sel)
        finally:
            sel.close()
            listener.close()
            for c in self.conns.values():
                c.close()
        t.send({"type": self.ending, "iteration": self.iteration, "iterations": self.iteration})
        return EXIT_OK

    def _accept(self, listener: socket.socket, sel: selectors.BaseSelector) -> None:
        sock, _ = listener.accept()
        conn = Conn(sock)
        try:  # a peer without the job's secret, or a malformed frame, loses its connection; nothing else
            hello = accept_hello(conn, str(self.t.sec["secret"]))
            w = hello["worker"]
            if not 0 <= w < self.t.n_workers or w in self.conns:
                raise Rejected(f"worker index {w} out of range or already connected")
        except Rejected as exc:
            conn.close()
            print(f"server {self.index}: refused a connection: {exc}", flush=True)  # to the task log
            return
        if int(hello["iteration"]) != self.iteration:
            raise RuntimeError(f"server {self.index} restored iteration {self.iteration} but worker {w} "
                               f"restored {hello['iteration']}: inconsistent checkpoint")
        conn.link = self.t.link_to(int(hello["node"]))
        self.conns[w] = conn
        sel.register(conn, selectors.EVENT_READ, w)

    def _serve(self, w: int, sel: selectors.BaseSelector) -> None:
        conn = self.conns[w]
        try:
            raw, hl = conn.recv()
        except PeerGone:
            sel.unregister(conn)
            conn.close()
            del self.conns[w]
            if self.ending is None:
                raise PeerLost(f"server {self.index}: worker {w} went away at iteration "
                                   f"{self.iteration}") from None
            return
        header, arrays = decode(raw, hl)
        kind = header.get("type")
        if kind == "pull":
            if self._pull_reply is None:
                self._pull_reply = encode({"type": "model", "iteration": self.iteration}, self.part)
            conn.send(self._pull_reply)
        elif kind == "push":
            if int(header["iteration"]) != self.iteration or self.ending is not None:
                raise RuntimeError(f"server {self.index}: worker {w} pushed iteration {header['iteration']}, "
                                   f"server is at {self.iteration}")
            self.pending[w] = arrays
            self.metrics[w] = header.get("metrics") or {}
            self.flag |= int(header.get("flag", 0))
            if len(self.pending) == self.t.n_workers:
                self._apply()
        else:
            raise RuntimeError(f"server {self.index}: unknown message {kind!r} from worker {w}")

    def _apply(self) -> None:
        t, n = self.t, self.t.n_workers
        self.part = t.workload.apply(self.part, [self.pending[r] for r in range(n)], self.iteration)
        self.iteration += 1
        self._pull_reply = None
        flag, self.flag = self.flag, 0
        names = set().union(*(m.keys() for m in self.metrics.values()))
        mean = {k: float(np.mean([self.metrics[r][k] for r in range(n) if k in self.metrics[r]])) for k in names}
        last = self.iteration >= self.total
        if flag & CKPT or last:
            save_part(t.parts(), "server", self.index, {"model": self.part}, iteration=self.iteration,
                      n_workers=n, n_servers=t.n_servers)
        ack = encode({"type": "ack", "iteration": self.iteration, "flag": flag, "metrics": mean})
        for r in range(n):
            self.conns[r].send(ack)
        self.pending.clear()
        self.metrics.clear()
        if last:
            self.ending = "finished"
        elif flag & STOP:
            self.ending = "halted"
