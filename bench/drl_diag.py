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
    python bench/drl_diag.py --workloads drl_poisson --policies drl,lif-line --attribute 8

``--attribute N``: where each policy's *excess* over the solo bound goes (``wait + run - solo``
per job, summed and divided by the number of jobs, so it adds up to ``avg JCT - mean solo``):
split by whether the job was placed beside a running job (``beside``: another job had tasks on
one of its servers when it started), whether a later job was placed on one of its servers while
it ran (``joined``), both or neither, and by its length (the longest fifth by solo time against
the rest); and the ``N`` jobs with the largest excess, with their placement. The placements are
recorded from the policy's own ``Start`` actions (what the scheduler observes), the speeds are
the simulator's.

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

from cohabit.engine.actions import Start
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


def workloads(servers: int = 6) -> dict[str, list[TraceJob]]:
    """The four 6-server rows of ``bench/drl.py`` (never trained on), or its three ``drl-30`` rows."""
    if servers == 30:
        return {f"drl-30 {a}": generate(30, arrival=a, seed=101, n_servers=30) for a in ("uniform", "poisson", "bursty")}
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


class Starts:
    """Wraps a policy's ``decide``: every ``Start`` it returns, with the time and the servers each
    running job held then (for ``--attribute``)."""

    def __init__(self, policy) -> None:
        self.policy, self.log = policy, {}
        inner = policy.decide

        def decide(view):
            plan = inner(view)
            for a in plan:
                if isinstance(a, Start):
                    self.log[a.job] = (view.now, set(a.placement),
                                       {k: set(v.placement) for k, v in view.running.items()})
            return plan

        policy.decide = decide


def attribute(jobs: Sequence[TraceJob], res: SimOutcome, starts: dict) -> dict[str, object]:
    """The ``--attribute`` split of the module docstring for one run (intervals per job)."""
    jr = res.metrics.jobs
    by_id = {j.spec.id: j for j in jobs}
    done = {i: (q, s, e) for i, q, s, e, st in zip(jr.ids, jr.queueing, jr.start, jr.end, jr.states)
            if st == "finished"}
    rows = []
    for i, (q, s, e) in done.items():
        solo = solo_runtime(by_id[i]) / INTERVAL_S
        _, servers, running = starts[i]
        beside = any(servers & other for other in running.values())
        joined = any(k != i and s <= t < e and servers & srv for k, (t, srv, _) in starts.items())
        rows.append({"job": i, "model": by_id[i].spec.model, "workers": by_id[i].spec.workers.count,
                     "ps": by_id[i].spec.num_ps, "solo": solo, "wait": q / INTERVAL_S,
                     "slowdown": (e - s) / INTERVAL_S / solo, "excess": (q + e - s) / INTERVAL_S - solo,
                     "beside": beside, "joined": joined, "servers": sorted(servers)})
    n = len(rows)
    long_cut = np.quantile([r["solo"] for r in rows], 0.8)
    out: dict[str, object] = {"excess": sum(r["excess"] for r in rows) / n,
                              "excess_wait": sum(r["wait"] for r in rows) / n}
    for name, sel in (("beside only", lambda r: r["beside"] and not r["joined"]),
                      ("joined only", lambda r: r["joined"] and not r["beside"]),
                      ("beside and joined", lambda r: r["beside"] and r["joined"]),
                      ("alone throughout", lambda r: not r["beside"] and not r["joined"]),
                      ("longest fifth", lambda r: r["solo"] >= long_cut)):
        part = [r for r in rows if sel(r)]
        out[name] = {"jobs": len(part), "excess": sum(r["excess"] for r in part) / n,
                     "wait": sum(r["wait"] for r in part) / n}
    out["top"] = sorted(rows, key=lambda r: -r["excess"])
    return out


def show_attribution(wname: str, p: str, a: dict) -> None:
    print(f"\n{wname} / {p}: excess over solo {a['excess']:.3f} per job (wait {a['excess_wait']:.3f}); "
          f"share of it (per job, and its waiting part), by co-location:")
    for k in ("beside only", "joined only", "beside and joined", "alone throughout", "longest fifth"):
        r = a[k]
        print(f"  {k:20s} {r['jobs']:4d} jobs  excess {r['excess']:.3f}  of which wait {r['wait']:.3f}")


def seed_workloads(spec: str, servers: int = 6) -> dict[str, list[TraceJob]]:
    """``--seeds A-B``: fresh workloads of every arrival pattern, named ``ARRIVAL-SEED``."""
    lo, dash, hi = spec.partition("-")
    if not (dash and lo.isdigit() and hi.isdigit() and int(lo) <= int(hi)):
        raise SystemExit(f"--seeds: expected A-B with integers A <= B, got {spec!r}")
    return {f"{a}-{s}": generate(30, arrival=a, seed=s, n_servers=servers) for a in ("uniform", "poisson", "bursty")
            for s in range(int(lo), int(hi) + 1)}


def means(table: dict[str, dict[str, dict[str, float]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per arrival pattern (the part of a workload name before ``-``), each policy's mean row."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for wname, rows in table.items():
        for p, r in rows.items():
            out.setdefault(f"mean {wname.split('-')[0]}", {}).setdefault(p, []).append(r)  # type: ignore[arg-type]
    return {k: {p: {c: float(np.nanmean([r[c] for r in rs])) for c in rs[0]} for p, rs in v.items()}  # type: ignore[misc]
            for k, v in out.items()}


def run(wl: dict[str, list[TraceJob]], policies: Sequence[str], top: int = 0,
        attributions: dict | None = None, servers: int = 6) -> dict[str, dict[str, dict[str, float]]]:
    """Every policy on every workload; ``top`` > 0: also the ``--attribute`` split, printed and
    stored in ``attributions`` (with the ``top`` largest-excess jobs)."""
    cluster = preset("drl" if servers == 6 else "drl-30")
    out: dict[str, dict[str, dict[str, float]]] = {}
    for wname, jobs in wl.items():
        out[wname] = {}
        for p in policies:
            head, eq, rest = p.partition("=")
            name, spec = (head, rest) if eq and ":" not in head else (p, p)
            t = time.process_time()
            rec = Starts(make_policy(spec))
            res = simulate(jobs, cluster, rec.policy)
            row = split(jobs, res)
            row["cpu_s"] = time.process_time() - t
            out[wname][name] = row
            if top > 0:
                a = attribute(jobs, res, rec.log)
                a["top"] = a["top"][:top]  # type: ignore[index]
                show_attribution(wname, name, a)
                for r in a["top"]:  # type: ignore[union-attr]
                    print(f"    {r['job']:6s} {r['model']:24s} w{r['workers']} p{r['ps']} solo {r['solo']:5.2f} "
                          f"wait {r['wait']:5.2f} slowdown {r['slowdown']:4.2f} excess {r['excess']:5.2f} "
                          f"beside {r['beside']!s:5s} joined {r['joined']!s:5s} servers {r['servers']}")
                if attributions is not None:
                    attributions.setdefault(wname, {})[name] = a
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
    ap.add_argument("--attribute", type=int, default=0, metavar="N",
                    help="also split each policy's excess over the solo bound by co-location and list the N "
                    "jobs with the most (module docstring)")
    ap.add_argument("--servers", type=int, choices=(6, 30), default=6,
                    help="30: the drl-30 preset (its bench rows are seed 101 of each pattern)")
    args = ap.parse_args()
    wl = seed_workloads(args.seeds, args.servers) if args.seeds else workloads(args.servers)
    if args.workloads:
        keep = args.workloads.split(",")
        unknown = [w for w in keep if w not in wl]
        if unknown:
            raise SystemExit(f"--workloads: unknown {', '.join(unknown)}; expected some of {', '.join(wl)}")
        wl = {w: wl[w] for w in keep}
    policies = args.policies.split(",")
    if args.before is not None:
        policies.insert(0, f"drl-before=drl:weights={args.before / 'policy.pt'}:order=arrival")
    attributions: dict = {}
    table = run(wl, policies, args.attribute, attributions, args.servers)
    summary = means(table) if args.seeds else {}
    show(summary or table)
    out = OUT.with_name(f"drl_diag_seeds_{args.seeds}.json") if args.seeds else OUT
    if args.servers == 30:
        out = out.with_name(out.stem + "_30.json")
    if args.attribute:
        out = out.with_name(out.stem + "_attribution.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"rows": _rounded(table), "means": _rounded(summary), "policies": policies, "load_average": os.getloadavg()}
    if attributions:
        doc["attribution"] = {w: {p: {k: v if k == "top" else _rounded(v) if isinstance(v, dict) else round(v, 4)
                                      for k, v in a.items()} for p, a in rows.items()}
                              for w, rows in attributions.items()}
    out.write_text(json.dumps(doc, separators=(",", ":")).replace('},"', '},\n"') + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
