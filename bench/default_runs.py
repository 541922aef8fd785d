"""Default runs of the embedded traces against their full-size presets: offered load, queueing, JCT.

For every embedded trace, simulates two policies (default FIFO and SRTF; Harmony's PS trace:
FIFO and Harmony, as SRTF has no lengths to order PS jobs by) on

* ``default``: the trace's default run (``cohabit.sim.traces.scenario``: the cluster and the
  arrival-time factor ``cohabit simulate`` uses without ``--cluster``), and
* ``recorded``: the preset the trace was recorded on, arrivals as recorded (the old default;
  left out where it is the default run),

and prints, per run, the offered load (``cohabit.sim.load``), each policy's avg and median JCT
and avg queueing delay, and the CPU seconds each simulation took. Writes JSON.

Usage: python bench/default_runs.py [--traces a,b] [--json bench/results/default_runs.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cohabit.policies import make_policy
from cohabit.sim.load import offered_load
from cohabit.sim.runner import simulate
from cohabit.sim.traces import EMBEDDED, load_trace
from cohabit.sim.traces.scenario import default_run, scale_arrivals
from cohabit.spec.cluster import preset

PAIRS = {"harmony_80": ("fifo", "harmony")}


def run_one(name: str) -> list[dict[str, object]]:
    """Both settings of one embedded trace; one row per (setting, policy)."""
    load = load_trace(name)
    cluster_name, scale, _ = default_run(name, None, None, load.default_cluster)
    rows = []
    settings = [("default", cluster_name, scale)]
    if (cluster_name, scale) != (load.default_cluster, 1.0):  # else the two runs are the same
        settings.append(("recorded", load.default_cluster, 1.0))
    for setting, cl_name, factor in settings:
        jobs = scale_arrivals(load.jobs, factor)
        cluster = preset(cl_name)
        offered = offered_load(jobs, cluster)
        for pol in PAIRS.get(name, ("fifo", "srtf")):
            t0 = time.process_time()
            m = simulate(jobs, cluster, make_policy(pol)).metrics
            rows.append({
                "trace": name, "setting": setting, "cluster": cl_name, "arrival_scale": factor,
                "offered_load": offered.value, "load_resource": offered.resource, "policy": pol,
                "avg_jct_s": m.avg_jct, "median_jct_s": m.median_jct, "avg_queue_s": m.avg_queueing_delay,
                "makespan_s": m.makespan, "finished": m.jobs_finished, "cpu_s": round(time.process_time() - t0, 2),
            })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default=",".join(EMBEDDED))
    ap.add_argument("--json", default="bench/results/default_runs.json")
    args = ap.parse_args()
    rows: list[dict[str, object]] = []
    for name in args.traces.split(","):
        rows += run_one(name.strip())
    table = Table(title="embedded traces: default run vs the recorded preset")
    for col in ("trace", "setting", "cluster", "arrivals x", "offered load", "policy", "avg JCT h",
                "median JCT h", "avg queue h", "sim CPU s"):
        table.add_column(col, justify="left" if col in ("trace", "setting", "cluster", "policy") else "right")
    for r in rows:
        load = r["offered_load"]
        table.add_row(str(r["trace"]), str(r["setting"]), str(r["cluster"]), f"{r['arrival_scale']:g}",
                      "-" if load is None else f"{load:.3g} {r['load_resource']}", str(r["policy"]),
                      f"{r['avg_jct_s'] / 3600:.3f}", f"{r['median_jct_s'] / 3600:.3f}",
                      f"{r['avg_queue_s'] / 3600:.3f}", f"{r['cpu_s']:.1f}")
    Console(width=200).print(table)
    out = {"benchmark": "default_runs", "load_average": os.getloadavg(), "rows": rows}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
