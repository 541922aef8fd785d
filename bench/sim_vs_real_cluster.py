"""Sim vs real on work that resembles a cluster (issue 19, point 5).

Real runs on LocalBackend: 2 logical nodes of one core each (tasks pinned to their node's core)
and two logical GPUs (the tasks train on the CPU: the GPUs give Tiresias its GPU-seconds and a
reason to preempt), a 20 Mbps parameter-server bandwidth budget per node, and nine jobs of 10-60 s of solo work
(minutes with contention) arriving over the first 90 s: single-process numpy and torch jobs
two to a core, a data-parallel torch job, two parameter-server jobs (ps-mlr) whose worker and
server sit on different nodes and share the budgets. Under FIFO, SRTF and Tiresias (the last two
preempt: real checkpoint, process exit, restore in a new or warm process).

For each real run, the simulator replays the same jobs with profiles measured ONLY from that
run's record as the scheduler saw it (``cohabit.sim.calibrate``: placements, pauses, progress
reports; never the finish times), under physics ``local`` (``sim.host_physics``: cores and
budgets shared by the tasks on each node, each job's measured start and restore latency), and
the table compares average JCT, makespan and preemptions. Ablations show what each part of the
physics is worth: the same profiles with sharing off (each job at its solo speed), with the
measured latencies replaced by zero, the raw reported step times (sharing not taken out), and
cohabit's default physics (10 s checkpoint + 20 s restore). Profiles from the FIFO run also
predict the SRTF and Tiresias runs (``fifo-profiles``: nothing of those runs feeds that row; ``fifo-profiles,
run's load``: with the machine's background load measured in that run; ``bench/sim_vs_real_cross.py``
does this across runs).

The machine is shared: the load average is sampled through every real run and printed, and
each run's CPU share (CPU seconds our processes got / (makespan x cores)).

    python bench/sim_vs_real_cluster.py [--scale 1.0] [--policies fifo,srtf,tiresias] \\
        [--json bench/results/sim_vs_real_cluster.json]

``--scale`` multiplies every job's iterations (0.2 for a 2-3 minute smoke run).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cohabit.engine.record import EventKind, Record
from cohabit.policies import FIFO, SRTF
from cohabit.policies.tiresias import Tiresias
from cohabit.runtime.runner import local_cluster, run_local
from cohabit.sim.calibrate import calibrate, host_costs, trace_from_run
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import HostTruth, JobTruth, TraceJob
from cohabit.spec import ClusterSpec, NodeSpec, Resources
from cohabit.spec.job import JobSpec, TaskGroup

console = Console(width=150)
BUDGET_GBPS = 0.02  # 20 Mbps per node: ps-mlr is link-bound (~70 ms per iteration alone)


def bench_cluster() -> ClusterSpec:
    """2 logical compute nodes of one core (LocalBackend pins node i's tasks to core i) and 2 logical
    GPUs each (Tiresias counts GPU-seconds and preempts for GPUs; this machine has none, so tasks
    train on the CPU), and a node without GPUs for parameter servers (the most room for them, so
    every PS job's traffic crosses two nodes' budgets; its processes share both cores and hardly
    compute); a 20 Mbps PS bandwidth budget on each node."""
    mem = local_cluster(3, cores=2).nodes[0].capacity["mem_gb"]
    gpu_node = Resources(cpu=1, gpu=2, mem_gb=mem, net_gbps=BUDGET_GBPS)
    return ClusterSpec(name="local-gpu", nodes=(
        NodeSpec(name="n0", capacity=gpu_node), NodeSpec(name="n1", capacity=gpu_node),
        NodeSpec(name="ps", capacity=Resources(cpu=2, gpu=0, mem_gb=mem, net_gbps=BUDGET_GBPS))))


def job(id: str, workload: dict[str, Any], iterations: int, submit: float, *, cpu: float = 0.5, workers: int = 1,
        ps: int = 0) -> JobSpec:
    """A job of ``workers`` tasks of one logical GPU and ``cpu`` cores each (and ``ps`` servers of
    ``cpu`` cores, no GPU)."""
    extra: dict[str, Any] = {}
    if ps:
        extra = {"architecture": "ps", "ps": TaskGroup(count=ps, demand=Resources(cpu=cpu, mem_gb=0.2))}
    elif workers > 1:
        extra = {"architecture": "allreduce"}
    return JobSpec(id=id, submit_time=round(submit, 3), model=workload["name"], iterations=max(int(iterations), 20),
                   workload=workload,
                   workers=TaskGroup(count=workers, demand=Resources(cpu=cpu, gpu=1, mem_gb=0.3)), **extra)


def workload(scale: float = 1.0) -> list[JobSpec]:
    """Nine jobs; solo lengths (this machine, quiet) in the comments."""
    s = scale  # iterations and arrival times
    return [
        job("cnn-a", {"name": "torch-cnn", "channels": 8}, 27000 * s, 0.0 * s),  # ~60 s
        job("mlr-a", {"name": "mlr"}, 110000 * s, 0.0),  # ~40 s
        job("dp-mlp", {"name": "torch-mlp", "hidden": 64}, 6000 * s, 5.0 * s, workers=2),  # ~40 s, 2 ranks
        job("ps-a", {"name": "ps-mlr", "data": "sample", "lr": 0.1}, 360 * s, 10.0 * s, cpu=0.25, ps=1),  # ~25 s
        job("ps-b", {"name": "ps-mlr", "data": "sample", "lr": 0.1}, 360 * s, 12.0 * s, cpu=0.25, ps=1),  # ~25 s
        job("mlp-s", {"name": "torch-mlp"}, 34000 * s, 30.0 * s),  # ~15 s
        job("lasso", {"name": "lasso"}, 600000 * s, 45.0 * s),  # ~15 s
        job("cnn-b", {"name": "torch-cnn", "channels": 8}, 13500 * s, 60.0 * s),  # ~30 s
        job("mlr-s", {"name": "mlr"}, 27000 * s, 90.0 * s),  # ~10 s
    ]


def policies(scale: float) -> dict[str, Callable[[], Any]]:
    """The policies compared; their time parameters follow the jobs' scale."""
    t = max(scale, 0.05)
    return {
        "fifo": FIFO,
        "srtf": lambda: SRTF(preempt_margin=5.0 * t, min_run_time=5.0 * t),
        # service in GPU-seconds (a one-worker job earns 1 per second): queues at 10 and 40
        "tiresias": lambda: Tiresias(thresholds=(10.0 * t, 40.0 * t), min_run_time=10.0 * t, tick_interval=5.0 * t,
                                     starve_limit=None),
    }


class LoadSampler:
    """The 1-minute load average, sampled every ``every`` seconds in a thread while in use."""

    def __init__(self, every: float = 5.0) -> None:
        self.every = every
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.every)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, float]:
        s = self.samples or [os.getloadavg()[0]]
        return {"mean": statistics.mean(s), "min": min(s), "max": max(s)}


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def jcts(record: Any) -> dict[str, float]:
    sub = {e.job: e.time for e in record if e.kind == EventKind.SUBMITTED}
    return {e.job: e.time - sub[e.job] for e in record if e.kind == EventKind.FINISHED}


def summary(record: Any) -> dict[str, Any]:
    j = jcts(record)
    ends = [e.time for e in record if e.kind == EventKind.FINISHED]
    return {"avg_jct": statistics.mean(j.values()) if j else float("nan"), "makespan": max(ends, default=float("nan")),
            "preemptions": sum(1 for e in record if e.kind == EventKind.PAUSED), "jct": j}


def with_costs(trace: list[TraceJob], change: Callable[[HostTruth], HostTruth]) -> list[TraceJob]:
    out = []
    for tj in trace:
        assert tj.truth.host is not None
        host = change(tj.truth.host)
        out.append(TraceJob(tj.spec, replace(tj.truth, duration=tj.truth.iterations * host.iter_s, host=host)))
    return out


def raw_trace(specs: list[JobSpec], record: Any, cluster: Any) -> list[TraceJob]:
    """Profiles from the raw reported step times (median), sharing not taken out; latencies measured."""
    costs = host_costs(specs, record, cluster, background=0.0)
    out = []
    for s in specs:
        if s.id not in costs:
            continue
        its = [e.data["iter_time"] for e in record if e.kind == EventKind.PROGRESS and e.job == s.id]
        c = costs[s.id]
        if not its:  # never reported: the twin's cost host_costs gave it
            host = c
        elif s.architecture == "ps":
            comp = [e.data.get("compute_s", 0.0) for e in record if e.kind == EventKind.PROGRESS and e.job == s.id]
            comm = [e.data.get("comm_s", 0.0) for e in record if e.kind == EventKind.PROGRESS and e.job == s.id]
            host = HostTruth(max(statistics.median(comp), 1e-9), statistics.median(comm), c.start_s, c.restore_s)
        else:
            host = HostTruth(statistics.median(its), 0.0, c.start_s, c.restore_s)
        n = int(s.iterations or 1)
        out.append(TraceJob(s, JobTruth(iterations=n, duration=n * host.iter_s, host=host)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every job's iterations")
    ap.add_argument("--policies", default="fifo,srtf,tiresias")
    ap.add_argument("--json", type=Path, default=Path("bench/results/sim_vs_real_cluster.json"))
    ap.add_argument("--records", type=Path, default=None,
                    help="write each real run's record (JSON lines) and summary to this directory")
    ap.add_argument("--replay", type=Path, default=None,
                    help="no real runs: simulate against the records an earlier --records run wrote there")
    args = ap.parse_args()
    specs = workload(args.scale)
    cluster = bench_cluster()
    makers = policies(args.scale)
    names = [p.strip() for p in args.policies.split(",") if p.strip()]
    results: dict[str, Any] = {"replayed_from": str(args.replay) if args.replay else None, "scale": args.scale,
                               "budget_gbps": BUDGET_GBPS, "cores": 2, "runs": {}}
    t_all = time.perf_counter()
    reals: dict[str, Any] = {}
    for name in names:
        if args.replay is not None:
            meta = json.loads((args.replay / f"{name}.json").read_text())
            reals[name] = (read_record(args.replay / f"{name}.jsonl.gz"), meta)
            continue
        console.rule(f"real run: {name}")
        c0, w0 = children_cpu_s(), time.perf_counter()
        with LoadSampler() as load:
            out = run_local(specs, cluster, makers[name]())
        wall = time.perf_counter() - w0
        assert not out.result.unfinished, out.result.unfinished
        real = summary(out.result.record)
        real.update(load=load.summary(), wall_s=wall, cpu_s=children_cpu_s() - c0)
        real["cpu_share"] = real["cpu_s"] / (real["makespan"] * 2)
        reals[name] = (out.result.record, real)
        if args.records is not None:
            args.records.mkdir(parents=True, exist_ok=True)
            write_record(out.result.record, args.records / f"{name}.jsonl.gz")
            (args.records / f"{name}.json").write_text(json.dumps(real, indent=1))
        console.print(f"{name}: avg JCT {real['avg_jct']:.1f} s, makespan {real['makespan']:.1f} s, "
                      f"preemptions {real['preemptions']}, load {real['load']['mean']:.1f} "
                      f"({real['load']['min']:.1f}-{real['load']['max']:.1f}), CPU share {real['cpu_share']:.2f}")

    base = SimConfig(report_interval_s=0.5)
    fifo_cal = calibrate(specs, reals["fifo"][0], cluster, base) if "fifo" in reals else None
    table = Table(title="sim / real (profiles from the run's own record unless named)", title_justify="left")
    for col in ("policy", "setting", "avg JCT real", "sim", "ratio", "makespan real", "sim", "ratio",
                "preempt real", "sim"):
        table.add_column(col, justify="left" if col in ("policy", "setting") else "right")
    for name, (rec, real) in reals.items():
        cal = calibrate(specs, rec, cluster, base)
        trace, local = cal.trace, cal.config
        # costs with the machine's load left in (a job alone on its core of this machine): for the
        # settings that do not model that load
        flat = trace_from_run(specs, rec, cluster, background=0.0)
        missing = sorted({s.id for s in specs} - {tj.spec.id for tj in trace})
        if missing:
            console.print(f"[red]{name}: no progress report of {', '.join(missing)}: left out of the simulation")
        settings: dict[str, tuple[list[TraceJob], SimConfig]] = {
            "local (full)": (trace, local),
            "local, background 0": (flat, replace(local, host_background=0.0, host_background_series=())),
            "local, latencies zero": (with_costs(trace, lambda h: replace(h, start_s=0.0, restore_s=0.0)), local),
            "sharing off": (flat, replace(local, host_sharing=False, checkpoint_s=0.0, restore_s=0.0)),
            "raw step times": (raw_trace(specs, rec, cluster), replace(local, host_background=0.0, host_background_series=())),
            "cohabit default": (flat, SimConfig(report_interval_s=0.5)),
        }
        if fifo_cal is not None and name != "fifo":
            settings["local, fifo-profiles"] = (fifo_cal.trace, fifo_cal.config)
            moved = fifo_cal.in_environment(cal)  # the FIFO run's jobs on the machine as this run found it
            settings["local, fifo-profiles, run's load"] = (moved.trace, moved.config)
        per: dict[str, Any] = {"real": real, "background": cal.background, "background_series": cal.series,
                               "profiles": {tj.spec.id: vars_of(tj.truth.host) for tj in trace},
                               "sim": {}}
        for label, (tr, cfg) in settings.items():
            sim = simulate(tr, cluster, makers[name](), config=cfg)
            s = summary(sim.result.record)
            per["sim"][label] = {**s, "avg_jct_ratio": s["avg_jct"] / real["avg_jct"],
                                 "makespan_ratio": s["makespan"] / real["makespan"]}
            table.add_row(name, label, f"{real['avg_jct']:.1f}", f"{s['avg_jct']:.1f}", f"{s['avg_jct'] / real['avg_jct']:.3f}",
                          f"{real['makespan']:.1f}", f"{s['makespan']:.1f}", f"{s['makespan'] / real['makespan']:.3f}",
                          str(real["preemptions"]), str(s["preemptions"]),
                          end_section=label == list(settings)[-1])
        results["runs"][name] = per
    console.print(table)
    for name, (_, real) in reals.items():
        console.print(f"{name}: load average during the run {real['load']['mean']:.1f} "
                      f"(min {real['load']['min']:.1f}, max {real['load']['max']:.1f}); CPU share {real['cpu_share']:.2f}; "
                      f"wall {real['wall_s']:.0f} s")
    t2 = Table(title="per-job JCT (s), real vs sim (local, full)", title_justify="left")
    t2.add_column("job")
    for name in reals:
        t2.add_column(f"{name} real", justify="right")
        t2.add_column("sim", justify="right")
    for s in specs:
        row = [s.id]
        for name in reals:
            rj = results["runs"][name]["real"]["jct"].get(s.id, float("nan"))
            sj = results["runs"][name]["sim"]["local (full)"]["jct"].get(s.id, float("nan"))
            row += [f"{rj:.1f}", f"{sj:.1f}"]
        t2.add_row(*row)
    console.print(t2)
    results["wall_s"] = time.perf_counter() - t_all
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    console.print(f"wrote {args.json} ({results['wall_s']:.0f} s in all)")


def write_record(record: Record, path: Path) -> None:
    """The record as gzipped JSON lines (what ``--replay`` reads)."""
    with tempfile.TemporaryDirectory() as d:
        plain = Path(d) / "record.jsonl"
        record.write_jsonl(plain)
        path.write_bytes(gzip.compress(plain.read_bytes()))


def read_record(path: Path) -> Record:
    with tempfile.TemporaryDirectory() as d:
        plain = Path(d) / "record.jsonl"
        plain.write_bytes(gzip.decompress(path.read_bytes()))
        return Record.read_jsonl(plain)


def vars_of(h: HostTruth | None) -> dict[str, float | None] | None:
    return None if h is None else {"cpu_s": h.cpu_s, "link_s": h.link_s, "wire_s": h.wire_s, "start_s": h.start_s,
                                   "restore_s": h.restore_s}


if __name__ == "__main__":
    main()
