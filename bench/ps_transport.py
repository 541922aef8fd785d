"""Parameter-server transport under a per-node bandwidth budget vs unlimited (issue 4, PS part).

Two measurements, both on loopback TCP on this machine:

1. Raw link: one sender thread and one receiver thread move ``--mbytes`` MB
   as 1 MB messages through :class:`cohabit.runtime.ps.wire.Conn`, the sender
   on node 0 and the receiver on node 1, each charging its node's bucket
   (:mod:`cohabit.runtime.ps.netlimit`); unlimited and at each ``--limits``.
2. Real PS jobs on the LocalBackend (``ps-mlr`` on the packaged MNIST sample,
   1 worker on node 0, 1 server on node 1, so every byte crosses both nodes'
   links): one job alone unlimited, one job alone under each limit, and two
   jobs sharing the same two nodes under each limit. Reported: measured
   bytes/s per job (median of progress reports; pulls + pushes as the worker
   saw them), communication and iteration time per iteration, and the CPU
   seconds the job processes used (the machine is shared: wall times are noisy).

    python bench/ps_transport.py [--limits 40 160] [--iterations 150] [--json bench/results/ps_transport.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from cohabit.engine.backend import BackendEventKind as K
from cohabit.engine.ledger import Ledger
from cohabit.runtime.local import LocalBackend
from cohabit.runtime.ps.netlimit import NodeBucket
from cohabit.runtime.ps.wire import Conn, encode
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.job import JobSpec, TaskGroup

console = Console(width=120)


def raw_link(mbps: float | None, mbytes: int) -> dict[str, Any]:
    """Throughput of one Conn pair between node 0 and node 1 (threads; ``mbps=None``: unlimited)."""
    with tempfile.TemporaryDirectory() as d:
        rate = None if mbps is None else mbps * 1e6 / 8
        links = [NodeBucket(Path(d) / f"node-{i}", rate) if rate else None for i in (0, 1)]
        a, b = socket.socketpair()
        tx, rx = Conn(a, links[0]), Conn(b, links[1])
        msg = encode({"type": "push"}, {"x": np.zeros(1 << 17)})  # 1 MiB of float64
        n = max(1, mbytes)

        def send() -> None:
            for _ in range(n):
                tx.send(msg)

        cpu0, t0 = time.process_time(), time.perf_counter()
        th = threading.Thread(target=send)
        th.start()
        for _ in range(n):
            rx.recv()
        th.join()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        tx.close()
        rx.close()
        for ln in links:
            if ln is not None:
                ln.close()
    return {"limit_mbps": mbps, "bytes": rx.received, "wall_s": wall, "cpu_s": cpu,
            "bytes_per_s": rx.received / wall, "of_limit": None if rate is None else rx.received / wall / rate}


def _job(id: str, iterations: int) -> JobSpec:
    d = Resources(cpu=0.5, mem_gb=0.2)
    return JobSpec(id=id, architecture="ps", workers=TaskGroup(count=1, demand=d), ps=TaskGroup(count=1, demand=d),
                   iterations=iterations, workload={"name": "ps-mlr"}, model="ps-mlr")


def ps_jobs(mbps: float | None, n_jobs: int, iterations: int) -> list[dict[str, Any]]:
    """Run ``n_jobs`` ps-mlr jobs at once (workers on node 0, servers on node 1); per-job measurements."""
    cl = ClusterSpec.homogeneous("bench", 2, Resources(cpu=1, mem_gb=2))
    led = Ledger(cl)
    ids = [f"j{i}" for i in range(n_jobs)]
    events: list[Any] = []
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as root, LocalBackend(cl, root=root, report_interval=0.2,
                                                             bandwidth_mbps=mbps, prewarm=False) as be:
        for i in ids:
            spec = _job(i, iterations)
            be.launch(spec, led.allocate(i, (0, 1), [led.vector(d) for d in spec.task_demands()]), be.now(),
                      from_checkpoint=False)
        t0 = time.perf_counter()
        while sum(e.kind in (K.FINISHED, K.FAILED) for e in events) < n_jobs:
            if time.perf_counter() - t0 > 300:
                raise RuntimeError("PS bench jobs did not finish within 300 s")
            events += be.advance(be.now() + 1.0)[1]
        wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    out = []
    for i in ids:
        prog = [e.data for e in events if e.job == i and e.kind is K.PROGRESS]
        fin = next(e for e in events if e.job == i and e.kind in (K.FINISHED, K.FAILED))
        if fin.kind is not K.FINISHED:
            raise RuntimeError(f"job {i} did not finish: {fin.data}")
        out.append({"job": i, "limit_mbps": mbps, "jobs_sharing": n_jobs,
                    "bytes_per_s": statistics.median(p["net_bytes_s"] for p in prog),
                    "comm_s": statistics.median(p["comm_s"] for p in prog),
                    "compute_s": statistics.median(p["compute_s"] for p in prog),
                    "iter_time": statistics.median(p["iter_time"] for p in prog),
                    "wall_s": wall, "cpu_s_all_jobs": cpu})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limits", type=float, nargs="+", default=[40.0, 160.0], help="per-node budgets, Mbit/s")
    ap.add_argument("--iterations", type=int, default=150)
    ap.add_argument("--mbytes", type=int, default=8, help="MiB moved by each raw-link measurement")
    ap.add_argument("--json", default="bench/results/ps_transport.json")
    args = ap.parse_args()

    raw = [raw_link(m, args.mbytes) for m in [None, *args.limits]]
    t = Table(title="raw link, node 0 -> node 1 (1 MiB messages)")
    for c in ("limit Mbit/s", "MB/s measured", "of limit", "wall s", "CPU s"):
        t.add_column(c, justify="right")
    for r in raw:
        t.add_row("none" if r["limit_mbps"] is None else f"{r['limit_mbps']:g}", f"{r['bytes_per_s'] / 1e6:.2f}",
                  "-" if r["of_limit"] is None else f"{r['of_limit']:.2f}", f"{r['wall_s']:.2f}", f"{r['cpu_s']:.2f}")
    console.print(t)

    jobs: list[dict[str, Any]] = []
    jobs += ps_jobs(None, 1, args.iterations)
    for m in args.limits:
        jobs += ps_jobs(m, 1, args.iterations)
        jobs += ps_jobs(m, 2, args.iterations)
    t = Table(title=f"ps-mlr jobs ({args.iterations} iterations; worker on node 0, server on node 1)")
    for c in ("limit Mbit/s", "jobs sharing", "job", "MB/s measured", "of limit", "comm ms/it", "compute ms/it",
              "iter ms", "wall s", "CPU s (all jobs)"):
        t.add_column(c, justify="right")
    for r in jobs:
        lim = r["limit_mbps"]
        t.add_row("none" if lim is None else f"{lim:g}", str(r["jobs_sharing"]), r["job"],
                  f"{r['bytes_per_s'] / 1e6:.2f}", "-" if lim is None else f"{r['bytes_per_s'] / (lim * 1e6 / 8):.2f}",
                  f"{r['comm_s'] * 1e3:.1f}", f"{r['compute_s'] * 1e3:.2f}", f"{r['iter_time'] * 1e3:.1f}",
                  f"{r['wall_s']:.1f}", f"{r['cpu_s_all_jobs']:.1f}")
    console.print(t)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"raw_link": raw, "ps_jobs": jobs, "iterations": args.iterations}, indent=1))
    console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
