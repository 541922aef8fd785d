"""MLFS (issue 14): the Philly-derived MLFS workload at 620*x jobs on the 80-GPU ``mlfs`` cluster,
Fig. 4-5 metrics per policy, and the decision time of one full round with a 1,860-job queue.

    python bench/mlfs.py [--scales 0.25,0.5] [--policies mlfs,mlfs-h,...] [--seed 0] [--ablations]
                         [--large 3100] [--large-policies mlfs,tiresias] [--decision-jobs 1860]
                         [--json bench/results/mlfs.json]

Metrics per policy (from the record and, for the bench only, the jobs' truths):
avg JCT (every job that ended, stopped early included), makespan, deadline-guarantee ratio,
mean waiting time (time in the system not running), mean accuracy by the deadline (the job's
real curve at the iterations it had done by its deadline, or when it ended if earlier),
accuracy-guarantee ratio (that accuracy >= the job's required accuracy), bandwidth cost (GB
sent between nodes, ``SimBackend.net_mb``), mean decision time (every ``decide`` call) and,
for the MLFS policies, the mean time of their full rounds. CPU seconds of each run are printed
beside the load average (the machine is shared).

Decision time at 1,860 jobs: the workload's 1,860 jobs all arrive at t = 0 on the empty
cluster; the scheduler's first decision (all 1,860 queued) is that round, timed by the loop
(CPU time of the deciding thread, and the loop's wall clock around ``decide``; median of 3); the
CPU time of the whole run to t = 0
(arrivals and admission included) is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.engine.state import JobState
from cohabit.policies import make_policy
from cohabit.sim.backend import SimBackend
from cohabit.sim.mlfs_workload import generate
from cohabit.sim.runner import config_for
from cohabit.spec.cluster import preset

POLICIES = "mlfs,mlfs-rl,mlfs-h,graphene,tiresias,hypersched,gandiva,tf-fair,slaq"


def run_one(name: str, jobs, cluster):  # type: ignore[no-untyped-def]
    pol = make_policy(name)
    cfg = config_for(cluster)
    want = getattr(pol, "report_interval", None) or 60.0
    cfg = replace(cfg, report_interval_s=float(want))  # every policy sees accuracy reports
    backend = SimBackend(jobs, cfg)
    t0 = time.process_time()
    result = Scheduler(cluster, pol, backend).run([tj.spec for tj in jobs])
    cpu = time.process_time() - t0
    truth = {tj.spec.id: tj.truth for tj in jobs}
    progress: dict[str, list[tuple[float, float]]] = {}
    for e in result.record:
        if e.kind is EventKind.PROGRESS:
            progress.setdefault(e.job, []).append((e.time, float(e.data["iterations"])))
    ended = [j for j in result.jobs.values() if j.state in (JobState.FINISHED, JobState.STOPPED_EARLY)]
    jct, met, acc, acc_ok, wait = [], 0, [], 0, []
    for j in ended:
        jct.append(j.end_time - j.spec.submit_time)
        dl = j.spec.absolute_deadline
        met += dl is None or j.end_time <= dl
        wait.append(j.waiting_time(j.end_time))
        pts = progress.get(j.id, []) + [(j.end_time, j.reported_iterations)]
        at = min(j.end_time, dl) if dl is not None else j.end_time
        ts, its = zip(*sorted(pts))
        done = float(np.interp(at, ts, its, left=0.0))
        a = truth[j.id].accuracy_at(done / truth[j.id].iterations) or 0.0
        acc.append(a)
        acc_ok += j.spec.accuracy is not None and a >= j.spec.accuracy
    n = len(jobs)
    decisions = [e.data["ms"] for e in result.record if e.kind is EventKind.DECISION]
    rounds = getattr(pol, "round_ms", None) or getattr(getattr(pol, "inner", None), "round_ms", None)
    return {
        "policy": name, "jobs": n, "ended": len(ended),
        "stopped_early": sum(1 for j in ended if j.state is JobState.STOPPED_EARLY),
        "avg_jct_h": float(np.mean(jct)) / 3600 if jct else None,
        "makespan_h": max(j.end_time for j in ended) / 3600 if ended else None,
        "deadline_ratio": met / n, "avg_wait_h": float(np.mean(wait)) / 3600 if wait else None,
        "avg_accuracy_by_deadline": float(np.mean(acc)) if acc else None, "accuracy_ratio": acc_ok / n,
        "bandwidth_gb": sum(backend.net_mb.values()) / 1e3,
        "decide_mean_ms": float(np.mean(decisions)) if decisions else None,
        "round_mean_ms": float(np.mean(rounds)) if rounds else None,
        "migrations": sum(1 for e in result.record if e.kind is EventKind.MIGRATED),
        "cpu_s": round(cpu, 1),
    }


def decision_time(names: list[str], n_jobs: int, seed: int, horizon: float = 3600.0) -> list[dict]:
    """First round (every job just arrived) and the later rounds that start jobs, with the
    whole workload submitted at t = 0 and run to ``horizon`` (CPU ms of ``decide``)."""
    from cohabit.sim.truth import TraceJob
    jobs = [TraceJob(tj.spec.model_copy(update={"submit_time": 0.0}), tj.truth) for tj in generate(n_jobs, seed=seed)]
    cluster = preset("mlfs")
    out = []
    for name in names:
        times, later, queue_len = [], [], []
        for rep in range(3):
            pol = make_policy(name)
            calls: list[tuple[float, int, int]] = []  # (cpu ms, queue length, actions)
            inner = pol.decide

            def timed(view, inner=inner, calls=calls):  # type: ignore[no-untyped-def]
                q = len(view.pending) + len(view.paused)
                t = time.process_time()
                plan = inner(view)
                calls.append(((time.process_time() - t) * 1e3, q, len(plan)))
                return plan
            pol.decide = timed  # type: ignore[method-assign]
            sched = Scheduler(cluster, pol, SimBackend(jobs, config_for(cluster)), horizon=horizon if rep == 0 else 0.0)
            t0 = time.process_time()
            res = sched.run([tj.spec for tj in jobs])
            cpu = (time.process_time() - t0) * 1e3
            first = next(e for e in res.record if e.kind is EventKind.DECISION)
            times.append((first.data["ms"], cpu, calls[0][0]))
            if rep == 0:  # later rounds that started or resumed jobs: the queue read and placement
                later = [c for c, q, n in calls[1:] if n > 0]
                queue_len = [q for c, q, n in calls[1:] if n > 0]
        started = sum(1 for j in res.jobs.values() if j.first_start is not None)
        out.append({"policy": name, "queue": n_jobs, "started": started,
                    "round_ms_wall": statistics.median(t for t, _, _ in times),
                    "round_ms_cpu": statistics.median(c for _, _, c in times),
                    "run_cpu_ms_incl_arrivals": statistics.median(c for _, c, _ in times),
                    "later_rounds": len(later), "later_queue_min": min(queue_len) if queue_len else None,
                    "later_round_ms_cpu_median": statistics.median(later) if later else None,
                    "later_round_ms_cpu_max": max(later) if later else None})
    return out


ABLATIONS = ("mlfs-h,mlfs-h:use_urgency=false,mlfs-h:use_deadline=false,mlfs-h:bandwidth=false,"
             "mlfs-h:migrate=false,mlfs,mlfs:control=false")


def print_table(runs: list[dict], header: bool = True) -> None:
    if header:
        print(f"{'policy':28} {'ended':>5} {'early':>5} {'avgJCT h':>8} {'mkspan h':>8} {'ddl %':>6} {'wait h':>7} "
              f"{'acc@ddl':>7} {'acc %':>6} {'bw TB':>8} {'dec ms':>7} {'round ms':>8} {'migr':>5} {'cpu s':>6}")

    def f(v, w, p=2):  # type: ignore[no-untyped-def]
        return f"{v:>{w}.{p}f}" if isinstance(v, float) else f"{'-':>{w}}"
    for r in runs:
        print(f"{r['policy']:28} {r['ended']:>5} {r['stopped_early']:>5} {f(r['avg_jct_h'], 8)} {f(r['makespan_h'], 8)} "
              f"{100 * r['deadline_ratio']:>6.1f} {f(r['avg_wait_h'], 7)} {f(r['avg_accuracy_by_deadline'], 7, 3)} "
              f"{100 * r['accuracy_ratio']:>6.1f} {r['bandwidth_gb'] / 1e3:>8.1f} {f(r['decide_mean_ms'], 7)} "
              f"{f(r['round_mean_ms'], 8)} {r['migrations']:>5} {r['cpu_s']:>6}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", default="0.25")
    ap.add_argument("--policies", default=POLICIES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--decision-jobs", type=int, default=1860)
    ap.add_argument("--decision-horizon", type=float, default=3600.0, help="seconds of the run whose later rounds count")
    ap.add_argument("--ablations", action="store_true", help="also the Fig. 6-9 ablations at the first scale")
    ap.add_argument("--large", type=int, default=0, help="jobs of the large run on the philly preset (0: none)")
    ap.add_argument("--large-policies", default="mlfs,mlfs-h,tiresias,graphene")
    ap.add_argument("--json", type=Path, default=Path("bench/results/mlfs.json"))
    a = ap.parse_args(argv)
    names = [p for p in a.policies.split(",") if p]
    cluster = preset("mlfs")
    results: dict = {"runs": [], "load_avg": os.getloadavg(), "argv": sys.argv[1:]}
    a.json.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every run: a long bench keeps what it measured
        results["load_avg_end"] = os.getloadavg()
        a.json.write_text(json.dumps(results, indent=1) + "\n")
    scales = [float(s) for s in a.scales.split(",") if s]
    for x in scales:
        jobs = generate(int(round(620 * x)), seed=a.seed)
        print(f"\n620 x {x:g} = {len(jobs)} jobs on mlfs (80 GPUs), seed {a.seed}; load average "
              f"{os.getloadavg()[0]:.1f}")
        runs = []
        for name in names:
            r = run_one(name, jobs, cluster)
            r["x"] = x
            runs.append(r)
            results["runs"].append(r)
            print_table([r], header=len(runs) == 1)
            save()
    if a.ablations and scales:
        jobs = generate(int(round(620 * scales[0])), seed=a.seed)
        print(f"\nablations (Fig. 6-9), {len(jobs)} jobs; load average {os.getloadavg()[0]:.1f}")
        results["ablations"] = []
        for name in ABLATIONS.split(","):
            r = run_one(name, jobs, cluster)
            results["ablations"].append(r)
            print_table([r], header=len(results["ablations"]) == 1)
            save()
    if a.large > 0:
        big = preset("philly")
        gpus = int(sum(n.capacity["gpu"] for n in big.nodes))
        jobs = generate(a.large, seed=a.seed)
        print(f"\nlarge run: {len(jobs)} jobs on philly ({gpus} GPUs), seed {a.seed}; load average "
              f"{os.getloadavg()[0]:.1f}")
        results["large"] = {"jobs": len(jobs), "gpus": gpus, "runs": []}
        for name in (p for p in a.large_policies.split(",") if p):
            r = run_one(name, jobs, big)
            results["large"]["runs"].append(r)
            print_table([r], header=len(results["large"]["runs"]) == 1)
            save()
    if a.decision_jobs > 0:
        dt = []
        results["decision_time"] = dt
        for name in (n for n in names if n in ("mlfs", "mlfs-rl", "mlfs-h", "graphene", "tiresias")):
            dt += decision_time([name], a.decision_jobs, a.seed, a.decision_horizon)
            save()
        print(f"\n{a.decision_jobs} jobs submitted at t = 0 (CPU ms of decide; first round median of 3; later rounds "
              f"that started jobs in the first {a.decision_horizon / 3600:g} h; load average {os.getloadavg()[0]:.1f})")
        for d in dt:
            lm = d["later_round_ms_cpu_median"]
            print(f"{d['policy']:11} first round {d['round_ms_cpu']:6.1f} ms CPU ({d['round_ms_wall']:6.1f} wall); "
                  f"later rounds: {d['later_rounds']:4} with >= {d['later_queue_min']} queued, median "
                  + (f"{lm:5.1f} ms, max {d['later_round_ms_cpu_max']:5.1f} ms" if lm is not None else "-")
                  + f"; run to t=0 incl. arrivals {d['run_cpu_ms_incl_arrivals']:6.1f} ms CPU")
    save()
    print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
