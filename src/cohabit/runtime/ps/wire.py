"""The PS transport: length-prefixed messages of a JSON header and raw numpy arrays over TCP.

A message is ``!II`` (header length, body length), a JSON header and a body
that concatenates the raw bytes of the arrays the header lists as
``[name, dtype, shape]``. :func:`encode` and :func:`decode` are the
(de)serialisation steps, which a worker runs OUTSIDE its PULL/PUSH subtasks
(Harmony, Sec. 4.1); :class:`Conn` only moves bytes, in chunks (the budget's
``chunk``, else ``CHUNK`` bytes), each charged to the node's bandwidth budget
when the peer is on another logical node — before sending, after receiving, so
that the sender's egress and the receiver's ingress overlap as on a real wire
— and counts the bytes it moved.

A budget is anything with ``charge(n)`` (:class:`Budget`): the node's file
bucket (:class:`~cohabit.runtime.ps.netlimit.NodeBucket`), or, on the nodes of a
Harmony pipelined group, :class:`Throttled` around the Harmony link (the
worker's gate, whose COMM subtask draws as primary or secondary, or a PS
server's link-only client): see :mod:`.task` for which one a task uses.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any, Protocol

import numpy as np

PREFIX = struct.Struct("!II")
CHUNK = 1 << 14
Arrays = dict[str, np.ndarray]


class Budget(Protocol):
    """A node's bandwidth budget as a connection sees it."""

    chunk: int
    """Bytes charged at a time (the granularity at which transfers interleave)."""

    def charge(self, n: int) -> None:
        """Return once ``n`` bytes went through the node's link."""


class Throttled:
    """A :class:`Budget` drawing from a Harmony link: ``charge(n)`` is ``target.throttle(n)``.

    ``target``: a :class:`~cohabit.runtime.harmony.gate.HarmonyGate` (a worker: its running COMM
    subtask's role decides its priority) or a :class:`~cohabit.runtime.harmony.gate.LinkClient`.
    ``chunk`` (64 KiB) bounds how long a secondary's draw can hold the link before a primary's
    next one (5 ms at 100 Mbit/s) at a few hundred round trips per second to the Harmony server.
    """

    chunk = 1 << 16

    def __init__(self, target: Any) -> None:
        self.target = target

    def charge(self, n: int) -> None:
        if n > 0:
            self.target.throttle(n)


class PeerGone(ConnectionError):
    """The other end closed the connection."""


def encode(header: dict[str, Any], arrays: Arrays | None = None) -> bytes:
    """One message: header (plus the array layout) and the arrays' bytes."""
    arrays = arrays or {}
    parts = [np.ascontiguousarray(a) for a in arrays.values()]
    meta = dict(header)
    meta["arrays"] = [[k, a.dtype.str, list(a.shape)] for k, a in zip(arrays, parts, strict=True)]
    head = json.dumps(meta, separators=(",", ":")).encode()
    body = b"".join(a.tobytes() for a in parts)
    return PREFIX.pack(len(head), len(body)) + head + body


def decode(raw: bytes, header_len: int) -> tuple[dict[str, Any], Arrays]:
    """Header and arrays of one received message (``raw`` = header bytes + body bytes)."""
    header = json.loads(raw[:header_len])
    arrays: Arrays = {}
    off = header_len
    for name, dtype, shape in header.pop("arrays", []):
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        arrays[name] = np.frombuffer(raw, dtype=dt, count=count, offset=off).reshape(shape)
        off += count * dt.itemsize
    if off != len(raw):
        raise ValueError(f"PS message: arrays take {off - header_len} body bytes, got {len(raw) - header_len}")
    return header, arrays


class Conn:
    """One TCP connection between a PS worker and a server; blocking, throttled, counted."""

    def __init__(self, sock: socket.socket, link: Budget | None = None) -> None:
        self.sock = sock
        self.sock.setblocking(True)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small acks must not wait
        self.link = link
        self.chunk = CHUNK if link is None else int(link.chunk)
        self.sent = 0
        self.received = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, data: bytes) -> None:
        """Send one encoded message."""
        view = memoryview(data)
        try:
            for i in range(0, len(view), self.chunk):
                piece = view[i:i + self.chunk]
                if self.link is not None:
                    self.link.charge(len(piece))
                self.sock.sendall(piece)
        except OSError as exc:
            raise PeerGone(f"send failed: {exc}") from None
        self.sent += len(data)

    def _read(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            try:
                k = self.sock.recv_into(view[got:got + min(self.chunk, n - got)])
            except OSError as exc:
                raise PeerGone(f"receive failed: {exc}") from None
            if k == 0:
                raise PeerGone("peer closed the connection")
            if self.link is not None:
                self.link.charge(k)  # after the bytes arrived: the sender's and our link overlap
            got += k
        self.received += n
        return buf

    def recv(self) -> tuple[bytes, int]:
        """One whole message: (header + body bytes, header length). Decode with :func:`decode`."""
        hlen, blen = PREFIX.unpack(self._read(PREFIX.size))
        return bytes(self._read(hlen + blen)), hlen

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
