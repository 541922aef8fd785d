"""Every registered policy on the 480-job Philly-derived trace, a heavy synthetic workload and
a multi-tenant workload, plus a decision-time micro-benchmark (issue 3).

    python bench/baselines.py [--policies fifo,drf,...] [--skip-micro] [--json bench/results/baselines.json]

Policies come from ``cohabit.policies.REGISTRY`` at run time, so policies added
later are included. A policy that can read true job lengths is also run with
the oracle (its name then carries ``[oracle]``). A policy that fails to build
or to run is reported with its error and the benchmark goes on.

Workloads:

* ``tiresias_480``: ``load_trace("tiresias_480", "tiresias")`` on the
  ``tiresias`` preset (16 nodes x 4 GPUs);
* ``synthetic-heavy``: ``generate(1000, seed=2024, mean_interarrival=60)``
  (Philly-fitted sizes and lengths, lengths capped at one day) on the same
  cluster: about twice the load the cluster can serve while jobs arrive;
* ``multi-tenant``: :func:`multi_tenant_workload`, four tenants whose jobs
  have different dominant resources (GPU, CPU, memory, all three) and
  lengths, submitted together; the fairness check of the DRF baseline.

Micro-benchmark: a 500-node cluster (8 GPUs, 64 CPUs, 512 GB each) is filled
to about 97% of its GPUs at t=0 by jobs that run for days, then 1,000 jobs of
five tenants and mixed sizes arrive at t=1. The scheduler runs each policy up
to t=1 (``horizon=1``): the recorded time of its t=1 decision is a round
with a 1,000-job queue (median of three runs). ``decide`` is then called again on
the resulting view (whatever queue is left) and timed as the steady crowded
round. Times are the deciding thread's CPU time (wall time is in the JSON too);
the garbage collector is paused during these runs. Goal: < 10 ms.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from cohabit.engine.loop import Scheduler
from cohabit.policies import REGISTRY, make_policy
from cohabit.report import Metrics, print_comparison
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import config_for, simulate
from cohabit.sim.traces import load_trace
from cohabit.sim.traces.synthetic import generate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources, preset
from cohabit.spec.job import JobSpec, TaskGroup

#: tenant -> (per-job demand, nominal length in seconds). Every shape's dominant share of the
#: multi-tenant cluster is 1/16, on a different resource.
TENANTS: dict[str, tuple[Resources, float]] = {
    "gpu": (Resources(gpu=2, cpu=4, mem_gb=16), 2400.0),
    "cpu": (Resources(gpu=1, cpu=16, mem_gb=16), 1200.0),
    "mem": (Resources(gpu=1, cpu=4, mem_gb=64), 1800.0),
    "big": (Resources(gpu=2, cpu=16, mem_gb=64), 3000.0),
}


def multi_tenant_workload(seed: int = 0, jobs_per_tenant: int = 20) -> tuple[list[TraceJob], ClusterSpec]:
    """Four tenants of different demand shapes and job lengths, all submitted at t=0 (tenant by
    tenant, so arrival order favours the first), on 8 nodes of 4 GPUs, 32 CPUs, 128 GB.

    Each job's dominant share is 1/16 of the cluster; lengths are the tenant's nominal length
    +-10%. An order-based (FIFO) or length-based (SRTF) policy serves some tenants first; DRF
    runs equally many jobs of every tenant."""
    rng = np.random.default_rng(seed)
    cluster = ClusterSpec.homogeneous("multi-tenant", 8, Resources(gpu=4, cpu=32, mem_gb=128))
    jobs = []
    for tenant, (demand, length) in TENANTS.items():
        for i in range(jobs_per_tenant):
            dur = round(float(length * rng.uniform(0.9, 1.1)), 3)
            spec = JobSpec(id=f"{tenant}-{i:02d}", tenant=tenant, submit_time=0.0, model="resnet50",
                           workers=TaskGroup(count=1, demand=demand), iterations=max(1, int(dur)))
            jobs.append(TraceJob(spec, JobTruth(iterations=max(1, int(dur)), duration=dur)))
    return jobs, cluster


def workloads(synthetic_jobs: int) -> dict[str, tuple[list[TraceJob], ClusterSpec]]:
    tiresias = preset("tiresias")
    heavy = generate(synthetic_jobs, seed=2024, mean_interarrival=60.0, max_duration=86400.0)
    return {
        "tiresias_480": (load_trace("tiresias_480", "tiresias").jobs, tiresias),
        "synthetic-heavy": (heavy, tiresias),
        "multi-tenant": multi_tenant_workload(),
    }


def variants(names: list[str]) -> list[tuple[str, bool]]:
    """(registry name, oracle) pairs: every policy, plus its oracle variant when it has one (a policy
    that always reads the oracle, ``optimus-oracle``, runs only with it)."""
    out = []
    for name in names:
        try:
            if not getattr(make_policy(name), "uses_oracle", False):
                out.append((name, False))
            if getattr(make_policy(name, oracle=True), "uses_oracle", False):
                out.append((name, True))
        except Exception:  # reported when the plain variant is run
            out.append((name, False))
    return out


def run_workload(jobs: list[TraceJob], cluster: ClusterSpec, names: list[str],
                 console: Console) -> tuple[dict[str, Metrics], dict[str, str], dict[str, float]]:
    results: dict[str, Metrics] = {}
    errors: dict[str, str] = {}
    wall: dict[str, float] = {}
    for name, oracle in variants(names):
        label = f"{name}[oracle]" if oracle else name
        try:
            policy = make_policy(name, oracle=oracle)
            label = policy.name
            t0 = time.perf_counter()
            out = simulate(jobs, cluster, policy, oracle=oracle)
            wall[label] = time.perf_counter() - t0
            results[label] = out.metrics
            console.print(f"  {label}: {wall[label]:.1f} s", style="dim", markup=False)
        except Exception as exc:  # keep going: one broken policy must not hide the others
            errors[label] = f"{type(exc).__name__}: {exc}"
            console.print(f"{label} failed: {errors[label]}", style="red", markup=False)
            traceback.print_exc(file=sys.stderr)
    return results, errors, wall


# --------------------------------------------------------------------------- micro-benchmark
MICRO_NODE = Resources(gpu=8, cpu=64, mem_gb=512)
SIZES = (1, 1, 1, 1, 2, 2, 4, 8)


_GROUPS: dict[int, TaskGroup] = {}


def _job(i: int, tenant: str, gpus: int, submit: float, duration: float) -> TraceJob:
    # one TaskGroup per size, shared as the trace loaders share them
    group = _GROUPS.setdefault(gpus, TaskGroup(count=gpus, demand=Resources(gpu=1, cpu=4, mem_gb=32)))
    spec = JobSpec(id=f"{tenant}-{i}", tenant=tenant, submit_time=submit, model="resnet50",
                   architecture="single" if gpus == 1 else "allreduce", iterations=max(1, int(duration)),
                   workers=group)
    return TraceJob(spec, JobTruth(iterations=max(1, int(duration)), duration=duration, ref_workers=gpus))


def crowded_workload(nodes: int = 500, queue: int = 1000, fill: float = 0.97,
                     seed: int = 7) -> tuple[list[TraceJob], ClusterSpec]:
    """Jobs filling ``fill`` of the GPUs at t=0 (running for days), then ``queue`` arrivals at t=1."""
    rng = np.random.default_rng(seed)
    cluster = ClusterSpec.homogeneous("micro", nodes, MICRO_NODE)
    target = fill * nodes * MICRO_NODE["gpu"]
    jobs: list[TraceJob] = []
    used = 0
    while used < target:
        g = int(rng.choice(SIZES))
        jobs.append(_job(len(jobs), f"t{len(jobs) % 5}", g, 0.0, float(rng.uniform(2e5, 4e5))))
        used += g
    for k in range(queue):
        g = int(rng.choice(SIZES))
        jobs.append(_job(len(jobs), f"t{k % 5}", g, 1.0, float(rng.uniform(600, 36000))))
    return jobs, cluster


def _timed(decide: Any, into: list[tuple[float, float, int]], when: float | None) -> Any:
    """``decide`` that appends (CPU ms, wall ms, actions) of its calls at time ``when`` (all if None)."""
    def run(view: Any) -> Any:
        c0, w0 = time.thread_time(), time.perf_counter()
        plan = decide(view)
        if when is None or view.now == when:
            into.append(((time.thread_time() - c0) * 1e3, (time.perf_counter() - w0) * 1e3, len(plan)))
        return plan
    return run


def _crowded_run(name: str, queue: int, arrival: list[tuple[float, float, int]]) -> tuple[Any, Any]:
    """Run ``name`` on :func:`crowded_workload` up to t=1 (GC paused); (policy, view) after it."""
    jobs, cluster = crowded_workload(queue=queue)
    gc.collect()
    gc.disable()
    try:
        policy = make_policy(name)
        decide = policy.decide
        policy.decide = _timed(decide, arrival, 1.0)  # the scheduler calls the instance attribute
        sched = Scheduler(cluster, policy, SimBackend(jobs, config_for(cluster, SimConfig())), horizon=1.0)
        sched.run([j.spec for j in jobs])
        policy.decide = decide
        return policy, sched.view
    finally:
        gc.enable()


def micro_one(name: str, queue: int = 1000, runs: int = 3, repeats: int = 20) -> dict[str, Any]:
    """Time ``name``'s decisions on :func:`crowded_workload`.

    * arrival round: its decision at t=1, when ``queue`` jobs arrive at once (median of
      ``runs`` scenario runs);
    * steady round: ``repeats`` more calls of ``decide`` on a view where at least ``queue``
      jobs still wait after that decision. A policy that started many of them (naive
      co-location shares GPUs) gets a larger arrival batch, grown by what it started, until
      ``queue`` are left waiting.

    Times are CPU time of the deciding thread (``time.thread_time``), which other processes on
    a shared machine do not inflate; wall times are reported alongside. The garbage collector is
    paused during the runs, so that a collection of the whole simulated heap is not charged to
    whichever policy happens to allocate when it triggers."""
    arrival: list[tuple[float, float, int]] = []
    for _ in range(runs):
        policy, view = _crowded_run(name, queue, arrival)
    arrival_left = len(view.pending) + len(view.paused)
    batch = queue
    for _ in range(4):
        left = len(view.pending) + len(view.paused)
        if left >= queue:
            break
        batch += queue - left
        policy, view = _crowded_run(name, batch, [])
    steady: list[tuple[float, float, int]] = []
    again = _timed(policy.decide, steady, None)
    gc.disable()
    try:
        for _ in range(repeats):
            again(view)
    finally:
        gc.enable()
    cpu = [c for c, _, _ in steady]
    return {
        "policy": policy.name, "nodes": view.capacity.shape[0], "queue_at_arrival": queue,
        "arrival_round_ms": round(statistics.median(c for c, _, _ in arrival), 3),
        "arrival_round_wall_ms": round(statistics.median(w for _, w, _ in arrival), 3),
        "arrival_round_actions": arrival[-1][2],
        "arrival_left": arrival_left, "steady_batch": batch, "queue_waiting": len(view.pending) + len(view.paused),
        "running": len(view.running),
        "steady_round_ms_median": round(statistics.median(cpu), 3), "steady_round_ms_max": round(max(cpu), 3),
        "steady_round_wall_ms_median": round(statistics.median(w for _, w, _ in steady), 3),
    }


def micro(names: list[str], console: Console) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        try:
            rows.append(micro_one(name))
        except Exception as exc:
            console.print(f"{name} micro-benchmark failed: {type(exc).__name__}: {exc}", style="red", markup=False)
            rows.append({"policy": name, "error": f"{type(exc).__name__}: {exc}"})
    return rows


def print_micro(rows: list[dict[str, Any]], console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="Decision time, 500 nodes: CPU ms per decide (goal < 10 ms per round)",
                  caption="steady: a round with >= 1,000 jobs waiting; arrival: the round in which "
                          "1,000 jobs arrive at once (its cost grows with the actions it plans)")
    for col in ("policy", "steady median", "steady max", "waiting", "running", "arrival round", "its actions"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for r in rows:
        if "error" in r:
            table.add_row(Text(r["policy"]), Text(r["error"]), "", "", "", "", "")
            continue
        style = "" if r["steady_round_ms_median"] < 10.0 else "bold red"
        table.add_row(Text(r["policy"]), f"{r['steady_round_ms_median']:.2f} ms", f"{r['steady_round_ms_max']:.2f} ms",
                      f"{r['queue_waiting']:,}", f"{r['running']:,}", f"{r['arrival_round_ms']:.2f} ms",
                      f"{r['arrival_round_actions']:,}", style=style)
    console.print(table)


# --------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default="all", help="comma-separated registry names, or 'all'")
    ap.add_argument("--workloads", default="all", help="comma-separated: tiresias_480, synthetic-heavy, "
                    "multi-tenant, or 'all'")
    ap.add_argument("--synthetic-jobs", type=int, default=1000)
    ap.add_argument("--skip-micro", action="store_true")
    ap.add_argument("--json", default="bench/results/baselines.json")
    args = ap.parse_args()
    names = list(REGISTRY) if args.policies == "all" else [n.strip() for n in args.policies.split(",")]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise SystemExit(f"unknown policies {unknown}; registered: {', '.join(REGISTRY)}")
    console = Console(width=200)
    doc: dict[str, Any] = {"benchmark": "baselines", "policies": names, "workloads": {}}
    chosen = workloads(args.synthetic_jobs)
    if args.workloads != "all":
        keep = [w.strip() for w in args.workloads.split(",")]
        if unknown := [w for w in keep if w not in chosen]:
            raise SystemExit(f"unknown workloads {unknown}; known: {', '.join(chosen)}")
        chosen = {w: chosen[w] for w in keep}
    for wname, (jobs, cluster) in chosen.items():
        console.rule(f"{wname}: {len(jobs)} jobs on {cluster.name} ({len(cluster.nodes)} nodes)")
        results, errors, wall = run_workload(jobs, cluster, names, console)
        if results:  # the tenant Jain column shows itself where tenants exist
            print_comparison(results, console, title=wname)
        doc["workloads"][wname] = {
            "jobs": len(jobs), "cluster": cluster.name, "nodes": len(cluster.nodes),
            "results": {k: {**m.to_json(), "wall_s": round(wall[k], 3)} for k, m in results.items()},
            "errors": errors,
        }
    if not args.skip_micro:
        console.rule("decision-time micro-benchmark")
        rows = micro(names, console)
        print_micro(rows, console)
        doc["micro"] = rows
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, default=lambda x: None if isinstance(x, float) and not math.isfinite(x)
                               else str(x)))
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
