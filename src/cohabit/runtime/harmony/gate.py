"""``HarmonyGate``: the client a parameter-server worker uses to run its subtasks through Harmony's queues.

``make_gate({"kind": "harmony", "socket": PATH, "world": W, "incarnation": I}, job=, rank=, node=)``
(:mod:`cohabit.runtime.subtask`) builds one. ``with gate.subtask(kind):`` blocks
until the synchronizer has released this worker's next subtask and the node's
CPU or network queue starts it (Lee et al., §IV-A), then runs the body and
reports the end. ``gate.throttle(n)`` draws ``n`` bytes from the node's link
(a COMM subtask's transport calls it per chunk; the secondary COMM subtask
yields to the primary there; ``link_rate``, in bytes/s, gives the node a link
when the server has none: a real PS worker passes its node's budget, see
:mod:`cohabit.runtime.ps.task`). ``spent`` holds seconds inside subtask bodies per
kind (what the worker reports as ``compute_s`` / ``comm_s``: queueing is not
work), ``waited`` the seconds spent queueing.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..subtask import GateConfigError, SubtaskKind


class HarmonyProtocolError(RuntimeError):
    """The node-queue server refused a request or went away."""


class LineClient:
    """A blocking JSON-lines request/reply connection to the node-queue server's unix socket."""

    def __init__(self, path: str, timeout: float | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as exc:
            self.sock.close()
            raise HarmonyProtocolError(f"cannot reach the Harmony node-queue server at {path!r}: {exc}") from None
        self._r = self.sock.makefile("rb")

    def send(self, msg: dict[str, Any]) -> None:
        try:
            self.sock.sendall(json.dumps(msg).encode() + b"\n")
        except OSError as exc:
            raise HarmonyProtocolError(f"node-queue server went away: {exc}") from None

    def ask(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.send(msg)
        line = self._r.readline()
        if not line:
            raise HarmonyProtocolError(f"node-queue server closed the connection after {msg.get('op')!r}")
        reply: dict[str, Any] = json.loads(line)
        if not reply.get("ok"):
            raise HarmonyProtocolError(f"node-queue server refused {msg.get('op')!r}: {reply.get('error')}")
        return reply

    def close(self) -> None:
        try:
            self._r.close()
            self.sock.close()
        except OSError:
            pass


class HarmonyGate:
    """One worker's connection to its node's queues and the job's synchronizer."""

    def __init__(self, *, job: str, rank: int, node: int, socket: str, world: int, incarnation: int = 0,
                 connect_timeout: float = 10.0, link_rate: float | None = None) -> None:
        if not isinstance(world, int) or world < 1:
            raise GateConfigError(f"subtask_gate.world: expected an integer >= 1, got {world!r}")
        if not isinstance(socket, str) or not socket:
            raise GateConfigError(f"subtask_gate.socket: expected the server's unix socket path, got {socket!r}")
        self.job, self.rank, self.node = job, rank, node
        self._c = LineClient(socket, timeout=connect_timeout)
        self._c.sock.settimeout(None)
        self._c.ask({"op": "hello", "job": f"{job}#{incarnation}", "rank": rank, "node": node, "world": world,
                     "link_rate": link_rate})
        self.spent: dict[SubtaskKind, float] = {k: 0.0 for k in SubtaskKind}
        self.waited: dict[SubtaskKind, float] = {k: 0.0 for k in SubtaskKind}
        self.roles: dict[str, int] = {}

    @contextmanager
    def subtask(self, kind: SubtaskKind) -> Iterator[None]:
        t0 = time.perf_counter()
        reply = self._c.ask({"op": "begin", "kind": SubtaskKind(kind).value})
        t1 = time.perf_counter()
        self.waited[kind] += t1 - t0
        self.roles[reply["role"]] = self.roles.get(reply["role"], 0) + 1
        try:
            yield
        finally:
            self.spent[kind] += time.perf_counter() - t1
            self._c.send({"op": "end"})

    def throttle(self, nbytes: int) -> None:
        """Draw ``nbytes`` from the node's link (priority to the primary COMM subtask)."""
        self._c.ask({"op": "take", "n": int(nbytes)})

    def close(self) -> None:
        self._c.close()


class LinkClient:
    """Draws bytes from a node's link without joining Harmony's queues (jobs outside pipelined groups)."""

    def __init__(self, path: str, node: int, link_rate: float | None = None) -> None:
        self._c = LineClient(path, timeout=10.0)
        self._c.sock.settimeout(None)
        self._c.ask({"op": "link", "node": node, "link_rate": link_rate})

    def throttle(self, nbytes: int) -> None:
        self._c.ask({"op": "take", "n": int(nbytes)})

    def barrier(self, job: str, world: int, round: int) -> None:
        """Wait until ``world`` workers of ``job`` reached ``round`` (a BSP iteration boundary)."""
        self._c.ask({"op": "barrier", "job": job, "world": world, "round": round})

    def close(self) -> None:
        self._c.close()
