"""Warm pack host: ``cohabit run`` of small packable torch jobs under ``pack`` and ``fifo``, before/after.

A pack host (``runtime/packed.py``) spends seconds importing torch before its
first member trains. With ``prewarm=True`` the LocalBackend keeps one idle,
already-imported pack host after its first ``launch_pack`` and hands it to the
next device that needs a host. This runs the real CLI (``python -m cohabit.cli
run``) on two YAML workloads of three small torch-mlp jobs, with the sources of
``--before`` (a git revision, default ``main``) and of this tree:

* ``burst``: the three jobs (one family: they pack together) all submitted at t=0;
* ``staggered``: three jobs of three families (different ``hidden``), submitted at
  t = 0, 1.5 and 3 s on two logical nodes, so later jobs need a new device's host;
* ``late``: a 6000-iteration job at t=0 and a 300-iteration one of another family at
  t=3.5 s, which needs the second node's device (the warm host is idle by then).

Per run: the avg JCT the CLI reports, the wall time and the CPU time (user + sys
of the CLI and all its children, from ``os.wait4``) of the whole command, and the
mean time from launch to each job's ``ready`` (``start`` timings) and to its first
progress report (``first_progress``; NaN when jobs finished before their first
report). The machine is shared: wall times are noisy, CPU time less so.

Usage: python bench/pack_warm.py [--before main] [--repeats 3] [--json bench/results/pack_warm.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("fifo", "pack")


def job_line(i: int, hidden: int, lr: float, submit: float, iterations: int = 300) -> str:
    return (f"  - {{id: m{i}, submit_time: {submit}, workers: {{count: 1, demand: {{cpu: 1, mem_gb: 0.3}}}}, "
            f"iterations: {iterations}, workload: {{name: torch-mlp, n_samples: 512, hidden: {hidden}, lr: {lr}}}}}\n")


SCENARIOS = {
    "burst": "jobs:\n" + "".join(job_line(i, 16, lr, 0.0) for i, lr in enumerate((0.05, 0.1, 0.02))),
    "staggered": "jobs:\n" + "".join(job_line(i, h, 0.05, t) for i, (h, t) in enumerate(((16, 0.0), (32, 1.5),
                                                                                           (64, 3.0)))),
    "late": "jobs:\n" + job_line(0, 16, 0.05, 0.0, 6000) + job_line(1, 32, 0.05, 3.5),
}


def run_once(src: Path, yaml: Path, policy: str, out: Path) -> dict[str, float]:
    """One ``cohabit run``; its avg JCT, wall and CPU seconds, and mean launch -> first progress."""
    env = dict(os.environ, PYTHONPATH=str(src))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cohabit.cli", "run", str(yaml), "--policy", policy,
                             "--nodes", "2", "--json", str(out)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"cohabit run {yaml} --policy {policy} failed ({proc.returncode}): {err[-2000:]}")
    got = json.loads(out.read_text())
    timings = got["real"][policy]["timings"]

    def mean_since_launch(kind: str) -> float:  # NaN when no job sent one (finished within one report)
        got = [t["since_launch"] for t in timings if t["kind"] == kind]
        return statistics.fmean(got) if got else math.nan

    last = max(got["real"][policy]["jobs"])  # the last submitted (ids m0, m1, ...)
    late = [t["since_launch"] for t in timings if t["kind"] == "first_progress" and t["job"] == last]
    return {"avg_jct": got["policies"][policy]["avg_jct"], "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "ready_s": mean_since_launch("start"), "first_progress_s": mean_since_launch("first_progress"),
            "last_job_first_progress_s": late[0] if late else math.nan}


def checkout(rev: str, into: Path) -> Path:
    """The ``src`` tree of git revision ``rev`` extracted under ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="git revision without the warm pack host")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "pack_warm.json")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pack-warm-") as tmp:
        tmpd = Path(tmp)
        trees = {"before": checkout(args.before, tmpd), "after": ROOT / "src"}
        for name, text in SCENARIOS.items():
            (tmpd / f"{name}.yaml").write_text(text)
        for r in range(args.repeats):  # interleaved, so drifting load hits every variant alike
            for scenario in SCENARIOS:
                for policy in POLICIES:
                    for variant, src in trees.items():
                        m = run_once(src, tmpd / f"{scenario}.yaml", policy, tmpd / "out.json")
                        rows.append({"scenario": scenario, "policy": policy, "variant": variant, "repeat": r, **m})
    keys = ("avg_jct", "wall_s", "cpu_s", "ready_s", "first_progress_s", "last_job_first_progress_s")
    summary = []
    print(f"{'scenario':10} {'policy':6} {'variant':7} " + " ".join(f"{k[:16]:>16}" for k in keys))
    for scenario in SCENARIOS:
        for policy in POLICIES:
            for variant in ("before", "after"):
                sel = [x for x in rows if (x["scenario"], x["policy"], x["variant"]) == (scenario, policy, variant)]
                med = {k: statistics.median(x[k] for x in sel) for k in keys}
                summary.append({"scenario": scenario, "policy": policy, "variant": variant, **med})
                print(f"{scenario:10} {policy:6} {variant:7} " + " ".join(f"{med[k]:16.2f}" for k in keys))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"before": args.before, "repeats": args.repeats, "cores": os.cpu_count(),
                                     "median": summary, "runs": rows}, indent=1))
    print(f"medians of {args.repeats} runs; wrote {args.json}")


if __name__ == "__main__":
    main()
