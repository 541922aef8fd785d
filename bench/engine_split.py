"""Where a simulation's CPU goes: the policy's own code, the engine's per-event path, the metrics pass (issue 18).

For each (policy, size) a fresh subprocess (``PYTHONHASHSEED=0``, as ``sim_scale.py``) runs ``simulate`` with the
policy's ``decide`` and every optional hook the loop calls (``on_arrival``, ``on_finish``, ``on_progress``,
``on_reports``, ``next_decision_time``, ``wants_reports``) wrapped in ``time.process_time`` and
``compute_metrics`` timed the same way. The *engine* is what is left: the loop, the apply path (ledger, the
simulator's launch / halt / physics), the backend's event heap, the record. Trace loading is outside.

``--detail`` (``--detail --detail``: also the ledger's allocate/release, the simulator's launch, halt and reschedule, the
record's appends) also times, exclusively (a nested timed call is subtracted from its caller), the scheduler's
``_apply`` (an action: ledger + backend launch/halt + record), ``_arrive`` (an arrival: its admission), the backend's ``advance`` (its heap, finishes and
their halts) and ``next_event_time``, the scheduler's ``_on_backend_event`` (folding an event: ends, releases)
and ``_record_used``; the wrappers cost CPU themselves (about ``overhead_us`` per timed call, measured in the
child on an empty function and printed beside), so the detail's total is larger than the plain run's.

    python bench/engine_split.py [--trace bench/reference/inputs/muri_trace1.csv --format muri --cluster muri-n8g8]
        [--sizes all] [--policies tiresias,gandiva] [--before SRC] [--detail] [--repeat 1] [--label L]

``--before SRC`` runs every case on another tree's code too (``SRC`` = its ``src``), the two alternating run by run (with
``--repeat``) at the same load, and prints the engine's speed-up beside the whole run's; rows go to ``bench/results/engine_split.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HOOKS = ("decide", "on_arrival", "on_finish", "on_progress", "on_reports", "next_decision_time", "wants_reports")


class _Timer:
    """Exclusive CPU time per bucket: a timed call inside another is subtracted from the outer one."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._inner = [0.0]  # per open timed call: CPU of the timed calls nested in it

    def wrap(self, bucket: str, fn):  # type: ignore[no-untyped-def]
        clock, spent, calls, inner = time.process_time, self.spent, self.calls, self._inner
        spent.setdefault(bucket, 0.0)
        calls.setdefault(bucket, 0)

        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            inner.append(0.0)
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                dt = clock() - t0
                nested = inner.pop()
                spent[bucket] += dt - nested
                calls[bucket] += 1
                inner[-1] += dt

        return timed


def _overhead_us(timer: _Timer, n: int = 20000) -> float:
    """CPU microseconds one timed call adds over the call itself (an empty function, best of 3)."""
    def f() -> None:
        return None

    g = _Timer().wrap("x", f)
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        for _ in range(n):
            g()
        t1 = time.process_time()
        for _ in range(n):
            f()
        t2 = time.process_time()
        best = min(best, ((t1 - t0) - (t2 - t1)) / n * 1e6)
    return best


def one(size: int | None, policy_name: str, cluster_arg: str, trace: str, fmt: str, detail: int) -> dict[str, object]:
    import cohabit.sim.runner as runner
    from cohabit.engine.loop import Scheduler
    from cohabit.policies import make_policy
    from cohabit.report.fingerprint import fingerprint
    from cohabit.sim.backend import SimBackend
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    load = load_trace(trace, fmt, limit=size)
    cluster = cluster_from_arg(cluster_arg)
    timer = _Timer()
    policy = make_policy(policy_name)
    for hook in HOOKS:
        fn = getattr(policy, hook, None)
        if fn is not None:  # an instance attribute: the loop binds it by getattr, as it would the method
            setattr(policy, hook, timer.wrap("policy", fn))
    runner.compute_metrics = timer.wrap("metrics", runner.compute_metrics)
    if detail:
        from cohabit.engine.ledger import Ledger
        from cohabit.engine.record import Record
        parts = [(Scheduler, "_apply", "apply"), (Scheduler, "_on_backend_event", "on_event"), (Scheduler, "_arrive", "arrive"),
                 (Scheduler, "_record_used", "record_used"), (SimBackend, "advance", "advance"),
                 (SimBackend, "next_event_time", "next_event_time")]
        if detail > 1:  # the apply path's parts
            parts += [(Ledger, "allocate", "ledger"), (Ledger, "release", "ledger"), (SimBackend, "launch", "launch"),
                      (SimBackend, "halt", "halt"), (SimBackend, "_reschedule", "reschedule"),
                      (Record, "append_alloc", "record"), (Record, "append_paused", "record"),
                      (Record, "append_used", "record"), (Record, "append_decision", "record"),
                      (Record, "append", "record")]
        for cls, name, bucket in parts:
            setattr(cls, name, timer.wrap(bucket, getattr(cls, name)))
    c0 = time.process_time()
    out = runner.simulate(load.jobs, cluster, policy)
    total = time.process_time() - c0
    spent = dict(timer.spent)
    engine = total - sum(spent.values())
    return {
        "policy": policy_name, "jobs": len(load.jobs), "cluster": cluster.name, "cpu_s": round(total, 3),
        "policy_s": round(spent.pop("policy"), 3), "metrics_s": round(spent.pop("metrics"), 3),
        "engine_s": round(engine + sum(spent.values()), 3),
        "engine_rest_s": round(engine, 3) if detail else None,
        "detail_s": {k: round(v, 3) for k, v in spent.items()} or None,
        "calls": timer.calls, "overhead_us": round(_overhead_us(timer), 2),
        "events": len(out.result.record), "preemptions": out.metrics.preemptions,
        "loadavg_1m": round(os.getloadavg()[0], 1), "fingerprint": fingerprint(out.result.record, out.metrics),
    }


def _child(args: argparse.Namespace, size: str, policy: str, src: str | None) -> dict[str, object]:
    env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
    if src is not None:
        env["PYTHONPATH"] = src
    cmd = [sys.executable, __file__, "--child", size, policy, "--cluster", args.cluster, "--trace", args.trace,
           "--format", args.format] + ["--detail"] * args.detail
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr)
        raise SystemExit(f"child failed for {policy} {size}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _median_row(rows: list[dict[str, object]]) -> dict[str, object]:
    """The row of the median total CPU (its own split: the parts of one run add up)."""
    return sorted(rows, key=lambda r: float(r["cpu_s"]))[len(rows) // 2]  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster", default="philly-512")
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--trace", default="philly_82k")
    ap.add_argument("--format", default="philly")
    ap.add_argument("--policies", default="tiresias,gandiva")
    ap.add_argument("--before", metavar="SRC")
    ap.add_argument("--detail", action="count", default=0, help="time the engine's parts (twice: the apply path's too)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--label", default="split")
    ap.add_argument("--json", default="bench/results/engine_split.json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        size = None if args.child[0] == "all" else int(args.child[0])
        print(json.dumps(one(size, args.child[1], args.cluster, args.trace, args.format, args.detail)))
        return
    from cohabit.report.fingerprint import differences

    print(f"trace {args.trace}, cluster {args.cluster}; load average {os.getloadavg()[0]:.1f} at start; CPU s, "
          f"median of {args.repeat}")
    head = f"{'policy':17} {'code':6} {'jobs':>6} {'total':>7} {'policy':>7} {'metrics':>7} {'engine':>7} {'events':>9} " \
           f"{'us/event':>8} {'load':>5}"
    print(head + ("  detail" if args.detail else ""))
    rows: list[dict[str, object]] = []
    for policy in args.policies.split(","):
        for size in args.sizes.split(","):
            pair: dict[str, dict[str, object]] = {}
            codes = [(c, s) for c, s in (("before", args.before), ("after", None)) if c == "after" or s is not None]
            taken: dict[str, list[dict[str, object]]] = {c: [] for c, _ in codes}
            for _ in range(args.repeat):  # (before and after alternate: a load that drifts weighs on both alike)
                for code, src in codes:
                    taken[code].append(_child(args, size, policy, src))
            for code, _src in codes:
                runs = taken[code]
                row = _median_row(runs)
                row["code"] = code
                row["engine_runs_s"] = [r["engine_s"] for r in runs]
                pair[code] = row
                per = float(row["engine_s"]) / int(row["events"]) * 1e6  # type: ignore[arg-type]
                extra = ""
                if args.detail:
                    extra = "  " + " ".join(f"{k}={v}" for k, v in (row["detail_s"] or {}).items())  # type: ignore[union-attr]
                    extra += f" rest={row['engine_rest_s']} (+{row['overhead_us']} us per timed call)"
                print(f"{policy:17} {code:6} {row['jobs']:>6} {row['cpu_s']:>7.2f} {row['policy_s']:>7.2f} "
                      f"{row['metrics_s']:>7.2f} {row['engine_s']:>7.2f} {row['events']:>9} {per:>8.1f} "
                      f"{row['loadavg_1m']:>5.1f}{extra}", flush=True)
                rows.append(row)
            if "before" in pair:
                b, a = pair["before"], pair["after"]
                diff = differences(b["fingerprint"], a["fingerprint"])  # type: ignore[arg-type]
                a["vs_before"] = "same" if not diff else "DIFFERS: " + "; ".join(diff)
                a["engine_speedup"] = round(float(b["engine_s"]) / float(a["engine_s"]), 2)  # type: ignore[arg-type]
                a["speedup"] = round(float(b["cpu_s"]) / float(a["cpu_s"]), 2)  # type: ignore[arg-type]
                print(f"{'':17} engine {a['engine_speedup']}x, whole run {a['speedup']}x, results {a['vs_before']}",
                      flush=True)
    path = Path(args.json)
    doc = json.loads(path.read_text()) if path.exists() else {}
    run_key = args.cluster if args.trace == "philly_82k" else f"{Path(args.trace).stem}@{args.cluster}"
    doc.setdefault(run_key, {})[args.label] = rows
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")
    if any(str(r.get("vs_before", "same")) != "same" for r in rows):
        raise SystemExit("results differ from the before code")


if __name__ == "__main__":
    main()
