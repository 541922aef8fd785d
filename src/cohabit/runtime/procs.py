"""The OS processes behind local tasks: their records, spawning, log tails and clean stopping.

A task is one ``python -m cohabit.runtime.worker`` process linked to the backend by a socketpair
(:class:`~.channel.Channel`); :class:`Run` is one job's launch (its tasks, restart timer, last
iteration time). Used by :class:`~.local.LocalBackend`, its Ray subclass and the pack host.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.ledger import Allocation
from ..spec.job import JobSpec
from .channel import Channel
from .workloads import WorkloadConfig

LOG_TAIL = 6


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def describe_exit(rc: int | None) -> str:
    if rc is None:
        return "stopped responding"
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


@dataclass
class Task:
    rank: int
    node: int
    proc: subprocess.Popen[bytes]
    chan: Channel
    log_path: Path
    done: bool = False  # sent "finished" or "halted"
    error: str | None = None
    fatal: bool = False


@dataclass
class Spare:
    kind: str  # "numpy" | "torch": what it has imported already
    proc: subprocess.Popen[bytes]
    sock: socket.socket
    log_path: Path


@dataclass
class Run:
    spec: JobSpec
    alloc: Allocation
    config: WorkloadConfig
    tasks: list[Task] = field(default_factory=list)
    launched: float = 0.0
    restart_at: float | None = None
    last_iter_time: float | None = None
    first_progress: bool = False

    @property
    def is_ps(self) -> bool:
        return self.spec.architecture == "ps"


def safe_name(job: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in job)[:80] or "job"


def log_tail(path: Path, n: int = LOG_TAIL) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    lines = [ln for ln in lines if not ln.startswith("--- ")]
    return " | ".join(lines[-n:])


def thread_env(threads: int) -> dict[str, str]:
    """This process's environment for a task running ``threads`` BLAS / torch threads."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        env[var] = str(threads)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def spawn_worker(python: str, env: dict[str, str], log_path: Path, header: str, *args: str) -> tuple[
        subprocess.Popen[bytes], socket.socket]:
    """Start ``python -m cohabit.runtime.worker`` in its own session, output appended to ``log_path``
    after a ``--- header`` line; returns the process and the backend's end of its control socket."""
    mine, theirs = socket.socketpair()
    with open(log_path, "ab") as log:
        log.write(f"--- {header}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            [python, "-m", "cohabit.runtime.worker", "--fd", str(theirs.fileno()), *args],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=env, start_new_session=True,
        )
    theirs.close()
    return proc, mine


def kill_tasks(tasks: list[Task], grace: float = 2.0) -> None:
    """Make sure every process of ``tasks`` is gone (SIGTERM, then SIGKILL after ``grace``) and close
    their channels."""
    for t in tasks:
        if t.proc.poll() is None:
            try:
                t.proc.terminate()
            except OSError:
                pass
    deadline = time.monotonic() + grace
    for t in tasks:
        try:
            t.proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            try:
                t.proc.kill()
                t.proc.wait(timeout=5.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        t.chan.close()


class SparePool:
    """Idle workers that have already imported a kind's modules ("numpy" or "torch"), one per kind."""

    def __init__(self) -> None:
        self._pools: dict[str, list[Spare]] = {}

    def has(self, kind: str) -> bool:
        return bool(self._pools.get(kind))

    def pids(self, kind: str) -> list[int]:
        """Process ids of the idle spares of ``kind``."""
        return [sp.proc.pid for sp in self._pools.get(kind, [])]

    def add(self, spare: Spare) -> None:
        self._pools.setdefault(spare.kind, []).append(spare)

    def take(self, kind: str) -> Spare | None:
        """A live spare of ``kind`` (dead ones are dropped), or None."""
        pool = self._pools.get(kind, [])
        while pool:
            sp = pool.pop()
            if sp.proc.poll() is None:
                return sp
            sp.sock.close()
        return None

    def close(self) -> None:
        """Stop every spare (a spare exits when its socket closes; killed if it does not)."""
        for pool in self._pools.values():
            for sp in pool:
                sp.sock.close()
                if sp.proc.poll() is None:
                    try:
                        sp.proc.kill()
                    except OSError:
                        pass
                try:
                    sp.proc.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    pass
        self._pools.clear()
