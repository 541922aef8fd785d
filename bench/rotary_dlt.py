"""Rotary-DLT (Liu dissertation ch. 3, §3.3.2) in the simulator and on real jobs.

    python bench/rotary_dlt.py [--jobs 30] [--seeds 0,1,2] [--real] [--json bench/results/rotary_dlt.json]

**Workload**: Table 3.2's mix (``cohabit.sim.rotary_workload``: packaged learning curves,
Gavel V100 step times, 60/20/20% convergence/accuracy/runtime criteria, all jobs at time 0)
on the dissertation's server (4 GPUs of 8 GB); Rotary learns from the packaged curves minus
those the jobs were drawn from. One workload per seed; numbers are per seed and summed.

**Policies**: Rotary with T in {0.2, 0.5, 0.8} and its efficiency (T = 0) and fairness
(T = 1) variants, SRF, BCF, LAF, round-robin, FIFO; Rotary with a random epoch estimator
(T = 0 and T = 0.5; the sensitivity experiment).

**Metrics** (from each run's record and the workload's truth):

* attained jobs by time t (the objective of §3.1.4), and its mean over the window
  [0, the slowest policy's makespan] (the area under the curve of attained jobs over time,
  divided by the window: higher means more jobs attained sooner);
* the minimum and median *attainment rate* over jobs at time t (§3.3.2's definitions:
  accuracy reached / target; epochs done / convergence-line, or / max epochs when the
  job never converges; epochs done / runtime epochs; 1 once attained), the fairness side
  of Fig. 3.9;
* false attainment (attained by the reported validation accuracy, not by the held-out one),
  waiting time (time in the system not running, mean over jobs);
* estimator errors: TEE on held-back curves (joint fit vs history only vs own points only,
  with 1-5 own epochs), TME on real peak-memory measurements of the torch workloads
  (``cohabit/data/memory``, leave one model size out) and on held-back repository records
  (leave-one-out relative error, on the generator's assumed memory model), TTR's first-step
  effect on a real torch job;
* overheads (Table 3.3): CPU seconds spent in TTR, TEE and TME inside the rotary policy for
  workloads of 10, 20, 30 and 40 jobs, beside the workload's simulated running time.

``--real`` also runs ``examples/rotary_jobs.yaml`` (12 real PyTorch jobs) under rotary
(T = 0 and 0.5), SRF, BCF, LAF, round-robin and FIFO on this machine.

CPU time (``time.process_time``) is measured, not wall time; the load average is printed
beside every table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.rotary import RotaryDLT
from cohabit.repository import JobRepository, packaged_records
from cohabit.sim.rotary_workload import generate, history, rotary_cluster
from cohabit.sim.runner import simulate
from cohabit.spec.criteria import Convergence, MetricTarget, RunFor

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ["rotary:threshold=0.2", "rotary:threshold=0.5", "rotary:threshold=0.8", "rotary:threshold=0",
            "rotary:threshold=1", "srf", "bcf", "laf", "rr", "fifo",
            "rotary:threshold=0:estimator=random", "rotary:threshold=0.5:estimator=random"]


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


# --------------------------------------------------------------------------- attainment rate
def convergence_line(acc: tuple[float, ...], delta: float) -> int | None:
    """First epoch whose reported gain is below ``delta`` (the retrospective convergence-line)."""
    for e in range(1, len(acc)):
        if acc[e] - acc[e - 1] < delta:
            return e + 1
    return None


def rate_curves(out: Any, jobs: list, grid: np.ndarray) -> np.ndarray:
    """Attainment rate of every job at every grid time (rows: jobs), §3.3.2's definitions."""
    ipe = {j.spec.id: j.spec.iterations / j.spec.epochs for j in jobs}
    prog: dict[str, list[tuple[float, float]]] = {j.spec.id: [] for j in jobs}
    attained: dict[str, float] = {}
    for e in out.result.record:
        if e.kind is EventKind.PROGRESS and e.job in prog:
            prog[e.job].append((e.time, e.data["iterations"] / ipe[e.job]))
        elif e.kind in (EventKind.FINISHED, EventKind.STOPPED) and e.job in prog and "epochs" in e.data:
            prog[e.job].append((e.time, float(e.data["epochs"])))  # the epochs it ended with
            if e.data.get("attained"):
                attained[e.job] = e.time
    rates = np.zeros((len(jobs), grid.size))
    for i, j in enumerate(jobs):
        c, acc = j.spec.criteria, j.truth.accuracy
        pts = prog[j.spec.id]
        times = np.asarray([p[0] for p in pts]) if pts else np.zeros(0)
        epochs = np.floor(np.maximum.accumulate(np.asarray([p[1] for p in pts])) + 1e-6) if pts else np.zeros(0)
        for k, t in enumerate(grid):
            if j.spec.id in attained and attained[j.spec.id] <= t:
                rates[i, k] = 1.0
                continue
            n = int(np.searchsorted(times, t, side="right"))
            e = int(epochs[n - 1]) if n else 0
            if isinstance(c, RunFor):
                r = e / c.budget.amount
            elif isinstance(c, MetricTarget):
                r = (acc[e - 1] / c.value) if e >= 1 else 0.0
            else:
                line = convergence_line(acc, c.delta) if isinstance(c, Convergence) else None
                r = e / (line if line is not None else c.within.amount)
            rates[i, k] = min(r, 1.0)
    return rates


# --------------------------------------------------------------------------- simulation
def run_sim(n_jobs: int, seeds: list[int], repo_dir: Path) -> dict[str, Any]:
    per_seed: dict[str, Any] = {}
    cluster = rotary_cluster()
    for seed in seeds:
        jobs = generate(n_jobs, seed=seed)
        repo = repo_dir / f"rotary_repo_{n_jobs}_{seed}.sqlite"
        if repo.exists():
            repo.unlink()
        with JobRepository(repo) as r:
            r.add_many(history(jobs, seed=seed))
        outs = {}
        for name in POLICIES:
            spec = name.replace("rotary:", f"rotary:repo={repo}:") if name.startswith("rotary") else name
            t0 = time.process_time()
            outs[name] = (simulate(jobs, cluster, make_policy(spec)), time.process_time() - t0)
        window = max(o.result.end_time for o, _ in outs.values())
        grid = np.linspace(0.0, window, 13)[1:]
        res: dict[str, Any] = {"window_s": window, "grid_s": grid.tolist(), "policies": {}}
        for name, (o, cpu) in outs.items():
            att = o.metrics.attainment
            times = att.attained_times
            rates = rate_curves(o, jobs, grid)
            auc = float(np.mean([sum(1 for x in times if x <= t) for t in np.linspace(0, window, 201)]))
            wait = [o.result.jobs[j.spec.id].waiting_time(o.result.end_time) for j in jobs]
            res["policies"][name] = {
                "attained": att.attained, "attained_by": [att.attained_by(t) for t in grid],
                "attained_mean_over_window": auc, "false_attained": att.false_attained,
                "false_attainment_ratio": att.false_attainment_ratio,
                "min_rate_by": rates.min(axis=0).tolist(), "median_rate_by": np.median(rates, axis=0).tolist(),
                "mean_waiting_s": float(np.mean(wait)), "preemptions": o.metrics.preemptions,
                "makespan_s": o.metrics.makespan, "sim_cpu_s": cpu,
            }
        per_seed[str(seed)] = res
    return per_seed


def print_sim(per_seed: dict[str, Any]) -> None:
    print(f"\n== Simulated Table 3.2 workload, attained jobs over time ({load()})")
    for seed, res in per_seed.items():
        grid = res["grid_s"]
        cols = [grid[i] for i in (1, 3, 5, 8, 11)]
        idx = [1, 3, 5, 8, 11]
        print(f"\nseed {seed}: window {res['window_s'] / 60:.0f} min")
        head = "".join(f"{c / 60:>7.0f}m" for c in cols)
        print(f"{'policy':38s}{head}   mean  min-rate@{cols[1] / 60:.0f}m  med-rate@{cols[1] / 60:.0f}m"
              f"  false  wait(min)  preempt")
        for name, p in res["policies"].items():
            att = "".join(f"{p['attained_by'][i]:>8d}" for i in idx)
            print(f"{name:38s}{att}  {p['attained_mean_over_window']:5.2f}  {p['min_rate_by'][3]:10.2f}"
                  f"  {p['median_rate_by'][3]:10.2f}  {p['false_attained']:5d}  {p['mean_waiting_s'] / 60:9.1f}"
                  f"  {p['preemptions']:7d}")
    print(f"\nsummed over seeds: mean attained over the window ({load()})")
    names = list(next(iter(per_seed.values()))["policies"])
    tot = {n: sum(r["policies"][n]["attained_mean_over_window"] for r in per_seed.values()) for n in names}
    for n in sorted(names, key=lambda n: -tot[n]):
        print(f"  {n:38s} {tot[n]:7.2f}")


# --------------------------------------------------------------------------- estimators
def tee_errors(n_curves: int = 60, seed: int = 0) -> dict[str, Any]:
    from cohabit.models import TEE
    from cohabit.models.similar import JobTraits

    recs = list(packaged_records())
    picks = np.random.default_rng(seed).choice(len(recs), n_curves, replace=False)
    out: dict[str, Any] = {}
    t_cpu = 0.0
    fits = 0
    for own_n in (1, 2, 3, 5):
        errs: dict[str, list[float]] = {"joint": [], "history": [], "own": []}
        for i in picks:
            held = recs[i]
            hist = recs[:i] + recs[i + 1:]
            tr = JobTraits(held.model, held.dataset, held.batch_size, held.optimizer, held.learning_rate,
                           held.num_parameters)
            own = [(e + 1.0, a) for e, a in enumerate(held.accuracy[:own_n])]
            later = np.arange(own_n + 1.0, 21.0)
            truth = np.asarray(held.accuracy[own_n:])
            tee = TEE(hist)
            t0 = time.process_time()
            joint = tee.fit(tr, own)
            fits += 1
            t_cpu += time.process_time() - t0
            errs["joint"].append(float(np.mean(np.abs(joint.raw(later) - truth))))
            errs["history"].append(float(np.mean(np.abs(tee.fit(tr, ()).raw(later) - truth))))
            own_fit = TEE([]).fit(tr, own)
            errs["own"].append(float(np.mean(np.abs(own_fit.raw(later) - truth))))
        out[str(own_n)] = {k: float(np.mean(v)) for k, v in errs.items()}
    out["cpu_ms_per_fit"] = 1e3 * t_cpu / max(fits, 1)
    return out


def tme_errors(seed: int = 0) -> dict[str, Any]:
    from cohabit.models import TME
    from cohabit.models.similar import JobTraits

    hist = history(generate(1, seed=seed), seed=seed)
    picks = np.random.default_rng(seed).choice(len(hist), 100, replace=False)
    rel, under = [], 0
    t_cpu = 0.0
    for i in picks:
        held = hist[i]
        tme = TME(hist[:i] + hist[i + 1:])
        tr = JobTraits(held.model, held.dataset, held.batch_size, held.optimizer, held.learning_rate,
                       held.num_parameters)
        t0 = time.process_time()
        est = tme.estimate(tr)
        t_cpu += time.process_time() - t0
        rel.append(abs(est - held.peak_mem_mb) / held.peak_mem_mb)
        under += est < held.peak_mem_mb
    return {"mean_rel_error": float(np.mean(rel)), "p95_rel_error": float(np.percentile(rel, 95)),
            "underestimates": int(under), "n": len(rel), "cpu_ms_per_estimate": 1e3 * t_cpu / len(rel)}


def tme_real_errors() -> dict[str, Any]:
    """TME on the packaged real peak-memory measurements (``cohabit/data/memory``), each model size
    held back in turn at every batch size: TME as built, ignoring similarity, without the +5%."""
    from cohabit.models.tme import TME, SizeBlindTME, held_back_errors
    from cohabit.repository import packaged_memory_records

    recs = list(packaged_memory_records())
    held = sorted({r.model for r in recs})
    variants = {"tme": TME, "size-blind": SizeBlindTME, "no pad": lambda h: TME(h, pad=0.0)}
    out: dict[str, Any] = {"held_models": held, "records": len(recs)}
    for label, make in variants.items():
        out[label] = held_back_errors(recs, held, make)
    return out


def print_tme_real() -> dict[str, Any]:
    t = tme_real_errors()
    print(f"\n== TME on real peak-memory measurements ({t['records']} records, leave one model size out) ({load()})")
    print("variant       mean rel error   p95     under the peak   mean shortfall")
    for label in ("tme", "size-blind", "no pad"):
        e = t[label]
        print(f"{label:12s}  {e['mean_rel_error']:14.3f}   {e['p95_rel_error']:.3f}   {e['under_rate']:14.2f}   "
              f"{e['mean_shortfall']:14.3f}")
    return t


def ttr_first_step(steps: int = 60) -> dict[str, Any]:
    """Step times of a real torch job in this process: the first step against the rest (TTR discards it)."""
    import torch

    from cohabit.runtime.workloads import build, parse_config
    from cohabit.runtime.workloads.base import WorkloadContext

    torch.set_num_threads(1)
    ctx = WorkloadContext(job="ttr", seed=0, iterations=steps, batch_size=32)
    w = build(parse_config("ttr", {"name": "torch-cnn", "n_samples": 1024}), ctx)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        w.step()
        times.append(time.perf_counter() - t0)
    rest = float(np.mean(times[1:]))
    with_first = float(np.mean(times))
    return {"first_step_s": times[0], "mean_rest_s": rest, "first_over_rest": times[0] / rest,
            "error_if_first_kept": (with_first - rest) / rest, "steps": steps}


def overheads(sizes: tuple[int, ...] = (10, 20, 30, 40), repo_dir: Path = Path("/tmp")) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        jobs = generate(n, seed=100 + n)
        repo = repo_dir / f"rotary_overhead_{n}.sqlite"
        if repo.exists():
            repo.unlink()
        with JobRepository(repo) as r:
            r.add_many(history(jobs, seed=100 + n))
        pol = RotaryDLT(threshold=0.5, repo=str(repo))
        t0 = time.process_time()
        out = simulate(jobs, rotary_cluster(), pol)
        rows.append({"jobs": n, "running_time_s": out.result.end_time, "ttr_cpu_s": pol.overhead["ttr"],
                     "tee_cpu_s": pol.overhead["tee"], "tme_cpu_s": pol.overhead["tme"],
                     "sim_cpu_s": time.process_time() - t0})
    return rows


# --------------------------------------------------------------------------- real
def run_real() -> dict[str, Any]:
    from cohabit.runtime.runner import local_cluster, run_local
    from cohabit.spec.yamlio import load_jobs

    specs = load_jobs(ROOT / "examples" / "rotary_jobs.yaml")
    cluster = local_cluster()
    out: dict[str, Any] = {"cluster_nodes": len(cluster.nodes), "policies": {}}
    for name in ["rotary:threshold=0", "rotary:threshold=0.5", "srf", "bcf", "laf", "rr", "fifo"]:
        usage0 = os.times()
        t0 = time.perf_counter()
        res = run_local(specs, cluster, make_policy(name))
        wall = time.perf_counter() - t0
        usage1 = os.times()
        att = res.metrics.attainment
        window = res.result.end_time
        out["policies"][name] = {
            "attained": att.attained, "false_attained": att.false_attained, "attained_times": att.attained_times,
            "attained_mean_over_window": None, "end_s": window, "wall_s": wall,
            "cpu_s": (usage1.children_user + usage1.children_system + usage1.user + usage1.system)
            - (usage0.children_user + usage0.children_system + usage0.user + usage0.system),
            "preemptions": res.metrics.preemptions,
        }
        print(f"  real {name}: attained {att.attained}/12 by {window:.0f} s ({load()})", flush=True)
    window = max(p["end_s"] for p in out["policies"].values())
    for p in out["policies"].values():
        p["attained_mean_over_window"] = float(np.mean(
            [sum(1 for x in p["attained_times"] if x <= t) for t in np.linspace(0, window, 201)]))
    return out


def print_real(real: dict[str, Any]) -> None:
    print(f"\n== Real run: examples/rotary_jobs.yaml, 12 torch jobs on {real['cluster_nodes']} slots ({load()})")
    print(f"{'policy':24s} attained  mean-over-window  false  preempt  end(s)  wall(s)  cpu(s)")
    for n, p in sorted(real["policies"].items(), key=lambda kv: -kv[1]["attained_mean_over_window"]):
        print(f"{n:24s} {p['attained']:8d}  {p['attained_mean_over_window']:16.2f}  {p['false_attained']:5d}"
              f"  {p['preemptions']:7d}  {p['end_s']:6.0f}  {p['wall_s']:7.0f}  {p['cpu_s']:6.0f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--real", action="store_true", help="also run examples/rotary_jobs.yaml on real processes")
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "rotary_dlt.json"))
    ap.add_argument("--tme-real-only", action="store_true",
                    help="only TME on the real memory measurements (updates that key of the JSON)")
    a = ap.parse_args(argv)
    if a.tme_real_only:
        path = Path(a.json)
        old = json.loads(path.read_text()) if path.exists() else {}
        old["tme_real"] = print_tme_real()
        path.write_text(json.dumps(old, indent=1) + "\n")
        return
    seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    t_all = time.process_time()
    repo_dir = Path(os.environ.get("TMPDIR", "/tmp"))
    doc: dict[str, Any] = {"command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
                           "jobs": a.jobs, "seeds": seeds, "load_average_start": list(os.getloadavg())}
    doc["simulation"] = run_sim(a.jobs, seeds, repo_dir)
    print_sim(doc["simulation"])
    doc["tee"] = tee_errors()
    print(f"\n== TEE mean absolute error on 60 held-back real curves, epochs after the own points ({load()})")
    print("own epochs   joint (0.5/0.5)   history only   own only")
    for k in ("1", "2", "3", "5"):
        e = doc["tee"][k]
        print(f"{k:>10s}   {e['joint']:15.4f}   {e['history']:12.4f}   {e['own']:8.4f}")
    print(f"TEE fit: {doc['tee']['cpu_ms_per_fit']:.2f} ms CPU")
    doc["tme"] = tme_errors()
    t = doc["tme"]
    print(f"\n== TME leave-one-out on 100 repository records (assumed memory model, 5% noise) ({load()})")
    print(f"mean relative error {t['mean_rel_error']:.3f}, p95 {t['p95_rel_error']:.3f}, "
          f"underestimates {t['underestimates']}/{t['n']}, {t['cpu_ms_per_estimate']:.2f} ms CPU per estimate")
    doc["tme_real"] = print_tme_real()
    doc["ttr"] = ttr_first_step()
    t = doc["ttr"]
    print(f"\n== TTR on a real torch-cnn job, {t['steps']} steps ({load()})")
    print(f"first step {t['first_step_s'] * 1e3:.1f} ms, later steps {t['mean_rest_s'] * 1e3:.2f} ms "
          f"({t['first_over_rest']:.1f}x); keeping the first step would bias the step time by "
          f"{100 * t['error_if_first_kept']:+.1f}%")
    doc["overheads"] = overheads(repo_dir=repo_dir)
    print(f"\n== Overheads (Table 3.3), rotary T=0.5, CPU seconds in the estimators ({load()})")
    print("jobs  running time (sim)   TTR       TEE       TME      whole simulation (CPU)")
    for r in doc["overheads"]:
        print(f"{r['jobs']:4d}  {r['running_time_s']:12.0f} s  {r['ttr_cpu_s']:7.3f}s  {r['tee_cpu_s']:7.3f}s  "
              f"{r['tme_cpu_s']:7.3f}s  {r['sim_cpu_s']:7.2f}s")
    if a.real:
        doc["real"] = run_real()
        print_real(doc["real"])
    doc["cpu_s"] = time.process_time() - t_all
    doc["load_average_end"] = list(os.getloadavg())
    doc["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(doc, indent=1, default=lambda x: None if isinstance(x, float) and
                                       not math.isfinite(x) else x))
    print(f"\nwrote {a.json} ({doc['cpu_s']:.0f} s CPU)")


if __name__ == "__main__":
    main()
