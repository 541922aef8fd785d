"""Where the average JCT of each policy goes on Harmony-DRL's 6-server workloads (Bao et al.,
ToN'22, §VII): waiting (submission -> first start) and running, running split into solo time x
slowdown, so that ``avg JCT = wait + solo x slowdown`` holds exactly per row.

* ``wait``: mean over finished jobs of start - submission (intervals of 20 minutes).
* ``solo``: mean of each job's solo run time (``sim.drl_bounds.solo_runtime``: alone on an empty
  cluster, as locally as the servers allow; the bound no placement beats).
* ``slowdown``: mean run time / mean solo time (a ratio of means, so the identity above holds);
  ``slow/job``: the mean of the per-job ratios (what a typical job suffers).
* ``wait<=0.1``: share of jobs that started within 0.1 interval of their arrival.
* ``w 1g`` / ``w 2g`` / ``w 3g``: mean wait of jobs of 1, 2 and 3 GPUs (the task-by-task loop
  offers the pending jobs in arrival order unless the policy's ``order`` says otherwise; a job
  that does not fit waits and a smaller later one may pass it).
* ``slow long`` / ``wait long``: slowdown and mean wait of the longest fifth of the jobs (by solo
  time), which carry most of the average's run time.

    python bench/drl_diag.py                    # drl, lif-line, lif-quad, tetris on the four 6-server rows
    python bench/drl_diag.py --policies drl,lif-quad --workloads drl_bursty
    python bench/drl_diag.py --before DIR       # + drl with DIR/policy.pt
    python bench/drl_diag.py --seeds 950-961    # mean over fresh workloads of each arrival pattern

``--seeds A-B``: instead of the bench's rows, workloads ``drl_workload.generate(30, arrival, seed)``
for every seed in A..B of each arrival pattern (seeds below 1000 were never trained on; the
shipped weights chose their best round on 900-902), and the mean of each column per pattern:
single workloads swing by 10-20% between policies of nearly equal quality, so a mean over many
is the steadier comparison.

Writes ``bench/results/drl_diag.json``; CPU seconds per run (``time.process_time``) and the load
average are printed beside the table.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cohabit.policies import make_policy
from cohabit.sim.drl_bounds import solo_runtime
from cohabit.sim.drl_workload import INTERVAL_S, MODELS, UNSEEN_MODELS, generate
from cohabit.sim.runner import SimOutcome, simulate
from cohabit.sim.traces import load_trace
from cohabit.sim.truth import TraceJob
from cohabit.spec.cluster import preset

OUT = Path(__file__).resolve().parent / "results" / "drl_diag.json"


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def workloads() -> dict[str, list[TraceJob]]:
    """The four 6-server rows of ``bench/drl.py`` (never trained on)."""
    out = {n: load_trace(n).jobs for n in ("drl_uniform", "drl_poisson", "drl_bursty")}
    out["unseen"] = generate(30, arrival="uniform", seed=201, models=MODELS + UNSEEN_MODELS)
    return out


def _gpus(job: TraceJob) -> float:
    return job.spec.workers.count * float(job.spec.workers.demand.get("gpu", 0.0))


def split(jobs: Sequence[TraceJob], res: SimOutcome) -> dict[str, float]:
    """The decomposition of the module docstring for one simulated run (intervals)."""
    jr = res.metrics.jobs
    by_id = {j.spec.id: j for j in jobs}
    rows = [(by_id[i], q, e - s) for i, q, s, e, st in zip(jr.ids, jr.queueing, jr.start, jr.end, jr.states)
            if st == "finished"]
    if not rows:
        raise ValueError("no job finished")
    wait = np.array([q for _, q, _ in rows]) / INTERVAL_S
    run = np.array([r for _, _, r in rows]) / INTERVAL_S
    solo = np.array([solo_runtime(j) for j, _, _ in rows]) / INTERVAL_S
    size = np.array([_gpus(j) for j, _, _ in rows])
    out = {"avg_jct": float(wait.mean() + run.mean()), "wait": float(wait.mean()), "run": float(run.mean()),
           "solo": float(solo.mean()), "slowdown": float(run.mean() / solo.mean()),
           "slowdown_per_job": float(np.mean(run / solo)), "started_at_once": float(np.mean(wait <= 0.1)),
           "finished": len(rows), "jobs": len(jobs)}
    for g in (1, 2, 3):
        sel = size == g
        out[f"wait_gpus_{g}"] = float(wait[sel].mean()) if sel.any() else float("nan")
    # the longest fifth of the jobs (by solo time): where the average's run time mostly goes
    long = solo >= np.quantile(solo, 0.8)
    out["slowdown_long"] = float(run[long].sum() / solo[long].sum())
    out["wait_long"] = float(wait[long].mean())
    return out


def seed_workloads(spec: str) -> dict[str, list[TraceJob]]:
    """``--seeds A-B``: fresh workloads of every arrival pattern, named ``ARRIVAL-SEED``."""
    lo, dash, hi = spec.partition("-")
    if not (dash and lo.isdigit() and hi.isdigit() and int(lo) <= int(hi)):
        raise SystemExit(f"--seeds: expected A-B with integers A <= B, got {spec!r}")
    return {f"{a}-{s}": generate(30, arrival=a, seed=s) for a in ("uniform", "poisson", "bursty")
            for s in range(int(lo), int(hi) + 1)}


def means(table: dict[str, dict[str, dict[str, float]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per arrival pattern (the part of a workload name before ``-``), each policy's mean row."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for wname, rows in table.items():
        for p, r in rows.items():
            out.setdefault(f"mean {wname.split('-')[0]}", {}).setdefault(p, []).append(r)  # type: ignore[arg-type]
    return {k: {p: {c: float(np.nanmean([r[c] for r in rs])) for c in rs[0]} for p, rs in v.items()}  # type: ignore[misc]
            for k, v in out.items()}


def run(wl: dict[str, list[TraceJob]], policies: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    cluster = preset("drl")
    out: dict[str, dict[str, dict[str, float]]] = {}
    for wname, jobs in wl.items():
        out[wname] = {}
        for p in policies:
            head, eq, rest = p.partition("=")
            name, spec = (head, rest) if eq and ":" not in head else (p, p)
            t = time.process_time()
            row = split(jobs, simulate(jobs, cluster, make_policy(spec)))
            row["cpu_s"] = time.process_time() - t
            out[wname][name] = row
    return out


def show(table: dict[str, dict[str, dict[str, float]]]) -> None:
    cols = ("avg_jct", "wait", "run", "solo", "slowdown", "slowdown_per_job", "started_at_once",
            "wait_gpus_1", "wait_gpus_2", "wait_gpus_3", "slowdown_long", "wait_long", "cpu_s")
    heads = ("JCT", "wait", "run", "solo", "slowdown", "slow/job", "wait<=0.1", "w 1g", "w 2g", "w 3g",
             "slow long", "wait long", "cpu s")
    print(f"\nJCT = wait + solo x slowdown (intervals of 20 min), finished jobs; {load()}")
    print(f"{'workload':14s}{'policy':22s}" + "".join(f"{h:>10s}" for h in heads))
    for wname, rows in table.items():
        for p, r in rows.items():
            print(f"{wname:14s}{p:22s}" + "".join(f"{r[c]:10.2f}" for c in cols))


def _rounded(table: dict) -> dict:
    """Every number rounded to 4 decimals (the JSON stays small)."""
    return {k: _rounded(v) if isinstance(v, dict) else (round(v, 4) if isinstance(v, float) else v)
            for k, v in table.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="drl,lif-line,lif-quad,tetris",
                    help="comma-separated policy specs; NAME=SPEC names a column")
    ap.add_argument("--workloads", default="", help="comma-separated subset of drl_uniform, drl_poisson, "
                    "drl_bursty, unseen")
    ap.add_argument("--before", type=Path, help="folder with earlier policy.pt (+ JSON): a 'drl-before' row "
                    "(in arrival order, as drl decided before drl10)")
    ap.add_argument("--seeds", default="", help="A-B: fresh workloads of each arrival pattern, seeds A..B, and "
                    "their means (instead of the bench's rows)")
    args = ap.parse_args()
    wl = seed_workloads(args.seeds) if args.seeds else workloads()
    if args.workloads:
        keep = args.workloads.split(",")
        unknown = [w for w in keep if w not in wl]
        if unknown:
            raise SystemExit(f"--workloads: unknown {', '.join(unknown)}; expected some of {', '.join(wl)}")
        wl = {w: wl[w] for w in keep}
    policies = args.policies.split(",")
    if args.before is not None:
        policies.insert(0, f"drl-before=drl:weights={args.before / 'policy.pt'}:order=arrival")
    table = run(wl, policies)
    summary = means(table) if args.seeds else {}
    show(summary or table)
    out = OUT.with_name(f"drl_diag_seeds_{args.seeds}.json") if args.seeds else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"rows": _rounded(table), "means": _rounded(summary), "policies": policies, "load_average": os.getloadavg()}
    out.write_text(json.dumps(doc, separators=(",", ":")).replace('},"', '},\n"') + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
