"""Starting and stopping the Harmony node-queue server (:mod:`.server`) as a child process, by pid."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .gate import LineClient


class HarmonyService:
    """One node-queue server for ``n_nodes`` logical nodes, on a unix socket under ``root``.

    ``link_mbps``: each node's network budget in MB/s for COMM subtasks that draw from it
    (``gate.throttle``); ``None`` for no link. ``hold_s``: how long a node queue waits for an
    earlier-released subtask that has not arrived (:class:`~.queues.NodeQueues`). Use as a context manager or call :meth:`stop`.
    """

    def __init__(self, n_nodes: int, *, link_mbps: float | None = None, hold_s: float = 0.05,
                 root: str | Path | None = None, python: str = sys.executable,
                 env: dict[str, str] | None = None) -> None:
        if n_nodes < 1:
            raise ValueError(f"n_nodes must be >= 1, got {n_nodes!r}")
        if link_mbps is not None and not link_mbps > 0:
            raise ValueError(f"link_mbps must be > 0 or None, got {link_mbps!r}")
        self._tmp = tempfile.mkdtemp(prefix="cohabit-harmony-", dir=root)
        self.socket = os.path.join(self._tmp, "queues.sock")
        if hold_s < 0:
            raise ValueError(f"hold_s must be >= 0, got {hold_s!r}")
        cmd = [python, "-m", "cohabit.runtime.harmony.server", "--socket", self.socket, "--nodes", str(n_nodes),
               "--hold-s", repr(float(hold_s))]
        if link_mbps is not None:
            cmd += ["--link-mbps", repr(float(link_mbps))]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.stop()
            raise RuntimeError(f"Harmony node-queue server did not start (exit {self.proc.poll()}, said {line!r})")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stats(self) -> dict[str, Any]:
        """Per node: busy seconds of the CPU and network queues, their overlap, subtasks started, link bytes."""
        c = LineClient(self.socket, timeout=10.0)
        try:
            return c.ask({"op": "stats"})["nodes"]  # type: ignore[no-any-return]
        finally:
            c.close()

    def gate_config(self, world: int, incarnation: int) -> dict[str, Any]:
        """The ``subtask_gate`` entry of a worker configuration for this server."""
        return {"kind": "harmony", "socket": self.socket, "world": world, "incarnation": incarnation}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5.0)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        for p in (self.socket, self._tmp):
            try:
                os.rmdir(p) if p == self._tmp else os.unlink(p)
            except OSError:
                pass

    def __enter__(self) -> HarmonyService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
