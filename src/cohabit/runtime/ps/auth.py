"""Who may talk to a parameter server: a per-job secret and an HMAC challenge on ``hello``.

Each launch of a PS job gets a fresh random secret (:func:`new_secret`),
handed to its tasks inside their configuration over the scheduler's private
socketpair (never on a command line or in the environment, which other local
users can read). A server answers every new connection with a random nonce
(``challenge``); the worker's ``hello`` must carry
``mac = HMAC-SHA256(secret, nonce || hello fields)`` (:func:`sign`). A peer
that sends anything else — no answer within :data:`HELLO_TIMEOUT_S`, a frame
over :data:`HELLO_MAX_BYTES`, malformed bytes, a wrong MAC — has its
connection closed; the server and the job go on (:func:`accept_hello`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import socket
from typing import Any

from .wire import PREFIX, Conn, PeerGone, decode, encode

#: Seconds a new connection has to answer the challenge.
HELLO_TIMEOUT_S = 10.0
#: Largest hello frame (header and body) a server reads before authenticating the peer.
HELLO_MAX_BYTES = 1 << 16
_FIELDS = ("type", "worker", "node", "iteration")


def new_secret() -> str:
    """A fresh per-launch job secret (256 bits, hex)."""
    return secrets.token_hex(32)


def sign(secret: str, nonce: str, hello: dict[str, Any]) -> str:
    """The MAC of ``hello``'s fields for the server's ``nonce``."""
    body = nonce.encode() + json.dumps([hello.get(k) for k in _FIELDS], separators=(",", ":")).encode()
    return hmac.new(bytes.fromhex(secret), body, hashlib.sha256).hexdigest()


def challenge(conn: Conn) -> str:
    """Send a fresh nonce to a new peer; returns it."""
    nonce = secrets.token_hex(16)
    conn.send(encode({"type": "challenge", "nonce": nonce}))
    return nonce


def answer(conn: Conn, secret: str, hello: dict[str, Any]) -> None:
    """Worker side: read the server's challenge and send the signed ``hello``."""
    raw, hl = conn.recv()
    header, _ = decode(raw, hl)
    if header.get("type") != "challenge" or not isinstance(header.get("nonce"), str):
        raise PeerGone(f"expected a challenge from the server, got {header.get('type')!r}")
    conn.send(encode({**hello, "mac": sign(secret, header["nonce"], hello)}))


class Rejected(Exception):
    """A peer that did not authenticate (the reason is the message); only its connection is closed."""


def accept_hello(conn: Conn, secret: str) -> dict[str, Any]:
    """Server side: challenge a new connection and return its verified ``hello``; raises :class:`Rejected`."""
    sock = conn.sock
    sock.settimeout(HELLO_TIMEOUT_S)
    try:
        nonce = challenge(conn)
        head = bytes(conn._read(PREFIX.size))
        hlen, blen = PREFIX.unpack(head)
        if hlen + blen > HELLO_MAX_BYTES:
            raise Rejected(f"hello of {hlen + blen} bytes (at most {HELLO_MAX_BYTES})")
        raw = bytes(conn._read(hlen + blen))
        hello, _ = decode(raw, hlen)
    except (PeerGone, OSError, socket.timeout) as exc:
        raise Rejected(f"no hello: {exc}") from None
    except (ValueError, TypeError, KeyError, OverflowError) as exc:  # JSON, array layout, numbers
        raise Rejected(f"malformed hello: {exc}") from None
    finally:
        sock.settimeout(None)
    if not isinstance(hello, dict) or hello.get("type") != "hello":
        raise Rejected("the first frame is not a hello")
    mac = hello.get("mac")
    if not isinstance(mac, str) or not hmac.compare_digest(mac, sign(secret, nonce, hello)):
        raise Rejected("hello not signed with the job's secret")
    for key in ("worker", "node", "iteration"):
        if isinstance(hello.get(key), bool) or not isinstance(hello.get(key), int):
            raise Rejected(f"hello field {key!r} is not an integer")
    return hello
