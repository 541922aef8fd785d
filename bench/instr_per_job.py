"""Instructions per job of a contended Philly simulation, counted by valgrind (issue 18): a measure the load does not move.

On a shared machine CPU seconds move by +-20% with the other processes; the number of instructions a
run executes does not. For each size, ``valgrind --tool=cachegrind --cache-sim=no`` counts the
instructions of a child that loads the trace and simulates (``sim``) and of one that only loads it
(``load``: start-up, imports, parse); their difference over the jobs is the simulation's
instructions per job (metrics pass included). Where CPU per job grows with the trace but
instructions per job do not, the growth is the memory system's (cache and TLB misses of a larger
heap), not more work (docs/speed.md, "Sixteenth session"). Needs ``valgrind`` on the PATH; each
child runs ~30-60x slower than natively (82k FIFO jobs: a few minutes).

    python bench/instr_per_job.py fifo 10000,40000,all [--cluster philly-512] [--before /tmp/before/src]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

_CHILD = """
import sys
from cohabit.policies import make_policy
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec import cluster_from_arg
policy, size, cluster, mode = sys.argv[1:5]
jobs = load_trace("philly_82k", "philly", limit=None if size == "all" else int(size)).jobs
spec, chosen = cluster_from_arg(cluster), make_policy(policy)
if mode == "sim":
    simulate(jobs, spec, chosen)
print(len(jobs))
"""


def instructions(policy: str, size: str, cluster: str, mode: str, src: str | None) -> tuple[int, int]:
    """(instructions executed, jobs) of one child under cachegrind; ``src``: another tree's ``src`` first."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if src is not None:
        env["PYTHONPATH"] = src
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, "-c", _CHILD, policy, size, cluster, mode],
                         capture_output=True, text=True, env=env, check=True)
    m = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if m is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(m.group(1).replace(",", "")), int(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("policy")
    ap.add_argument("sizes", help="comma-separated job counts of philly_82k, or 'all'")
    ap.add_argument("--cluster", default="philly-512")
    ap.add_argument("--before", metavar="SRC", help="also count the code in SRC (another tree's src/)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("bench/instr_per_job.py needs valgrind on the PATH (Debian: apt-get install valgrind)")
    here = str(Path(__file__).resolve().parents[1] / "src")
    sides = ([("before", args.before)] if args.before else []) + [("after", here)]
    print(f"{'code':6} {'jobs':>6} {'sim instr':>16} {'load instr':>16} {'instr/job':>10}")
    for size in args.sizes.split(","):
        for label, src in sides:
            sim, n = instructions(args.policy, size, args.cluster, "sim", src)
            load, _ = instructions(args.policy, size, args.cluster, "load", src)
            print(f"{label:6} {n:>6} {sim:>16,} {load:>16,} {(sim - load) / n:>10,.0f}", flush=True)


if __name__ == "__main__":
    main()
