"""Simulator speed on a contended cluster: the Philly 82k trace under every baseline (issue 18).

For each (policy, size) a fresh subprocess simulates the first ``size`` jobs of
``philly_82k`` on ``--cluster`` (default ``philly-512``: 64 nodes x 8 GPUs, where the trace
queues, so preemptive policies preempt and rounds see long queues) and reports CPU and wall
time of the simulation (metrics included), the whole child process's CPU time up to the simulation's end
(``process_cpu_s``: interpreter start-up, imports, trace parse and simulation, what a public simulator's
``time python run_sim.py`` measures), jobs per CPU second and per wall second, peak RSS
(ru_maxrss of the child: trace loading included), record events and preemptions, with the
load average beside every row. Goals: >= 5,000 jobs per CPU second and peak RSS <= 500 MB on
the 82k run for every baseline, and the 10k and 82k rates within 20%.

    python bench/sim_scale.py [--cluster philly-512] [--sizes 10000,all] [--policies fifo,srtf,...]
        [--label after] [--cpu-limit 180] [--pin | --check] [--json bench/results/sim_scale.json]
    python bench/sim_scale.py --trace bench/reference/inputs/muri_trace1.csv --format muri \
        --cluster muri-n8g8 --sizes all      # the Muri artifact's trace1 (bench/reference/muri.md)

``--cpu-limit`` stops a child past that many CPU seconds (reported, not an error: a slow
policy's 82k run is skipped). ``--pin`` stores each run's fingerprint (average JCT, makespan,
every event kind's count, preemptions, a digest of the jobs' start and end times; see
``cohabit.report.fingerprint``) in ``bench/results/sim_pins_<cluster>.json``; ``--check``
compares every run with its pin and exits 1 on any difference. ``--before SRC`` runs every case on
another checkout's code first (``SRC`` = its ``src`` directory, e.g. ``git archive main | tar -x -C
/tmp/before``), side by side at the same load: speed-up in CPU time and whether the results are the
same (exit 1 if not); its rows go to ``<label>-before`` in the JSON. The JSON keeps one row list
per ``--label`` (``before``, ``after``), so a before/after pair lives in one file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

BASELINES = ("fifo,fifo-backfill,srtf,tiresias,tiresias-gittins,gandiva,optimus,slaq,themis,drf,tetris,"
             "lb,binpack,static,naive")


def one(size: int | None, policy: str, cluster_arg: str, trace: str = "philly_82k",
        fmt: str = "philly") -> dict[str, object]:
    from cohabit.policies import make_policy
    from cohabit.report.fingerprint import fingerprint
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    t0 = time.perf_counter()
    load = load_trace(trace, fmt, limit=size)
    t_load = time.perf_counter() - t0
    cluster = cluster_from_arg(cluster_arg)
    t1, c1 = time.perf_counter(), time.process_time()
    out = simulate(load.jobs, cluster, make_policy(policy))
    t_sim, c_sim = time.perf_counter() - t1, time.process_time() - c1
    ru = resource.getrusage(resource.RUSAGE_SELF)  # the whole process so far: start-up, imports, parse, run
    m = out.metrics
    n = len(load.jobs)
    return {
        "policy": policy, "jobs": n, "cluster": cluster.name, "load_s": round(t_load, 3),
        "sim_s": round(t_sim, 3), "cpu_s": round(c_sim, 3), "process_cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
        "jobs_per_cpu_s": round(n / c_sim, 1), "jobs_per_s": round(n / t_sim, 1),
        "events": len(out.result.record), "preemptions": m.preemptions,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "jobs_finished": m.jobs_finished, "avg_jct_h": round((m.avg_jct or 0) / 3600, 3),
        "gpu_allocated": round(m.allocated.get("gpu", 0.0), 4),
        "loadavg_1m": round(os.getloadavg()[0], 1),
        "fingerprint": fingerprint(out.result.record, m),
    }


def _child(size: str, policy: str, cluster: str, cpu_limit: float, trace: str,
           fmt: str, src: str | None = None) -> dict[str, object] | str:
    def limit() -> None:
        if cpu_limit > 0:
            resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_limit), int(cpu_limit) + 5))

    # a fixed hash seed: gandiva's count of `reallocated` events depends on the order of a set of job
    # ids (found here: 1,926 or 1,927 on 10k jobs), and a pin must not depend on the process
    env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
    if src is not None:  # another checkout's code (``--before``): its package directory comes first
        env["PYTHONPATH"] = src
    res = subprocess.run([sys.executable, __file__, "--child", size, policy, "--cluster", cluster,
                          "--trace", trace, "--format", fmt],
                         capture_output=True, text=True, preexec_fn=limit, env=env)
    if res.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return f"over the {cpu_limit:g} s CPU limit"
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr)
        raise SystemExit(f"benchmark child failed for {policy} {size}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster", default="philly-512", help="preset name or cluster YAML")
    ap.add_argument("--sizes", default="10000,all")
    ap.add_argument("--trace", default="philly_82k", help="embedded trace name or trace file")
    ap.add_argument("--format", default="philly", help="trace format (muri for bench/reference/inputs/muri_trace1.csv)")
    ap.add_argument("--policies", default=BASELINES)
    ap.add_argument("--label", default="after", help="row list to (re)write in the JSON")
    ap.add_argument("--cpu-limit", type=float, default=180.0, help="CPU seconds per run, 0 = none")
    ap.add_argument("--json", default="bench/results/sim_scale.json")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--pin", action="store_true", help="store each run's fingerprint as its pin")
    mode.add_argument("--check", action="store_true", help="compare each run with its pin; exit 1 if any differs")
    ap.add_argument("--before", metavar="SRC", help="also run each case on the code in SRC (the src/ directory "
                    "of another checkout, e.g. a `git archive` of main) just before it, and compare results")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        size = None if args.child[0] == "all" else int(args.child[0])
        print(json.dumps(one(size, args.child[1], args.cluster, args.trace, args.format)))
        return
    from cohabit.report.fingerprint import differences

    pin_path = Path(args.json).parent / f"sim_pins_{Path(args.cluster).stem}.json"
    pins = json.loads(pin_path.read_text()) if pin_path.exists() else {}
    rows, failed = [], []
    print(f"trace {args.trace}, cluster {args.cluster}, label {args.label}; load average {os.getloadavg()[0]:.1f} at start")
    print(f"{'policy':17} {'jobs':>6} {'cpu s':>8} {'jobs/cpu-s':>10} {'jobs/s':>8} {'peak MB':>8} "
          f"{'events':>9} {'preempt':>8} {'load':>5} {'proc s':>7}  pin")
    before_rows: list[dict[str, object]] = []
    for policy in args.policies.split(","):
        for size in args.sizes.split(","):
            ref = None
            if args.before:
                ref = _child(size, policy, args.cluster, args.cpu_limit, args.trace, args.format, args.before)
                if isinstance(ref, str):
                    print(f"{'(before) ' + policy:17} {size:>6} {ref}", flush=True)
                    before_rows.append({"policy": policy, "size": size, "skipped": ref})
                    ref = None
                else:
                    before_rows.append(ref)
                    print(f"{'(before) ' + policy:17} {ref['jobs']:>6} {ref['cpu_s']:>8.2f} "
                          f"{ref['jobs_per_cpu_s']:>10.0f} {ref['jobs_per_s']:>8.0f} {ref['peak_rss_mb']:>8.0f} "
                          f"{ref['events']:>9} {ref['preemptions']:>8} {ref['loadavg_1m']:>5.1f} "
                          f"{ref.get('process_cpu_s', float('nan')):>7.2f}", flush=True)
            row = _child(size, policy, args.cluster, args.cpu_limit, args.trace, args.format)
            if isinstance(row, str):
                print(f"{policy:17} {size:>6} {row}", flush=True)
                rows.append({"policy": policy, "size": size, "skipped": row})
                continue
            key = f"{policy}@{row['jobs']}"
            verdict = ""
            if ref is not None:
                diff = differences(ref["fingerprint"], row["fingerprint"])  # type: ignore[arg-type]
                row["vs_before"] = "same" if not diff else "DIFFERS: " + "; ".join(diff)
                row["speedup"] = round(float(ref["cpu_s"]) / float(row["cpu_s"]), 2)  # type: ignore[arg-type]
                verdict = f"{row['speedup']}x, vs before {row['vs_before']}; "
                if diff:
                    failed.append(key + " (vs before)")
            if args.pin:
                pins[key] = row["fingerprint"]
                verdict += "pinned"
            elif args.check:
                if key not in pins:
                    verdict += "no pin"
                else:
                    diff = differences(pins[key], row["fingerprint"])  # type: ignore[arg-type]
                    verdict += "pin same" if not diff else "pin CHANGED: " + "; ".join(diff)
                    if diff:
                        failed.append(key)
            rows.append(row)
            print(f"{policy:17} {row['jobs']:>6} {row['cpu_s']:>8.2f} {row['jobs_per_cpu_s']:>10.0f} "
                  f"{row['jobs_per_s']:>8.0f} {row['peak_rss_mb']:>8.0f} {row['events']:>9} "
                  f"{row['preemptions']:>8} {row['loadavg_1m']:>5.1f} {row['process_cpu_s']:>7.2f}  {verdict}", flush=True)
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = json.loads(path.read_text()) if path.exists() else {}
    if doc.get("benchmark") != "sim_scale" or "runs" not in doc:
        doc = {"benchmark": "sim_scale", "runs": {}}
    run_key = args.cluster if args.trace == "philly_82k" else f"{Path(args.trace).stem}@{args.cluster}"
    doc["runs"].setdefault(run_key, {})[args.label] = rows
    if args.before:
        doc["runs"][run_key][args.label + "-before"] = before_rows
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")
    if args.pin:
        pin_path.write_text(json.dumps(dict(sorted(pins.items())), indent=1) + "\n")
        print(f"wrote {pin_path}")
    if failed:
        raise SystemExit(f"results changed against the pins: {', '.join(failed)}")


if __name__ == "__main__":
    main()
