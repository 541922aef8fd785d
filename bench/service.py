"""The service under load (issue 13): submit throughput and latency, list/get latency at 100k
jobs, and the scheduler's decision latency while submissions pour in; SQLite and PostgreSQL.

For each database the real daemon (``cohabit serve``) runs as a process on a loopback port on a
2-node local cluster under FIFO:

1. for each ``--modes`` entry ``CLIENT-FORMAT``, on a fresh daemon: ``--submits`` jobs (small real
   numpy jobs, so the queue grows and the loop decides over it while some run) are submitted by
   ``--clients`` concurrent clients in this process, one job per request with an
   ``Idempotency-Key``. ``CLIENT`` is ``httpx`` (``httpx.AsyncClient``, keep-alive) or ``lean``
   (raw asyncio streams writing HTTP/1.1 requests on one keep-alive connection each: a load
   generator that costs ~0.05 ms of CPU per request, where httpx costs 1.5 to 3.5 ms, on the same
   2 cores as the daemon); ``FORMAT`` is ``yaml`` (the job file) or ``json`` (the same jobs with
   ``Content-Type: application/json``). Reported: throughput, per-request latency p50/p99, the
   daemon's CPU time per submission (its own threads while the submissions last: the scheduler
   admitting and launching them is included, the jobs' processes are not), split by thread
   (``api``: uvicorn's event loop and the routes; ``sched``: the scheduler loop; ``pool``: the
   threads requests hand blocking work to, the group commit), and the clients' CPU time per
   submission (this process);
2. the policy's decision times (the record's ``decision`` events) during each submit run, p50/p99;
3. ``--history`` finished jobs are bulk-inserted into a fresh store (as a long-lived service would
   have), then list (first page, a deep page) and get latency over ``--requests`` sequential
   requests each, p50/p99.

The 1-minute load average is printed beside each row (the machine is shared: wall-clock numbers
move with it, CPU per submission much less). ``--daemon-src OLD/src`` runs the daemon from another
checkout (a before/after pair with the same load generator). PostgreSQL: ``--pg-url
postgresql://...`` or ``COHABIT_TEST_PG_URL`` (``.ci/postgres.sh`` starts one); without either only
SQLite runs. Writes ``bench/results/service.json``.

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
import uvloop
import sqlalchemy as sa
import yaml
from rich.console import Console
from rich.table import Table

from cohabit.service.daemon import SCHED_THREAD
from cohabit.service.db import Job
from cohabit.service.store import Store

JOB = ("jobs:\n  - id: b{i}\n    model: mlr\n    workers: {{count: 1, demand: {{cpu: 1, mem_gb: 0.2}}}}\n"
       "    iterations: 200\n    workload: {{name: mlr, data: synthetic, n_samples: 500, n_features: 10}}\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: ``--daemon-src``: run the daemon from another checkout's ``src`` (a before/after pair with this bench)
DAEMON_SRC: str | None = None


def start(state: Path, db: str | None, sqlite_sync: str = "normal") -> tuple[subprocess.Popen, str, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "cohabit.cli", "serve", "--state-dir", str(state), "--port", str(port),
           "--nodes", "2", "--policy", "fifo"] + (["--db", db] if db else [])
    if sqlite_sync != "normal":  # the default; older daemons have no such flag
        cmd += ["--sqlite-sync", sqlite_sync]
    env = dict(os.environ, PYTHONPATH=DAEMON_SRC) if DAEMON_SRC else None
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(state.parent / "serve.log", "ab"), env=env)
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


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each group of ``pid``'s threads: ``api`` (the main thread: uvicorn's event
    loop and the routes), ``scheduler`` (the loop's thread, named by the daemon) and ``pool`` (the
    rest: the threads requests hand blocking work to, such as the group commit)."""
    out = {"api": 0.0, "scheduler": 0.0, "pool": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        group = "api" if task.name == str(pid) else "scheduler" if comm == SCHED_THREAD else "pool"
        out[group] += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def pcts(xs: list[float]) -> dict[str, float]:
    p50, p99 = np.percentile(np.asarray(xs) * 1e3, [50, 99])
    return {"p50_ms": float(p50), "p99_ms": float(p99), "n": len(xs)}


async def httpx_client(url: str, token: str, jobs: list[tuple[str, bytes]], ctype: str, lat: list[float]) -> None:
    """One httpx.AsyncClient (keep-alive) sending ``jobs`` (idempotency key, body) in turn."""
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300) as c:
        for key, body in jobs:
            t0 = time.perf_counter()
            r = await c.post("/v1/jobs", content=body, headers={"Idempotency-Key": key, "Content-Type": ctype})
            lat.append(time.perf_counter() - t0)
            if r.status_code != 201:
                raise SystemExit(f"submit failed: {r.status_code} {r.text[:200]}")


async def lean_client(url: str, token: str, jobs: list[tuple[str, bytes]], ctype: str, lat: list[float]) -> None:
    """The same requests over one keep-alive HTTP/1.1 connection on raw asyncio streams: a load
    generator that costs little CPU, so that the table measures the server rather than the client
    library. Reads the status line, headers and ``Content-Length`` body of each answer."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: {ctype}\r\n").encode()
    try:
        for key, body in jobs:
            t0 = time.perf_counter()
            writer.write(head + f"Idempotency-Key: {key}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
            resp = await reader.readuntil(b"\r\n\r\n")
            lines = resp.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            length = next(int(ln.split(":", 1)[1]) for ln in lines[1:] if ln.lower().startswith("content-length:"))
            answer = await reader.readexactly(length)
            lat.append(time.perf_counter() - t0)
            if status != 201:
                raise SystemExit(f"submit failed: {status} {answer[:200]!r}")
    finally:
        writer.close()


CLIENTS = {"httpx": httpx_client, "lean": lean_client}
CTYPES = {"yaml": "application/yaml", "json": "application/json"}


def job_body(i: int, fmt: str) -> bytes:
    """Submission ``i`` as the YAML job file or as the same jobs in JSON."""
    text = JOB.format(i=i)
    return (text if fmt == "yaml" else json.dumps(yaml.safe_load(text), separators=(",", ":"))).encode()


async def submit_load(url: str, token: str, bodies: list[tuple[str, bytes]], clients: int, client: str = "httpx",
                      fmt: str = "yaml") -> tuple[list[float], float]:
    """``bodies`` (idempotency key, body) submitted by ``clients`` concurrent clients of kind
    ``client`` (``httpx`` or ``lean``), bodies in ``fmt`` (``yaml`` or ``json``); (latencies, wall seconds)."""
    lat: list[float] = []
    t0 = time.perf_counter()
    await asyncio.gather(*(CLIENTS[client](url, token, bodies[k::clients], CTYPES[fmt], lat) for k in range(clients)))
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


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def fresh_daemon(kind: str, db: str | None, sqlite_sync: str = "normal") -> tuple[subprocess.Popen, str, str, str]:
    """A new daemon on a new store: (process, API URL, admin token, store URL)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"cohabit-bench-{kind}-"))
    state = tmp / "state"
    state.mkdir()
    proc, url, token = start(state, db, sqlite_sync)
    return proc, url, token, db or f"sqlite:///{state / 'cohabit.db'}"


def decisions(url_db: str, t_begin: float, t_end: float) -> list[float]:
    """The policy's decision times (seconds) recorded between two wall-clock times."""
    store = Store(url_db)
    with store.engine.connect() as conn:
        epoch = store.epoch
        rows = conn.execute(sa.text("SELECT data FROM events WHERE kind = 'decision' AND time >= :a AND time <= :b"),
                            {"a": t_begin - epoch, "b": t_end - epoch}).all()
    store.close()
    return [float((json.loads(d) if isinstance(d, str) else d)["ms"]) / 1e3 for (d,) in rows]


def submit_run(kind: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """``args.submits`` submissions to a fresh daemon by ``mode`` (``CLIENT-FORMAT``, e.g. ``lean-json``)."""
    client, fmt = mode.split("-")
    if client not in CLIENTS or fmt not in CTYPES:
        raise SystemExit(f"--modes: expected CLIENT-FORMAT with CLIENT in {sorted(CLIENTS)} and FORMAT in "
                         f"{sorted(CTYPES)}, got {mode!r}")
    db_run = fresh_db(args.pg_url) if kind == "postgresql" else None
    proc, url, token, url_db = fresh_daemon(kind, db_run, args.sqlite_sync)
    try:
        bodies = [(f"b{i}", job_body(i, fmt)) for i in range(args.submits)]
        t_begin = time.time()
        cpu0, ccpu0, th0 = cpu_seconds(proc.pid), time.process_time(), thread_cpu(proc.pid)
        lat, wall = uvloop.run(submit_load(url, token, bodies, args.clients, client, fmt))
        cpu, ccpu, th1 = cpu_seconds(proc.pid) - cpu0, time.process_time() - ccpu0, thread_cpu(proc.pid)
        t_end = time.time()
        load = os.getloadavg()[0]
    finally:
        stop(proc)
    ms = decisions(url_db, t_begin, t_end)
    return {"db": kind, "mode": mode, "sqlite_sync": args.sqlite_sync if kind == "sqlite" else None,
            "daemon_src": args.daemon_src, "client": client, "body": fmt, "submits": args.submits,
            "clients": args.clients, "submit_wall_s": wall, "submits_per_s": args.submits / wall,
            "submit": pcts(lat), "daemon_cpu_ms_per_submit": cpu / args.submits * 1e3,
            "client_cpu_ms_per_submit": ccpu / args.submits * 1e3, "loadavg_1min": load,
            "daemon_cpu_ms_per_submit_by_thread": {k: (th1[k] - th0[k]) / args.submits * 1e3 for k in th1},
            "decision_under_load": pcts(ms) if ms else None}


def read_run(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """List and get latency over a store of ``args.history`` finished jobs (sequential requests)."""
    db_run = fresh_db(args.pg_url) if kind == "postgresql" else None
    proc, url, token, url_db = fresh_daemon(kind, db_run)
    try:
        lo, hi = bulk_history(url_db, args.history)
        rng = np.random.default_rng(0)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
            total = hi - lo + 1
            first = timed(c, [("/v1/jobs", {"limit": 100})] * args.requests)
            deep_after = lo + int(total * 0.99)
            deep = timed(c, [("/v1/jobs", {"limit": 100, "after": deep_after})] * args.requests)
            gets = timed(c, [(f"/v1/jobs/{int(s)}", {}) for s in rng.integers(lo, hi + 1, args.requests)])
            filt = timed(c, [("/v1/jobs", {"limit": 100, "state": "pending"})] * args.requests)
        load = os.getloadavg()[0]
    finally:
        stop(proc)
    return {"db": kind, "jobs_in_store": total, "list_first_page": pcts(first), "list_deep_page": pcts(deep),
            "list_state_filter": pcts(filt), "get": pcts(gets), "loadavg_1min": load}


def fresh_db(pg_url: str) -> str:
    """A new PostgreSQL database on the server of ``pg_url``; its URL."""
    name = "bench_" + uuid.uuid4().hex[:8]
    eng = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    eng.dispose()
    return pg_url.rsplit("/", 1)[0] + "/" + name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submits", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--modes", default="httpx-yaml,lean-yaml,lean-json",
                    help="submit runs, each on a fresh daemon: CLIENT-FORMAT, CLIENT httpx or lean, "
                         "FORMAT yaml or json")
    ap.add_argument("--history", type=int, default=100_000, help="jobs in the store for list/get (0: skip)")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--sqlite-sync", default="normal", choices=("normal", "full"),
                    help="the daemon's --sqlite-sync for the submit runs")
    ap.add_argument("--daemon-src", default=None,
                    help="run the daemon from this src directory (e.g. an older commit's, for a before/after pair)")
    ap.add_argument("--pg-url", default=os.environ.get("COHABIT_TEST_PG_URL"))
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "service.json")
    args = ap.parse_args()
    global DAEMON_SRC
    DAEMON_SRC = args.daemon_src
    kinds = ["sqlite"] + (["postgresql"] if args.pg_url else [])
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    submits = [submit_run(k, m, args) for k in kinds for m in modes]
    reads = [read_run(k, args) for k in kinds] if args.history else []

    def pp(d: dict[str, float] | None) -> str:
        return "-" if d is None else f"{d['p50_ms']:.1f} / {d['p99_ms']:.1f}"

    tab = Table(title=f"cohabit service: {args.submits} submits by {args.clients} concurrent clients "
                      f"({os.cpu_count()} cores); client httpx = httpx.AsyncClient, lean = raw asyncio HTTP/1.1")
    for col in ("db", "client", "body", "submits/s", "submit p50/p99 ms", "daemon CPU ms/submit",
                "of which api / sched / pool", "client CPU ms/submit", "decision p50/p99 ms", "load avg"):
        tab.add_column(col)
    for r in submits:
        tab.add_row(r["db"], r["client"], r["body"], f"{r['submits_per_s']:.0f}", pp(r["submit"]),
                    f"{r['daemon_cpu_ms_per_submit']:.2f}",
                    " / ".join(f"{v:.2f}" for v in r["daemon_cpu_ms_per_submit_by_thread"].values()),
                    f"{r['client_cpu_ms_per_submit']:.2f}",
                    pp(r["decision_under_load"]), f"{r['loadavg_1min']:.1f}")
    Console(width=200).print(tab)
    if reads:
        rt = Table(title=f"list / get at {reads[0]['jobs_in_store']:,} jobs, {args.requests} sequential requests each")
        for col in ("db", "list 1st p50/p99 ms", "list deep p50/p99 ms", "list state= p50/p99", "get p50/p99 ms",
                    "load avg"):
            rt.add_column(col)
        for r in reads:
            rt.add_row(r["db"], pp(r["list_first_page"]), pp(r["list_deep_page"]), pp(r["list_state_filter"]),
                       pp(r["get"]), f"{r['loadavg_1min']:.1f}")
        Console(width=200).print(rt)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    args.json.write_text(json.dumps({"submit": submits, "read": reads, "loadavg_1_5_15": load,
                                     "cores": os.cpu_count(), "args": {k: v for k, v in vars(args).items()
                                                                       if k not in ("json", "pg_url")}}, indent=2))
    print(f"wrote {args.json} (load average 1/5/15 min at the end: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f})")


if __name__ == "__main__":
    main()
