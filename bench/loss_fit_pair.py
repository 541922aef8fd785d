"""CPU per loss-curve fit, old code against new, side by side (issue 18, eighth session).

    python bench/loss_fit_pair.py --before /tmp/before/src [--fits 300] [--json bench/results/loss_fit_pair.json]

Both sides fit the same histories in a fresh subprocess each (``fit_loss_curve(..., polish=False)``, what
the schedulers' :class:`~cohabit.models.loss_fits.LossFits` runs): exact points of Optimus's curve (the
simulator's losses, :meth:`cohabit.sim.truth.JobTruth.loss_at`) with 4 to 64 points, weighted like SLAQ's
(``0.95 ** age``) or not, and the same with 0.3% noise. Prints CPU microseconds per fit and the relative
error of the iterations to converge (tolerance 0.05) against the true curve (exact points) or the
polished least-squares fit (noisy points), with the load average; writes the rows to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, random, sys, time
import numpy as np
from cohabit.models.loss_curve import LossCurve, fit_loss_curve
rng = random.Random(1)
n_fits = int(sys.argv[1])
cases = []
for i in range(n_fits):
    a, b, c = 5 + 25 * rng.random(), 1.0, 0.05 + 0.35 * rng.random()
    total = rng.choice([1e3, 1e4, 1e5, 1e6])
    n = rng.randint(4, 64)
    k0 = rng.uniform(1, total * 0.05)
    ks = sorted({k0} | {rng.uniform(k0, total) for _ in range(n - 1)})
    noise = 0.003 if i % 2 else 0.0
    pts = [(k, (1 / (a * k / total + b) + c) * (1 + rng.gauss(0, noise))) for k in ks]
    w = [0.95 ** (len(pts) - 1 - j) for j in range(len(pts))] if i % 4 < 2 else None
    cases.append((pts, w, (a / total, b, c), noise))
fits = []
t = time.process_time()
for _ in range(3):
    fits = [fit_loss_curve(p, w, polish=False) for p, w, _, _ in cases]
cpu = (time.process_time() - t) / (3 * len(cases))
err = {"exact": [], "noisy": []}
for (pts, w, true, noise), f in zip(cases, fits):
    ref = LossCurve(*true, pts[0][0]) if not noise else fit_loss_curve(pts, w, polish=True)
    want = ref.iterations_to_converge(0.05)
    err["noisy" if noise else "exact"].append(abs(f.iterations_to_converge(0.05) - want) / want)
print(json.dumps({"us_per_fit": cpu * 1e6, **{f"{k}_median_err": float(np.median(v)) for k, v in err.items()},
                  **{f"{k}_max_err": float(max(v)) for k, v in err.items()}}))
"""


def run(src: str | None, fits: int) -> dict[str, float]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    out = subprocess.run([sys.executable, "-c", CHILD, str(fits)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="src/ of the old code (e.g. a git archive of main)")
    ap.add_argument("--fits", type=int, default=300)
    ap.add_argument("--json", default="bench/results/loss_fit_pair.json")
    args = ap.parse_args()
    rows = []
    for side, src in (("before", args.before), ("after", str(Path(__file__).resolve().parent.parent / "src"))):
        row = {"side": side, **run(src, args.fits), "load": os.getloadavg()[0]}
        rows.append(row)
    print(f"{'side':8} {'us/fit':>8} {'exact: median err':>18} {'max':>9} {'noisy: median err':>18} {'max':>9} {'load':>5}")
    for r in rows:
        print(f"{r['side']:8} {r['us_per_fit']:8.1f} {r['exact_median_err']:18.2e} {r['exact_max_err']:9.2e} "
              f"{r['noisy_median_err']:18.2e} {r['noisy_max_err']:9.2e} {r['load']:5.1f}")
    print(f"speed-up {rows[0]['us_per_fit'] / rows[1]['us_per_fit']:.2f}x")
    Path(args.json).write_text(json.dumps({"fits": args.fits, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
