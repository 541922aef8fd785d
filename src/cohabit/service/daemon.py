"""The service process: the store, the one scheduler loop in a thread, and the HTTP API.

:class:`Service` opens the store (migrating it), creates the admin token at first start (written
once to ``<state dir>/admin.token``, mode 0600), builds the backend and the
:class:`~cohabit.engine.loop.Scheduler` with the store-backed feed (:mod:`.feed`), and runs
``Scheduler.run(source=feed)`` in a thread. :func:`serve` adds uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import signal
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.loop import Scheduler
from ..policies import make_policy
from ..spec.cluster import ClusterSpec
from .feed import JournaledBackend, StoreFeed
from .store import Store

DEFAULT_PORT = 8470
DEFAULT_POLICY = "fifo"
TOKEN_FILE = "admin.token"
SCHED_THREAD = "cohabit-sched"  # the scheduler thread's name in ps/top -H and /proc/PID/task/*/comm
log = logging.getLogger("cohabit.service")


def default_state_dir() -> Path:
    """``$XDG_DATA_HOME/cohabit`` (default ``~/.local/share/cohabit``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "cohabit"


def write_token_file(path: Path, token: str) -> None:
    """Write ``token`` to a new file readable by its owner only (never overwrites)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")


@dataclass
class ServiceConfig:
    state_dir: Path
    cluster: ClusterSpec
    db_url: str | None = None
    policy: str | None = None  # None: the store's, else DEFAULT_POLICY
    backend: str = "local"
    ray_address: str | None = None
    checkpoint_interval: float = 2.0
    poll_interval: float = 0.25
    sqlite_sync: str = "normal"  # see store.engine_for
    backend_options: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.db_url or f"sqlite:///{self.state_dir / 'cohabit.db'}"


class Service:
    """One running service (see the module docstring)."""

    def __init__(self, cfg: ServiceConfig) -> None:
        cfg.state_dir.mkdir(parents=True, exist_ok=True)
        self.cfg = cfg
        self.store = Store(cfg.url, sqlite_sync=cfg.sqlite_sync)
        token = self.store.ensure_admin()
        self.token_path = cfg.state_dir / TOKEN_FILE
        if token is not None:
            if self.token_path.exists():
                self.token_path.unlink()  # a stale file from an older store: the new admin's token replaces it
            write_token_file(self.token_path, token)
        policy = cfg.policy or self.store.policy() or DEFAULT_POLICY
        make_policy(policy)  # refuse a bad name before anything starts
        self.store.set_policy(policy)
        self.cluster = cfg.cluster
        self.feed = StoreFeed(self.store, policy_spec=policy, poll_interval=cfg.poll_interval)
        inner = self._backend()
        self.backend = JournaledBackend(inner, self.store, self.feed)
        self.scheduler = Scheduler(cfg.cluster, make_policy(policy), self.backend, record=self.feed.record)
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="cohabit-scheduler", daemon=True)

    def _backend(self) -> Any:
        root = self.cfg.state_dir / "runs"
        # no warm spares: a spare logs to its own file, and `cohabit logs JOB` reads <job>.<rank>.log
        opts = dict(checkpoint_interval=self.cfg.checkpoint_interval, **self.cfg.backend_options)
        opts.setdefault("prewarm", False)
        if self.cfg.backend == "ray":
            from ..runtime.ray_backend import RayBackend
            opts.setdefault("warm_actors", 0)
            return RayBackend(self.cluster, root=root, address=self.cfg.ray_address, **opts)
        from ..runtime.local import LocalBackend
        return LocalBackend(self.cluster, root=root, **opts)

    @property
    def logs_dir(self) -> Path:
        return self.cfg.state_dir / "runs" / "logs"

    def check(self, specs: list[Any]) -> list[str]:
        """Problems that stop these jobs from running on the backend (bad workloads), one per job."""
        from ..runtime.runner import check_jobs
        return check_jobs(specs)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        name_os_thread(SCHED_THREAD)
        try:
            self.scheduler.run([], source=self.feed)
        except BaseException:  # noqa: BLE001 - reported on /healthz, the store keeps the truth
            self.error = traceback.format_exc()
            log.error("scheduler loop stopped:\n%s", self.error)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 60.0) -> None:
        """Checkpoint running jobs, stop the loop and the backend's processes, close the store."""
        self.feed.stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.store.close()


def serve(cfg: ServiceConfig, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
          announce: Any = print) -> None:
    """Run the service until SIGINT/SIGTERM: the loop in its thread, uvicorn in this one."""
    import uvicorn

    from .api import create_app

    service = Service(cfg)
    app = create_app(service)
    # uvicorn re-raises the SIGTERM it caught once it has shut down; with the default handler that
    # would end the process before the jobs are checkpointed below. Ignore the re-raised one.
    signal.signal(signal.SIGTERM, lambda *_: None)
    # the objects built so far (modules, store, scheduler) live as long as the process: keep them
    # out of the cyclic GC's scans, whose pauses showed in the API's p99 latency
    gc.freeze()
    service.start()
    announce(f"cohabit serve: http://{host}:{port} (state {cfg.state_dir}, store {redact(cfg.url)}, "
             f"policy {service.feed.policy_spec}); admin token in {service.token_path}")
    try:
        # httptools and uvloop (dependencies) are uvicorn's fast HTTP parser and event loop; one
        # worker process, since the scheduler loop runs in this one.
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                                      http="httptools", loop="uvloop")).run()
    finally:
        service.stop()


def name_os_thread(name: str) -> None:
    """Give the calling thread ``name`` (15 bytes at most) in the OS (Linux ``prctl(PR_SET_NAME)``),
    so that ``top -H`` and ``/proc/PID/task/TID/comm`` tell the scheduler thread from the API's;
    elsewhere nothing happens."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # 15: PR_SET_NAME
    except (OSError, AttributeError):
        pass


def redact(url: str) -> str:
    """``url`` without its password."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        cred, tail = rest.rsplit("@", 1)
        return f"{scheme}://{cred.split(':', 1)[0]}:***@{tail}"
    return url
