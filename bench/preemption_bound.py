"""Preemptions per job vs average JCT for bounded-preemption settings (issue 19, points 1 and 2).

Runs each policy spec on each workload and prints avg JCT, preemptions (total, per job, most of one
job) and the CPU seconds the simulation took, beside the load average. Workloads:

* ``tiresias_480``: the embedded 480-job Tiresias trace on the ``tiresias`` preset (cohabit physics);
* ``trace1``: the Muri artifact's trace1 (1,494 jobs, ``bench/reference/inputs/muri_trace1.csv``)
  on ``muri-n8g8``, with cohabit's physics (``trace1``) or the artifact's (``trace1@muri``);
* ``gavel-v100x8`` / ``gavel-888``: Gavel's ``max_min_fairness.trace`` (96 jobs) on 8 V100 / 8+8+8,
  physics ``gavel``; the reference numbers of Gavel's ``finish_time_fairness`` are printed beside.

    .venv/bin/python bench/preemption_bound.py --policies themis,themis:restart_gain=0 \\
        --workloads tiresias_480,trace1 --json bench/results/preemption_bound_themis.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "bench" / "reference"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def workload(name: str) -> tuple[list[Any], Any, str, dict[str, float] | None]:
    """(jobs, cluster, physics, reference metrics or None) of a named workload."""
    from cohabit.sim.traces import load_trace
    from cohabit.spec.cluster import gavel_cluster, preset

    base, _, physics = name.partition("@")
    if base == "tiresias_480":
        return load_trace("tiresias_480", "tiresias").jobs, preset("tiresias"), physics or "cohabit", None
    if base == "trace1":
        jobs = load_trace(REF / "inputs" / "muri_trace1.csv", "muri").jobs
        return jobs, preset("muri-n8g8"), physics or "cohabit", None
    if base in ("gavel-v100x8", "gavel-888"):
        jobs = load_trace(REF / "inputs" / "gavel_max_min_fairness.trace", "gavel").jobs
        v, p, k = (8, 0, 0) if base == "gavel-v100x8" else (8, 8, 8)
        ref = json.loads((REF / "gavel.json").read_text())
        tag = "v100x8" if base == "gavel-v100x8" else "v8-p8-k8"
        metrics = next(r["metrics"] for r in ref["runs"] if r["reference_policy"] == "finish_time_fairness"
                       and r["workload"].endswith(tag))
        return jobs, gavel_cluster(v, p, k, gpus_per_server=4), physics or "gavel", metrics
    raise SystemExit(f"unknown workload {name!r}: tiresias_480, trace1[@muri], gavel-v100x8, gavel-888")


def run(policy: str, name: str, limit: int | None = None) -> dict[str, Any]:
    from cohabit.policies import make_policy
    from cohabit.sim.physics import physics_config
    from cohabit.sim.runner import simulate

    jobs, cluster, physics, ref = workload(name)
    if limit:
        jobs, ref = sorted(jobs, key=lambda j: j.spec.submit_time)[:limit], None
    t0 = _cpu()
    out = simulate(jobs, cluster, make_policy(policy), config=physics_config(physics))
    cpu = _cpu() - t0
    m = out.metrics
    per = [j.preemptions for j in out.result.jobs.values()]
    return {"policy": policy, "workload": name + (f"[:{limit}]" if limit else ""), "physics": physics, "jobs": len(jobs), "finished": m.jobs_finished,
            "avg_jct": m.avg_jct, "makespan": m.makespan, "p95_jct": m.p95_jct, "preemptions": m.preemptions,
            "preemptions_per_job": m.preemptions / max(len(jobs), 1), "max_preemptions_of_a_job": max(per or [0]),
            "cpu_s": round(cpu, 2), "reference": ref}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policies", required=True, help="comma-separated policy specs (';' also separates)")
    ap.add_argument("--workloads", default="tiresias_480")
    ap.add_argument("--limit", type=int, default=None, help="only the first N jobs (by submit time) of each")
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "preemption_bound.json")
    a = ap.parse_args()
    policies = [p for p in a.policies.replace(";", ",").split(",") if p]
    rows = []
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("workload | policy | avg JCT | ref avg JCT | preempt | per job | max of a job | CPU s | load")
    for w in a.workloads.split(","):
        for p in policies:
            r = run(p, w, a.limit)
            rows.append(r)
            ref = r["reference"]
            print(f"{w} | {p} | {r['avg_jct']:,.0f} | {ref['avg_jct'] if ref else float('nan'):,.0f} | "
                  f"{r['preemptions']:,} | {r['preemptions_per_job']:.2f} | {r['max_preemptions_of_a_job']} | "
                  f"{r['cpu_s']:.1f} | {os.getloadavg()[0]:.1f}", flush=True)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"rows": rows, "loadavg": os.getloadavg()}, indent=1))
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
