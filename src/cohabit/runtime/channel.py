"""JSON-lines messages over a stream socket (the backend <-> task process link).

One :class:`Channel` wraps one connected socket (an ``AF_UNIX`` socketpair
end passed to the task process). Messages are JSON objects, one per line.
``recv_ready`` never blocks: it reads what the kernel has and returns the
complete messages; ``closed`` becomes true at end of file (the peer exited or
closed its end), which is how the backend learns a task died.
"""

from __future__ import annotations

import json
import math
import socket
import time
from typing import Any


class ChannelClosed(ConnectionError):
    """The other end went away."""


def _clean(obj: Any) -> Any:
    """JSON has no NaN/inf: send them as null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(False)
        self._buf = bytearray()
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, msg: dict[str, Any]) -> None:
        """Send one message (blocking until written); ChannelClosed if the peer is gone."""
        data = json.dumps(_clean(msg), separators=(",", ":"), allow_nan=False).encode() + b"\n"
        view = memoryview(data)
        while view:
            try:
                n = self.sock.send(view)
            except BlockingIOError:
                time.sleep(0.001)
                continue
            except OSError as exc:
                self.closed = True
                raise ChannelClosed(str(exc)) from None
            view = view[n:]

    def recv_ready(self) -> list[dict[str, Any]]:
        """Complete messages available now (possibly none); sets ``closed`` at end of file."""
        while not self.closed:
            try:
                chunk = self.sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.closed = True
                break
            if not chunk:
                self.closed = True
                break
            self._buf += chunk
        out = []
        while True:
            i = self._buf.find(b"\n")
            if i < 0:
                break
            line = bytes(self._buf[:i])
            del self._buf[:i + 1]
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    out.append({"type": "garbled", "line": line[:200].decode(errors="replace")})
        return out

    def recv(self, timeout: float) -> dict[str, Any]:
        """The next message, waiting up to ``timeout`` seconds; TimeoutError or ChannelClosed otherwise."""
        import select

        deadline = time.monotonic() + timeout
        pending: list[dict[str, Any]] = []
        while True:
            pending = self.recv_ready()
            if pending:
                # put back all but the first
                rest = b"".join(json.dumps(m).encode() + b"\n" for m in pending[1:])
                self._buf[:0] = rest
                return pending[0]
            if self.closed:
                raise ChannelClosed("peer closed the channel")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no message within {timeout:g} s")
            select.select([self.sock], [], [], left)

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
