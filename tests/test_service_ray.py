"""``cohabit serve --backend ray``: the ``tests/ray_service`` test in a loopback-only network namespace.

Ray binds the machine's external address, so the daemon and its Ray run inside a fresh network
namespace with only ``lo`` (``ip netns add``), started by a child pytest there; in a ``finally``
whatever still runs in the namespace is killed by pid (``ip netns pids``) and the namespace deleted.
Skipped with the reason when not root, without ``ip``, or without Ray (as tests/test_runtime_ray.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from xml.etree import ElementTree

import pytest

from test_runtime_ray import _netns_pids, _why_not

HERE = Path(__file__).resolve().parent
TIMEOUT = 560.0


@pytest.mark.timeout(600)
@pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))
def test_serve_on_ray_in_a_loopback_only_namespace(tmp_path) -> None:
    name = f"cohabit-svc-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=10)
    if made.returncode != 0:  # e.g. a container without CAP_SYS_ADMIN
        pytest.skip(f"cannot create a network namespace: {made.stderr.strip()}")
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True, timeout=10)
        env = dict(os.environ, COHABIT_RAY_NETNS="1", RAY_USAGE_STATS_ENABLED="0",
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        cmd = ["ip", "netns", "exec", name, sys.executable, "-m", "pytest", str(HERE / "ray_service"), "-q", "-s",
               "-p", "no:cacheprovider", "-x", "--timeout", str(int(TIMEOUT) - 20), "--basetemp",
               str(tmp_path / "suite"), "-rs", "--junitxml", str(tmp_path / "suite.xml")]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT, cwd=HERE.parent)
        report = (f"serve --backend ray took {time.monotonic() - t0:.1f} s, exit {proc.returncode}\n"
                  f"{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
        print(report)
        assert proc.returncode == 0, report
        suite = ElementTree.parse(tmp_path / "suite.xml").getroot().find("testsuite")
        assert suite is not None, report
        counts = {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}
        assert counts == {"tests": 1, "failures": 0, "errors": 0, "skipped": 0}, (counts, report)
    finally:
        for _ in range(3):  # what outlived the child (Ray's processes): ours, found by namespace
            pids = [p for p in _netns_pids(name) if p != os.getpid()]
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.5)
        subprocess.run(["ip", "netns", "del", name], timeout=10)
