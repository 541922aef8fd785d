"""Before/after side by side: the same ``bench/sim_scale.py`` run on an older tree and on this one, alternating.

For each (policy, size) the child of ``sim_scale.py`` runs ``--repeat`` times with ``PYTHONPATH`` pointing at
the old tree's ``src`` (``--before``, e.g. made with ``git archive <commit> | tar -x -C DIR``) and as often on
this checkout, one after the other, so both see the same machine load. Prints CPU seconds (the median of the
repeats), jobs per CPU second, the speed-up, whether the two results are identical (``cohabit.report.fingerprint``;
"same but decisions": identical apart from the count of decision rounds)
and the 1-minute load average, and writes the rows to ``--json`` under ``--label``.

    python bench/sim_pair.py --before /tmp/before --policies srtf,tiresias --sizes 10000 [--repeat 2]
        [--trace bench/reference/inputs/muri_trace1.csv --format muri --cluster muri-n8g8 --sizes all]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_scale import _child  # noqa: E402


def _but_decisions(row: dict[str, object]) -> str:
    """The fingerprint without the count of decisions (the same schedule reached in fewer rounds)."""
    fp = dict(row["fingerprint"])  # type: ignore[call-overload]
    fp["events"] = {k: v for k, v in fp["events"].items() if k != "decision"}
    return json.dumps(fp, sort_keys=True)


def _run(tree: str | None, size: str, policy: str, args: argparse.Namespace) -> dict[str, object] | str:
    env_before = os.environ.get("PYTHONPATH")
    if tree is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = str(Path(tree) / "src")
    try:
        return _child(size, policy, args.cluster, args.cpu_limit, args.trace, args.format)
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="directory holding the old tree (its src/ is imported)")
    ap.add_argument("--cluster", default="philly-512")
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--trace", default="philly_82k")
    ap.add_argument("--format", default="philly")
    ap.add_argument("--policies", default="srtf,tiresias,tiresias-gittins,gandiva")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cpu-limit", type=float, default=60.0)
    ap.add_argument("--label", default="pair")
    ap.add_argument("--json", default="bench/results/sim_pair.json")
    args = ap.parse_args()
    if not (Path(args.before) / "src" / "cohabit").is_dir():
        raise SystemExit(f"--before {args.before}: expected a tree with src/cohabit in it")
    print(f"trace {args.trace}, cluster {args.cluster}; before = {args.before}; load average "
          f"{os.getloadavg()[0]:.1f} at start; CPU s = median of {args.repeat} run(s) each")
    print(f"{'policy':17} {'jobs':>6} {'before s':>9} {'jobs/cpu-s':>10} {'after s':>9} {'jobs/cpu-s':>10} "
          f"{'speed-up':>8} {'events':>8} {'preempt':>8} {'load':>5}  result")
    rows = []
    for policy in args.policies.split(","):
        for size in args.sizes.split(","):
            runs: dict[str, list[dict[str, object] | str]] = {"before": [], "after": []}
            for _ in range(args.repeat):
                runs["before"].append(_run(args.before, size, policy, args))
                runs["after"].append(_run(None, size, policy, args))
            ok = {k: [r for r in v if isinstance(r, dict)] for k, v in runs.items()}
            cpu = {k: (statistics.median(float(r["cpu_s"]) for r in v) if v else None) for k, v in ok.items()}
            any_row = (ok["after"] or ok["before"] or [None])[0]
            if any_row is None:
                print(f"{policy:17} {size:>6} both over the {args.cpu_limit:g} s CPU limit", flush=True)
                rows.append({"policy": policy, "size": size, "skipped": "both over the CPU limit"})
                continue
            n = int(any_row["jobs"])  # type: ignore[call-overload]
            fps = {json.dumps(r["fingerprint"], sort_keys=True) for v in ok.values() for r in v}
            same = "same" if len(fps) == 1 and ok["before"] and ok["after"] else (
                "DIFFERS" if ok["before"] and ok["after"] else "—")
            if same == "DIFFERS" and len({_but_decisions(r) for v in ok.values() for r in v}) == 1:
                same = "same but decisions"  # (a policy that skips rounds known to be quiet)
            row = {"policy": policy, "jobs": n, "cluster": args.cluster, "trace": args.trace,
                   "before_cpu_s": cpu["before"], "after_cpu_s": cpu["after"],
                   "before_jobs_per_cpu_s": round(n / cpu["before"], 1) if cpu["before"] else None,
                   "after_jobs_per_cpu_s": round(n / cpu["after"], 1) if cpu["after"] else None,
                   "speedup": round(cpu["before"] / cpu["after"], 2) if cpu["before"] and cpu["after"] else None,
                   "events": any_row["events"], "preemptions": any_row["preemptions"],
                   "peak_rss_mb": ok["after"][0]["peak_rss_mb"] if ok["after"] else None,
                   "result": same, "loadavg_1m": round(os.getloadavg()[0], 1),
                   "runs": {k: [r if isinstance(r, str) else {"cpu_s": r["cpu_s"], "loadavg_1m": r["loadavg_1m"]}
                                for r in v] for k, v in runs.items()},
                   "fingerprint": ok["after"][0]["fingerprint"] if ok["after"] else None}
            rows.append(row)

            def fmt(c: float | None) -> tuple[str, str]:
                return (f"{c:9.2f}", f"{n / c:10.0f}") if c else (f"{'> limit':>9}", f"{'—':>10}")

            b, a = fmt(cpu["before"]), fmt(cpu["after"])
            sp = f"{row['speedup']:7.1f}x" if row["speedup"] else f"{'—':>8}"
            print(f"{policy:17} {n:>6} {b[0]} {b[1]} {a[0]} {a[1]} {sp} {row['events']!s:>8} "
                  f"{row['preemptions']!s:>8} {row['loadavg_1m']:>5.1f}  {same}", flush=True)
    path = Path(args.json)
    doc = json.loads(path.read_text()) if path.exists() else {}
    if doc.get("benchmark") != "sim_pair":
        doc = {"benchmark": "sim_pair", "runs": {}}
    run_key = args.cluster if args.trace == "philly_82k" else f"{Path(args.trace).stem}@{args.cluster}"
    doc["runs"].setdefault(run_key, {})[args.label] = rows
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
