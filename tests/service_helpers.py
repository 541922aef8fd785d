"""Helpers for the service tests: the real daemon (``cohabit serve``) as a process on a free
loopback port, stopped by pid; the database URLs to test against (SQLite, and PostgreSQL when
``COHABIT_TEST_PG_URL`` names a server: ``.ci/run`` starts one)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

PG_ENV = "COHABIT_TEST_PG_URL"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def db_params() -> list:
    """``sqlite`` always; ``postgresql`` too. Without a server it is skipped locally, but in CI
    (``CI=true``) a missing server fails the test instead."""
    pg_missing = not os.environ.get(PG_ENV)
    marks = [pytest.mark.skipif(pg_missing and os.environ.get("CI") != "true",
                                reason=f"no PostgreSQL: set {PG_ENV} (.ci/run starts one)")]
    return ["sqlite", pytest.param("postgresql", marks=marks)]


def db_url(kind: str, tmp: Path) -> str | None:
    """A fresh database of ``kind``: None (the daemon's SQLite default) or a new PostgreSQL database."""
    if kind == "sqlite":
        return None
    base = os.environ.get(PG_ENV)
    assert base, f"CI=true but {PG_ENV} is not set: .ci/run must start PostgreSQL"
    import sqlalchemy as sa
    name = "t_" + uuid.uuid4().hex[:12]
    eng = sa.create_engine(base.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.execute(sa.text(f"CREATE DATABASE {name}"))
    eng.dispose()
    return base.rsplit("/", 1)[0] + "/" + name


@dataclass
class Daemon:
    url: str
    state_dir: Path
    proc: subprocess.Popen
    db: str | None

    @property
    def token(self) -> str:
        return (self.state_dir / "admin.token").read_text().strip()

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token or self.token}"}, timeout=30)

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill9()


def start_daemon(state_dir: Path, *, db: str | None = None, port: int | None = None, nodes: int = 2,
                 extra: tuple[str, ...] = (), timeout: float = 60.0) -> Daemon:
    """``cohabit serve`` as a real process; returns once ``/healthz`` answers."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "cohabit.cli", "serve", "--state-dir", str(state_dir), "--port", str(port),
           "--nodes", str(nodes), *extra]
    if db:
        cmd += ["--db", db]
    log = open(state_dir.parent / f"{state_dir.name}.serve.log", "ab")
    state_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    log.close()
    d = Daemon(f"http://127.0.0.1:{port}", state_dir, proc, db)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"cohabit serve exited with {proc.returncode}: "
                                 f"{(state_dir.parent / f'{state_dir.name}.serve.log').read_text()[-3000:]}")
        try:
            if httpx.get(d.url + "/healthz", timeout=2).status_code == 200:
                return d
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    d.kill9()
    raise AssertionError("cohabit serve did not answer /healthz in time")


def wait_until(pred, timeout: float, what: str, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def mlr_jobs(n: int, iterations: int, prefix: str = "m") -> str:
    """YAML for ``n`` small numpy jobs (synthetic MLR, seeded)."""
    lines = ["jobs:"]
    for i in range(n):
        lines += [f"  - id: {prefix}{i}", "    model: mlr", "    workers: {count: 1, demand: {cpu: 1, mem_gb: 0.2}}",
                  f"    iterations: {iterations}",
                  f"    workload: {{name: mlr, data: synthetic, n_samples: 2000, n_features: 20, seed: {i + 1}, "
                  f"lr: 0.05}}"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    """Daemons a test starts; any still alive at the end are stopped (by pid)."""
    started: list[Daemon] = []
    yield started
    for d in started:
        if d.proc.poll() is None:
            d.kill9()
