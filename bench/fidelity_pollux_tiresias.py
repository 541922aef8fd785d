"""Which policy difference makes cohabit's Tiresias differ from the Pollux artifact's (issue 19).

On the artifact's workloads (``bench/reference/pollux.json``), under its physics (setting
``pollux-artifact`` of ``bench/fidelity_pollux.py``), this runs ``tiresias-pollux`` (the artifact's
Tiresias, within 5 % of it everywhere) with one of its differences from cohabit's ``tiresias``
switched to cohabit's rule at a time, then both, then cohabit's ``tiresias`` itself:

* ``reclaim=false``: a running job is never paused for a job of its own queue (the artifact
  recomputes every round who runs from the queue order, so an earlier job takes GPUs back from a
  later one that back-filled; cohabit's Tiresias, as the paper, preempts only across queues);
* ``placement=consolidated``: cohabit's placement (as few nodes as hold the job) instead of the
  artifact's most-free-nodes-first, which splits a job over nodes whenever the GPU count fits.

(A third difference docs/pollux.md listed, the artifact pausing a lower-priority job whenever the GPU
*count* claimed before it exceeds what is left even if the waiting job then does not fit, cannot
arise here: with GPUs the only constraint, a job whose count fits can always be placed.)

Prints avg JCT and the ratio to the artifact per workload and variant, with CPU seconds, and writes
``bench/results/fidelity_pollux_tiresias_ablation.json``.

Usage: python bench/fidelity_pollux_tiresias.py [--workloads workload-2,workload-5,workload-7,workload-8]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASE = "tiresias-pollux"
VARIANTS: dict[str, str] = {
    "artifact (tiresias-pollux)": BASE,
    "reclaim=false": f"{BASE}:reclaim=false",
    "placement=consolidated": f"{BASE}:placement=consolidated",
    "both": f"{BASE}:reclaim=false:placement=consolidated",
    "cohabit tiresias": "tiresias",  # fidelity_pollux.POLICIES: the artifact's parameters
}


def _fp():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("fidelity_pollux", HERE / "fidelity_pollux.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fidelity_pollux"] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="workload-2,workload-5,workload-7,workload-8")
    ap.add_argument("--json", default=str(HERE / "results" / "fidelity_pollux_tiresias_ablation.json"))
    a = ap.parse_args()
    fp = _fp()
    ref = fp.reference()
    out = []
    for wl in a.workloads.split(","):
        theirs = next(r for r in ref["runs"] if r["workload"] == wl and r["policy"] == "tiresias")["metrics"]
        jobs = fp.workload_jobs(wl, ref)
        for label, spec in VARIANTS.items():
            m = fp.run_cohabit(jobs, spec, "pollux-artifact")
            row = {"workload": wl, "variant": label, "policy": fp.POLICIES.get(spec, spec),
                   "avg_jct": m["avg_jct"], "reference_avg_jct": theirs["avg_jct"],
                   "ratio": m["avg_jct"] / theirs["avg_jct"], "p95_ratio": m["p95_jct"] / theirs["p95_jct"],
                   "restarts_per_job": m["restarts_per_job"], "reference_restarts_per_job": theirs["restarts_per_job"],
                   "cpu_s": round(m["cpu_s"], 2)}
            out.append(row)
            print(f"{wl:12s} {label:28s} avg JCT {row['avg_jct']:8.0f} ratio {row['ratio']:.3f} "
                  f"p95 {row['p95_ratio']:.3f} restarts/job {row['restarts_per_job']:.2f} "
                  f"(artifact {theirs['restarts_per_job']:.2f}) cpu {row['cpu_s']:.1f} s "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps({"load_average": os.getloadavg(), "rows": out,
                                        "command": " ".join(["bench/fidelity_pollux_tiresias.py", *sys.argv[1:]])},
                                       indent=1))
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
