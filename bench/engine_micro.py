"""The engine's per-event path in isolation (issue 18): CPU microseconds of one ledger allocate + release, one
simulator launch + halt, and one scheduler pause + resume (the ledger, the simulator's physics, the record and
the handlers together, no policy), for a 1-GPU and an 8-GPU job of Muri trace1 on ``muri-n8g8``.

    python bench/engine_micro.py [--before SRC] [--repeat 3] [--n 3000] [--label L]

Each case runs in a fresh subprocess (``gc`` off, best of ``--repeat`` loops of ``--n`` pairs, CPU time); with
``--before SRC`` the same cases run on another tree's code (``SRC`` = its ``src``) just before, alternating.
Prints a table with the load average; rows go to ``bench/results/engine_micro.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

TRACE = "bench/reference/inputs/muri_trace1.csv"


def _cases(n: int, repeat: int) -> dict[str, float]:
    from cohabit.engine import actions as A
    from cohabit.engine.ledger import Ledger
    from cohabit.engine.loop import Scheduler
    from cohabit.sim.backend import SimBackend
    from cohabit.sim.runner import config_for
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    cluster = cluster_from_arg("muri-n8g8")
    jobs = load_trace(TRACE, "muri").jobs
    spec_of = {k: next(j.spec for j in jobs if j.spec.workers.count == k) for k in (1, 8)}
    node_of = {1: 3, 8: 2}
    out: dict[str, float] = {}

    def best(loop) -> float:  # type: ignore[no-untyped-def]
        times = []
        for _ in range(repeat):
            t0 = time.process_time()
            loop()
            times.append((time.process_time() - t0) / n * 1e6)
        return round(min(times), 2)

    gc.disable()
    ledger = Ledger(cluster)
    ledger.allocate("other", (3, 3), [ledger.vector(spec_of[1].workers.demand)] * 2)  # a node not empty
    backend = SimBackend(jobs, config_for(cluster))
    for k, spec in spec_of.items():
        row = ledger.vector(spec.workers.demand)
        placement, rows = (node_of[k],) * k, [row] * k

        def ledger_loop() -> None:
            for _ in range(n):
                ledger.allocate("j", placement, rows)
                ledger.release("j")

        out[f"ledger allocate + release, {k} GPU"] = best(ledger_loop)
        alloc = ledger.allocate(spec.id, placement, rows)
        clock = [0.0]

        def backend_loop() -> None:
            t = clock[0]
            for _ in range(n):
                backend.launch(spec, alloc, t, from_checkpoint=True)
                t += 100.0
                backend.halt(spec.id, t, checkpoint=True)
                t += 1.0
                backend.now = t
            clock[0] = t
            backend._heap.clear()  # (stale entries of the halted runs)
            backend._used.clear()

        out[f"simulator launch + halt, {k} GPU"] = best(backend_loop)
        ledger.release(spec.id)

    class _Nop:
        name = "nop"

        def decide(self, view):  # type: ignore[no-untyped-def]
            return []

    sim = SimBackend(jobs, config_for(cluster))
    sched = Scheduler(cluster, _Nop(), sim, strict=True)
    for k, spec in spec_of.items():
        sched._arrive(spec)
        sched._apply(A.Start(spec.id, (node_of[k],) * k))
    for k, spec in spec_of.items():
        placement = (node_of[k],) * k

        def apply_loop() -> None:
            for _ in range(n):
                sched.now += 100.0
                sched._apply(A.Pause(spec.id))
                sched.now += 1.0
                sched._apply(A.Resume(spec.id, placement))
            sim._heap.clear()
            sim._used.clear()

        out[f"scheduler pause + resume, {k} GPU"] = best(apply_loop)
    return out


def _child(src: str | None, n: int, repeat: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if src is not None:
        env["PYTHONPATH"] = src
    res = subprocess.run([sys.executable, __file__, "--child", str(n), str(repeat)], capture_output=True, text=True,
                         env=env)
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr)
        raise SystemExit("benchmark child failed")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", metavar="SRC")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--label", default="after")
    ap.add_argument("--json", default="bench/results/engine_micro.json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_cases(int(args.child[0]), int(args.child[1]))))
        return
    before = _child(args.before, args.n, args.repeat) if args.before else None
    load_b = os.getloadavg()[0]
    after = _child(None, args.n, args.repeat)
    load_a = os.getloadavg()[0]
    print(f"CPU us per pair, best of {args.repeat} x {args.n}; load average {load_b:.1f} (before) / {load_a:.1f} (after)")
    print(f"{'case':36} {'before':>8} {'after':>8} {'speed-up':>8}")
    rows = []
    for case, us in after.items():
        b = before.get(case) if before else None
        rows.append({"case": case, "before_us": b, "after_us": us, "speedup": round(b / us, 2) if b else None})
        print(f"{case:36} {b if b is not None else '':>8} {us:>8} {rows[-1]['speedup'] or '':>8}")
    path = Path(args.json)
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc[args.label] = {"rows": rows, "loadavg_1m": [round(load_b, 1), round(load_a, 1)], "n": args.n,
                       "repeat": args.repeat}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
