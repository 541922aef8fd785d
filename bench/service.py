"""The service under load (issue 13): submit throughput and latency, list/get latency at 100k
jobs, and the scheduler's decision latency while submissions pour in; SQLite and PostgreSQL.

For each database the real daemon (``cohabit serve``) runs as a process on a loopback port on a
2-node local cluster under FIFO:

1. ``--submits`` jobs (small real numpy jobs, so the queue grows and the loop decides over it
   while some run) are submitted by ``--clients`` concurrent async httpx clients, one job per
   request with an ``Idempotency-Key``; throughput and per-request latency p50/p99, and the
   daemon's CPU time per submission (its own threads, while the submissions last: the scheduler
   admitting and launching them is included, the jobs' processes are not), and the clients' CPU
   time per submission (this process: the load generator shares the machine);
2. the policy's decision times (the record's ``decision`` events) during that window, p50/p99;
3. ``--history`` finished jobs are bulk-inserted into the store (as a long-lived service would
   have), then list (first page, a deep page) and get latency over ``--requests`` sequential
   requests each, p50/p99.

PostgreSQL: ``--pg-url postgresql://...`` or ``COHABIT_TEST_PG_URL`` (``.ci/postgres.sh`` starts
one); without either only SQLite runs. Writes ``bench/results/service.json``.

    .venv/bin/python bench/service.py --submits 1000 --history 100000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from cohabit.service.db import Job
from cohabit.service.store import Store

JOB = ("jobs:\n  - id: b{i}\n    model: mlr\n    workers: {{count: 1, demand: {{cpu: 1, mem_gb: 0.2}}}}\n"
       "    iterations: 200\n    workload: {{name: mlr, data: synthetic, n_samples: 500, n_features: 10}}\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(state: Path, db: str | None) -> tuple[subprocess.Popen, str, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "cohabit.cli", "serve", "--state-dir", str(state), "--port", str(port),
           "--nodes", "2", "--policy", "fifo"] + (["--db", db] if db else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(state.parent / "serve.log", "ab"))
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return proc, url, (state / "admin.token").read_text().strip()
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the daemon did not start")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (its threads, not its children): what a
    request costs the daemon, which a loaded machine does not change as it changes latency."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pcts(xs: list[float]) -> dict[str, float]:
    p50, p99 = np.percentile(np.asarray(xs) * 1e3, [50, 99])
    return {"p50_ms": float(p50), "p99_ms": float(p99), "n": len(xs)}


async def submit_load(url: str, token: str, n: int, clients: int) -> tuple[list[float], float]:
    lat: list[float] = []

    async def one_client(k: int) -> None:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300) as c:
            for i in range(k, n, clients):
                t0 = time.perf_counter()
                r = await c.post("/v1/jobs", content=JOB.format(i=i), headers={"Idempotency-Key": f"b{i}"})
                lat.append(time.perf_counter() - t0)
                if r.status_code != 201:
                    raise SystemExit(f"submit failed: {r.status_code} {r.text[:200]}")

    t0 = time.perf_counter()
    await asyncio.gather(*(one_client(k) for k in range(clients)))
    return lat, time.perf_counter() - t0


def bulk_history(url: str, n: int) -> tuple[int, int]:
    """Insert ``n`` finished jobs of the admin tenant; returns (first, last) seq."""
    store = Store(url)
    now = time.time()
    with store.engine.begin() as conn:
        tenant = conn.execute(sa.text("SELECT id FROM tenants WHERE name = 'admin'")).scalar_one()
        spec = {"id": "h", "workers": {"count": 1, "demand": {"cpu": 1.0}}, "iterations": 10}
        for start in range(0, n, 5000):
            conn.execute(sa.insert(Job), [dict(
                tenant_id=tenant, name=f"hist{i}", spec=spec, state="finished", pending_reason="", reason="",
                submit_time=now, start_time=now, end_time=now, iterations=10.0, total_iterations=10, gpus=0.0,
                idempotency_key=None, cancel_requested=False, hold_requested=False, runs=1)
                for i in range(start, min(n, start + 5000))])
        lo, hi = conn.execute(sa.text("SELECT min(seq), max(seq) FROM jobs")).one()
    store.close()
    return int(lo), int(hi)


def timed(c: httpx.Client, reqs: list[tuple[str, dict[str, Any]]]) -> list[float]:
    out = []
    for path, params in reqs:
        t0 = time.perf_counter()
        r = c.get(path, params=params)
        out.append(time.perf_counter() - t0)
        if r.status_code != 200:
            raise SystemExit(f"GET {path} failed: {r.status_code}")
    return out


def run_one(kind: str, db: str | None, args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix=f"cohabit-bench-{kind}-"))
    state = tmp / "state"
    state.mkdir()
    url_db = db or f"sqlite:///{state / 'cohabit.db'}"
    proc, url, token = start(state, db)
    try:
        t_begin = time.time()
        cpu0, ccpu0 = cpu_seconds(proc.pid), time.process_time()
        lat, wall = asyncio.run(submit_load(url, token, args.submits, args.clients))
        cpu, ccpu = cpu_seconds(proc.pid) - cpu0, time.process_time() - ccpu0
        t_end = time.time()
        lo, hi = bulk_history(url_db, args.history)
        rng = np.random.default_rng(0)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
            total = hi - lo + 1
            first = timed(c, [("/v1/jobs", {"limit": 100})] * args.requests)
            deep_after = lo + int(total * 0.99)
            deep = timed(c, [("/v1/jobs", {"limit": 100, "after": deep_after})] * args.requests)
            gets = timed(c, [(f"/v1/jobs/{int(s)}", {}) for s in rng.integers(lo, hi + 1, args.requests)])
            filt = timed(c, [("/v1/jobs", {"limit": 100, "state": "pending"})] * args.requests)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
    store = Store(url_db)
    with store.engine.connect() as conn:
        epoch = store.epoch
        rows = conn.execute(sa.text("SELECT data FROM events WHERE kind = 'decision' AND time >= :a AND time <= :b"),
                            {"a": t_begin - epoch, "b": t_end - epoch}).all()
    store.close()
    ms = [float((json.loads(d) if isinstance(d, str) else d)["ms"]) / 1e3 for (d,) in rows]
    return {
        "db": kind, "submits": args.submits, "clients": args.clients, "submit_wall_s": wall,
        "submits_per_s": args.submits / wall, "submit": pcts(lat), "daemon_cpu_ms_per_submit": cpu / args.submits * 1e3,
        "client_cpu_ms_per_submit": ccpu / args.submits * 1e3, "jobs_in_store": total,
        "list_first_page": pcts(first), "list_deep_page": pcts(deep), "list_state_filter": pcts(filt),
        "get": pcts(gets), "decision_under_load": pcts(ms) if ms else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submits", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--history", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--pg-url", default=os.environ.get("COHABIT_TEST_PG_URL"))
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "service.json")
    args = ap.parse_args()
    runs = [("sqlite", None)]
    if args.pg_url:
        name = "bench_" + uuid.uuid4().hex[:8]
        eng = sa.create_engine(args.pg_url.replace("postgresql://", "postgresql+psycopg://", 1),
                               isolation_level="AUTOCOMMIT")
        with eng.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {name}"))
        eng.dispose()
        runs.append(("postgresql", args.pg_url.rsplit("/", 1)[0] + "/" + name))
    results = [run_one(k, db, args) for k, db in runs]
    tab = Table(title=f"cohabit service: {args.submits} submits by {args.clients} clients; "
                      f"list/get at {results[0]['jobs_in_store']:,} jobs ({os.cpu_count()} cores)")
    for col in ("db", "submits/s", "submit p50/p99 ms", "daemon CPU ms/submit", "decision p50/p99 ms", "list 1st p50/p99 ms",
                "list deep p50/p99 ms", "list state= p50/p99", "get p50/p99 ms"):
        tab.add_column(col)

    def pp(d: dict[str, float] | None) -> str:
        return "-" if d is None else f"{d['p50_ms']:.1f} / {d['p99_ms']:.1f}"

    for r in results:
        tab.add_row(r["db"], f"{r['submits_per_s']:.0f}", pp(r["submit"]), f"{r['daemon_cpu_ms_per_submit']:.2f}", pp(r["decision_under_load"]),
                    pp(r["list_first_page"]), pp(r["list_deep_page"]), pp(r["list_state_filter"]), pp(r["get"]))
    Console().print(tab)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    args.json.write_text(json.dumps({"results": results, "loadavg_1_5_15": load, "cores": os.cpu_count()},
                                    indent=2))
    print(f"wrote {args.json} (load average during the run: {load[0]:.1f})")


if __name__ == "__main__":
    main()
