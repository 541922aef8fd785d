"""The Harmony node-queue server: the subtask synchronizer and every logical node's queues and link.

One server process (``python -m cohabit.runtime.harmony.server``) listens on a
unix socket and serves all the logical nodes of a LocalBackend; Harmony groups
hold whole machines, so the queues of node ``n`` only ever see the jobs of the
group holding ``n``. Each worker's gate (:mod:`.gate`) holds one connection,
served by its own thread; all state sits behind one lock and one condition
variable. The synchronizer spans nodes (a job's workers sit on several), the
queues and links are per node.

Protocol: JSON objects, one per line, client -> server (replies marked ->):

* ``{"op": "hello", "job", "rank", "node", "world"[, "link_rate"]}`` -> ``{"ok": true}``: a worker joins.
* ``{"op": "link", "node"[, "link_rate"]}`` -> ``{"ok": true}``: a link-only client (a PS server, or a job
  outside any group).

``link_rate`` (bytes/s) gives the node a link when the server was started without
one (``--link-mbps``): real PS tasks bring their node's budget (the LocalBackend's
``bandwidth_mbps``), so that the node's PS traffic has ONE budget, this link,
instead of the per-node file bucket of :mod:`cohabit.runtime.ps.netlimit`. A rate
different from the node's existing link is refused.
* ``{"op": "begin", "kind"}`` -> ``{"ok": true, "seq", "role", "wait_s"}`` once the subtask may run.
* ``{"op": "end"}`` (no reply): the running subtask finished.
* ``{"op": "take", "n"}`` -> ``{"ok": true}`` once ``n`` bytes went through the node's link.
* ``{"op": "barrier", "job", "world", "round"}`` -> ``{"ok": true}`` once ``world`` callers reached ``round``.
* ``{"op": "stats"}`` -> ``{"ok": true, "nodes": {...}}``.
* end of file: the worker left (finished, paused, moved or died).

A protocol error is answered ``{"ok": false, "error": ...}`` and the connection closed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socketserver
import threading
import time
from collections.abc import Callable
from typing import Any

from ..subtask import SubtaskKind
from .queues import NodeLink, NodeQueues, Ticket
from .sync import SubtaskSynchronizer, SyncError


CHUNK = 1 << 18
"""Bytes a transfer draws from its node's link at a time (the granularity at which a secondary yields)."""


class HarmonyState:
    """Synchronizer + node queues + links behind one condition variable."""

    def __init__(self, n_nodes: int, link_rate: float | None, hold_s: float = 0.05) -> None:
        if n_nodes < 1:
            raise ValueError(f"n_nodes must be >= 1, got {n_nodes!r}")
        self.cv = threading.Condition()
        self.sync = SubtaskSynchronizer()
        self.nodes = [NodeQueues(n, hold_s=hold_s) for n in range(n_nodes)]
        self.links: list[NodeLink | None] = [NodeLink(link_rate) if link_rate else None for _ in range(n_nodes)]
        self.where: dict[tuple[str, int], int] = {}
        self.barriers: dict[tuple[str, int], int] = {}

    def _dispatch(self) -> None:
        """Tell each node which released subtasks to expect; wake every waiter."""
        now = time.monotonic()
        for job, _step, seq, members in self.sync.releases:
            for r in members:
                n = self.where.get((job, r))
                if n is not None:
                    self.nodes[n].expect(job, r, seq, now)
        self.sync.releases.clear()
        self.cv.notify_all()

    def ensure_link(self, node: int, rate: Any) -> None:
        """Give ``node`` a link of ``rate`` bytes/s unless it has one (which must have that rate)."""
        if rate is None:
            return
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
            raise SyncError(f"link_rate must be a number of bytes/s > 0, got {rate!r}")
        with self.cv:
            link = self.links[self.node(node).node]
            if link is None:
                self.links[node] = NodeLink(float(rate))
            elif not math.isclose(link.rate, float(rate), rel_tol=1e-9):
                raise SyncError(f"node {node}'s link runs at {link.rate:g} bytes/s, a client says {rate!r}")

    def join(self, job: str, rank: int, node: int, world: int) -> None:
        with self.cv:
            self.node(node)
            self.sync.join(job, rank, world)
            self.where[(job, rank)] = node
            self._dispatch()

    def node(self, n: Any) -> NodeQueues:
        if not isinstance(n, int) or not 0 <= n < len(self.nodes):
            raise SyncError(f"node must be an integer in [0, {len(self.nodes)}), got {n!r}")
        return self.nodes[n]

    def begin(self, job: str, rank: int, node: int, step: int, kind: SubtaskKind) -> Ticket:
        """Block until subtask ``step`` of this worker is released and its node queue starts it."""
        with self.cv:
            while (seq := self.sync.release_seq(job, rank, step, kind.value)) is None:
                self.cv.wait()
            t = Ticket(job, rank, kind, seq)
            for q in self.nodes:
                q.learn_kind(job, seq, kind.is_comm)
            q = self.nodes[node]
            q.enqueue(t)
            self.cv.notify_all()
            while not q.try_start(t, time.monotonic()):
                h = q.hold(t, time.monotonic())
                self.cv.wait(h if 0 < h < math.inf else None)
            return t

    def end(self, job: str, rank: int, node: int, step: int, t: Ticket) -> None:
        with self.cv:
            self.nodes[node].finish(t)
            self.sync.finished(job, rank, step)
            self._dispatch()

    def take(self, node: int, n: int, is_high: Callable[[], bool]) -> None:
        """Send ``n`` bytes through ``node``'s link, ``CHUNK`` bytes at a time (no-op without a link rate).

        ``is_high()`` says, chunk by chunk, whether the caller is the primary (a secondary promoted
        mid-transfer draws first from then on); while a primary transfer is under way, a secondary
        gets no bytes. The bytes and the seconds spent in here are added to the link's
        :attr:`~.queues.NodeLink.timed` under the caller's priority when it began (stats).
        """
        link = self.links[node]
        if link is None:
            return
        counted = False
        t0, high0 = time.monotonic(), is_high()
        with self.cv:
            try:
                left = n
                while left > 0:
                    c = min(CHUNK, left)
                    while True:
                        high = is_high()
                        if high and not counted:
                            link.high_waiting += 1
                            counted = True
                        if (wait := link.try_take(c, high)) is None:
                            break
                        self.cv.wait(wait)
                    left -= c
            finally:
                if counted:
                    link.high_waiting -= 1
                self.cv.notify_all()
            done = time.monotonic() + link.drain_time()
            while (left_s := done - time.monotonic()) > 0:
                self.cv.wait(left_s)
            link.timed[high0][0] += n
            link.timed[high0][1] += time.monotonic() - t0

    def barrier(self, job: str, world: int, round: int) -> None:
        """Block until ``world`` callers reached round ``round`` of ``job``'s barrier (BSP iterations of
        synthetic jobs, :mod:`.synthetic`; real PS jobs synchronise through their servers)."""
        with self.cv:
            key = (job, round)
            self.barriers[key] = self.barriers.get(key, 0) + 1
            self.barriers.pop((job, round - 1), None)
            self.cv.notify_all()
            while self.barriers.get(key, world) < world:
                self.cv.wait()

    def leave(self, job: str | None, rank: int, node: int, t: Ticket | None) -> None:
        with self.cv:
            if t is not None:
                self.nodes[node].finish(t)
            if job is not None:
                self.nodes[node].forget(job, rank)
                self.where.pop((job, rank), None)
                self.sync.leave(job, rank)
            self._dispatch()

    def stats(self) -> dict[str, Any]:
        with self.cv:
            out = {}
            for q in self.nodes:
                s: dict[str, Any] = dict(q.stats())
                link = self.links[q.node]
                if link is not None:
                    s["link_bytes"] = link.bytes
                    s["link_bytes_secondary"] = link.bytes_low
                    for high, name in ((True, "high"), (False, "low")):
                        s[f"take_bytes_{name}"], s[f"take_s_{name}"] = link.timed[high]
                out[str(q.node)] = s
            return out


class _Conn(socketserver.StreamRequestHandler):
    server: _Server

    def _reply(self, msg: dict[str, Any]) -> None:
        self.wfile.write(json.dumps(msg).encode() + b"\n")
        self.wfile.flush()

    def handle(self) -> None:
        st = self.server.state
        job: str | None = None
        rank, node, step = 0, 0, 0
        ticket: Ticket | None = None
        try:
            for line in self.rfile:
                msg = json.loads(line)
                op = msg.get("op")
                if op == "hello":
                    if job is not None:
                        raise SyncError("hello twice on one connection")
                    st.ensure_link(int(msg["node"]), msg.get("link_rate"))
                    st.join(str(msg["job"]), int(msg["rank"]), int(msg["node"]), int(msg["world"]))
                    job, rank, node = str(msg["job"]), int(msg["rank"]), int(msg["node"])
                    self._reply({"ok": True})
                elif op == "link":
                    node = st.node(msg["node"]).node
                    st.ensure_link(node, msg.get("link_rate"))
                    self._reply({"ok": True})
                elif op == "begin":
                    if job is None or ticket is not None:
                        raise SyncError("begin before hello, or while a subtask runs")
                    t0 = time.monotonic()
                    ticket = st.begin(job, rank, node, step, SubtaskKind(msg["kind"]))
                    self._reply({"ok": True, "seq": ticket.seq, "role": ticket.role, "wait_s": time.monotonic() - t0})
                elif op == "end":
                    if job is None or ticket is None:
                        raise SyncError("end without a running subtask")
                    st.end(job, rank, node, step, ticket)
                    ticket, step = None, step + 1
                elif op == "take":
                    t = ticket
                    st.take(node, int(msg["n"]), lambda: job is None or (t is not None and t.role == "primary"))
                    self._reply({"ok": True})
                elif op == "barrier":
                    st.barrier(str(msg["job"]), int(msg["world"]), int(msg["round"]))
                    self._reply({"ok": True})
                elif op == "stats":
                    self._reply({"ok": True, "nodes": st.stats()})
                else:
                    raise SyncError(f"unknown op {op!r}; expected hello, link, begin, end, take, barrier or stats")
        except (SyncError, ValueError, KeyError, TypeError) as exc:
            try:
                self._reply({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            except OSError:
                pass
        except OSError:
            pass
        finally:
            st.leave(job, rank, node, ticket)


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, state: HarmonyState) -> None:
        self.state = state
        super().__init__(path, _Conn)


def serve(path: str, n_nodes: int, link_rate: float | None, hold_s: float = 0.05) -> _Server:
    """Bind ``path`` and return the server (call ``serve_forever``; tests run it in a thread)."""
    if os.path.exists(path):
        os.unlink(path)
    return _Server(path, HarmonyState(n_nodes, link_rate, hold_s))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Harmony node-queue server (unix socket)")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--link-mbps", type=float, default=0.0, help="per-node link budget in MB/s (0: no link)")
    ap.add_argument("--hold-s", type=float, default=0.05, help="longest wait for an earlier-released subtask")
    args = ap.parse_args(argv)
    server = serve(args.socket, args.nodes, args.link_mbps * 1e6 if args.link_mbps > 0 else None, args.hold_s)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    print("ready", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        if os.path.exists(args.socket):
            os.unlink(args.socket)


if __name__ == "__main__":
    main()
