"""``cohabit run``: run a YAML file of real jobs under one or more policies, with live progress.

Mount with ``app.command("run")(cohabit.runtime.cli.run)``. Each policy runs
the whole workload in turn on a fresh :class:`~cohabit.runtime.local.LocalBackend`
(or, with ``--backend ray``, :class:`~cohabit.runtime.ray_backend.RayBackend`
on one Ray connection shared by the policies)
(real time: a workload of one minute takes one minute per policy), then the
comparison table of ``cohabit simulate`` is printed, computed the same way
from the run's record, followed by each job's outcome (final loss/accuracy,
preemptions, restarts).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console() if Console().is_terminal else Console(width=160)
err = Console(stderr=True)

BACKENDS = ("local", "ray")
#: Bounds of the numeric options (far above any sensible value, far below overflow or a hang).
MAX_RESTARTS = 1000
MAX_INTERVAL_S = 1e6
MAX_BANDWIDTH_MBPS = 1e9
MAX_LOCAL_NODES = 4096


def _fail(msg: str) -> None:
    err.print(f"[bold red]error:[/] {msg}")
    raise typer.Exit(2)


class LiveBoard:
    """One progress bar per job: iterations, scheduler state, loss/accuracy, restarts."""

    def __init__(self, progress: Progress, specs: list[Any], label: str) -> None:
        self.progress = progress
        self.sched: Any = None
        self.backend_status: dict[str, Any] = {}
        self.tasks: dict[str, TaskID] = {}
        self._last = 0.0
        for s in specs:
            self.tasks[s.id] = progress.add_task(f"{label} · {s.id}", total=s.iterations, info="waiting")

    def bind(self, sched: Any) -> None:
        self.sched = sched
        self.backend_status = getattr(sched.backend, "status", {})

    def on_message(self, job: str, msg: dict[str, Any]) -> None:
        t = time.perf_counter()
        if msg.get("type") in ("progress",) and t - self._last < 0.1:
            return
        self._last = t
        self.refresh()

    def refresh(self) -> None:
        if self.sched is None:
            return
        for jid, task in self.tasks.items():
            jv = self.sched.jobs.get(jid)
            st = self.backend_status.get(jid)
            state = str(jv.state) if jv is not None else "not submitted"
            parts = [state]
            if st is not None:
                if st.state in ("restarting", "failed") and jv is not None and str(jv.state) == "running":
                    parts = [st.state]
                m = st.metrics
                if "loss" in m:
                    parts.append(f"loss {m['loss']:.4g}")
                if "accuracy" in m:
                    parts.append(f"acc {m['accuracy']:.3f}")
                if st.iter_time:
                    parts.append(f"{st.iter_time * 1e3:.2f} ms/it")
                if st.restarts:
                    parts.append(f"restarts {st.restarts}")
            if jv is not None and jv.preemptions:
                parts.append(f"paused {jv.preemptions}x")
            done = st.iterations if st is not None else 0
            total = (st.total if st is not None and st.total else None) or (jv.spec.iterations if jv else None)
            self.progress.update(task, completed=done, total=total, info=" · ".join(parts))


def run(
    jobs_yaml: Annotated[Path, typer.Argument(help="YAML file of jobs; each names a workload (see examples/real_jobs.yaml).")],
    policy: Annotated[str, typer.Option(help="Policy name(s), comma-separated; each runs the whole workload in turn.")],
    backend: Annotated[str, typer.Option(help="Where jobs run: 'local' (processes on this machine) or 'ray' (Ray actors).")] = "local",
    ray_address: Annotated[Optional[str], typer.Option(help="With --backend ray: an existing Ray cluster ('auto' or HOST:PORT); default: start a local one for this run.")] = None,
    nodes: Annotated[Optional[int], typer.Option(help="Logical nodes (default: one per usable core; each gets cpu = cores // nodes and 80% of memory / nodes; with --ray-address: one per Ray node, with its CPU and memory).")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write metrics and per-job results as JSON here.")] = None,
    workdir: Annotated[Optional[Path], typer.Option(help="Keep checkpoints and task logs here (default: a temporary directory, removed after the run).")] = None,
    max_restarts: Annotated[int, typer.Option(help="Restarts from checkpoint allowed per job after a task dies.")] = 2,
    checkpoint_interval: Annotated[float, typer.Option(help="Seconds between periodic checkpoints of a running task.")] = 2.0,
    bandwidth_mbps: Annotated[Optional[float], typer.Option(help="Per-node budget (Mbit/s) shared by all parameter-server traffic entering or leaving a logical node (default: unlimited).")] = None,
    resume: Annotated[bool, typer.Option(help="With --workdir: continue each job from the checkpoint an earlier (interrupted) run left there.")] = False,
    fresh: Annotated[bool, typer.Option(help="With --workdir: discard checkpoints an earlier run left there and start every job over.")] = False,
) -> None:
    """Run real training jobs under a policy on this machine, with live progress, then compare policies."""
    from .. import clichecks as check
    from ..policies import policy_list
    from ..spec.yamlio import SpecError, load_jobs
    from .runner import check_jobs, local_cluster

    problem = check.first(
        check.number("--max-restarts", max_restarts, lo=0, hi=MAX_RESTARTS),
        check.number("--checkpoint-interval", checkpoint_interval, lo=0, lo_open=True, hi=MAX_INTERVAL_S),
        check.number("--bandwidth-mbps", bandwidth_mbps, lo=0, hi=MAX_BANDWIDTH_MBPS),
        check.number("--nodes", nodes, lo=1, hi=MAX_LOCAL_NODES),
        check.output_file("--json", json_out), check.output_dir("--workdir", workdir),
    )
    if problem:
        _fail(problem)
    if backend not in BACKENDS:
        _fail(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    if ray_address is not None and backend != "ray":
        _fail("--ray-address needs --backend ray")
    try:
        names = policy_list(policy)
    except ValueError as exc:
        _fail(str(exc))
    try:
        specs = load_jobs(jobs_yaml)
    except SpecError as exc:
        _fail(str(exc))
    if not specs:
        _fail(f"{jobs_yaml}: no jobs")
    problem = _workdir_problem(workdir, specs, names, resume=resume, fresh=fresh)
    if problem:
        _fail(problem)
    problems = check_jobs(specs)
    if problems:
        _fail(f"{jobs_yaml}: cannot run these jobs for real:\n  " + "\n  ".join(problems))
    from_ray = ray_address is not None and nodes is None  # an existing cluster: its own nodes and capacities
    try:
        cluster = None if from_ray else local_cluster(nodes)
    except ValueError as exc:
        _fail(f"--nodes: {exc}")
    backend_cls, started_ray = _backend_class(backend, ray_address)
    try:
        if cluster is None:
            from .ray_backend import ray_cluster_spec

            cluster = ray_cluster_spec()
        with _stop_on_signals():
            _run_and_report(specs, cluster, names, backend, backend_cls, jobs_yaml, workdir, json_out,
                            {"max_restarts": max_restarts, "checkpoint_interval": checkpoint_interval,
                             "bandwidth_mbps": bandwidth_mbps, "resume": resume})
    except KeyboardInterrupt:
        kept = f"; checkpoints kept in {workdir} (continue with --resume)" if workdir is not None else ""
        err.print(f"[bold red]interrupted:[/] running jobs were checkpointed and stopped{kept}")
        raise typer.Exit(130) from None
    finally:
        if started_ray:
            import ray

            ray.shutdown()


def _workdir_problem(workdir: Path | None, specs: list[Any], names: list[str], *, resume: bool,
                     fresh: bool) -> str | None:
    """Refuse to silently discard an earlier run's checkpoints: ask for --resume or --fresh."""
    from ..policies import make_policy
    from .checkpoint import CheckpointStore
    from .ps.parts import checkpoint_iteration

    if resume and fresh:
        return "--resume and --fresh exclude each other"
    if workdir is None:
        return "--resume and --fresh need --workdir (the directory of the earlier run)" if resume or fresh else None
    if resume or fresh:
        return None
    for name in names:
        root = workdir / make_policy(name).name.replace("/", "_") / "checkpoints"
        if not root.is_dir():
            continue
        store = CheckpointStore(root, fsync=False)
        left = [s.id for s in specs if store.latest(s.id) is not None or checkpoint_iteration(root, s.id) is not None]
        if left:
            return (f"--workdir {workdir} holds checkpoints of {len(left)} job(s) from an earlier run "
                    f"(e.g. {left[0]!r} under {name}); pass --resume to continue them or --fresh to start over")
    return None


class _stop_on_signals:
    """Within: SIGTERM (and Ctrl-C) checkpoint the running jobs, stop their tasks and clean up, then
    raise KeyboardInterrupt (the backends' ``close`` does the work; see ``request_shutdown``)."""

    def __enter__(self) -> None:
        import signal

        from .local import request_shutdown_all

        def stop(signum: int, frame: Any) -> None:
            request_shutdown_all()
            raise KeyboardInterrupt

        self._old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}

    def __exit__(self, *exc: Any) -> None:
        import signal

        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def _run_and_report(specs: list[Any], cluster: Any, names: list[str], backend: str, backend_cls: Any,
                    jobs_yaml: Path, workdir: Path | None, json_out: Path | None, options: dict[str, Any]) -> None:
    """Run every policy, then print the comparison table (and write the JSON); ``options`` go to the backend."""
    from ..report.table import print_comparison

    cap = cluster.nodes[0].capacity
    console.print(f"[bold]{len(specs)}[/] real jobs from [bold]{jobs_yaml}[/] on {len(cluster.nodes)} logical "
                  f"node(s) of cpu={cap['cpu']:g}, mem_gb={cap['mem_gb']:g} ({backend_cls.__name__})")
    results, outcomes = run_policies(specs, cluster, names, workdir=workdir, backend_cls=backend_cls, **options)
    print_comparison(results, console=console, title=f"{jobs_yaml.name}: real execution on {len(cluster.nodes)} "
                                                   f"logical node(s), {backend} backend")
    if json_out is not None:
        write_json(json_out, outcomes, jobs=str(jobs_yaml), cluster=cluster, backend=backend)
        console.print(f"wrote {json_out}")


def _backend_class(backend: str, ray_address: str | None) -> tuple[Any, bool]:
    """The backend class for ``--backend``, and whether Ray was started/connected here (to shut down)."""
    from .local import LocalBackend

    if backend == "local":
        return LocalBackend, False
    try:
        from .ray_backend import RayBackend, connect
    except ImportError as exc:
        _fail(f"--backend ray needs Ray: pip install 'cohabit[ray]' ({exc})")
    try:
        started = connect(ray_address)  # once for every policy; each RayBackend then reuses it
    except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError... from ray.init
        _fail(f"cannot {'connect to Ray at ' + ray_address if ray_address else 'start Ray'}: {exc}")
    return RayBackend, started


def run_policies(specs: list[Any], cluster: Any, names: list[str], *, workdir: Path | None = None,
                 max_restarts: int = 2, checkpoint_interval: float = 2.0, bandwidth_mbps: float | None = None,
                 backend_cls: Any = None, resume: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``specs`` for real under each policy in turn, with live progress bars and a per-job table.

    ``bandwidth_mbps``: per-node budget of parameter-server traffic (None: unlimited).
    ``backend_cls``: LocalBackend (default) or RayBackend (Ray already connected).
    ``resume``: each job's first start continues from a checkpoint an earlier run left under ``workdir``.

    Returns (metrics by policy name, run outcome by policy name). Used by ``cohabit run`` and by the real
    part of ``cohabit demo``.
    """
    from ..policies import make_policy
    from .local import LocalBackend
    from .runner import run_local

    results: dict[str, Any] = {}
    outcomes: dict[str, Any] = {}
    for name in names:
        pol = make_policy(name)
        root = (workdir / pol.name.replace("/", "_")) if workdir is not None else None
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TextColumn("{task.fields[info]}"), console=err) as bar:
            board = LiveBoard(bar, specs, pol.name)
            out = run_local(specs, cluster, pol, root=root, listener=board.on_message, on_scheduler=board.bind,
                            backend_cls=backend_cls or LocalBackend, max_restarts=max_restarts,
                            checkpoint_interval=checkpoint_interval, bandwidth_mbps=bandwidth_mbps, resume=resume)
            board.refresh()
        results[pol.name] = out.metrics
        outcomes[pol.name] = out
        _print_jobs(pol.name, out)
    return results, outcomes


def _print_jobs(policy: str, out: Any) -> None:
    """Per-job outcome of one real run."""
    sub = {e.job: e.time for e in out.result.record if e.kind == "submitted"}
    table = Table(title=f"{policy}: jobs", title_justify="left")
    for col in ("job", "state", "JCT (s)", "iterations", "loss", "accuracy", "paused", "restarts", "note"):
        table.add_column(col)
    for jid, jv in out.result.jobs.items():
        st = out.status.get(jid)
        m = st.metrics if st is not None else {}
        jct = f"{jv.end_time - sub[jid]:.1f}" if jv.end_time is not None and str(jv.state) == "finished" else "—"
        table.add_row(
            jid, str(jv.state), jct, str(st.iterations) if st is not None else "0",
            f"{m['loss']:.4g}" if "loss" in m else "—", f"{m['accuracy']:.3f}" if "accuracy" in m else "—",
            str(jv.preemptions), str(st.restarts if st is not None else 0),
            "; ".join(x for x in [jv.reason or (st.reason if st else ""), *(st.checkpoint_events if st else [])] if x),
        )
    console.print(table)


def write_json(path: Path, outcomes: dict[str, Any], *, jobs: str, cluster: Any, backend: str = "local") -> None:
    """Metrics per policy (as ``simulate --json``) plus each job's real outcome and the backend's timings."""
    payload: dict[str, Any] = {"jobs": jobs, "cluster": cluster.name, "nodes": len(cluster.nodes), "backend": backend,
                               "policies": {}, "real": {}}
    for name, out in outcomes.items():
        payload["policies"][name] = out.metrics.to_json()
        payload["real"][name] = {
            "jobs": {jid: {"state": st.state, "iterations": st.iterations, "metrics": st.metrics,
                           "restarts": st.restarts, "reason": st.reason, "checkpoint_events": st.checkpoint_events}
                     for jid, st in out.status.items()},
            "timings": out.timings,
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str))
