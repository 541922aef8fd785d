"""Pollux against the other policies on Pollux-format workloads at several loads.

Workloads (all on the Pollux testbed: preset ``pollux``, 16 nodes x 4 GPUs):

* ``workload-1``: the embedded ``pollux_workload-1`` (160 jobs over 8 hours; the artifact's
  relative job load 1.0);
* ``synthetic-L`` for ``L`` in ``--loads``: ``--jobs`` jobs whose (application, replicas, batch
  size) are drawn with replacement from workload-1's rows, arriving as a Poisson process at
  ``L x 160`` jobs per 8 hours (the artifact's definition of relative job load), seed
  ``--seed``. The workload file is written to a temporary directory and read back by the
  ``pollux`` trace loader.

Every policy runs with the Pollux artifact's physics (``POLLUX_ARTIFACT``: goodput with
statistical efficiency, 30 s restart and start delay) and 60 s decision rounds, the setting in
which ``bench/fidelity_pollux.py`` matches the artifact; without goodput physics a batch-size
choice would change nothing. Jobs run at the trace's replicas and batch size except under
Pollux, whose jobs adapt their batch size to their GPUs.

Prints, per workload, each policy's avg / p95 JCT, makespan, restarts per job and avg JCT
relative to Pollux, with the CPU seconds each simulation took and the load average; writes JSON.

Usage: python bench/pollux.py [--loads 0.5,1,1.5,2] [--jobs 80] [--seed 1]
       [--policies fifo,tiresias,optimus,pollux] [--json bench/results/pollux.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from cohabit.policies import make_policy
from cohabit.sim.physics import POLLUX_ARTIFACT
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.sim.truth import TraceJob
from cohabit.spec.cluster import preset

#: cohabit policy spec per column (Tiresias as the artifact configures it, see bench/fidelity_pollux.py).
POLICIES: dict[str, str] = {
    "fifo": "fifo",
    "tiresias": "tiresias:thresholds=[57600]:starve_limit=null:consolidate_unknown=false:min_run_time=0",
    "optimus": "optimus",
    "pollux": "pollux",
}
BASE_RATE = 160 / (8 * 3600.0)  # jobs per second at relative job load 1 (the artifact's workloads)


def synthetic(load: float, n_jobs: int, seed: int, folder: Path) -> list[TraceJob]:
    """``n_jobs`` Pollux-format jobs resampled from workload-1, Poisson arrivals at ``load``."""
    src = [r for r in csv.DictReader(load_trace_text().splitlines())]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(src), size=n_jobs)
    times = np.concatenate(([0.0], np.cumsum(rng.exponential(1.0 / (BASE_RATE * load), size=n_jobs - 1))))
    path = folder / f"synthetic-{load:g}.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["name", "time", "application", "num_replicas", "batch_size"])
        for i, (k, t) in enumerate(zip(picks.tolist(), times.tolist())):
            r = src[k]
            w.writerow([f"{r['application']}-{i}", int(t), r["application"], r["num_replicas"], r["batch_size"]])
    return load_trace(path, "pollux").jobs


def load_trace_text() -> str:
    from importlib.resources import files

    return files("cohabit.data").joinpath("traces/pollux_workload-1.csv").read_text()


def run(jobs: list[TraceJob], policy: str) -> dict[str, Any]:
    t0 = time.process_time()
    out = simulate(jobs, preset("pollux"), make_policy(POLICIES[policy]), config=POLLUX_ARTIFACT,
                   decision_period=60.0)
    cpu = time.process_time() - t0
    done = [j for j in out.result.jobs.values() if j.end_time is not None]
    jct = np.array([j.end_time - j.spec.submit_time for j in done])  # type: ignore[operator]
    return {"policy": policy, "jobs": len(out.result.jobs), "finished": len(done),
            "avg_jct": float(jct.mean()), "p95_jct": float(np.percentile(jct, 95)),
            "makespan": float(max(j.end_time for j in done)),  # type: ignore[type-var]
            "restarts_per_job": sum(j.preemptions + j.resizes + j.migrations for j in out.result.jobs.values())
            / max(len(out.result.jobs), 1), "cpu_s": round(cpu, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loads", default="0.5,1,1.5,2")
    ap.add_argument("--jobs", type=int, default=80)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--json", default="bench/results/pollux.json")
    a = ap.parse_args()
    policies = [p for p in a.policies.split(",") if p]
    from rich.console import Console
    from rich.table import Table

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workloads = [("workload-1", load_trace("pollux_workload-1").jobs)]
        workloads += [(f"synthetic-{float(x):g}", synthetic(float(x), a.jobs, a.seed, Path(tmp)))
                      for x in a.loads.split(",") if x]
        for name, jobs in workloads:
            rows = [dict(run(jobs, p), workload=name) for p in policies]
            ref = next((r["avg_jct"] for r in rows if r["policy"] == "pollux"), None)
            t = Table(title=f"{name}: {len(jobs)} jobs, 64 GPUs (load average {os.getloadavg()[0]:.1f})")
            for col in ("policy", "avg JCT s", "p95 JCT s", "makespan s", "restarts/job", "avg JCT / pollux", "cpu s"):
                t.add_column(col, justify="left" if col == "policy" else "right")
            for r in rows:
                r["vs_pollux"] = r["avg_jct"] / ref if ref else None
                t.add_row(r["policy"], f"{r['avg_jct']:,.0f}", f"{r['p95_jct']:,.0f}", f"{r['makespan']:,.0f}",
                          f"{r['restarts_per_job']:.2f}", "" if r["vs_pollux"] is None else f"{r['vs_pollux']:.2f}",
                          f"{r['cpu_s']:.1f}")
            Console(width=130).print(t)
            results += rows
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps({"load_average": os.getloadavg(), "seed": a.seed, "synthetic_jobs": a.jobs,
                                        "policies": POLICIES, "rows": results}, indent=1))
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
