"""Where a contended Philly run's memory goes: resident set size after each stage (issue 18).

For each policy, a fresh subprocess imports cohabit, loads ``philly_82k`` (the first ``--size`` jobs,
or all), simulates them on ``--cluster`` and computes the metrics, reading its resident set size
(``/proc/self/statm``) after each stage and its peak (``ru_maxrss``) at the end, with the CPU seconds
of each stage and the 1-minute load average. ``--before SRC`` runs the same in another checkout's code
first (``SRC`` = its ``src`` directory, e.g. ``git archive main | tar -x -C /tmp/before``), side by side.

    python bench/sim_memory.py [--policies fifo,gandiva] [--size all] [--before /tmp/before/src] [--label L]

Rows go to ``bench/results/sim_memory.json`` under ``--label`` (and ``<label>-before``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def one(policy: str, size: int | None, cluster_arg: str) -> dict[str, object]:
    row: dict[str, object] = {"policy": policy}
    c = time.process_time()
    from cohabit.policies import make_policy
    from cohabit.report.metrics import compute_metrics
    from cohabit.sim import runner
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    row["import_mb"] = round(_rss_mb(), 1)
    c = time.process_time()
    load = load_trace("philly_82k", "philly", limit=size)
    row["load_cpu_s"] = round(time.process_time() - c, 3)
    row["after_load_mb"] = round(_rss_mb(), 1)
    row["jobs"] = len(load.jobs)
    cluster = cluster_from_arg(cluster_arg)
    stages: dict[str, float] = {}

    def metrics(record, capacity, **kw):  # type: ignore[no-untyped-def]
        stages["run_cpu"] = time.process_time()
        stages["after_run_mb"] = _rss_mb()
        stages["peak_before_metrics_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return compute_metrics(record, capacity, **kw)

    runner.compute_metrics = metrics  # (the runner's own call, timed apart)
    c = time.process_time()
    out = runner.simulate(load.jobs, cluster, make_policy(policy))
    end = time.process_time()
    row.update(
        run_cpu_s=round(stages["run_cpu"] - c, 3), metrics_cpu_s=round(end - stages["run_cpu"], 3),
        after_run_mb=round(stages["after_run_mb"], 1),
        peak_before_metrics_mb=round(stages["peak_before_metrics_mb"], 1),
        after_metrics_mb=round(_rss_mb(), 1),
        peak_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        events=len(out.result.record), loadavg_1m=round(os.getloadavg()[0], 1),
    )
    return row


def _child(policy: str, size: str, cluster: str, src: str | None) -> dict[str, object]:
    env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
    if src is not None:
        env["PYTHONPATH"] = src
    res = subprocess.run([sys.executable, __file__, "--child", policy, size, "--cluster", cluster],
                         capture_output=True, text=True, env=env)
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr)
        raise SystemExit(f"child failed for {policy}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default="fifo")
    ap.add_argument("--size", default="all")
    ap.add_argument("--cluster", default="philly-512")
    ap.add_argument("--before", metavar="SRC")
    ap.add_argument("--label", default="after")
    ap.add_argument("--json", default="bench/results/sim_memory.json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        size = None if args.child[1] == "all" else int(args.child[1])
        print(json.dumps(one(args.child[0], size, args.cluster)))
        return
    cols = ("import_mb", "after_load_mb", "after_run_mb", "after_metrics_mb", "peak_mb", "load_cpu_s",
            "run_cpu_s", "metrics_cpu_s", "loadavg_1m")
    print(f"philly_82k ({args.size} jobs) on {args.cluster}: resident MB after each stage, CPU s; "
          f"load average {os.getloadavg()[0]:.1f} at start")
    print(f"{'code':7} {'policy':10} " + " ".join(f"{c:>16}" for c in cols))
    rows, before = [], []
    for policy in args.policies.split(","):
        for tag, src, out in (("before", args.before, before), ("after", None, rows)):
            if tag == "before" and src is None:
                continue
            row = _child(policy, args.size, args.cluster, src)
            out.append(row)
            print(f"{tag:7} {policy:10} " + " ".join(f"{row[c]:>16}" for c in cols), flush=True)
    path = Path(args.json)
    doc = json.loads(path.read_text()) if path.exists() else {"benchmark": "sim_memory", "runs": {}}
    doc["runs"][args.label] = rows
    if before:
        doc["runs"][args.label + "-before"] = before
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
