"""Harmony in simulation (Lee et al., §V): the paper's setting, the ablation, the scheduler's
scalability and its distance to an exhaustive search. Writes JSON and prints tables.

    python bench/harmony_sim.py                  # everything (a few minutes)
    python bench/harmony_sim.py --quick          # all-at-once arrivals only, fewer baseline variants

Setting: 80 jobs (NMF, LDA, MLR, Lasso x 2 datasets x 10 hyper-parameters; generator and its
assumptions in ``cohabit.sim.harmony_workload``) on 100 machines of 8 vCPU / 32 GB / 1.1 Gbps,
all at time 0 and Poisson arrivals with mean gaps of 2, 4 and 8 minutes.

Utilisation is *useful work*: CPU = sum over jobs of iterations x one-machine COMP time, over
machines x makespan (GC, deserialisation and contention are not counted as work);
network = sum of iterations x COMM time x the job's machines, likewise. Because the CPU work
is fixed, CPU utilisation is inversely proportional to makespan for every policy.

Policies: ``harmony`` (Alg. 1 + regrouping + adaptive spill/reload), ``harmony-isolated``
(dedicated machines; DoP keeps CPU utilisation >= ``u_target`` = 0.7; the sweep over
``u_target`` is reported and the best of it is shown as "Isolated (best)"), ``harmony-naive``
(2 or 3 jobs share machines without coordination; seeded choices: mean, best, worst), and the
ablation: subtasks only (the naive groups run pipelined, no spill), + grouping (Alg. 1 and
regrouping, no spill), + spill/reload (= Harmony).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from cohabit.engine.loop import Scheduler
from cohabit.models.harmony_perf import cluster_eval
from cohabit.policies.harmony.algorithm import JobStat, exhaustive, schedule
from cohabit.policies.harmony.baselines import Isolated, NaiveGroups
from cohabit.policies.harmony.plan import current_groups
from cohabit.policies.harmony.policy import MODE, Harmony
from cohabit.report.metrics import compute_metrics
from cohabit.sim.backend import SimBackend
from cohabit.sim.harmony_physics import HarmonyWorld, group_speeds
from cohabit.sim.harmony_workload import BASES, generate, harmony_cluster
from cohabit.sim.runner import config_for

OUT = Path(__file__).resolve().parent / "results" / "harmony_sim.json"
PAPER = {"jct_speedup": 2.11, "makespan_speedup": 1.60, "cpu": 0.932, "net": 0.831,
         "arrivals": {"0": (2.11, 1.60), "4min": (None, None), "8min": (2.01, 1.56)},
         "ablation_share_of_benefit": {"subtasks only": 0.32, "+ grouping": 0.81, "+ spill/reload": 1.0}}


def run(jobs, policy, machines: int = 100, world: HarmonyWorld | None = None) -> dict:  # type: ignore[no-untyped-def]
    cluster = harmony_cluster(machines)
    cfg = config_for(cluster)
    if world is not None:
        cfg = replace(cfg, harmony=world)
    backend = SimBackend(jobs, cfg)
    t0 = time.process_time()
    result = Scheduler(cluster, policy, backend, strict=True).run([j.spec for j in jobs])
    cpu_s = time.process_time() - t0
    m = compute_metrics(result.record, cluster.capacity)
    span = float(m.makespan)
    out = {
        "policy": policy.name, "avg_jct_min": m.avg_jct / 60, "makespan_min": span / 60,
        "cpu_util": backend.ps_work["cpu"] / (machines * span), "net_util": backend.ps_work["net"] / (machines * span),
        "cpu_busy": backend.ps_work["cpu_busy"] / (machines * span),
        "finished": m.jobs_finished, "unfinished": len(result.unfinished), "preemptions": m.preemptions,
        "migrations": m.migrations, "resizes": m.resizes, "decision_ms_mean": m.decision_time_ms.mean,
        "decision_ms_max": m.decision_time_ms.max, "sim_cpu_s": cpu_s,
    }
    if isinstance(policy, Harmony):
        st = policy.stats
        out["model_error"] = policy.log.summary()
        out["harmony"] = {"full_schedules": st.full_schedules, "replaced_similar": st.replaced_similar,
                          "replaced_bunch": st.replaced_bunch, "regroups": st.regroups,
                          "regroups_skipped": st.regroups_skipped, "schedule_calls": st.schedule_calls,
                          "schedule_ms_mean": statistics.fmean(st.schedule_ms) if st.schedule_ms else None,
                          "schedule_ms_max": max(st.schedule_ms, default=None)}
    return out


class Traced(Harmony):
    """Harmony that also records, after every decision, what its own model (Eq. 1-4, profiled
    times only) predicts for the groups running then: the timeline behind the CPU it loses."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.timeline: list[tuple[float, float, int, int]] = []  # (now, predicted CPU util, running, waiting)

    def decide(self, view):  # type: ignore[no-untyped-def]
        plan = super().decide(view)
        keys = {k: js for k, js in current_groups(view, MODE).items() if js and all(j in self.book for j in js)}
        u = 0.0
        if keys:
            c1 = np.array([self.book.get(j).c1 for js in keys.values() for j in js])  # type: ignore[union-attr]
            net = np.array([self.book.get(j).net for js in keys.values() for j in js])  # type: ignore[union-attr]
            gid = np.repeat(np.arange(len(keys)), [len(js) for js in keys.values()])
            m = np.array([len(k) for k in keys], dtype=np.float64)
            u = cluster_eval(c1, net, gid, m)[0] * float(m.sum()) / view.capacity.shape[0]
        self.timeline.append((view.now, u, len(view.running), len(view.pending) + len(view.paused)))
        return plan


def phases(timeline: list[tuple[float, float, int, int]], makespan_s: float) -> dict:
    """Predicted CPU utilisation (time-weighted) per tenth of the makespan, with the mean number
    of running and waiting jobs: where the CPU is lost (bootstrap, steady state, tail)."""
    t = np.array([x[0] for x in timeline] + [makespan_s])
    dt = np.diff(t)
    vals = np.array([x[1:] for x in timeline], dtype=np.float64)
    out = []
    for k in range(10):
        lo, hi = k * makespan_s / 10, (k + 1) * makespan_s / 10
        w = np.clip(np.minimum(t[1:], hi) - np.maximum(t[:-1], lo), 0, None)
        if w.sum() > 0:
            u, run_, wait = (vals * w[:, None]).sum(0) / w.sum()
            out.append({"tenth": k, "pred_cpu": float(u), "running": float(run_), "waiting": float(wait)})
    return {"tenths": out, "pred_cpu_mean": float((vals[:, 0] * dt).sum() / dt.sum())}


def arrival_block(label: str, gap_s: float, seed: int, quick: bool) -> dict:
    jobs = generate(n_machines=100, seed=seed, mean_gap_s=gap_s)
    off = HarmonyWorld(spill="off")
    res: dict = {"label": label, "mean_gap_s": gap_s}
    traced = Traced()
    res["harmony"] = run(jobs, traced)
    res["harmony"]["phases"] = phases(traced.timeline, res["harmony"]["makespan_min"] * 60)
    # options that are not the paper's (see Harmony's doc): shortest / longest remaining first,
    # from declared iterations (the same jobs, declaring them); bootstrap profiling groups of 8
    declared = generate(n_machines=100, seed=seed, mean_gap_s=gap_s, declare_iterations=True)
    res["variants"] = {"order=srpt": run(declared, Harmony(order="srpt", name="harmony-srpt")),
                       "order=lrpt": run(declared, Harmony(order="lrpt", name="harmony-lrpt")),
                       "profiling groups of 8": run(jobs, Harmony(profile_group_jobs=8, name="harmony-pg8"))}
    res["isolated"] = run(jobs, Isolated(u_target=0.7))
    sweep = {}
    for u in ((0.6, 0.8) if quick else (0.5, 0.6, 0.8, 0.9)):
        sweep[str(u)] = run(jobs, Isolated(u_target=u))
    sweep["0.7"] = res["isolated"]
    res["isolated_sweep"] = sweep
    res["isolated_best"] = min(sweep.values(), key=lambda r: r["makespan_min"])
    res["isolated_best"]["u_target"] = next(u for u, r in sweep.items() if r is res["isolated_best"])
    naive = []
    for per in ((2,) if quick else (2, 3)):
        for s in ((0,) if quick else (0, 1, 2)):
            naive.append(run(jobs, NaiveGroups(jobs_per_group=per, seed=s, name=f"naive-{per}-s{s}")))
    res["naive_runs"] = naive
    res["naive"] = {k: statistics.fmean(r[k] for r in naive) for k in ("avg_jct_min", "makespan_min", "cpu_util", "net_util")}
    res["naive_best"] = min(naive, key=lambda r: r["makespan_min"])
    res["naive_worst"] = max(naive, key=lambda r: r["makespan_min"])
    res["ablation"] = {
        "subtasks only": run(jobs, NaiveGroups(mode="pipelined", name="subtasks-only"), world=off),
        "+ grouping": run(jobs, Harmony(spill=False, name="harmony-nospill"), world=off),
        "+ spill/reload": res["harmony"],
    }
    return res


def scalability(reps: int) -> dict:
    """Full Algorithm 1 on 8,000 profiled jobs and 10,000 machines (and on 80 / 100)."""
    out = {}
    rng = np.random.default_rng(0)
    pool = [(inp, mod, t16, r16) for (inp, mod, t16, r16) in BASES.values()]
    for n_jobs, n_machines in ((80, 100), (8000, 10_000)):
        jobs = []
        for i in range(n_jobs):
            inp, mod, t16, r16 = pool[i % len(pool)]
            cpu16 = t16 * r16 / (1 + r16) * 2.0 ** rng.uniform(-1, 1)
            net = t16 / (1 + r16) * 2.0 ** rng.uniform(-0.5, 0.5)
            jobs.append(JobStat(f"j{i}", c1=cpu16 * 16, net=net, mem_gb=mod, mem_peak_gb=mod))
        cpu, wall = [], []
        for _ in range(reps):
            t0, w0 = time.process_time(), time.perf_counter()
            g = schedule(jobs, n_machines)
            cpu.append(time.process_time() - t0)
            wall.append(time.perf_counter() - w0)
        out[f"{n_jobs}x{n_machines}"] = {
            "cpu_s_median": statistics.median(cpu), "cpu_s_max": max(cpu), "wall_s_median": statistics.median(wall),
            "considered": g.considered, "groups": len(g.groups), "u_cpu": g.u_cpu, "u_net": g.u_net,
            "evaluations": g.evaluations,
        }
    return out


def oracle_gap(seed: int, n_instances: int) -> dict:
    """Alg. 1 against the exhaustive search: the score (Eq. 4) on static instances, (a) random
    tiny ones and (b) jobs drawn from the workload, and whole simulated runs of the Harmony
    policy with either search on a small workload."""
    rng = np.random.default_rng(seed)
    out: dict = {}
    for label in ("random", "workload"):
        ratios = []
        for _ in range(n_instances):
            n = int(rng.integers(3, 7))
            machines = int(rng.integers(n, 13))
            jobs = []
            for i in range(n):
                if label == "random":
                    t, r = rng.uniform(5, 40), math.exp(rng.uniform(math.log(0.2), math.log(5)))
                    jobs.append(JobStat(f"j{i}", c1=8 * t * r / (1 + r), net=t / (1 + r)))
                else:
                    inp, mod, t16, r16 = list(BASES.values())[int(rng.integers(0, len(BASES)))]
                    cpu16 = t16 * r16 / (1 + r16) * 2.0 ** rng.uniform(-1, 1)
                    jobs.append(JobStat(f"j{i}", c1=cpu16 * 16, net=t16 / (1 + r16) * 2.0 ** rng.uniform(-0.5, 0.5)))
            ours, best = schedule(jobs, machines), exhaustive(jobs, machines)
            ratios.append(ours.score / best.score)
        out[label] = {"instances": n_instances, "mean_ratio": float(np.mean(ratios)),
                      "median_ratio": float(np.median(ratios)), "min_ratio": float(np.min(ratios)),
                      "share_within_2pct": float(np.mean(np.asarray(ratios) >= 0.98))}
    jobs = generate(n_machines=12, seed=seed, hyper=1)[:6]
    sims = {}
    for search in ("alg1", "exhaustive"):
        sims[search] = run(jobs, Harmony(search=search, name=f"harmony-{search}"), machines=12)
    out["simulated_6_jobs_12_machines"] = sims
    return out


def spill_micro() -> dict:
    """§V-G: 8 jobs (4 apps x 2 datasets) in one pipelined group; group iteration time (the
    slowest member's) for one fixed alpha for every job versus per-job hill climbing. The paper
    used 32 machines; our jobs' inputs only press on memory below that, so 16 and 24 machines
    are shown too (all-in-memory footprint 1.7x and 1.15x the usable memory)."""
    jobs = generate(n_machines=32, seed=0, hyper=1)
    truths = tuple(sorted((j.truth.ps for j in jobs), key=lambda t: t.input_gb))
    out: dict = {}
    for m in (16, 24, 32):
        row: dict = {"fixed": {}}
        for a in [round(x, 1) for x in np.linspace(0, 1, 11)]:
            sp = group_speeds("pipelined", truths, m, HarmonyWorld(spill=a))
            row["fixed"][str(a)] = max(s.iter_time for s in sp)
        sp = group_speeds("pipelined", truths, m, HarmonyWorld())
        row["adaptive"] = max(s.iter_time for s in sp)
        row["adaptive_alphas"] = [s.alpha for s in sp]
        row["best_fixed_alpha"] = min(row["fixed"], key=lambda k: row["fixed"][k])
        row["adaptive_gain_vs_best_fixed"] = 1 - row["adaptive"] / row["fixed"][row["best_fixed_alpha"]]
        out[str(m)] = row
    return out


def sensitivity(seed: int) -> dict:
    out = {}
    for subset in ("comp", "comm"):
        jobs = generate(n_machines=100, seed=seed, subset=subset)
        h, i = run(jobs, Harmony()), run(jobs, Isolated(u_target=0.7))
        out[subset] = {"harmony": h, "isolated": i, "jct_speedup": i["avg_jct_min"] / h["avg_jct_min"],
                       "makespan_speedup": i["makespan_min"] / h["makespan_min"]}
    return out


# --------------------------------------------------------------------------- tables


def _row(name: str, r: dict, base: dict) -> str:
    return (f"{name:<26}{r['avg_jct_min']:>10.1f}{r['makespan_min']:>11.1f}{r['cpu_util'] * 100:>8.1f}"
            f"{r['net_util'] * 100:>8.1f}{base['avg_jct_min'] / r['avg_jct_min']:>9.2f}x"
            f"{base['makespan_min'] / r['makespan_min']:>9.2f}x")


def print_tables(res: dict) -> None:
    head = f"{'policy':<26}{'avg JCT':>10}{'makespan':>11}{'CPU %':>8}{'net %':>8}{'JCT x':>10}{'mksp x':>10}"
    for blk in res["arrivals"]:
        base = blk["isolated"]
        print(f"\n== {blk['label']} (80 jobs, 100 machines; minutes; speed-ups over Isolated u=0.7) ==")
        print(head)
        print(_row("Harmony", blk["harmony"], base))
        for name, r in blk.get("variants", {}).items():
            print(_row(f"Harmony ({name})", r, base))
        print(_row("Isolated (u=0.7)", base, base))
        print(_row(f"Isolated (best, u={blk['isolated_best']['u_target']})", blk["isolated_best"], base))
        print(_row("Naive (mean)", blk["naive"], base))
        print(_row("Naive (best)", blk["naive_best"], base))
        print(_row("Naive (worst)", blk["naive_worst"], base))
        for name, r in blk["ablation"].items():
            print(_row(f"ablation: {name}", r, base))
        h = blk["harmony"]
        err = h.get("model_error", {})
        print(f"Harmony vs best Isolated: JCT {blk['isolated_best']['avg_jct_min'] / h['avg_jct_min']:.2f}x, "
              f"makespan {blk['isolated_best']['makespan_min'] / h['makespan_min']:.2f}x; "
              f"busy CPU (COMP incl. GC/deserialisation) {100 * h['cpu_busy']:.1f}%; "
              f"model error mean {100 * (err.get('mean') or 0):.1f}% p95 {100 * (err.get('p95') or 0):.1f}% "
              f"(n={err.get('n')}); {h['harmony']}")
        ph = h.get("phases")
        if ph:
            print(f"Harmony's own model, predicted CPU utilisation by tenth of the makespan (mean {100 * ph['pred_cpu_mean']:.1f}%): "
                  + " ".join(f"{100 * x['pred_cpu']:.0f}" for x in ph["tenths"])
                  + "; running jobs: " + " ".join(f"{x['running']:.0f}" for x in ph["tenths"]))
        for metric in ("makespan_min", "avg_jct_min"):
            full = base[metric] - h[metric]
            shares = {n: (base[metric] - r[metric]) / full if full else float("nan") for n, r in blk["ablation"].items()}
            print(f"ablation share of Harmony's {metric[:-4]} benefit: "
                  + ", ".join(f"{n} {100 * s:.0f}%" for n, s in shares.items()) + "  (paper: 32% / 81% / 100%)")
    print("\npaper (all at once): 2.11x avg JCT, 1.60x makespan over Isolated; 93.2% CPU / 83.1% network;"
          " 8-min gaps: 2.01x / 1.56x")
    if "scalability" in res:
        print("\n== scheduler scalability (one full Algorithm 1; CPU seconds) ==")
        for k, v in res["scalability"].items():
            print(f"{k:>12}: median {v['cpu_s_median']:.3f} s (max {v['cpu_s_max']:.3f}), wall {v['wall_s_median']:.3f} s, "
                  f"{v['considered']} jobs in {v['groups']} groups, U=({v['u_cpu']:.3f}, {v['u_net']:.3f}), "
                  f"{v['evaluations']} evaluations   (paper: 8K x 10K in 5 s)")
    if "oracle" in res:
        o = res["oracle"]
        print("\n== Algorithm 1 vs exhaustive search (score of Eq. 4) ==")
        for k in ("random", "workload"):
            v = o[k]
            print(f"{k:>9}: mean {100 * v['mean_ratio']:.1f}%, median {100 * v['median_ratio']:.1f}%, "
                  f"min {100 * v['min_ratio']:.1f}%, within 2%: {100 * v['share_within_2pct']:.0f}% of instances")
        s = o["simulated_6_jobs_12_machines"]
        a, e = s["alg1"], s["exhaustive"]
        print(f"simulated 6 jobs / 12 machines: Alg.1 JCT {a['avg_jct_min']:.1f} vs {e['avg_jct_min']:.1f} min, "
              f"makespan {a['makespan_min']:.1f} vs {e['makespan_min']:.1f} min, CPU {100 * a['cpu_util']:.1f}% vs "
              f"{100 * e['cpu_util']:.1f}%  (paper: within ~2%)")
    if "spill" in res:
        print("\n== spill/reload: 8 jobs (4 apps x 2 datasets) in one group, group iteration seconds ==")
        for m, sp in res["spill"].items():
            print(f"{m} machines, fixed alpha: " + ", ".join(f"{a}: {t:.0f}" for a, t in sp["fixed"].items()))
            print(f"   adaptive (per-job hill climbing): {sp['adaptive']:.1f} s, alphas "
                  f"{[round(a, 2) for a in sp['adaptive_alphas']]}; {100 * sp['adaptive_gain_vs_best_fixed']:.1f}% "
                  f"shorter than the best fixed alpha ({sp['best_fixed_alpha']})")
        print("paper (32 machines): 44.3 s adaptive vs 52.9 s at the best fixed alpha 0.3 (16.3%)")
    if "sensitivity" in res:
        print("\n== workload sensitivity (60 jobs, all at once) ==")
        for k, v in res["sensitivity"].items():
            h = v["harmony"]
            print(f"{k}-heavy: JCT {v['jct_speedup']:.2f}x, makespan {v['makespan_speedup']:.2f}x, "
                  f"CPU {100 * h['cpu_util']:.1f}%, net {100 * h['net_util']:.1f}%")
        print("paper: comp-heavy 2.31x / 1.58x (90.5% / 82.1%), comm-heavy 1.83x / 1.57x (91.8% / 80.9%)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="all-at-once only, fewer variants, no sensitivity")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=3, help="repetitions of the scalability timing")
    ap.add_argument("--json", type=Path, default=OUT)
    args = ap.parse_args(argv)
    res: dict = {"paper": PAPER, "seed": args.seed, "arrivals": []}
    gaps = [("all at time 0", 0.0)] + ([] if args.quick else [("Poisson, mean gap 2 min", 120.0),
                                                                ("Poisson, mean gap 4 min", 240.0),
                                                                ("Poisson, mean gap 8 min", 480.0)])
    for label, gap in gaps:
        print(f"running: {label} ...", file=sys.stderr, flush=True)
        res["arrivals"].append(arrival_block(label, gap, args.seed, args.quick))
    print("running: scalability, oracle, spill ...", file=sys.stderr, flush=True)
    res["scalability"] = scalability(args.reps)
    res["oracle"] = oracle_gap(args.seed, 10 if args.quick else 40)
    res["spill"] = spill_micro()
    if not args.quick:
        res["sensitivity"] = sensitivity(args.seed)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(res, indent=1, default=float))
    print_tables(res)
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
