"""Command line of the service: ``cohabit serve`` and the client commands (Slurm's and ``ray job``'s
habits): ``submit``, ``status``, ``queue``, ``cancel``, ``logs``, ``top``, ``tenant``, ``policy``,
``whatif``. Every client command takes ``--json``; server URL and token come from ``--url`` /
``--token``, ``COHABIT_URL`` / ``COHABIT_TOKEN`` or the config file (:mod:`.client`).

Mounted onto the main app by name (imported on use): :data:`cohabit.cli_lazy.LAZY_COMMANDS`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from .client import Client, ClientError, resolve
from .daemon import DEFAULT_PORT

out = Console()
err = Console(stderr=True)

Url = Annotated[Optional[str], typer.Option("--url", help="Service URL (default: COHABIT_URL, config file, "
                                                          f"http://127.0.0.1:{DEFAULT_PORT}).")]
Tok = Annotated[Optional[str], typer.Option("--token", help="Bearer token (default: COHABIT_TOKEN, config file, "
                                                            "the default state dir's admin.token).")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def _fail(msg: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {msg}", markup=True, highlight=False)
    raise typer.Exit(code)


def _client(url: str | None, token: str | None) -> Client:
    try:
        u, t = resolve(url, token)
    except ClientError as exc:
        _fail(str(exc))
    return Client(u, t)


def _call(c: Client, method: str, path: str, **kw: Any) -> Any:
    try:
        return c.request(method, path, **kw)
    except ClientError as exc:
        _fail(str(exc), 1 if exc.status and exc.status < 500 else 2)


def _emit(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _fmt_t(t: float | None) -> str:
    return "-" if t is None else time.strftime("%H:%M:%S", time.localtime(t))


def _jobs_table(jobs: list[dict[str, Any]], title: str) -> Table:
    tab = Table(title=title)
    for col in ("ID", "NAME", "TENANT", "STATE", "PROGRESS", "SUBMIT", "START", "REASON"):
        tab.add_column(col)
    for j in jobs:
        total = j.get("total_iterations")
        prog = f"{j['iterations']:.0f}/{total}" if total else f"{j['iterations']:.0f}"
        tab.add_row(str(j["id"]), j["name"], j["tenant"], j["state"], prog, _fmt_t(j["submit_time"]),
                    _fmt_t(j["start_time"]), j.get("pending_reason") or j.get("reason") or "")
    return tab


# ------------------------------------------------------------------- serve
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = DEFAULT_PORT,
    state_dir: Annotated[Optional[Path], typer.Option(help="Store, checkpoints, logs and admin.token (default: "
                                                           "$XDG_DATA_HOME/cohabit or ~/.local/share/cohabit).")] = None,
    db: Annotated[Optional[str], typer.Option(help="Database URL (default: SQLite in the state dir); "
                                                   "postgresql://user:pass@host/db for PostgreSQL.")] = None,
    backend: Annotated[str, typer.Option(help="'local' (processes on this machine) or 'ray'.")] = "local",
    ray_address: Annotated[Optional[str], typer.Option(help="With --backend ray: an existing cluster.")] = None,
    cluster: Annotated[Optional[str], typer.Option(help="Cluster preset or YAML (default: this machine, one "
                                                        "logical node per core).")] = None,
    nodes: Annotated[Optional[int], typer.Option(help="Logical nodes of the default local cluster.")] = None,
    policy: Annotated[Optional[str], typer.Option(help="Policy NAME[:k=v] (default: the store's, else fifo).")] = None,
    checkpoint_interval: Annotated[float, typer.Option(help="Seconds between periodic checkpoints.")] = 2.0,
    sqlite_sync: Annotated[str, typer.Option(help="SQLite store: 'normal' (durable across a crash of the daemon) "
                                                  "or 'full' (fsync per commit: across power loss too).")] = "normal",
) -> None:
    """Run cohabit as a long-running service: scheduler loop + REST API on 127.0.0.1."""
    from ..policies import make_policy
    from ..runtime.runner import local_cluster
    from ..spec.yamlio import SpecError, cluster_from_arg
    from .daemon import ServiceConfig, default_state_dir
    from .daemon import serve as run_server

    if backend not in ("local", "ray"):
        _fail(f"--backend: expected 'local' or 'ray', got {backend!r}")
    if not 0 < port < 65536:
        _fail(f"--port: expected 1..65535, got {port}")
    if checkpoint_interval <= 0:
        _fail(f"--checkpoint-interval: expected seconds > 0, got {checkpoint_interval:g}")
    try:
        spec = cluster_from_arg(cluster) if cluster else local_cluster(nodes)
        if policy:
            make_policy(policy)
    except (SpecError, ValueError) as exc:
        _fail(str(exc))
    if sqlite_sync not in ("normal", "full"):
        _fail(f"--sqlite-sync: expected 'normal' or 'full', got {sqlite_sync!r}")
    if db is not None and not db.startswith(("sqlite:", "postgresql:", "postgresql+psycopg:")):
        _fail(f"--db: expected a sqlite:/// or postgresql:// URL, got {db!r}")
    cfg = ServiceConfig(state_dir=state_dir or default_state_dir(), cluster=spec, db_url=db, policy=policy,
                        backend=backend, ray_address=ray_address, checkpoint_interval=checkpoint_interval,
                        sqlite_sync=sqlite_sync)
    try:
        run_server(cfg, host, port, announce=lambda m: err.print(m, highlight=False))
    except OSError as exc:
        _fail(f"cannot serve on {host}:{port}: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - a store that cannot be opened, a bad URL, ...
        _fail(f"{type(exc).__name__}: {exc}")


# ------------------------------------------------------------------ client
def submit(jobs_yaml: Annotated[Path, typer.Argument(help="YAML file of jobs (the format `cohabit run` takes).")],
           idempotency_key: Annotated[Optional[str], typer.Option(help="Retrying with the same key returns the "
                                                                       "same jobs.")] = None,
           url: Url = None, token: Tok = None, as_json: Json = False) -> None:
    """Submit jobs to the service (like sbatch)."""
    try:
        body = jobs_yaml.read_bytes()
    except OSError as exc:
        _fail(f"{jobs_yaml}: {exc.strerror}")
    headers = {"content-type": "application/yaml", "x-file-name": str(jobs_yaml)}
    if idempotency_key:
        headers["idempotency-key"] = idempotency_key
    res = _call(_client(url, token), "POST", "/v1/jobs", content=body, headers=headers)
    if as_json:
        _emit(res)
        return
    for j in res["jobs"]:
        out.print(f"submitted job {j['id']} ({j['name']})" + ("" if res["created"] else " [already submitted]"))


def status(job: Annotated[Optional[int], typer.Argument(help="A job id; none: your jobs.")] = None,
           state: Annotated[Optional[str], typer.Option(help="Only jobs in this state.")] = None,
           limit: Annotated[int, typer.Option(help="At most this many jobs.")] = 100,
           url: Url = None, token: Tok = None, as_json: Json = False) -> None:
    """Show one job (state, reason, queue position, placement, progress, events) or a list."""
    c = _client(url, token)
    if job is None:
        params: dict[str, Any] = {"limit": limit}
        if state:
            params["state"] = state
        res = _call(c, "GET", "/v1/jobs", params=params)
        if as_json:
            _emit(res)
        else:
            out.print(_jobs_table(res["jobs"], "jobs"))
        return
    j = _call(c, "GET", f"/v1/jobs/{job}")
    if as_json:
        _emit(j)
        return
    out.print(f"[bold]job {j['id']}[/] {j['name']} ({j['tenant']}): [bold]{j['state']}[/]"
              + (f" — {j['pending_reason']}" if j.get("pending_reason") else "")
              + (f" — {j['reason']}" if j.get("reason") else ""))
    if j.get("queue_position"):
        out.print(f"queue position {j['queue_position']}")
    if j.get("placement"):
        out.print(f"nodes {j['placement']['nodes']} alloc {j['placement']['alloc']}")
    out.print(f"iterations {j['iterations']:.0f}/{j.get('total_iterations') or '?'}; runs {j['runs']}; "
              f"checkpoint {j['checkpoint']['iteration'] if j.get('checkpoint') else '-'}")
    for e in j.get("events", [])[-10:]:
        out.print(f"  t={e['time']:.1f} {e['kind']} {json.dumps(e['data'])[:100]}", highlight=False)


def queue(url: Url = None, token: Tok = None, as_json: Json = False) -> None:
    """The queue: running jobs, then waiting ones in order (like squeue)."""
    res = _call(_client(url, token), "GET", "/v1/queue")
    if as_json:
        _emit(res)
    else:
        out.print(_jobs_table(res["jobs"], "queue"))


def cancel(job: Annotated[int, typer.Argument(help="The job id.")], url: Url = None, token: Tok = None,
           as_json: Json = False) -> None:
    """Cancel a job (like scancel); a running job checkpoints and stops."""
    res = _call(_client(url, token), "POST", f"/v1/jobs/{job}/cancel")
    if as_json:
        _emit(res)
    else:
        out.print(f"cancel of job {job} requested (state {res['state']})")


def logs(job: Annotated[int, typer.Argument(help="The job id.")],
         follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines until the job ends.")] = False,
         tail: Annotated[int, typer.Option(help="Last lines to print first.")] = 100,
         rank: Annotated[int, typer.Option(help="Which task's log.")] = 0,
         url: Url = None, token: Tok = None, as_json: Json = False) -> None:
    """Print a job's task log."""
    c = _client(url, token)
    if follow and not as_json:
        try:
            for chunk in c.stream(f"/v1/jobs/{job}/logs", tail=tail, follow="true", rank=rank):
                sys.stdout.write(chunk)
                sys.stdout.flush()
        except ClientError as exc:
            _fail(str(exc), 1)
        return
    text = _call(c, "GET", f"/v1/jobs/{job}/logs", params={"tail": tail, "rank": rank})
    if as_json:
        _emit({"job": job, "rank": rank, "log": text})
    else:
        sys.stdout.write(text)


def _top_table(snap: dict[str, Any], jobs: list[dict[str, Any]]) -> Table:
    names = snap.get("resources", [])
    cap = {r: sum(n["capacity"][r] for n in snap.get("nodes", [])) for r in names}
    used = {r: cap[r] - sum(n["free"][r] for n in snap.get("nodes", [])) for r in names}
    util = "  ".join(f"{r} {used[r]:g}/{cap[r]:g} ({100 * used[r] / cap[r]:.0f}%)" for r in names if cap[r] > 0)
    tab = Table(title=f"cohabit top — policy {snap.get('policy')} — {util}")
    for col in ("ID", "NAME", "TENANT", "STATE", "PROGRESS", "", "NODES", "MS/IT", "LOSS"):
        tab.add_column(col)
    running = snap.get("running", {})
    for j in jobs:
        live = running.get(f"j{j['id']}")
        it = live["iterations"] if live else j["iterations"]
        total = (live or {}).get("total") or j.get("total_iterations")
        frac = min(1.0, it / total) if total else 0.0
        bar = "█" * int(frac * 20) + "░" * (20 - int(frac * 20))
        ms = f"{live['iter_time'] * 1e3:.1f}" if live and live.get("iter_time") else ""
        loss = f"{live['metrics']['loss']:.4g}" if live and "loss" in live.get("metrics", {}) else ""
        tab.add_row(str(j["id"]), j["name"], j["tenant"], j["state"], f"{it:.0f}/{total or '?'}", bar,
                    ",".join(map(str, live["nodes"])) if live else "", ms, loss)
    return tab


def top(interval: Annotated[float, typer.Option(help="Seconds between refreshes.")] = 1.0,
        once: Annotated[bool, typer.Option(help="Print one table and exit.")] = False,
        url: Url = None, token: Tok = None, as_json: Json = False) -> None:
    """A live table of running and waiting jobs with progress bars and cluster utilisation."""
    c = _client(url, token)

    def fetch() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return _call(c, "GET", "/v1/cluster"), _call(c, "GET", "/v1/queue")["jobs"]

    if as_json:
        snap, jobs = fetch()
        _emit({"cluster": snap, "queue": jobs})
        return
    if once:
        out.print(_top_table(*fetch()))
        return
    with Live(_top_table(*fetch()), console=out, refresh_per_second=4) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(_top_table(*fetch()))
        except KeyboardInterrupt:
            pass


def tenant(name: Annotated[str, typer.Argument(help="Tenant name.")],
           weight: Annotated[Optional[float], typer.Option(help="Fair-share weight (DRF, Themis, Dorm).")] = None,
           max_gpus: Annotated[Optional[float], typer.Option(help="Quota: GPUs of the tenant's admitted jobs.")] = None,
           max_running: Annotated[Optional[int], typer.Option(help="Quota: the tenant's admitted jobs.")] = None,
           update: Annotated[bool, typer.Option(help="Change an existing tenant instead of creating one.")] = False,
           url: Url = None, token: Tok = None, as_json: Json = False) -> None:
    """Create a tenant and print its token once (admin), or change its weight and quotas (--update)."""
    c = _client(url, token)
    body = {k: v for k, v in (("weight", weight), ("max_gpus", max_gpus), ("max_running", max_running))
            if v is not None}
    if update:
        res = _call(c, "PATCH", f"/v1/tenants/{name}", json=body)
    else:
        res = _call(c, "POST", "/v1/tenants", json={"name": name, **body})
    if as_json:
        _emit(res)
    elif update:
        out.print(res)
    else:
        out.print(f"tenant {name} created; its token (shown once): {res['token']}", highlight=False)


def policy(name: Annotated[Optional[str], typer.Argument(help="Switch to this policy (admin); none: show.")] = None,
           url: Url = None, token: Tok = None, as_json: Json = False) -> None:
    """Show the active policy, or switch it live."""
    c = _client(url, token)
    res = _call(c, "PUT", "/v1/policy", json={"policy": name}) if name else _call(c, "GET", "/v1/policy")
    if as_json:
        _emit(res)
    else:
        out.print(f"policy: {res['policy']}")


def whatif(policy: Annotated[str, typer.Option(help="Policies to compare, comma-separated (NAME[:k=v]).")],
           hours: Annotated[Optional[float], typer.Option(help="Simulate at most this many hours from now.")] = None,
           url: Url = None, token: Tok = None, as_json: Json = False) -> None:
    """Simulate the live queue and running jobs under other policies from now on (admin)."""
    from ..policies import policy_list
    from .whatif import simulate_from

    try:
        names = policy_list(policy)
    except ValueError as exc:
        _fail(str(exc))
    if hours is not None and not hours > 0:
        _fail(f"--hours: expected a number > 0, got {hours:g}")
    state = _call(_client(url, token), "GET", "/v1/whatif/state")
    rows = simulate_from(state, names, hours)
    if as_json:
        _emit({"active_policy": state["policy"], "results": rows})
        return
    tab = Table(title=f"what-if from now: {rows[0]['jobs'] if rows else 0} jobs (active policy {state['policy']})")
    for col in ("policy", "avg JCT s", "avg queueing s", "makespan s", "allocated", "used", "unfinished"):
        tab.add_column(col)
    for r in rows:
        util = " ".join(f"{k} {v:.0%}" for k, v in r["allocated_share"].items())
        used = " ".join(f"{k} {v:.0%}" for k, v in r["used_share"].items()) or "-"
        f = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        tab.add_row(r["policy"], f(r["avg_jct_s"]), f(r["avg_queueing_s"]), f(r["makespan_s"]), util, used,
                    str(r["unfinished"]))
    out.print(tab)
    if rows and rows[0]["skipped_no_speed"]:
        out.print(f"left out (no speed observed yet and no history): jobs {rows[0]['skipped_no_speed']}")

