"""Simulator scale benchmark: the Philly 82k trace on a Philly-sized cluster under FIFO and SRTF.

Prints wall time, jobs simulated per second and peak memory for 1k, 10k and
all-job prefixes, and writes JSON. Goal (issue 2): >= 5,000 jobs/s on a
2-core machine (the whole trace in under 20 s), cost about linear in jobs.

    python bench/sim_scale.py [--sizes 1000,10000,all] [--policies fifo,srtf] [--json bench/results/sim_scale.json]

Each (size, policy) runs in a fresh subprocess so peak memory (ru_maxrss) is its own.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def one(size: int | None, policy: str) -> dict[str, object]:
    from cohabit.policies import make_policy
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import preset

    t0 = time.perf_counter()
    load = load_trace("philly_82k", "philly", limit=size)
    t_load = time.perf_counter() - t0
    cluster = preset("philly")
    t1, c1 = time.perf_counter(), time.process_time()
    out = simulate(load.jobs, cluster, make_policy(policy))
    t_sim, c_sim = time.perf_counter() - t1, time.process_time() - c1
    m = out.metrics
    n = len(load.jobs)
    return {
        "policy": policy, "jobs": n, "load_s": round(t_load, 3), "sim_s": round(t_sim, 3), "cpu_s": round(c_sim, 3),
        "jobs_per_cpu_s": round(n / c_sim, 1),
        "jobs_per_s": round(n / t_sim, 1), "events": len(out.result.record),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "jobs_finished": m.jobs_finished, "avg_jct_h": round((m.avg_jct or 0) / 3600, 3),
        "gpu_allocated": round(m.allocated.get("gpu", 0.0), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,all")
    ap.add_argument("--policies", default="fifo,srtf")
    ap.add_argument("--json", default="bench/results/sim_scale.json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        size = None if args.child[0] == "all" else int(args.child[0])
        print(json.dumps(one(size, args.child[1])))
        return
    rows = []
    for policy in args.policies.split(","):
        for size in args.sizes.split(","):
            res = subprocess.run([sys.executable, __file__, "--child", size, policy], capture_output=True, text=True)
            if res.returncode != 0:
                print(res.stderr, file=sys.stderr)
                raise SystemExit(f"benchmark child failed for {policy} {size}")
            row = json.loads(res.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{row['policy']:6} {row['jobs']:>7} jobs  sim {row['sim_s']:>7.2f} s  "
                  f"{row['jobs_per_s']:>9.0f} jobs/s (cpu {row['cpu_s']:.2f} s, {row['jobs_per_cpu_s']:.0f} jobs/cpu-s)  load {row['load_s']:.2f} s  events {row['events']:>8}  "
                  f"peak {row['peak_rss_mb']:.0f} MB  finished {row['jobs_finished']}  gpu allocated {row['gpu_allocated']:.3f}",
                  flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"benchmark": "sim_scale", "cluster": "philly", "rows": rows}, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
