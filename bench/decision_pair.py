"""Decision time of one policy, before and after a change, side by side in one run.

    python bench/decision_pair.py --before /tmp/before/src [--policy naive] [--pairs 3] [--json out.json]

``--before`` is the ``src`` folder of the old code (e.g. ``git archive <commit> src | tar -x -C
/tmp/before``). Each pair runs ``bench/baselines.py``'s ``micro_one`` (1,000 jobs arrive at once
on 500 nodes filled to 97%: median CPU time of three arrival rounds, and the steady round) in a
fresh process on the old code, then on this checkout's, so both see the same machine load; the
load average is recorded with each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CHILD = ("import json, os, sys; sys.path.insert(0, {bench!r}); import baselines as b; "
         "r = b.micro_one({policy!r}); r['load'] = round(os.getloadavg()[0], 2); print(json.dumps(r))")


def one(policy: str, src: Path) -> dict[str, Any]:
    """``micro_one(policy)`` in a fresh interpreter that imports cohabit from ``src``."""
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, "-c", CHILD.format(bench=str(HERE), policy=policy)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="src folder of the old code")
    ap.add_argument("--policy", default="naive")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for _ in range(args.pairs):
        for label, src in (("before", args.before.resolve()), ("after", HERE.parent / "src")):
            r = one(args.policy, src)
            rows[label].append(r)
            print(f"{label:6} arrival {r['arrival_round_ms']:6.2f} ms  steady {r['steady_round_ms_median']:5.2f} ms"
                  f"  actions {r['arrival_round_actions']}  load {r['load']}", flush=True)
    summary = {k: {"arrival_round_ms_median": statistics.median(r["arrival_round_ms"] for r in v),
                   "steady_round_ms_median": statistics.median(r["steady_round_ms_median"] for r in v)}
               for k, v in rows.items()}
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"policy": args.policy, "summary": summary, "runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
