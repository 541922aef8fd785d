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
from rich.progress import Progress, TaskID, TextColumn
from rich.table import Table
from rich.text import Text

from ..cli_common import err, escape, fail, finish

console = Console() if Console().is_terminal else Console(width=160)

BACKENDS = ("local", "ray")
#: --checkpoint choices and the backend's checkpoint_policy each names (ratchet/trigger.py).
CHECKPOINT_POLICIES = {"interval": "fixed", "ratchet": "ratchet"}
#: Bounds of the numeric options (far above any sensible value, far below overflow or a hang).
MAX_RESTARTS = 1000
MAX_INTERVAL_S = 1e6
MAX_BANDWIDTH_MBPS = 1e9
MAX_PAUSED_MB = 1e7
MAX_LOCAL_NODES = 4096


_fail = fail  # error with user text escaped, exit code 2 (cli_common)


class LiveBoard:
    """One progress bar per job: iterations, scheduler state, loss/accuracy, restarts."""

    def __init__(self, progress: Progress, specs: list[Any], label: str) -> None:
        self.progress = progress
        self.sched: Any = None
        self.backend_status: dict[str, Any] = {}
        self.tasks: dict[str, TaskID] = {}
        self._last = 0.0
        for s in specs:
            self.tasks[s.id] = progress.add_task(escape(f"{label} · {s.id}"), total=s.iterations, info="waiting")

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
            self.progress.update(task, completed=done, total=total, info=escape(" · ".join(parts)))


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
    paused_memory_mb: Annotated[Optional[float], typer.Option(help="Ratchet's tiers: keep paused single-task jobs' states in memory up to this many MB (the rest written to the checkpoint store); default: every pause writes to the store.")] = None,
    checkpoint: Annotated[str, typer.Option(help="When running tasks checkpoint: 'interval' (every --checkpoint-interval seconds) or 'ratchet' (Ratchet's trigger: as often as CheckFreq's 3.5% overhead bound allows, from measured checkpoint costs; the first after --checkpoint-interval).")] = "interval",
    bandwidth_mbps: Annotated[Optional[float], typer.Option(help="Per-node budget (Mbit/s) shared by all parameter-server traffic entering or leaving a logical node (default: unlimited).")] = None,
    plot: Annotated[Optional[Path], typer.Option(help="Write the comparison plot (JCT CDF, allocated and used share per policy) here, as `cohabit simulate --plot`.")] = None,
    columns: Annotated[Optional[str], typer.Option(help="Table columns, comma-separated (e.g. avg-jct,alloc-cpu), or 'all'; default: the standard set.")] = None,
    cluster_arg: Annotated[Optional[str], typer.Option("--cluster", help="Logical nodes from a cluster YAML file or preset instead of --nodes; GPU nodes (gpu: N) give each task CUDA_VISIBLE_DEVICES of its devices: physical ids from a node's labels: {gpu_ids: \"0,1\"}, else this machine's GPUs in turn.")] = None,
    resume: Annotated[bool, typer.Option(help="With --workdir: continue each job from the checkpoint an earlier (interrupted) run left there.")] = False,
    fresh: Annotated[bool, typer.Option(help="With --workdir: discard checkpoints an earlier run left there and start every job over.")] = False,
) -> None:
    """Run real training jobs under a policy on this machine, with live progress, then compare policies."""
    from .. import clichecks as check
    from ..policies import policy_list
    from ..report.table import select_columns
    from .runner import local_cluster

    problem = check.first(
        check.number("--max-restarts", max_restarts, lo=0, hi=MAX_RESTARTS),
        check.number("--checkpoint-interval", checkpoint_interval, lo=0, lo_open=True, hi=MAX_INTERVAL_S),
        check.number("--bandwidth-mbps", bandwidth_mbps, lo=0, hi=MAX_BANDWIDTH_MBPS),
        check.number("--paused-memory-mb", paused_memory_mb, lo=0, hi=MAX_PAUSED_MB),
        check.number("--nodes", nodes, lo=1, hi=MAX_LOCAL_NODES),
        check.output_file("--json", json_out), check.output_dir("--workdir", workdir),
    )
    if problem:
        _fail(problem)
    if checkpoint not in CHECKPOINT_POLICIES:
        _fail(f"--checkpoint: expected one of {', '.join(CHECKPOINT_POLICIES)}, got {checkpoint!r}")
    if backend not in BACKENDS:
        _fail(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    if ray_address is not None and backend != "ray":
        _fail("--ray-address needs --backend ray")
    try:
        names = policy_list(policy)
    except ValueError as exc:
        _fail(str(exc))
    if bandwidth_mbps is not None and bandwidth_mbps < 0:
        _fail(f"--bandwidth-mbps: expected a number of Mbit/s >= 0 (0: unlimited), got {bandwidth_mbps:g}")
    if cluster_arg is not None and nodes is not None:
        _fail("give --cluster or --nodes, not both")
    from_ray = ray_address is not None and nodes is None and cluster_arg is None  # an existing cluster's own nodes
    try:
        # a bandwidth budget is the nodes' network capacity: the used share of it is then reported
        net = (bandwidth_mbps or 0) / 1000 or None
        cluster = None if from_ray else local_cluster(nodes, net_gbps=net) if cluster_arg is None \
            else _load_cluster(cluster_arg)
    except ValueError as exc:
        _fail(f"--nodes: {exc}")
    specs = _load_real_jobs(jobs_yaml, cluster)
    problem = _workdir_problem(workdir, specs, names, resume=resume, fresh=fresh)
    if problem:
        _fail(problem)
    backend_cls, started_ray = _backend_class(backend, ray_address)
    try:
        if cluster is None:
            from .ray_backend import ray_cluster_spec

            cluster = ray_cluster_spec()
            specs = _load_real_jobs(jobs_yaml, cluster)  # resource names against the Ray cluster's
        try:  # a typo in --columns fails now, not after the runs
            select_columns(columns, {}, [r for r, q in cluster.capacity.items() if q > 0])
        except ValueError as exc:
            _fail(str(exc))
        _prepare_query_data(specs)
        with _stop_on_signals():
            _run_and_report(specs, cluster, names, backend, backend_cls, jobs_yaml, workdir, json_out,
                            {"max_restarts": max_restarts, "checkpoint_interval": checkpoint_interval,
                             "checkpoint_policy": CHECKPOINT_POLICIES[checkpoint], "paused_memory_mb": paused_memory_mb,
                             "bandwidth_mbps": bandwidth_mbps, "resume": resume}, plot=plot, columns=columns)
    except KeyboardInterrupt:
        kept = f"; checkpoints kept in {workdir} (continue with --resume)" if workdir is not None else ""
        err.print(f"[bold red]interrupted:[/] running jobs were checkpointed and stopped{escape(kept)}")
        raise typer.Exit(130) from None
    finally:
        if started_ray:
            import ray

            ray.shutdown()


def _load_real_jobs(jobs_yaml: Path, cluster: Any) -> list[Any]:
    """The jobs of ``jobs_yaml``, each checked at load time (file:line) for what real execution needs:
    a workload whose options build, and (when ``cluster`` is known) only resources the cluster has."""
    from ..spec.job import unknown_demands
    from ..spec.yamlio import SpecError, load_jobs
    from .runner import job_problems

    def check(spec: Any) -> list[tuple[tuple[str, ...], str]]:
        found = job_problems(spec)
        if cluster is not None:
            found += unknown_demands(spec, cluster.resource_names, f"cluster {cluster.name!r}")
        return found

    try:
        specs = load_jobs(jobs_yaml, check=check)
    except SpecError as exc:
        _fail(str(exc))
    if not specs:
        _fail(f"{jobs_yaml}: no jobs")
    return specs


def _load_cluster(arg: str) -> Any:
    """The ``--cluster`` of a real run, with its GPU id mapping checked before any process starts."""
    from ..spec.yamlio import SpecError, cluster_from_arg
    from .devices import DeviceMap, DeviceMapError

    try:
        cluster = cluster_from_arg(arg)
        DeviceMap.build(cluster)
    except (SpecError, DeviceMapError) as exc:
        _fail(f"--cluster {arg}: {exc}" if isinstance(exc, DeviceMapError) else str(exc))
    return cluster


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
                    jobs_yaml: Path, workdir: Path | None, json_out: Path | None, options: dict[str, Any], *,
                    plot: Path | None = None, columns: str | None = None) -> None:
    """Run every policy, then print the comparison table (and write the JSON and the plot); ``options`` go to
    the backend."""
    from ..report.table import print_comparison, select_columns

    cap = cluster.nodes[0].capacity
    gpus = f", gpu={cap['gpu']:g}" if cap["gpu"] else ""
    console.print(f"[bold]{len(specs)}[/] real jobs from [bold]{escape(str(jobs_yaml))}[/] on {len(cluster.nodes)} logical "
                  f"node(s) of cpu={cap['cpu']:g}, mem_gb={cap['mem_gb']:g}{gpus} ({backend_cls.__name__})")
    results, outcomes = run_policies(specs, cluster, names, workdir=workdir, backend_cls=backend_cls, **options)
    title = f"{jobs_yaml.name}: real execution on {len(cluster.nodes)} logical node(s), {backend} backend"
    print_comparison(results, console=console, title=escape(title), columns=select_columns(columns, results))
    if json_out is not None:
        write_json(json_out, outcomes, jobs=str(jobs_yaml), cluster=cluster, backend=backend)
        console.print(f"wrote {escape(str(json_out))}")
    if plot is not None:
        from ..report.plot import plot_comparison

        plot_comparison(results, plot, title=title)
        console.print(f"wrote {escape(str(plot))}")
    finish(o.result for o in outcomes.values())


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


def _prepare_query_data(specs: list[Any]) -> None:
    """Query jobs' TPC-H data, generated before any clock starts (cohabit.aqp.data.prepare_for)."""
    if not any(getattr(s, "kind", None) == "query" for s in specs):
        return
    from ..aqp.data import DataError, prepare_for

    try:
        prepare_for(specs, note=lambda text: err.print(escape(text)))
    except DataError as exc:
        _fail(str(exc))


def run_policies(specs: list[Any], cluster: Any, names: list[str], *, workdir: Path | None = None,
                 max_restarts: int = 2, checkpoint_interval: float = 2.0, bandwidth_mbps: float | None = None,
                 backend_cls: Any = None, resume: bool = False,
                 checkpoint_policy: str = "fixed",
                 paused_memory_mb: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``specs`` for real under each policy in turn, with live progress bars and a per-job table.

    ``bandwidth_mbps``: per-node budget of parameter-server traffic (None: unlimited).
    ``backend_cls``: LocalBackend (default) or RayBackend (Ray already connected).
    ``resume``: each job's first start continues from a checkpoint an earlier run left under ``workdir``.
    ``checkpoint_policy``: ``"fixed"`` (every ``checkpoint_interval`` s) or ``"ratchet"`` (Ratchet's trigger).
    ``paused_memory_mb``: Ratchet's tiers for paused jobs' states (None: all on disk).

    Returns (metrics by policy name, run outcome by policy name). Used by ``cohabit run`` and by the real
    part of ``cohabit demo``.
    """
    from ..policies import make_policy
    from ..report.progress import finished_line, progress_bar
    from .local import LocalBackend
    from .runner import run_local

    results: dict[str, Any] = {}
    outcomes: dict[str, Any] = {}
    for name in names:  # before any work: a policy that cannot run on this cluster says why
        policy = make_policy(name)
        if getattr(policy, "uses_oracle", False):
            fail(f"policy {policy.name!r} reads the simulator's ground truth (--oracle), which real jobs "
                 f"do not have; it runs only under `cohabit simulate --oracle`")
        check_cluster = getattr(policy, "cluster_problem", None)
        if check_cluster is not None and (problem := check_cluster(cluster)):
            fail(problem)
    for name in names:
        pol = make_policy(name)
        root = (workdir / pol.name.replace("/", "_")) if workdir is not None else None
        started = time.perf_counter()
        with progress_bar(err, TextColumn("{task.fields[info]}")) as bar:
            board = LiveBoard(bar, specs, pol.name)
            out = run_local(specs, cluster, pol, root=root, listener=board.on_message, on_scheduler=board.bind,
                            backend_cls=backend_cls or LocalBackend, max_restarts=max_restarts,
                            checkpoint_interval=checkpoint_interval, bandwidth_mbps=bandwidth_mbps, resume=resume,
                            checkpoint_policy=checkpoint_policy, paused_memory_mb=paused_memory_mb)
            board.refresh()
        if bar.disable:
            finished_line(err, pol.name, out.metrics.jobs_finished, len(specs), "jobs finished",
                          time.perf_counter() - started)
        results[pol.name] = out.metrics
        outcomes[pol.name] = out
        _print_jobs(pol.name, out)
    return results, outcomes


def _print_jobs(policy: str, out: Any) -> None:
    """Per-job outcome of one real run (compact enough for 80 columns; the note column only when one is set)."""
    from rich import box

    sub = {e.job: e.time for e in out.result.record if e.kind == "submitted"}
    rows = []
    for jid, jv in out.result.jobs.items():
        st = out.status.get(jid)
        m = st.metrics if st is not None else {}
        jct = f"{jv.end_time - sub[jid]:.1f}" if jv.end_time is not None and str(jv.state) == "finished" else "—"
        rows.append((
            jid, str(jv.state), jct, str(st.iterations) if st is not None else "0",
            f"{m['loss']:.4g}" if "loss" in m else "—", f"{m['accuracy']:.3f}" if "accuracy" in m else "—",
            str(jv.preemptions), str(st.restarts if st is not None else 0),
            Text("; ".join(x for x in [jv.reason or (st.reason if st else ""),
                                       *(st.checkpoint_events if st else [])] if x)),
        ))
    table = Table(title=escape(f"{policy}: jobs"), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  padding=(0, 1, 0, 0))
    table.add_column("job", overflow="fold")  # a long id folds; the numbers stay whole
    table.add_column("state", no_wrap=True)
    for col in ("JCT s", "iters", "loss", "acc", "paused", "restarts"):
        table.add_column(col, justify="right", no_wrap=True)
    notes = any(str(r[-1]) for r in rows)
    if notes:
        table.add_column("note", overflow="fold")
    for r in rows:
        table.add_row(Text(r[0]), *(r[1:] if notes else r[1:-1]))
    console.print(table)


def write_json(path: Path, outcomes: dict[str, Any], *, jobs: str, cluster: Any, backend: str = "local") -> None:
    """Metrics and per-job results per policy (as ``simulate --json``) plus each job's real outcome (iterations,
    loss, restarts) and the backend's timings."""
    payload: dict[str, Any] = {"jobs": jobs, "cluster": cluster.name, "nodes": len(cluster.nodes), "backend": backend,
                               "policies": {}, "real": {}}
    for name, out in outcomes.items():
        payload["policies"][name] = out.metrics.to_json(jobs=True)
        payload["real"][name] = {
            "jobs": {jid: {"state": st.state, "iterations": st.iterations, "metrics": st.metrics,
                           "restarts": st.restarts, "reason": st.reason, "device": st.device,
                           "cuda_visible_devices": st.cuda_visible_devices, "device_note": st.device_note,
                           "device_mem_mb": st.device_mem_mb,
                           "checkpoint_events": st.checkpoint_events} for jid, st in out.status.items()},
            "timings": out.timings,
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str))
