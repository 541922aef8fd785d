"""CPU seconds spent inside named functions during one whole simulation, old code against new (issue 18).

Each target ``module:Class.method`` (or ``module:function``) is wrapped with ``time.process_time`` around every call
(the same wrapper on both sides), the run is simulated once, and the seconds and calls per target are printed with
the run's total and the load average. With ``--before SRC`` (``SRC`` = another tree's ``src``, e.g. from ``git
archive main | tar -x -C /tmp/before``) each repeat runs the old code, then this checkout's, in fresh subprocesses
(``PYTHONHASHSEED=0``): what one change saves, timed inside the runs it is meant for, where whole runs at a
shared machine's load move by more than the change.

    python bench/inplace_time.py tiresias 10000 cohabit.engine.series:MetricSeries.freeze \\
        cohabit.sim.backend:SimBackend.launch [--before /tmp/before/src] [--repeat 3]
    python bench/inplace_time.py tiresias muri ...   # the Muri artifact's trace1 on muri-n8g8
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _one(policy: str, size: str, targets: list[str]) -> dict[str, object]:
    from cohabit.policies import make_policy
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    spent: dict[str, float] = {}
    calls: dict[str, int] = {}
    clock = time.process_time

    def wrap(name: str, fn):  # type: ignore[no-untyped-def]
        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + clock() - t0
                calls[name] = calls.get(name, 0) + 1
        return timed

    for target in targets:
        mod, qual = target.split(":")
        owner_name, _, attr = qual.rpartition(".")
        owner = importlib.import_module(mod)
        if owner_name:
            owner = getattr(owner, owner_name)
        setattr(owner, attr, wrap(qual, getattr(owner, attr)))
    if size == "muri":
        jobs, cluster = load_trace("bench/reference/inputs/muri_trace1.csv", "muri").jobs, cluster_from_arg("muri-n8g8")
    else:
        jobs, cluster = load_trace("philly_82k", "philly", limit=int(size)).jobs, cluster_from_arg("philly-512")
    c0 = clock()
    simulate(jobs, cluster, make_policy(policy))
    return {"total_s": round(clock() - c0, 3), "spent_s": {k: round(v, 4) for k, v in spent.items()}, "calls": calls,
            "loadavg_1m": round(os.getloadavg()[0], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("policy")
    ap.add_argument("size", help="jobs of philly_82k on philly-512, or 'muri' for trace1 on muri-n8g8")
    ap.add_argument("targets", nargs="+", help="module:Class.method or module:function")
    ap.add_argument("--before", metavar="SRC")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_one(args.policy, args.size, args.targets)))
        return
    here = str(Path(__file__).resolve().parents[1] / "src")
    sides = ([("before", args.before)] if args.before else []) + [("after", here)]
    for _ in range(args.repeat):
        for label, src in sides:
            env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": src}
            out = subprocess.run([sys.executable, __file__, args.policy, args.size, *args.targets, "--child"],
                                 env=env, capture_output=True, text=True, check=True)
            row = json.loads(out.stdout)
            parts = "  ".join(f"{k} {v:.3f} s / {row['calls'][k]}" for k, v in row["spent_s"].items())
            print(f"{label:6s} total {row['total_s']:.2f} s  {parts}  (load {row['loadavg_1m']})")


if __name__ == "__main__":
    main()
