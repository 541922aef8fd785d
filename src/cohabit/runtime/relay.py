"""A TCP relay that joins remote task processes to local control sockets.

:class:`~cohabit.runtime.local.LocalBackend` talks to each task over one end
of a socketpair (:mod:`.channel`). A Ray actor is a process the backend did
not fork, possibly on another machine, so it cannot inherit a socket: it
connects back over TCP instead and names the task with a token. The
:class:`Relay` (one thread) owns a listening socket; :meth:`Relay.expect`
returns the backend's end of a fresh socketpair and parks the other end
under a token; when a connection arrives with that token, the thread copies
bytes both ways until either side closes, and then closes the other. So the
backend sees exactly what it sees for a local process: JSON lines, and end
of file when the task dies (its TCP connection drops) or when its node goes.
"""

from __future__ import annotations

import secrets
import selectors
import socket
import threading

_TOKEN_MAX = 256


class Relay:
    """Listen on ``host`` (an ephemeral port) and splice task connections to local sockets."""

    def __init__(self, host: str = "127.0.0.1", accept_timeout: float = 10.0) -> None:
        self._listener = socket.create_server((host, 0))
        self._listener.setblocking(False)
        self.address: tuple[str, int] = (host, int(self._listener.getsockname()[1]))
        self.accept_timeout = accept_timeout
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, ("listen", None))
        self._lock = threading.Lock()
        self._parked: dict[str, socket.socket] = {}  # token -> our end, until the task connects
        self._new: list[socket.socket] = []  # parked ends to watch (registered by the thread)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cohabit-relay", daemon=True)
        self._thread.start()

    def expect(self) -> tuple[str, socket.socket]:
        """A new token and the backend's socket for the task that will connect with it."""
        token = secrets.token_hex(16)
        mine, parked = socket.socketpair()
        with self._lock:
            self._parked[token] = parked
            self._new.append(parked)
        return token, mine

    # ------------------------------------------------------------ the thread
    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                new, self._new = self._new, []
            for s in new:
                self._sel.register(s, selectors.EVENT_READ, ("parked", None))
            for stale, _ in self._sel.select(timeout=0.1):
                try:  # an earlier event of this batch may have re-registered or closed it
                    key = self._sel.get_key(stale.fileobj)
                except (KeyError, ValueError):
                    continue
                role, peer = key.data
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if role == "listen":
                    self._accept()
                elif role == "parked":
                    self._parked_readable(sock)
                else:
                    self._forward(sock, peer)
        for key in list(self._sel.get_map().values()):
            self._drop(key.fileobj)  # type: ignore[arg-type]
        self._sel.close()

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        conn.settimeout(self.accept_timeout)
        buf = b""
        try:
            while b"\n" not in buf and len(buf) < _TOKEN_MAX:
                chunk = conn.recv(_TOKEN_MAX)
                if not chunk:
                    break
                buf += chunk
        except OSError:
            buf = b""
        token, _, rest = buf.partition(b"\n")
        with self._lock:
            parked = self._parked.pop(token.decode(errors="replace"), None)
            if parked in self._new:  # connected before the thread started watching it
                self._new.remove(parked)
        if parked is None:  # unknown or late: the backend gave up on this task
            conn.close()
            return
        conn.settimeout(None)
        try:
            self._sel.unregister(parked)
        except (KeyError, ValueError):
            pass  # already unregistered: it held the configuration for the task
        if rest:
            parked.sendall(rest)
        self._sel.register(conn, selectors.EVENT_READ, ("link", parked))
        self._sel.register(parked, selectors.EVENT_READ, ("link", conn))

    def _parked_readable(self, sock: socket.socket) -> None:
        """The backend wrote to (config) or closed a task that has not connected yet."""
        try:
            data = sock.recv(1, socket.MSG_PEEK)
        except OSError:
            data = b""
        if data:  # the configuration, buffered for the task: stop polling until it connects
            self._sel.unregister(sock)
            return
        with self._lock:
            for tok, s in list(self._parked.items()):
                if s is sock:
                    del self._parked[tok]
        self._drop(sock)

    def _forward(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            data = src.recv(1 << 16)
            if data:
                dst.sendall(data)
                return
        except OSError:
            pass
        self._drop(src)
        self._drop(dst)

    def _drop(self, sock: socket.socket) -> None:
        try:
            self._sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        try:
            sock.close()
        except OSError:
            pass

    def close(self) -> None:
        """Stop the thread and close every socket it holds."""
        self._stop.set()
        self._thread.join(timeout=5.0)
        with self._lock:
            for s in self._parked.values():
                s.close()
            self._parked.clear()
