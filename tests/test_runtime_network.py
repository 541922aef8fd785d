"""Nothing open to the network (issue 12): listeners bind loopback; PS peers must know the job's secret.

* A data-parallel job's ranks (gloo) and a PS job's servers listen on
  127.0.0.1 only — read from ``/proc/net/tcp{,6}`` and the tasks' open sockets.
* A connection to a parameter server that sends garbage, a huge frame, or a
  hello without the job's secret is closed; the server and the job go on (no
  restart) and the job finishes.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from pathlib import Path

import pytest

from cohabit.engine.backend import BackendEventKind as K
from cohabit.engine.ledger import Ledger
from cohabit.runtime.local import LocalBackend
from cohabit.runtime.ps.auth import sign
from cohabit.spec import Resources
from cohabit.spec.job import JobSpec, TaskGroup

from runtime_helpers import allocate, cluster, ended, final_event, job, no_orphans, wait_for  # noqa: F401

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def _addr(hexaddr: str) -> str:
    ip, _ = hexaddr.split(":")
    raw = bytes.fromhex(ip)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def listening(pids: list[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state that one of ``pids`` holds open."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except FileNotFoundError:
            continue
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                out.append((_addr(f[1]), int(f[1].split(":")[1], 16)))
    return out


def test_data_parallel_ranks_listen_on_loopback_only(tmp_path) -> None:
    cl = cluster(2)
    spec = job("dp", {"name": "torch-mlp", "n_samples": 1024}, 300, workers=2)
    with LocalBackend(cl, root=tmp_path, report_interval=0.1) as be:
        be.launch(spec, allocate(cl, spec, (0, 1), Ledger(cl)), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] > 5 for e in ev))
        socks = listening(list(be.status["dp"].pids))
        assert all(addr in LOOPBACK for addr, _ in socks), socks
        events = wait_for(be, ended("dp"))
        assert final_event(events, "dp").kind is K.FINISHED


SMALL = Resources(cpu=0.25, mem_gb=0.1)


def _frame(header: dict) -> bytes:
    head = json.dumps(header).encode()
    return struct.pack("!II", len(head), 0) + head


@pytest.mark.parametrize("attack", ["garbage", "huge", "unsigned", "wrong-secret"])
def test_ps_server_drops_an_unauthenticated_peer_and_the_job_goes_on(tmp_path, attack: str) -> None:
    cl = cluster(2)
    spec = JobSpec(id="ps", architecture="ps", workers=TaskGroup(count=1, demand=SMALL),
                   ps=TaskGroup(count=1, demand=SMALL), iterations=400, workload={"name": "ps-mlr"}, model="ps-mlr")
    led = Ledger(cl)
    demands = [spec.workers.demand, spec.ps.demand]
    with LocalBackend(cl, root=tmp_path, report_interval=0.05) as be:
        be.launch(spec, led.allocate("ps", (0, 1), [led.vector(d) for d in demands]), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] > 3 for e in ev))
        server_pid = be.status["ps"].pids[-1]
        socks = listening([server_pid])
        assert socks and all(addr in LOOPBACK for addr, _ in socks), socks
        port = socks[0][1]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            challenge = s.recv(4096)
            assert b"challenge" in challenge
            if attack == "garbage":
                s.sendall(b"\x00\x00\x00\x05\x00\x00\x00\x00{{{{{")
            elif attack == "huge":
                s.sendall(struct.pack("!II", 2**31, 2**31))
            else:
                hello = {"type": "hello", "worker": 0, "node": 0, "iteration": 0}
                if attack == "wrong-secret":
                    nonce = json.loads(challenge[8:])["nonce"]
                    hello["mac"] = sign("00" * 32, nonce, hello)
                s.sendall(_frame(hello))
            assert s.recv(4096) == b""  # the server closed this connection
        events = wait_for(be, ended("ps"))
        fin = final_event(events, "ps")
        assert fin.kind is K.FINISHED and fin.data["iterations"] == 400, fin.data
        assert be.status["ps"].restarts == 0
        log = "".join(p.read_text(errors="ignore") for p in (tmp_path / "logs").glob("*"))
        assert "refused a connection" in log
