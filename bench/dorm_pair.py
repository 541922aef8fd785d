"""Dorm's P2 on server classes (``policies/dorm/aggregate.py``) at 1,000 x 500, before and after a change.

    python bench/dorm_pair.py --before /tmp/before/src [--seeds 100,101,102] [--time-limit 10]
        [--json bench/results/dorm_pair.json] [--label NAME]

Each instance (``bench/dorm.py``'s ``scaled_instance``: 1,000 applications, 500 servers of two
capacities, one arriving application or 10% arriving, θ = Dorm-3) is solved by
``solve_aggregated`` with one HiGHS thread and the policy's 10-s limit, in a fresh process on the
old code (``--before``, the ``src`` folder of another checkout) and then on this checkout's, so both
see the same machine load. Prints the status, the class solve's MIP gap, the CPU seconds of the
solve (the child's own ``process_time``), the wall seconds (HiGHS' time limit is wall time, which
the machine's load inflates) and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CHILD = """
import json, os, sys, time
sys.path.insert(0, {bench!r})
from dorm import scaled_instance
from cohabit.policies.dorm.milp import PAPER_SETTINGS, keep_and_fill
from cohabit.policies.dorm.aggregate import solve_aggregated
th = PAPER_SETTINGS["dorm-3"]
prob = scaled_instance(1000, 500, seed={seed}, arriving={arriving!r})
c0, w0 = time.process_time(), time.perf_counter()
start = keep_and_fill(prob, th.adjust_bound(int(prob.running.sum())))
sol = solve_aggregated(prob, th, time_limit={limit}, start=start, threads=1)
print(json.dumps({{"status": sol.status, "gap": sol.gap, "cpu_s": time.process_time() - c0,
                  "wall_s": time.perf_counter() - w0, "utilization": sol.utilization,
                  "class_bound": sol.size.get("aggregated_utilization"), "rounds": sol.size.get("rounds"),
                  "load": os.getloadavg()[0]}}))
"""


def one(src: Path | None, seed: int, arriving: float | int, limit: float) -> dict[str, Any]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    code = CHILD.format(bench=str(HERE), seed=seed, arriving=arriving, limit=limit)
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="src folder of the old code")
    ap.add_argument("--seeds", default="100,101,102")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--json", default="bench/results/dorm_pair.json")
    ap.add_argument("--label", default="pair")
    args = ap.parse_args()
    print(f"P2 on server classes, 1,000 apps x 500 servers, one HiGHS thread, {args.time_limit:g} s limit; "
          f"load average {os.getloadavg()[0]:.1f} at start")
    print(f"{'seed':>4} {'arriving':>8} {'code':6} {'status':11} {'gap':>8} {'CPU s':>6} {'wall s':>7} "
          f"{'util':>6} {'bound':>6} {'load':>5}")
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for arriving in (1, 0.1):
            for code, src in (("before", args.before), ("after", None)):
                r = one(src, seed, arriving, args.time_limit)
                r.update(seed=seed, arriving=arriving, code=code)
                rows.append(r)
                gap = "-" if r["gap"] is None else f"{r['gap']:.2e}"
                bound = r["class_bound"] if r["class_bound"] is not None else float("nan")
                print(f"{seed:>4} {arriving!s:>8} {code:6} {r['status']:11} {gap:>8} {r['cpu_s']:6.2f} "
                      f"{r['wall_s']:7.2f} {r['utilization']:6.3f} {bound:6.3f} {r['load']:5.1f}", flush=True)
    path = Path(args.json)
    old = json.loads(path.read_text()) if path.exists() else {}
    old[args.label] = rows
    path.write_text(json.dumps(old, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
