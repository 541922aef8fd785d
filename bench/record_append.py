"""What one record row costs: CPU microseconds per append and bytes per event, per kind (issue 18).

Appends ``--n`` events of each kind the engine writes per start, pause and resume and per round (a decision,
a usage sample, a resume with its allocation, a pause), the way the engine appends them (the record's
``append_*`` methods where the code has them, else ``append``), with ``gc`` off; CPU time with
``time.process_time`` (best of ``--repeat``), memory with ``tracemalloc`` in a separate pass.
``--before SRC`` runs the same on another checkout's code (``SRC`` = its ``src`` directory), side by side.

    python bench/record_append.py [--n 200000] [--repeat 3] [--before /tmp/before/src] [--label L]

Rows go to ``bench/results/record_append.json`` under ``--label`` (and ``<label>-before``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path


def _appenders(rec, K):  # type: ignore[no-untyped-def]
    """kind -> a function appending the i-th event of that kind the way the engine does."""
    alloc = {"gpu": 1.0, "cpu": 4.0, "mem_gb": 16.0}
    dec = getattr(rec, "append_decision", None)
    used = getattr(rec, "append_used", None)
    place = getattr(rec, "append_alloc", None)
    pause = getattr(rec, "append_paused", None)
    return {
        "decision": (lambda t, i: dec(t, 0.01 * (i % 97))) if dec else
        (lambda t, i: rec.append(t, K.DECISION, None, ms=0.01 * (i % 97))),
        "used": (lambda t, i: used(t, "j", {"gpu": 1.0}, t - 1.0, t)) if used else
        (lambda t, i: rec.append(t, K.USED, "j", used=dict({"gpu": 1.0}), since=t - 1.0, until=t)),
        "resumed": (lambda t, i: place(t, K.RESUMED, "j", alloc, [i % 8])) if place else
        (lambda t, i: rec.append(t, K.RESUMED, "j", alloc=dict(alloc), nodes=[i % 8])),
        "paused": (lambda t, i: pause(t, "j", "preempted")) if pause else
        (lambda t, i: rec.append(t, K.PAUSED, "j", reason="preempted")),
    }


def measure(n: int, repeat: int) -> dict[str, dict[str, float]]:
    from cohabit.engine.record import EventKind as K
    from cohabit.engine.record import Record

    out: dict[str, dict[str, float]] = {}
    gc.disable()
    for kind in ("decision", "used", "resumed", "paused"):
        best = float("inf")
        for _ in range(repeat):
            rec = Record()
            f = _appenders(rec, K)[kind]
            c = time.process_time()
            for i in range(n):
                f(float(i), i)
            best = min(best, time.process_time() - c)
        rec = Record()
        f = _appenders(rec, K)[kind]
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            f(float(i), i)
        size = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        out[kind] = {"us_per_append": round(best / n * 1e6, 3), "bytes_per_event": round(size / n, 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", metavar="SRC")
    ap.add_argument("--label", default="after")
    ap.add_argument("--json", default="bench/results/record_append.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.n, args.repeat)))
        return
    results = {}
    for tag, src in (("before", args.before), ("after", None)):
        if tag == "before" and src is None:
            continue
        env = dict(os.environ)
        if src is not None:
            env["PYTHONPATH"] = src
        res = subprocess.run([sys.executable, __file__, "--child", "--n", str(args.n), "--repeat", str(args.repeat)],
                             capture_output=True, text=True, env=env, check=True)
        results[tag] = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"{args.n} appends per kind, best of {args.repeat}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'kind':10} " + " ".join(f"{t + ' us':>12} {t + ' B/event':>16}" for t in results))
    for kind in results["after"]:
        print(f"{kind:10} " + " ".join(f"{r[kind]['us_per_append']:>12} {r[kind]['bytes_per_event']:>16}"
                                       for r in results.values()))
    path = Path(args.json)
    doc = json.loads(path.read_text()) if path.exists() else {"benchmark": "record_append", "runs": {}}
    doc["runs"][args.label] = {**results["after"], "loadavg_1m": round(os.getloadavg()[0], 1)}
    if "before" in results:
        doc["runs"][args.label + "-before"] = results["before"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
