"""Run a pytest suite that starts Ray inside a fresh loopback-only network namespace.

Ray binds to the machine's external address, so everything that starts Ray runs
inside a namespace that has only ``lo``: :func:`run_suite_in_netns` creates one
(``ip netns add``), runs the suite there in a child pytest (``ip netns exec``),
and in a ``finally`` kills whatever still runs in the namespace (by pid, from
``ip netns pids``) and deletes it. :func:`why_not` says why this cannot run here
(the tests skip with it).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from xml.etree import ElementTree

import pytest

TESTS = Path(__file__).resolve().parent


def why_not() -> str | None:
    """Why a Ray suite cannot run in a namespace here (None when it can)."""
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed (pip install 'cohabit[ray]')"
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root to create a network namespace (ip netns add)"
    if shutil.which("ip") is None:
        return "needs the 'ip' command (iproute2) to create a network namespace"
    return None


def netns_pids(name: str) -> list[int]:
    """Processes running in network namespace ``name``."""
    out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, timeout=10)
    return [int(p) for p in out.stdout.split() if p.isdigit()]


def _kill_namespace(name: str) -> None:
    """SIGKILL what still runs in ``name`` (ours: it was made for this run), then delete it."""
    for _ in range(3):
        pids = [p for p in netns_pids(name) if p != os.getpid()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.5)
    subprocess.run(["ip", "netns", "del", name], timeout=10)


def run_suite_in_netns(suite: str, tmp_path: Path, *, prefix: str, timeout: float, inner_timeout: float,
                       extra: tuple[str, ...] = ()) -> tuple[dict[str, int], str]:
    """Run ``tests/<suite>`` in a fresh loopback-only namespace; returns its junit counts and a report.

    Fails the calling test when the child pytest exits non-zero; skips it when the namespace
    cannot be created (e.g. a container without CAP_SYS_ADMIN). ``inner_timeout`` is the child's
    per-test limit (pytest-timeout), ``timeout`` the whole child's.
    """
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=10)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace: {made.stderr.strip()}")
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True, timeout=10)
        env = dict(os.environ, COHABIT_RAY_NETNS="1", RAY_USAGE_STATS_ENABLED="0",
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        cmd = ["ip", "netns", "exec", name, sys.executable, "-m", "pytest", str(TESTS / suite), "-q", *extra,
               "-p", "no:cacheprovider", "-x", "--timeout", str(int(inner_timeout)), "--basetemp",
               str(tmp_path / "suite"), "-rs", "--junitxml", str(tmp_path / "suite.xml")]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=TESTS.parent)
        report = (f"{suite} took {time.monotonic() - t0:.1f} s, exit {proc.returncode}\n"
                  f"{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
        print(report)
        assert proc.returncode == 0, report
        found = ElementTree.parse(tmp_path / "suite.xml").getroot().find("testsuite")
        assert found is not None, report
        return {k: int(found.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}, report
    finally:
        _kill_namespace(name)
