"""How long compute_metrics takes on large records: CPU seconds per size and events per second.

    python bench/metrics_scale.py [--jobs 8200 41000 82000] [--repeats 3] [--json bench/results/metrics_scale.json]

The record is tests/metrics_helpers.py's ``scale_record`` (82,000 jobs: ~426k events, the size of
the Philly trace). Time is this process's CPU time (``time.process_time``), the best of
``--repeats``; the load average is printed beside the table (the machine is shared). This
replaces a wall-clock bound that a unit test used to assert.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from cohabit.report import compute_metrics  # noqa: E402
from cohabit.spec import Resources  # noqa: E402
from metrics_helpers import scale_record  # noqa: E402


def measure(n_jobs: int, repeats: int) -> dict:
    """Best CPU seconds of ``compute_metrics`` over ``repeats`` runs on ``scale_record(n_jobs)``."""
    rec = scale_record(n_jobs)
    best = float("inf")
    for _ in range(repeats):
        c0 = time.process_time()
        m = compute_metrics(rec, Resources(gpu=2500, cpu=10_000))
        best = min(best, time.process_time() - c0)
    assert m.jobs_finished == n_jobs
    return {"jobs": n_jobs, "events": len(rec), "cpu_s": best, "events_per_cpu_s": len(rec) / best}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=[8_200, 41_000, 82_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "metrics_scale.json"))
    a = ap.parse_args()
    rows = [measure(n, a.repeats) for n in a.jobs]
    load = os.getloadavg()
    print(f"compute_metrics, best of {a.repeats} (CPU seconds)   "
          f"[load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}]")
    print(f"{'jobs':>8} {'events':>9} {'CPU s':>7} {'events/CPU s':>13} {'CPU s / first':>14}")
    for r in rows:
        print(f"{r['jobs']:>8} {r['events']:>9} {r['cpu_s']:>7.3f} {r['events_per_cpu_s']:>13,.0f} "
              f"{r['cpu_s'] / rows[0]['cpu_s']:>14.2f}")
    Path(a.json).write_text(json.dumps({"benchmark": "metrics_scale", "load_average": list(load),
                                        "repeats": a.repeats, "rows": rows}, indent=1) + "\n")
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
