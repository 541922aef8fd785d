"""The cohabit command line: compare scheduling policies on traces in simulation (simulate, demo),
run real training jobs under them (run), tune with pack-aware Hyperband (hyperband), and list what
exists (policies, traces)."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from . import __version__
from .cli_common import EXIT_CODES_HELP, err, escape, fail, finish
from .cli_lazy import LazyGroup
from .clichecks import DEFAULT_MAX_BAD_ROWS

if TYPE_CHECKING:
    from .sim.truth import TraceJob

# commands that live with their subsystem (run, hyperband, mlfs-workload, the service, train) are
# mounted by name in cli_lazy.LAZY_COMMANDS and imported only when used
app = typer.Typer(cls=LazyGroup, add_completion=False, no_args_is_help=True, help=__doc__, epilog=EXIT_CODES_HELP,
                  context_settings={"help_option_names": ["-h", "--help"]})
console = Console() if Console().is_terminal else Console(width=160)


_fail = fail  # error with user text escaped, exit code 2 (cli_common)


def _version(value: bool) -> None:
    if value:
        print(f"cohabit {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Scheduling policies for ML training jobs, in simulation and for real."""


def run_comparison(
    trace_load: object,
    cluster: object,
    policy_names: list[str],
    *,
    oracle: bool,
    horizon: float,
    label: str,
    config: object = None,
    decision_period: float | None = None,
    first_round: float | None = None,
) -> dict[str, object]:
    """Simulate each policy on one loaded trace with a progress bar; returns name -> SimOutcome.
    ``config``: the simulator's ``SimConfig`` (None: the default physics); ``decision_period``: seconds
    between scheduling rounds (None: at every event), the first at ``first_round`` (None: one period)."""
    from .policies import make_policy
    from .report.progress import finished_line, progress_bar
    from .sim.runner import simulate

    outcomes: dict[str, object] = {}
    jobs = trace_load.jobs  # type: ignore[attr-defined]
    policies = [make_policy(name, oracle=oracle) for name in policy_names]
    for policy in policies:  # before any work: a policy that cannot run on this cluster says why
        if getattr(policy, "uses_oracle", False) and not oracle:
            _fail(f"policy {policy.name!r} reads the ground truth (true work and step times); "
                  f"allow it explicitly with --oracle")
        check_cluster = getattr(policy, "cluster_problem", None)
        if check_cluster is not None and (problem := check_cluster(cluster)):
            _fail(problem)
    with progress_bar(err) as bar:
        for policy in policies:
            task = bar.add_task(escape(f"{label} · {policy.name}"), total=len(jobs))
            last = [0.0]

            def tick(done: int, total: int, now: float, _task=task, _last=last) -> None:
                t = time.perf_counter()
                if t - _last[0] > 0.1 or done == total:
                    _last[0] = t
                    bar.update(_task, completed=done)

            started = time.perf_counter()
            out = simulate(jobs, cluster, policy, oracle=oracle, horizon=horizon, on_progress=tick,  # type: ignore[arg-type]
                           config=config, decision_period=decision_period,  # type: ignore[arg-type]
                           first_round=first_round)
            bar.update(task, completed=len(jobs))
            if bar.disable:
                finished_line(err, f"{label} · {policy.name}", len(jobs), len(jobs), "jobs simulated",
                              time.perf_counter() - started)
            outcomes[policy.name] = out
    return outcomes


COLUMNS_HELP = ("Table columns, comma-separated (e.g. avg-jct,p95-jct,alloc-gpu), or 'all'; default: the "
                "standard set. A table wider than the terminal continues below.")


def _policies(text: str) -> list[str]:
    from .policies import policy_list

    try:
        return policy_list(text)
    except ValueError as exc:
        _fail(str(exc))


@app.command(epilog=EXIT_CODES_HELP)
def simulate(
    trace: Annotated[str, typer.Option(help="Trace file, or an embedded trace name (see `cohabit traces`).")],
    format: Annotated[Optional[str], typer.Option("--format", help="tiresias|muri|philly|pollux|alibaba|cohabit|harmony|gavel")] = None,
    cluster: Annotated[Optional[str], typer.Option(help="Preset name or cluster YAML; default: an embedded trace's default run "
                                                           "(see `cohabit traces`), a file's format preset.")] = None,
    policy: Annotated[str, typer.Option(help="Comma-separated policy names, each optionally with parameters: "
                                             "srtf:preempt_margin=1 (see `cohabit policies`).")] = "fifo,srtf",
    seed: Annotated[int, typer.Option(help="Seed for randomised policies and synthetic traces.")] = 0,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write metrics JSON here.")] = None,
    plot: Annotated[Optional[Path], typer.Option(help="Write the plots (JCT CDF, allocated and used share over "
                                                      "time) here, in the format the suffix names (.png, .svg, .pdf, ...).")] = None,
    oracle: Annotated[bool, typer.Option(help="Let policies that can use true job lengths read them.")] = False,
    skip_bad_rows: Annotated[bool, typer.Option(help="Report and skip malformed trace rows.")] = False,
    max_bad_rows: Annotated[int, typer.Option(help="With --skip-bad-rows: give up after this many malformed rows.")] = DEFAULT_MAX_BAD_ROWS,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N jobs of the trace.")] = None,
    horizon: Annotated[float, typer.Option(help="Stop simulated time here (seconds).")] = math.inf,
    columns: Annotated[Optional[str], typer.Option(help=COLUMNS_HELP)] = None,
    arrival_scale: Annotated[Optional[float], typer.Option(
        help="Multiply submit times by this (< 1 compresses arrivals); default: the embedded trace's "
             "default run when --cluster is not given, else 1.")] = None,
    physics: Annotated[str, typer.Option(help="Simulated physics: cohabit (default), or a public simulator's to "
                                              "compare with it: muri, gavel, pollux-artifact (see docs/fidelity.md, "
                                              "docs/pollux.md).")] = "cohabit",
) -> None:
    """Replay a trace under one or more policies and compare them."""
    from . import clichecks as check
    from .report.table import print_comparison, select_columns
    from .sim.load import offered_load
    from .sim.traces import EMBEDDED, TraceRowError, load_trace, unknown_resources
    from .sim.traces.scenario import default_run, scale_arrivals
    from .spec.cluster import cluster_from_arg
    from .spec.errors import SpecError

    import random

    import numpy as np

    problem = check.first(
        check.seed(seed), check.number("--horizon", horizon, lo=0, lo_open=True, allow_inf=True),
        check.number("--limit", limit, lo=0), check.number("--max-bad-rows", max_bad_rows, lo=0),
        check.output_file("--json", json_out), check.output_file("--plot", plot, suffixes=check.PLOT_SUFFIXES),
    )
    if problem:
        _fail(problem)
    from .sim.physics import PHYSICS, PHYSICS_DECISION_PERIOD, PHYSICS_FIRST_ROUND, physics_config
    if physics not in PHYSICS:
        _fail(f"--physics: unknown physics {physics!r}; known: {', '.join(PHYSICS)}")
    random.seed(seed)
    np.random.seed(seed)
    names = _policies(policy)
    if plot is not None:  # matplotlib is imported only when a plot is asked for (~0.6 CPU s)
        from .report.plot import plot_format
        try:
            plot_format(plot)
        except ValueError as exc:
            _fail(f"--plot: {exc}")
    try:
        load = load_trace(trace, format, skip_bad_rows=skip_bad_rows, limit=limit, max_bad_rows=max_bad_rows)
    except (TraceRowError, SpecError, FileNotFoundError, ValueError) as exc:
        _fail(str(exc))
    fmt = load.fmt
    _print_left_out(load)
    try:
        embedded = trace if trace in EMBEDDED and not Path(trace).exists() else ""  # a file of that name wins
        cluster_name, scale, scenario = default_run(embedded, cluster, arrival_scale, load.default_cluster)
        cl = cluster_from_arg(cluster_name)
    except (SpecError, ValueError, FileNotFoundError) as exc:
        _fail(str(exc))
    load = dataclasses.replace(load, jobs=scale_arrivals(load.jobs, scale))
    problems = unknown_resources(load, cl)
    if problems:
        _fail("\n".join(problems))
    name = Path(str(load.path)).name
    try:  # a typo in --columns fails now, not after the runs
        select_columns(columns, {}, [r for r, q in cl.capacity.items() if q > 0])
    except ValueError as exc:
        _fail(str(exc))
    if scenario is not None and scenario.horizon_s is not None and horizon == math.inf:
        horizon = scenario.horizon_s  # the default run's own stop (an explicit --horizon wins)
    default_note = (f" (default run: {scenario.why})" if scenario else
                    " (default for this format)" if cluster is None else "")
    console.print(
        f"trace [bold]{escape(str(load.path))}[/] ({fmt}, {len(load.jobs)} jobs"
        f"{f', {len(load.skipped)} bad rows skipped' if load.skipped else ''}"
        f"{f', {len(load.excluded)} rows excluded' if load.excluded else ''}"
        f"{f', arrivals x{scale:g}' if scale != 1 else ''}"
        f"{f', horizon {horizon / 3600:g} h' if horizon != math.inf else ''}) on cluster "
        f"[bold]{escape(cl.name)}[/] ({len(cl.nodes)} nodes, {cl.capacity['gpu']:g} GPUs){escape(default_note)}"
    )
    offered = offered_load(load.jobs, cl)
    console.print(escape(offered.describe()))
    if physics != "cohabit":
        console.print(escape(f"physics: {physics} ({PHYSICS[physics]})"))
    outcomes = run_comparison(load, cl, names, oracle=oracle, horizon=horizon, label=name,
                              config=physics_config(physics),
                              decision_period=PHYSICS_DECISION_PERIOD.get(physics),
                              first_round=PHYSICS_FIRST_ROUND.get(physics))
    results = {n: o.metrics for n, o in outcomes.items()}  # type: ignore[attr-defined]
    print_comparison(results, console=console, title=escape(f"{name} on {cl.name}"),
                     columns=select_columns(columns, results))
    _print_unfinished(outcomes)
    if json_out is not None:
        write_json(json_out, results, trace=str(load.path), fmt=fmt, cluster=cl.name, seed=seed,
                   n_jobs=len(load.jobs), skipped=len(load.skipped), excluded=len(load.excluded),
                   oracle=oracle,
                   arrival_scale=scale, horizon=None if horizon == math.inf else horizon,
                   offered_load=offered.to_json(), physics=physics)
        console.print(f"wrote {escape(str(json_out))}")
    if plot is not None:
        from .report.plot import plot_comparison
        plot_comparison(results, plot, title=f"{name} on {cl.name}")
        console.print(f"wrote {escape(str(plot))}")
    finish(o.result for o in outcomes.values())  # type: ignore[attr-defined]


#: Skipped or excluded rows printed one by one; the rest are summarised by reason.
SHOW_ROWS = 20


def _print_left_out(load: object) -> None:
    """The rows a trace load skipped (malformed) or excluded (well-formed, cannot be replayed), then counts."""
    for label, rows in (("skipped", load.skipped), ("excluded", load.excluded)):  # type: ignore[attr-defined]
        for bad in rows[:SHOW_ROWS]:
            err.print(f"[yellow]{label}[/] {escape(str(bad))}", highlight=False)
        if len(rows) > SHOW_ROWS:
            reasons: dict[str, int] = {}
            for r in rows:
                reasons[r.message] = reasons.get(r.message, 0) + 1
            err.print(f"[yellow]{label}[/] {len(rows)} rows in all; most common reasons: " + "; ".join(
                f"{n} x {escape(m)}" for m, n in sorted(reasons.items(), key=lambda x: -x[1])[:3]), highlight=False)


def _print_unfinished(outcomes: dict[str, object]) -> None:
    for name, o in outcomes.items():
        unfinished = o.result.unfinished  # type: ignore[attr-defined]
        rejected = [j for j in o.result.jobs.values() if j.state == "rejected"]  # type: ignore[attr-defined]
        if rejected:
            reasons: dict[str, int] = {}
            for j in rejected:
                reasons[j.reason] = reasons.get(j.reason, 0) + 1
            for r, n in sorted(reasons.items(), key=lambda x: -x[1])[:5]:
                console.print(f"[yellow]{escape(name)}: {n} job(s) rejected:[/] {escape(r)}")
        if unfinished:
            first = next(iter(unfinished))
            console.print(f"[yellow]{escape(name)}: {len(unfinished)} job(s) did not finish[/] "
                          + escape(f"(e.g. {first}: {unfinished[first]})"))


def write_json(path: Path, results: dict[str, object], **meta: object) -> None:
    payload = {"policies": {n: m.to_json(jobs=True) for n, m in results.items()}}  # type: ignore[attr-defined]
    payload.update({"trace": meta.pop("trace"), "cluster": meta.pop("cluster")})
    payload.update(meta)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, allow_nan=False))


#: Left out of the demo to keep it to a couple of minutes: Dorm's theta variants (same
#: policy, other thresholds) and, on the 1,000-job synthetic workload, Dorm itself (one
#: MILP per arrival and completion: ~80 s there). `cohabit simulate --policy ...` runs them.
DEMO_SKIP = frozenset({"dorm-1", "dorm-2", "dorm-3"})
DEMO_SKIP_SYNTHETIC = frozenset({"dorm"})
#: Harmony and its baselines schedule CPU parameter-server jobs (they leave GPU jobs pending):
#: the demo runs them on the embedded Harmony trace instead of the GPU traces.
DEMO_PS_POLICIES = ("harmony", "harmony-isolated", "harmony-naive")
#: Policies built for workloads of their own (jobs with completion criteria, task graphs, Pollux's
#: goodput physics, Bao et al.'s interference cluster, progressive queries): the demo names the
#: command that shows each family instead of running it on the GPU traces.
DEMO_OWN_WORKLOAD: dict[str, str] = {
    **dict.fromkeys(("drl", "lif-line", "lif-quad"),
                    "cohabit simulate --trace drl_uniform --policy drl,lb,tetris,tiresias,lif-line,lif-quad"),
    **dict.fromkeys(("pollux",),
                    "cohabit simulate --trace pollux_workload-1 --physics pollux-artifact --policy pollux,tiresias"),
    **dict.fromkeys(("optimus-oracle",),  # reads the oracle: the demo runs policies without it
                    "cohabit simulate --trace pollux_workload-1 --physics pollux-artifact --policy "
                    "optimus-oracle,optimus --oracle"),
    **dict.fromkeys(("rotary", "srf", "bcf", "laf", "rr"),
                    "python -m cohabit.sim.rotary_workload r.yaml --jobs 30 --repo r.sqlite, then cohabit simulate "
                    "--trace r.yaml --policy rotary:repo=r.sqlite,srf,bcf,laf,rr (docs/rotary.md)"),
    **dict.fromkeys(("rotary-aqp", "edf", "lcaf", "relaqs"),
                    "cohabit run examples/aqp_jobs.yaml --policy rotary-aqp,edf,rr (docs/aqp.md)"),
    **dict.fromkeys(("mlfs", "mlfs-h", "mlfs-rl", "graphene", "hypersched", "tf-fair", "rl-placement"),
                    "cohabit mlfs-workload m.yaml --jobs 155, then cohabit simulate --trace m.yaml "
                    "--policy mlfs,mlfs-h,graphene,tiresias (docs/mlfs.md)"),
}


def demo_synthetic_jobs(n_jobs: int, seed: int) -> list[TraceJob]:
    """The demo's synthetic workload: a Philly-like mix (mostly 1-GPU, heavy-tailed lengths capped
    at 8 h) arriving every 90 s on average, an offered GPU load of 1.07 on the 64-GPU ``tiresias``
    preset for 1,000 jobs. (At 120 s the load is 0.8, almost no job waits and every policy ends
    at the same makespan.)"""
    from .sim.traces.synthetic import generate

    return generate(n_jobs, seed=seed, mean_interarrival=90.0, max_duration=8 * 3600.0)


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Directory for the JSON and plots.")] = Path("out/demo"),
    seed: Annotated[int, typer.Option()] = 0,
    synthetic_jobs: Annotated[int, typer.Option(help="Size of the synthetic workload.")] = 1000,
    real: Annotated[bool, typer.Option(help="Also train six small real jobs under fifo and srtf (about 30 s).")] = True,
) -> None:
    """The main job: simulate the 480-job Philly-derived trace and a synthetic workload under every GPU policy
    and Harmony's 80 parameter-server jobs under Harmony and its baselines, then train a handful of small
    real jobs on this machine under two policies."""
    from .policies import REGISTRY
    from .report.plot import plot_comparison
    from .report.table import print_comparison
    from .sim.load import offered_load
    from .sim.traces import TraceLoad, load_trace
    from .spec.cluster import preset

    from . import clichecks as check

    problem = check.first(check.seed(seed), check.number("--synthetic-jobs", synthetic_jobs, lo=1, hi=1_000_000),
                          check.output_dir("--out", out))
    if problem:
        _fail(problem)
    gpu_names = [n for n in sorted(REGISTRY)
                 if n not in DEMO_SKIP and n not in DEMO_PS_POLICIES and n not in DEMO_OWN_WORKLOAD]
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs = [
        ("tiresias_480", load_trace("tiresias_480", "tiresias"), preset("tiresias"), gpu_names),
        ("synthetic", TraceLoad(
            jobs=demo_synthetic_jobs(synthetic_jobs, seed),
            skipped=[], path=f"synthetic-{synthetic_jobs}", fmt="synthetic", default_cluster="tiresias",
        ), preset("tiresias"), [n for n in gpu_names if n not in DEMO_SKIP_SYNTHETIC]),
        # 80 parameter-server jobs (Harmony's Fig. 9-like mix) on 100 CPU machines
        ("harmony_80", load_trace("harmony_80", "harmony"), preset("harmony"), list(DEMO_PS_POLICIES)),
    ]
    for label, load, cl, these in runs:
        gpus = cl.capacity["gpu"]
        console.rule(f"[bold]{label}[/] — {len(load.jobs)} jobs on {cl.name} ({len(cl.nodes)} nodes"
                     f"{f', {gpus:g} GPUs' if gpus else ''})")
        offered = offered_load(load.jobs, cl)
        console.print(offered.describe())
        outcomes = run_comparison(load, cl, these, oracle=False, horizon=math.inf, label=label)
        results = {n: o.metrics for n, o in outcomes.items()}  # type: ignore[attr-defined]
        print_comparison(results, console=console, title=f"{label} on {cl.name}")
        _print_unfinished(outcomes)
        write_json(out / f"{label}.json", results, trace=label, cluster=cl.name, seed=seed, n_jobs=len(load.jobs),
                   offered_load=offered.to_json())
        plot_comparison(results, out / f"{label}.png", title=f"{label} on {cl.name}")
        console.print(escape(f"wrote {out / (label + '.json')} and {out / (label + '.png')}"))
    if real:
        _demo_real(out)
    console.print("[bold]Seed systems on workloads of their own[/] (not run here):")
    for command in dict.fromkeys(DEMO_OWN_WORKLOAD.values()):
        console.print(escape(f"  {command}"))
    console.print(f"demo finished in {time.perf_counter() - t0:.1f} s "
                  f"(not run here: {', '.join(sorted(DEMO_SKIP))}; dorm on the synthetic workload — "
                  f"use `cohabit simulate --policy ...`)")


DEMO_REAL_POLICIES = ["fifo", "srtf:preempt_margin=1:min_run_time=0"]  # jobs of seconds: not the 60 s defaults


def _demo_real(out: Path) -> None:
    """The real part of the demo: the packaged small jobs trained for real under FIFO and SRTF."""
    from importlib.resources import files

    from .report.plot import plot_comparison
    from .report.table import print_comparison
    from .runtime.cli import run_policies
    from .runtime.cli import write_json as write_real_json
    from .runtime.runner import local_cluster
    from .spec.yamlio import load_jobs

    jobs_file = files("cohabit") / "data" / "demo" / "real_jobs.yaml"
    specs = load_jobs(Path(str(jobs_file)))
    cluster = local_cluster()
    console.rule(f"[bold]real execution[/] — {len(specs)} small training jobs on {len(cluster.nodes)} logical "
                 f"node(s) of this machine (LocalBackend), under {', '.join(DEMO_REAL_POLICIES)}")
    results, outcomes = run_policies(specs, cluster, DEMO_REAL_POLICIES)
    title = f"real jobs on {len(cluster.nodes)} local node(s)"
    print_comparison(results, console=console, title=title)
    write_real_json(out / "real.json", outcomes, jobs=str(jobs_file), cluster=cluster)
    plot_comparison(results, out / "real.png", title=title)
    console.print(escape(f"wrote {out / 'real.json'} and {out / 'real.png'}"))


@app.command()
def policies() -> None:
    """List the available policies: one line each, whether it accepts --oracle, and its parameters."""
    console.print(policies_table())


def policies_table() -> Table:
    """A rich table of every registered policy (name, --oracle, description and settable parameters)."""
    from rich.text import Text

    from .policies import DESCRIPTIONS, REGISTRY, make_policy, settable_params

    table = Table(box=None, padding=(0, 1, 0, 0), show_header=True, header_style="bold", caption_justify="left",
                  caption="oracle: yes = accepts --oracle (reads true job lengths). Parameters: --policy NAME:KEY=VALUE.")
    table.add_column("policy", style="bold", no_wrap=True)
    table.add_column("oracle", no_wrap=True)
    table.add_column("description, parameters", overflow="fold")
    for name in sorted(REGISTRY):
        text = Text(DESCRIPTIONS[name])
        params = settable_params(name)
        if params:
            text.append("\n" + ", ".join(f"{k}={v!r}" for k, v in params.items()), style="dim")
        table.add_row(name, "yes" if make_policy(name, oracle=True).uses_oracle else "", text)
    return table


@app.command()
def traces() -> None:
    """List the traces embedded in the package, each with its default run (cluster, arrival scale)."""
    from .sim.traces import EMBEDDED
    from .sim.traces.scenario import SCENARIOS

    for name, (filename, fmt) in sorted(EMBEDDED.items()):
        sc = SCENARIOS[name]
        scale = f", arrivals x{sc.arrival_scale:g}" if sc.arrival_scale != 1 else ""
        console.print(f"[bold]{name:20}[/] {fmt:9} {filename}")
        console.print(f"{'':21}[dim]default run: cluster {sc.cluster}{scale} — {sc.why}[/]")


if __name__ == "__main__":  # pragma: no cover
    app()
