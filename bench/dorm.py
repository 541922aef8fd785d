"""Dorm (Sun et al., SMARTCOMP'17) on the paper's workload, solver scaling, and real resizes.

    python bench/dorm.py [--seeds 3] [--json bench/results/dorm.json] [--skip-scaling] [--skip-sensitivity]
                         [--alpha A] [--real | --real-only | --aggregated-only]

**Workload (§V-A, Table II).** 50 applications — 20 LR (Criteo, MxNet), 20 MF
(MovieLens, TensorFlow), 6 CaffeNet (CIFAR-10, MPI-Caffe), one each of
VGG-16, GoogLeNet, AlexNet, ResNet-50 (ImageNet, one GPU per container) —
shuffled and submitted with exponential gaps of mean 20 minutes, on 20
servers of 12 CPUs and 128 GB (240 CPUs, 2.5 TB) of which 5 hold one GPU.
Table II's extracted text loses every cell that reads "1"; the columns
(weight, max, min, num) are restored so that the counts sum to 50 (20 + 20 +
6 + 1 + 1 + 1 + 1) and Swarm's sizes (8, 8, 4, 2, 2, 2, 3) lie in [min, max]:
n_min = 1 for every type; weights 1, 2, 4, 1, 1, 2, 4; n_max 32, 32, 8, 5,
5, 5, 5. (Reading "32 20" as max 32 / *min 20* cannot be right: 20 LR
applications of min 20 x 2 CPUs need 800 CPUs.)

**Speed.** An application's speed grows with its containers as n^α relative
to its Swarm size. α comes from DL2's measured MXNet speeds
(``sim/profiles/ps_speed.py``) for the models both papers share — ResNet-50,
VGG-16 and Inception-BN (GoogLeNet with batch norm): a Dorm container hosts
one worker and one parameter-server shard, so n containers are DL2's (n PS,
n workers); fitting log speed(n, n) / speed(1, 1) against log n over n = 1..5
(the GPU applications' range) gives α per model and the bench uses their
mean for every application (LR, MF, CaffeNet and AlexNet have no DL2 data).
The simulator's one ``scaling_exponent`` carries it. The paper does not give
application lengths; each application's length at its Swarm size is drawn
uniformly from [1, 5] hours (seeded), so that Swarm needs about the paper's
24 hours. Resizing costs ``checkpoint_s + restore_s`` = 90 + 180 s: the
paper's 5% overhead for a 3-hour application killed and resumed twice.

**Policies.** Dorm-1/2/3 (θ1, θ2 = (0.2, 0.1), (0.1, 0.2), (0.1, 0.1));
Swarm = ``fifo-backfill`` with each application's Swarm container count (the
paper's baseline creates a fixed number of containers per application type
and starts whatever fits, in arrival order; ``static.py`` partitions nodes per
tenant, which is not that); FIFO (head-of-line blocking); weighted DRF over
applications (``drf``, each application its own tenant).

**Metrics** (all from each run's record): utilization Σ_k u_k (Eq. 1,
max 3) averaged over the first 5 hours and over the run; fairness loss
Σ_i |s_i − ŝ_i| (Eq. 2) over the applications in the system, ŝ by weighted
DRF in containers, averaged the same way; adjustments (resized or
paused-and-resumed running applications) per re-solve and in total; average
per-application speed-up over Swarm (Swarm JCT / JCT, and Swarm run time /
run time); makespan.

**Scaling.** P2 on 50 x 20 (the paper's size, several draws), 200 x 100 and
1,000 x 500 instances built from the same mix, with 90% of the applications
running (a feasible allocation) and 10% arriving; θ = Dorm-3; time limits
10 s and 60 s; time, status and MIP gap.

**Real** (``--real``): applications on ``LocalBackend`` killed and resumed
twice each (same container count on other logical nodes, as the paper's
sharing-overhead experiment with n_min = n_max), against the same
applications left alone; overhead = extra wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from cohabit.engine.record import EventKind, Record
from cohabit.policies import make_policy
from cohabit.policies.dorm import Dorm, DormApp
from cohabit.policies.dorm.aggregate import solve_aggregated
from cohabit.policies.dorm.milp import PAPER_SETTINGS, Problem, evaluate, keep_and_fill, solve
from cohabit.policies.dorm.shares import AppDemand, container_share, inverse_capacity, theoretical_shares
from cohabit.sim.physics import SimConfig
from cohabit.sim.profiles.ps_speed import ps_throughput
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, NodeSpec, Resources

HOUR = 3600.0
#: Table II: (model, executor, (cpu, gpu, mem GB), weight, n_max, n_min, count, Swarm containers)
TABLE_II = [
    ("lr", "MxNet", (2, 0, 8), 1, 32, 1, 20, 8),
    ("mf", "TensorFlow", (2, 0, 6), 2, 32, 1, 20, 8),
    ("caffenet", "MPI-Caffe", (4, 0, 6), 4, 8, 1, 6, 4),
    ("vgg-16", "MxNet", (4, 1, 32), 1, 5, 1, 1, 2),
    ("googlenet", "TensorFlow", (6, 1, 16), 1, 5, 1, 1, 2),
    ("alexnet", "Petuum", (6, 1, 16), 2, 5, 1, 1, 2),
    ("resnet-50", "MPI-Caffe", (4, 1, 32), 4, 5, 1, 1, 3),
]
DL2_OVERLAP = {"resnet-50": "resnet-50", "vgg-16": "vgg-16", "googlenet": "inception-bn"}
PAPER = {  # the paper's reported numbers (§V-B)
    "util_5h_x": {"dorm-1": 2.55, "dorm-2": 2.46, "dorm-3": 2.32},
    "fairness_lower_x_dorm3": 1.52,
    "speedup_x": {"dorm-1": 2.79, "dorm-2": 2.73, "dorm-3": 2.72},
    "adjusted_total_24h": {"dorm-2": 80, "dorm-3": 76},
    "adjusted_per_event_max": 2,
    "sharing_overhead": 0.05,
}
POLICIES = ("dorm-1", "dorm-2", "dorm-3", "swarm", "fifo", "drf")


# ----------------------------------------------------------------------------- setup
def paper_cluster(servers: int = 20, gpu_servers: int = 5) -> ClusterSpec:
    return ClusterSpec(name="dorm-testbed", nodes=tuple(
        NodeSpec(name=f"slave-{j:03d}", capacity=Resources(cpu=12, gpu=1 if j < gpu_servers else 0, mem_gb=128))
        for j in range(servers)))


def dl2_exponents(max_n: int = 5) -> dict[str, float]:
    """α per overlapping model: slope of log speed(n PS, n workers) vs log n, n = 1..max_n."""
    out = {}
    n = np.arange(1, max_n + 1)
    for ours, dl2 in DL2_OVERLAP.items():
        speed = np.array([ps_throughput(dl2, int(k), int(k)) for k in n])
        out[ours] = float(np.polyfit(np.log(n), np.log(speed / speed[0]), 1)[0])
    return out


def paper_workload(seed: int, lengths_h: tuple[float, float] = (1.0, 5.0)) -> list[TraceJob]:
    rng = np.random.default_rng(seed)
    kinds = [row for row in TABLE_II for _ in range(row[6])]
    order = rng.permutation(len(kinds))
    jobs, t = [], 0.0
    for k, idx in enumerate(order):
        model, executor, (c, g, mem), w, n_max, n_min, _, swarm = kinds[idx]
        length = float(rng.uniform(*lengths_h)) * HOUR
        iters = int(length)
        app = DormApp(id=f"{model}-{k:02d}", executor=executor, model=model,
                      demand=Resources(cpu=c, gpu=g, mem_gb=mem), weight=w, n_max=n_max, n_min=n_min,
                      cmd=("start.sh", "resume.sh"), containers=swarm, submit_time=t, iterations=iters)
        jobs.append(TraceJob(app.to_spec(), JobTruth(iterations=iters, duration=length, ref_workers=swarm)))
        t += float(rng.exponential(20 * 60))
    return jobs


def build_policy(name: str) -> Any:
    if name == "swarm":
        p = make_policy("fifo-backfill")
        p.name = "swarm"
        return p
    return make_policy(name)


# ------------------------------------------------------------------- record metrics
def timeline(record: Record) -> list[tuple[float, dict[str, int], set[str]]]:
    """(time, containers per running app, apps in the system) after each event time."""
    counts: dict[str, int] = {}
    present: set[str] = set()
    out: list[tuple[float, dict[str, int], set[str]]] = []
    for e in record:
        k = e.kind
        if k is EventKind.SUBMITTED:
            present.add(e.job)
        elif k in (EventKind.STARTED, EventKind.RESUMED, EventKind.RESIZED, EventKind.MIGRATED):
            counts[e.job] = len(e.data["nodes"])
        elif k is EventKind.PAUSED:
            counts.pop(e.job, None)
        elif k in (EventKind.FINISHED, EventKind.STOPPED, EventKind.FAILED, EventKind.CANCELLED,
                   EventKind.REJECTED):
            counts.pop(e.job, None)
            present.discard(e.job)
        else:
            continue
        if out and out[-1][0] == e.time:
            out[-1] = (e.time, dict(counts), set(present))
        else:
            out.append((e.time, dict(counts), set(present)))
    return out


def series(jobs: list[TraceJob], cluster: ClusterSpec, record: Record) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step functions (times, utilization Eq. 1, fairness loss Eq. 2) from a run's record."""
    names = ("cpu", "gpu", "mem_gb")
    cap = np.array([[n.capacity[r] for r in names] for n in cluster.nodes], dtype=float)
    inv = inverse_capacity(cap)
    apps = {j.spec.id: AppDemand(j.spec.id, np.array([j.spec.workers.demand[r] for r in names], float),
                                 j.spec.weight, j.spec.min_workers, j.spec.max_workers) for j in jobs}
    per_util = {a: float((d.demand * inv).sum()) for a, d in apps.items()}
    per_dom = {a: container_share(d.demand, inv) for a, d in apps.items()}
    times, util, loss = [], [], []
    cache: dict[frozenset[str], dict[str, float]] = {}
    for t, counts, present in timeline(record):
        key = frozenset(present)
        if key not in cache:
            order = sorted(present, key=lambda a: jobs_index[a])
            cache[key] = theoretical_shares([apps[a] for a in order], cap) if order else {}
        hat = cache[key]
        times.append(t)
        util.append(sum(n * per_util[a] for a, n in counts.items()))
        loss.append(sum(abs(counts.get(a, 0) * per_dom[a] - hat[a]) for a in present))
    return np.array(times), np.array(util), np.array(loss)


jobs_index: dict[str, int] = {}


def time_avg(times: np.ndarray, values: np.ndarray, start: float, end: float) -> float:
    """Average of a right-continuous step function over [start, end]."""
    if end <= start or times.size == 0:
        return float("nan")
    edges = np.clip(np.append(times, end), start, end)
    widths = np.diff(edges)
    return float((values * widths).sum() / (end - start))


def run_sim(name: str, jobs: list[TraceJob], cluster: ClusterSpec, cfg: SimConfig) -> dict[str, Any]:
    policy = build_policy(name)
    t0 = time.perf_counter()
    out = simulate(jobs, cluster, policy, config=cfg, strict=True)
    wall = time.perf_counter() - t0
    rec = out.result.record
    times, util, loss = series(jobs, cluster, rec)
    end = max(e.time for e in rec if e.kind is EventKind.FINISHED)
    submit = {e.job: e.time for e in rec if e.kind is EventKind.SUBMITTED}
    first = {}
    for e in rec:
        if e.kind is EventKind.STARTED:
            first.setdefault(e.job, e.time)
    finish = {e.job: e.time for e in rec if e.kind is EventKind.FINISHED}
    resized = sum(e.kind is EventKind.RESIZED for e in rec)
    paused = sum(e.kind is EventKind.PAUSED for e in rec)
    res: dict[str, Any] = {
        "policy": name, "unfinished": len(out.result.unfinished), "wall_s": wall, "makespan_h": end / HOUR,
        "util_5h": time_avg(times, util, 0.0, 5 * HOUR), "util_total": time_avg(times, util, 0.0, end),
        "loss_5h": time_avg(times, loss, 0.0, 5 * HOUR), "loss_total": time_avg(times, loss, 0.0, end),
        "loss_max": float(loss.max()), "adjusted_total": resized + paused,
        "jct": {j: finish[j] - submit[j] for j in finish}, "run": {j: finish[j] - first[j] for j in finish},
        "series": {"t_h": (times / HOUR).round(4).tolist(), "util": util.round(4).tolist(),
                   "loss": loss.round(4).tolist()},
    }
    if isinstance(policy, Dorm):
        log = policy.log
        secs = [d.seconds for d in log]
        res["solver"] = {
            "solves": len(log), "status": {s: sum(d.status == s for d in log) for s in sorted({d.status for d in log})},
            "median_s": statistics.median(secs), "p95_s": float(np.percentile(secs, 95)), "max_s": max(secs),
            "adjusted_per_solve_mean": statistics.fmean(d.adjusted for d in log),
            "adjusted_per_solve_max": max(d.adjusted for d in log),
            "adjust_bound_max": max(d.adjust_bound for d in log), "fairness_bound": log[0].fairness_bound,
            "cycle_pauses": sum(d.paused_for_cycle for d in log),
            "theta_violations": sum(1 for d in log if d.status in ("optimal", "time_limit") and (
                d.fairness_loss > d.fairness_bound + 1e-6 or d.adjusted > d.adjust_bound)),
        }
    return res


def speedups(base: dict[str, Any], other: dict[str, Any]) -> dict[str, float]:
    ids = sorted(base["jct"].keys() & other["jct"].keys())
    return {
        "jct_ratio_mean": statistics.fmean(base["jct"][j] / other["jct"][j] for j in ids),
        "run_ratio_mean": statistics.fmean(base["run"][j] / other["run"][j] for j in ids),
        "mean_jct_ratio": statistics.fmean(base["jct"][j] for j in ids) / statistics.fmean(other["jct"][j] for j in ids),
    }


# ------------------------------------------------------------------------ scaling
def scaled_instance(n_apps: int, n_servers: int, seed: int, arriving: float | int = 0.1) -> Problem:
    """Table II's mix scaled to ``n_apps``, a quarter of servers with a GPU; the applications but
    ``arriving`` (a count, or a fraction) run, placed first-fit at min(DRF count, n_max) (a
    feasible previous allocation); the rest are new."""
    rng = np.random.default_rng(seed)
    gpu_servers = max(n_servers // 4, 1)
    cap = np.array([[12.0, 1.0 if j < gpu_servers else 0.0, 128.0] for j in range(n_servers)])
    scale = n_apps / 50
    kinds: list[tuple] = []
    for row in TABLE_II:
        kinds += [row] * max(int(round(row[6] * scale)), 1)
    kinds = [kinds[i] for i in rng.permutation(len(kinds))][:n_apps]
    apps = [AppDemand(f"a{i}", np.array(r[2], float), float(r[3]), r[5], r[4]) for i, r in enumerate(kinds)]
    n_new = arriving if isinstance(arriving, int) else int(round(len(apps) * arriving))
    n_run = len(apps) - n_new
    running = apps[:n_run]
    fair = theoretical_shares(running, cap)
    inv = inverse_capacity(cap)
    prev = np.zeros((len(apps), n_servers), dtype=np.int64)
    free = cap.copy()
    for i, a in enumerate(running):
        want = max(int(round(fair[a.id] / max(container_share(a.demand, inv), 1e-12))), a.n_min)
        for j in rng.permutation(n_servers):
            while prev[i].sum() < want and (free[j] - a.demand >= -1e-9).all():
                prev[i, j] += 1
                free[j] -= a.demand
        if prev[i].sum() < a.n_min:  # did not fit: it waits (treated as arriving)
            free += prev[i][:, None] * a.demand[None, :]
            prev[i] = 0
    return Problem(apps, cap, previous=prev)


def scaling(seeds: int) -> list[dict[str, Any]]:
    """P2 at growing sizes: one arrival (Dorm's usual event) and 10% arriving at once."""
    th = PAPER_SETTINGS["dorm-3"]
    out = []
    for n_apps, n_srv, limit, reps in ((50, 20, 10.0, seeds * 3), (200, 100, 10.0, 1), (1000, 500, 60.0, 1)):
        for arriving in (1, 0.1):
            for s in range(reps):
                prob = scaled_instance(n_apps, n_srv, seed=100 + s, arriving=arriving)
                assert prob.running is not None
                t0 = time.perf_counter()
                start = keep_and_fill(prob, th.adjust_bound(int(prob.running.sum())))
                sol = solve(prob, th, time_limit=limit, start=start)
                row = {"apps": n_apps, "servers": n_srv, "arriving": arriving, "time_limit_s": limit,
                       "seed": 100 + s, "status": sol.status, "seconds": sol.seconds,
                       "seconds_with_start": time.perf_counter() - t0, "gap": sol.gap,
                       "utilization": sol.utilization, "start_utilization": evaluate(prob, start)[0], **sol.size}
                out.append(row)
                print(f"  P2 {n_apps:>4} apps x {n_srv:>3} servers, {arriving!s:>3} arriving: {sol.status:<11} "
                      f"{sol.seconds:6.2f} s  gap {sol.gap if sol.gap is not None else float('nan'):.4f}  "
                      f"util {sol.utilization:.3f} (start {row['start_utilization']:.3f})  {sol.size}", flush=True)
    return out


def aggregated_scaling(time_limit: float = 10.0) -> list[dict[str, Any]]:
    """P2 on server classes (``policies/dorm/aggregate.py``) at 200 x 100 and 1,000 x 500, one HiGHS
    thread; CPU seconds (this process) beside the wall time, which the machine's load inflates."""
    th = PAPER_SETTINGS["dorm-3"]
    out = []
    for n_apps, n_srv in ((200, 100), (1000, 500)):
        for arriving in (1, 0.1):
            prob = scaled_instance(n_apps, n_srv, seed=100, arriving=arriving)
            assert prob.running is not None
            c0 = time.process_time()
            start = keep_and_fill(prob, th.adjust_bound(int(prob.running.sum())))
            sol = solve_aggregated(prob, th, time_limit=time_limit, start=start, threads=1)
            cpu = time.process_time() - c0
            row = {"apps": n_apps, "servers": n_srv, "arriving": arriving, "time_limit_s": time_limit,
                   "status": sol.status, "wall_s": sol.seconds, "cpu_s": cpu, "utilization": sol.utilization,
                   "start_utilization": evaluate(prob, start)[0], "load_average": list(os.getloadavg()), **sol.size}
            out.append(row)
            print(f"  P2 on classes {n_apps:>4} x {n_srv:>3}, {arriving!s:>3} arriving: {sol.status:<11} "
                  f"{cpu:6.2f} s CPU ({sol.seconds:6.2f} s wall)  util {sol.utilization:.3f} "
                  f"(class bound {sol.size.get('aggregated_utilization', float('nan')):.3f}, start "
                  f"{row['start_utilization']:.3f})  rounds {sol.size.get('rounds')}  load {os.getloadavg()[0]:.1f}",
                  flush=True)
    return out


# ---------------------------------------------------------------------------- real
class KillResumeTwice:
    """Bench-only policy for the sharing-overhead experiment (§V-B-5): start each application on
    nodes 0..n-1; with ``resize``, kill and resume it (``Resize`` to the same container count on
    the next nodes) when it passes 1/3 and 2/3 of its iterations."""

    tick_interval = 0.25
    uses_oracle = False

    def __init__(self, resize: bool) -> None:
        self.resize = resize
        self.name = "kill-resume-x2" if resize else "alone"
        self.done: dict[str, int] = {}

    def decide(self, view: Any) -> list[Any]:
        from cohabit.engine.actions import Resize, Start

        plan: list[Any] = []
        nodes = view.capacity.shape[0]
        for job in view.pending.values():
            plan.append(Start(job.id, tuple(range(job.spec.workers.count))))
        if self.resize:
            for job in view.running.values():
                k = self.done.get(job.id, 0)
                if k < 2 and job.iterations_done(view.now) >= (k + 1) / 3 * (job.spec.iterations or 1):
                    n = job.n_workers
                    shift = (k + 1) * n
                    plan.append(Resize(job.id, tuple((i + shift) % nodes for i in range(n))))
                    self.done[job.id] = k + 1
        return plan


def real_apps() -> list[Any]:
    """Three applications of two to three minutes each on this machine (Dorm tuples, n_min = n_max)."""

    def app(id: str, workers: int, iters: int, workload: dict[str, Any], mem: float) -> Any:
        return DormApp(id=id, executor="cohabit", demand=Resources(cpu=1, mem_gb=mem), n_min=workers,
                       n_max=workers, containers=workers, cmd=workload, iterations=iters).to_spec()

    return [
        app("mlr-mnist", 1, 1_500_000, {"name": "mlr", "data": "sample", "lr": 0.1}, 0.5),
        app("cnn", 1, 110_000, {"name": "torch-cnn", "channels": 8}, 1.0),
        app("mlp-dp2", 2, 30_000, {"name": "torch-mlp", "hidden": 64}, 1.0),
    ]


def real_overhead() -> dict[str, Any]:
    """Each application alone, then killed and resumed twice; extra wall time of the second run."""
    from cohabit.runtime.runner import local_cluster, run_local

    cluster = local_cluster(nodes=4)
    rows = []
    print("\nReal: kill-and-resume twice on LocalBackend (each app alone on this machine)")
    for spec in real_apps():
        times: dict[str, float] = {}
        resizes = 0
        for resize in (False, True):
            out = run_local([spec], cluster, KillResumeTwice(resize), checkpoint_interval=30.0)
            rec = out.result.record
            start = min(e.time for e in rec if e.kind is EventKind.STARTED)
            end = max(e.time for e in rec if e.kind is EventKind.FINISHED)
            times["resized" if resize else "alone"] = end - start
            if resize:
                resizes = sum(e.kind is EventKind.RESIZED for e in rec)
                halts = [t["seconds"] for t in out.timings if t["kind"] == "halt"]
                back = [t["since_launch"] for t in out.timings if t["kind"] == "first_progress"]
        over = times["resized"] / times["alone"] - 1
        rows.append({"app": spec.id, "workers": spec.workers.count, "iterations": spec.iterations,
                     "alone_s": times["alone"], "resized_s": times["resized"], "resizes": resizes,
                     "overhead": over, "per_resize_s": (times["resized"] - times["alone"]) / max(resizes, 1),
                     "halt_s": halts, "launch_to_first_progress_s": back,
                     # the kill-resume mechanism alone: halts plus relaunch-to-first-progress of the
                     # resumed runs (the wall-time difference is at the mercy of this machine's load)
                     "mechanism_s": sum(halts) + sum(back[1:]),
                     "mechanism_overhead": (sum(halts) + sum(back[1:])) / times["alone"]})
        print(f"  {spec.id:<10} alone {times['alone']:7.1f} s  resized x{resizes} {times['resized']:7.1f} s  "
              f"overhead {100 * over:5.1f}%  ({rows[-1]['per_resize_s']:.2f} s per kill-resume; halts "
              f"{', '.join(f'{h:.2f}' for h in halts)} s; launch->first progress "
              f"{', '.join(f'{b:.2f}' for b in back)} s)", flush=True)
    return {"rows": rows, "mean_overhead": statistics.fmean(r["overhead"] for r in rows),
            "mean_mechanism_overhead": statistics.fmean(r["mechanism_overhead"] for r in rows)}


# --------------------------------------------------------------------------- main
def fmt(x: float, p: int = 2) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{p}f}"


def compare(alpha: float, lengths: tuple[float, float], seeds: int, policies: tuple[str, ...],
            log: bool = True) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Run ``policies`` on ``seeds`` draws of the paper's workload; per-policy means."""
    cluster = paper_cluster()
    cfg = SimConfig(scaling_exponent=alpha, checkpoint_s=90.0, restore_s=180.0)
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in policies}
    for seed in range(seeds):
        jobs = paper_workload(seed, lengths)
        jobs_index.clear()
        jobs_index.update({j.spec.id: k for k, j in enumerate(jobs)})
        for name in policies:
            r = run_sim(name, jobs, cluster, cfg)
            r["seed"] = seed
            runs[name].append(r)
            if log:
                print(f"  α={alpha:.3f} lengths {lengths} seed {seed} {name:<7} util5h {r['util_5h']:.2f} "
                      f"util {r['util_total']:.2f} loss {r['loss_total']:.2f} adj {r['adjusted_total']} "
                      f"makespan {r['makespan_h']:.1f} h ({r['wall_s']:.1f} s)", flush=True)
    summary: dict[str, dict[str, Any]] = {}
    for name in policies:
        rs = runs[name]
        row = {k: statistics.fmean(r[k] for r in rs)
               for k in ("util_5h", "util_total", "loss_5h", "loss_total", "loss_max", "adjusted_total",
                         "makespan_h")}
        if name != "swarm":
            sp = [speedups(runs["swarm"][i], rs[i]) for i in range(len(rs))]
            row.update({k: statistics.fmean(s[k] for s in sp) for k in sp[0]})
        if "solver" in rs[0]:
            row["adjusted_per_solve_mean"] = statistics.fmean(r["solver"]["adjusted_per_solve_mean"] for r in rs)
            row["adjusted_per_solve_max"] = max(r["solver"]["adjusted_per_solve_max"] for r in rs)
            row["solve_median_s"] = statistics.fmean(r["solver"]["median_s"] for r in rs)
            row["solve_p95_s"] = statistics.fmean(r["solver"]["p95_s"] for r in rs)
            row["solve_max_s"] = max(r["solver"]["max_s"] for r in rs)
            row["theta_violations"] = sum(r["solver"]["theta_violations"] for r in rs)
            row["infeasible"] = sum(r["solver"]["status"].get("infeasible", 0) for r in rs)
            row["cycle_pauses"] = statistics.fmean(r["solver"]["cycle_pauses"] for r in rs)
        summary[name] = row
    return summary, runs


def print_table(summary: dict[str, dict[str, Any]], title: str) -> None:
    base = summary["swarm"]
    print(f"\n{title}; ratios are vs Swarm, the paper's in brackets")
    head = ("policy", "util 5h", "x Swarm", "util all", "x Swarm", "loss avg", "Swarm/loss", "adj total",
            "adj/solve mean/max", "speed-up JCT", "speed-up run", "makespan h")
    print(" | ".join(head))
    for name, r in summary.items():
        pu = PAPER["util_5h_x"].get(name)
        ps = PAPER["speedup_x"].get(name)
        pl = PAPER["fairness_lower_x_dorm3"] if name == "dorm-3" else None
        adj = (f"{r['adjusted_per_solve_mean']:.2f}/{r['adjusted_per_solve_max']}"
               if "adjusted_per_solve_max" in r else "—")
        cells = [
            name, fmt(r["util_5h"]), fmt(r["util_5h"] / base["util_5h"]) + (f" [{pu}]" if pu else ""),
            fmt(r["util_total"]), fmt(r["util_total"] / base["util_total"]), fmt(r["loss_total"]),
            fmt(base["loss_total"] / r["loss_total"]) + (f" [{pl}]" if pl else ""), fmt(r["adjusted_total"], 1),
            adj, (fmt(r["jct_ratio_mean"]) + (f" [{ps}]" if ps else "")) if "jct_ratio_mean" in r else "—",
            fmt(r["run_ratio_mean"]) if "run_ratio_mean" in r else "—", fmt(r["makespan_h"], 1),
        ]
        print(" | ".join(cells))
    dorms = [n for n in summary if "solve_median_s" in summary[n]]
    if dorms:
        print("solver per re-solve (s): " + "; ".join(
            f"{n} median {summary[n]['solve_median_s']:.3f} p95 {summary[n]['solve_p95_s']:.2f} "
            f"max {summary[n]['solve_max_s']:.2f}, θ violations {summary[n]['theta_violations']}, "
            f"infeasible {summary[n]['infeasible']}" for n in dorms))


class RecordingDorm(Dorm):
    """Dorm that keeps every P2 instance it builds (to re-solve them under other time limits)."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.problems: list[Problem] = []

    def problem(self, view: Any, jobs: Any) -> Problem:  # type: ignore[override]
        p = Dorm.problem(view, jobs)
        self.problems.append(p)
        return p


def policy_instances(alpha: float) -> list[dict[str, Any]]:
    """The P2 instances Dorm-3 met on seed 0, re-solved with a 1 s and a 10 s time limit."""
    th = PAPER_SETTINGS["dorm-3"]
    pol = RecordingDorm(th.theta1, th.theta2, name="dorm-3")
    jobs = paper_workload(0)
    simulate(jobs, paper_cluster(), pol, config=SimConfig(scaling_exponent=alpha, checkpoint_s=90, restore_s=180))
    out = []
    for p in pol.problems:
        a = solve(p, th, time_limit=1.0)
        b = solve(p, th, time_limit=10.0)
        out.append({"apps": len(p.apps), "status_1s": a.status, "seconds_1s": a.seconds, "util_1s": a.utilization,
                    "status_10s": b.status, "seconds_10s": b.seconds, "util_10s": b.utilization})
    ok = [r for r in out if r["status_10s"] in ("optimal", "time_limit")]
    within = sum(r["status_1s"] == "optimal" for r in out)
    worst = max((1 - r["util_1s"] / r["util_10s"] for r in ok if r["status_1s"] != "no_solution"
                 and r["util_10s"] > 0), default=0.0)
    secs = sorted(r["seconds_10s"] for r in out)
    print(f"  P2 instances met by Dorm-3 (seed 0, {len(out)} re-solves, up to {max(r['apps'] for r in out)} apps "
          f"x 20 servers): optimal within 1 s: {within}/{len(out)}; worst utilization loss of the 1 s incumbent "
          f"{100 * worst:.2f}%; time to optimal median {statistics.median(secs):.3f} s, "
          f"p95 {np.percentile(secs, 95):.2f} s, max {secs[-1]:.2f} s", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json", default="bench/results/dorm.json")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--skip-sensitivity", action="store_true")
    ap.add_argument("--real", action="store_true", help="also run the real resize-overhead experiment")
    ap.add_argument("--alpha", type=float, default=None, help="override the DL2-derived speed exponent")
    ap.add_argument("--real-only", action="store_true", help="only the real experiment (JSON: dorm_real.json)")
    ap.add_argument("--aggregated-only", action="store_true",
                    help="only P2 on server classes at 200 x 100 and 1,000 x 500 (updates that key of the JSON)")
    args = ap.parse_args(argv)
    if args.aggregated_only:
        path = Path(args.json)
        old = json.loads(path.read_text()) if path.exists() else {}
        print("\nSolver scaling on server classes (θ = Dorm-3)")
        old["scaling_aggregated"] = aggregated_scaling()
        path.write_text(json.dumps(old, indent=1, default=float))
        print(f"\nwrote {path}")
        return 0
    if args.real_only:
        path = Path(args.json).with_name("dorm_real.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(real_overhead(), indent=1))
        print(f"\nwrote {path}")
        return 0

    alphas = dl2_exponents()
    alpha = args.alpha if args.alpha is not None else statistics.fmean(alphas.values())
    print(f"speed exponent α from DL2 (n PS, n workers), n=1..5: "
          f"{', '.join(f'{m} {a:.3f}' for m, a in alphas.items())} -> α = {alpha:.3f}")
    summary, runs = compare(alpha, (1.0, 5.0), args.seeds, POLICIES)
    print_table(summary, f"Paper workload (α = {alpha:.3f}, lengths 1-5 h at Swarm size), {args.seeds} seeds")
    result: dict[str, Any] = {
        "alpha": alpha, "alphas": alphas, "checkpoint_s": 90.0, "restore_s": 180.0, "paper": PAPER,
        "summary": summary,
        "runs": {p: [{k: v for k, v in r.items() if k not in ("jct", "run")} for r in rs] for p, rs in runs.items()},
    }
    if not args.skip_sensitivity:
        result["sensitivity"] = []
        for a, lengths in ((1.0, (1.0, 5.0)), (alpha, (4.0, 12.0)), (1.0, (4.0, 12.0))):
            summ, _ = compare(a, lengths, 1, ("dorm-1", "dorm-2", "dorm-3", "swarm", "drf"))
            print_table(summ, f"Sensitivity: α = {a:.3f}, lengths {lengths[0]:g}-{lengths[1]:g} h, seed 0")
            result["sensitivity"].append({"alpha": a, "lengths_h": lengths, "summary": summ})
    if not args.skip_scaling:
        print("\nSolver scaling (θ = Dorm-3)")
        result["policy_instances"] = policy_instances(alpha)
        result["scaling"] = scaling(args.seeds)
    if args.real:
        result["real"] = real_overhead()
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=1, default=float))
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
