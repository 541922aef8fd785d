"""Per-node bandwidth budget shared by every process of a logical node: a token bucket in a file.

Each logical node ``i`` of the LocalBackend gets one small file
(``<net_dir>/node-<i>.bucket``) holding a single float64: the monotonic time
at which the node's link is free again (a "virtual finish time" bucket). A
process about to move ``n`` bytes across node ``i``'s link takes an exclusive
``flock`` on the file, reserves ``n / rate`` seconds after
``max(now - burst, free_at)``, writes the new ``free_at``, releases the lock
and sleeps until its reservation ends. Every byte a PS task sends to or
receives from a task on another node is charged to its own node, so ALL
parameter-server traffic leaving or entering a node — of every job placed
there — shares that node's budget, and contention between co-located jobs is
real (one job's transfers push the other's reservations back).

Why a shared-file bucket rather than a relay process acting as the node's
NIC: it adds no extra hop or copy and no extra process competing for the
few cores of this machine, it needs nothing to be started or stopped, and a
task that dies holds no state (the kernel drops its lock). ``CLOCK_MONOTONIC``
(``time.monotonic``) is system-wide on Linux, so reservations written by
different processes compare correctly.

Traffic between two tasks on the same logical node is not charged (it would
not cross a NIC in a real cluster). Rates are bytes per second; a node with
no rate (``None`` or ``<= 0``) is unlimited.
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
from pathlib import Path

_SLOT = struct.Struct("d")


class NodeBucket:
    """The shared bucket of one logical node (see the module docstring).

    ``bytes_per_s``: the node's bandwidth; ``burst_s``: how much idle time may
    be banked (a burst of ``burst_s * bytes_per_s`` bytes passes at once).
    """

    chunk = 1 << 14
    """Bytes a connection charges at a time (:class:`~cohabit.runtime.ps.wire.Budget`)."""

    def __init__(self, path: str | Path, bytes_per_s: float, *, burst_s: float = 0.002) -> None:
        if not bytes_per_s > 0:
            raise ValueError(f"bytes_per_s must be > 0, got {bytes_per_s!r}")
        if burst_s < 0:
            raise ValueError(f"burst_s must be >= 0, got {burst_s!r}")
        self.path = Path(path)
        self.rate = float(bytes_per_s)
        self.burst_s = float(burst_s)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        self.waited_s = 0.0  # total time this process slept for the budget

    def charge(self, n: int) -> None:
        """Reserve the link for ``n`` bytes and sleep until the reservation ends."""
        if n <= 0:
            return
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            raw = os.pread(self._fd, _SLOT.size, 0)
            free_at = _SLOT.unpack(raw)[0] if len(raw) == _SLOT.size else 0.0
            now = time.monotonic()
            done = max(now - self.burst_s, free_at) + n / self.rate
            os.pwrite(self._fd, _SLOT.pack(done), 0)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        wait = done - time.monotonic()
        if wait > 0:
            time.sleep(wait)
            self.waited_s += wait

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def bucket_path(net_dir: str | Path, node: int) -> Path:
    """Where node ``node``'s bucket lives."""
    return Path(net_dir) / f"node-{node}.bucket"


def node_rates_bytes(mbps: list[float | None]) -> list[float | None]:
    """Megabits per second per node -> bytes per second (None / <= 0: unlimited)."""
    return [None if r is None or r <= 0 else float(r) * 1e6 / 8.0 for r in mbps]
