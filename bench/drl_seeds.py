"""Harmony-DRL's primary measure (session drl12): mean average JCT over K fresh workloads per
arrival pattern, per policy, with the paired per-seed ratio of ``drl`` to the best baseline, so
that a claim does not hang on one workload (single workloads swing 10-40% between nearly equal
policies). ``bench/drl.py`` prints it first; its single-seed rows stay beside it.

Patterns (``drl_workload.generate(30, ...)``, seeds ``SEED0 .. SEED0 + K - 1`` of each; these seeds
were never used for training (seeds 1000 up, and ``drl_rl``'s random ones), validation (900-911,
920-931), the bench's single rows (0-2, 101, 102, 201) or earlier reports (950-961), so no weight
or rule was chosen on them):

* ``uniform`` / ``poisson`` / ``bursty``: the 6-server testbed (``drl`` preset);
* ``unseen``: uniform arrivals with DSSM and Inception-BN jobs too (models never trained on);
* ``30 uniform`` / ``30 poisson`` / ``30 bursty``: the ``drl-30`` rack at the paper's rates;
* ``30 matched ...``: the rack at ``drl_workload.LOAD_MATCHED_30`` x those rates, the offered
  GPU load per GPU of the 6-server testbed (``drl_workload.offered_load``).

Per pattern: each policy's mean avg JCT (intervals), the *best baseline* (the plain baseline of
least mean: ``lb``, ``tetris``, ``tiresias``, ``lif-line``, ``lif-quad``), ``gain`` = 1 - mean drl /
mean best, the paired ratios ``drl / best`` per seed (their mean, and on how many seeds drl is
below), and the same against the per-seed best baseline (the least of the five on each seed, a
stricter reference no single baseline reaches). The solo bound's mean (``sim.drl_bounds``) says
how much any placement could gain. Extra columns (``EXTRA``) attribute drl's result to its
hand-coded rules: LIF-Line in drl's shortest-first order on 6 servers; on 30 servers drl without
the isolation rule, and LIF-Quad and LIF-Line with both of drl's rules (shortest first and
``isolate=compact``), so that what drl's actor adds over its rules shows.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

BASELINES = ("lb", "tetris", "tiresias", "lif-line", "lif-quad")
#: extra columns per cluster size (not in the best-baseline choice)
EXTRA = {6: ("lif-line:order=short",), 30: ("drl:isolate=never", "lif-quad:order=short:isolate=compact",
                                              "lif-line:order=short:isolate=compact")}
SEED0 = 300
PATTERNS6 = ("uniform", "poisson", "bursty", "unseen")
PATTERNS30 = ("30 uniform", "30 poisson", "30 bursty", "30 matched uniform", "30 matched poisson",
              "30 matched bursty")


def workload(pattern: str, seed: int) -> tuple[list, int]:
    """The jobs of ``pattern`` (module docstring) on ``seed``, and the number of servers."""
    from cohabit.sim.drl_workload import LOAD_MATCHED_30, MODELS, UNSEEN_MODELS, generate

    if pattern == "unseen":
        return generate(30, arrival="uniform", seed=seed, models=MODELS + UNSEEN_MODELS), 6
    if pattern.startswith("30 "):
        arrival = pattern.split()[-1]
        scale = LOAD_MATCHED_30 if " matched " in pattern else 1.0
        return generate(30, arrival=arrival, seed=seed, n_servers=30, rate_scale=scale), 30
    return generate(30, arrival=pattern, seed=seed), 6


def policies_for(servers: int, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    return ("drl",) + BASELINES + EXTRA[servers] + tuple(extra)


def one(args: tuple[str, int, tuple[str, ...]]) -> dict[str, Any]:
    """Every policy on one workload: avg JCT (intervals) and CPU seconds each, the solo bound."""
    import torch

    from cohabit.policies import make_policy
    from cohabit.sim.drl_bounds import solo_bound
    from cohabit.sim.runner import simulate
    from cohabit.spec.cluster import preset

    torch.set_num_threads(1)
    pattern, seed, extra = args
    jobs, servers = workload(pattern, seed)
    cluster = preset("drl" if servers == 6 else "drl-30")
    row: dict[str, Any] = {"pattern": pattern, "seed": seed, "jobs": len(jobs), "solo_bound": solo_bound(jobs),
                           "jct": {}, "cpu_s": {}}
    for p in policies_for(servers, extra):
        t = time.process_time()
        row["jct"][p] = simulate(jobs, cluster, make_policy(p)).metrics.avg_jct / 1200.0
        row["cpu_s"][p] = time.process_time() - t
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-pattern means and paired ratios (module docstring) from :func:`one`'s rows."""
    out: dict[str, Any] = {}
    for pattern in dict.fromkeys(r["pattern"] for r in rows):
        rs = sorted((r for r in rows if r["pattern"] == pattern), key=lambda r: r["seed"])
        names = list(rs[0]["jct"])
        mean = {p: float(np.mean([r["jct"][p] for r in rs])) for p in names}
        best = min(BASELINES, key=lambda p: mean[p])
        drl = np.array([r["jct"]["drl"] for r in rs])
        ref = np.array([r["jct"][best] for r in rs])
        per_best = np.array([min(r["jct"][p] for p in BASELINES) for r in rs])
        out[pattern] = {
            "seeds": [r["seed"] for r in rs], "mean": mean, "solo_bound": float(np.mean([r["solo_bound"] for r in rs])),
            "best_baseline": best, "gain_pct": 100.0 * (1.0 - mean["drl"] / mean[best]),
            "ratio_mean": float(np.mean(drl / ref)), "wins": int(np.sum(drl < ref)),
            "ratio_vs_seed_best_mean": float(np.mean(drl / per_best)), "wins_vs_seed_best": int(np.sum(drl < per_best)),
            "solo_gain_bound_pct": 100.0 * (1.0 - float(np.mean([r["solo_bound"] for r in rs])) / mean[best]),
            "cpu_s": float(sum(sum(r["cpu_s"].values()) for r in rs)),
        }
    return out


def run(patterns: tuple[str, ...], k: int, workers: int = 2, extra: tuple[str, ...] = (),
        seed0: int = SEED0) -> dict[str, Any]:
    """Every pattern on seeds ``seed0 .. seed0 + k - 1``, ``workers`` processes; per-seed rows
    (every number kept), the summary, CPU seconds of the simulations and of this process."""
    tasks = [(p, s, extra) for p in patterns for s in range(seed0, seed0 + k)]
    t0, w0 = time.process_time(), time.perf_counter()
    if workers > 1:
        with ProcessPoolExecutor(workers) as ex:
            rows = list(ex.map(one, tasks))
    else:
        rows = [one(t) for t in tasks]
    return {"seeds": f"{seed0}-{seed0 + k - 1}", "rows": rows, "summary": summarise(rows),
            "sim_cpu_s": float(sum(sum(r["cpu_s"].values()) for r in rows)),
            "parent_cpu_s": time.process_time() - t0, "wall_s": time.perf_counter() - w0,
            "load_average": os.getloadavg()}


def show(res: dict[str, Any]) -> None:
    """The summary table (module docstring)."""
    summ = res["summary"]
    la = " ".join(f"{x:.1f}" for x in res["load_average"])
    print(f"\nPrimary measure: mean avg JCT (intervals) over seeds {res['seeds']} of each pattern (never trained, "
          f"validated or reported on before); {res['sim_cpu_s']:.0f} s CPU in simulations, {res['wall_s']:.0f} s "
          f"wall; load average {la}")
    cols = list(dict.fromkeys(p for s in summ.values() for p in s["mean"]))
    short = {"lif-line:order=short": "line short", "drl:isolate=never": "drl no-iso",
             "lif-quad:isolate=compact": "quad iso", "lif-quad:order=short:isolate=compact": "quad s+iso",
             "lif-line:order=short:isolate=compact": "line s+iso", "drl:order=area": "drl area",
             "lif-line:order=area": "line area"}
    for p in [c for s in summ.values() for c in s["mean"]]:
        if "weights=" in p:  # earlier weights (--extra drl:weights=DIR/policy-30.pt[:isolate=never])
            short[p] = "before" + ("-noiso" if "isolate=never" in p else "")
    print(f"{'pattern':20s}{'solo':>7s}" + "".join(f"{short.get(p, p):>11s}" for p in cols)
          + f"{'best':>10s}{'gain':>8s}{'drl/best':>10s}{'wins':>7s}{'vs seed-best':>14s}{'wins':>6s}{'solo room':>11s}")
    for pattern, s in summ.items():
        n = len(s["seeds"])
        print(f"{pattern:20s}{s['solo_bound']:7.2f}" + "".join(
            f"{s['mean'][p]:11.2f}" if p in s["mean"] else f"{'':11s}" for p in cols)
            + f"{s['best_baseline']:>10s}{s['gain_pct']:+7.1f}%{s['ratio_mean']:10.3f}{s['wins']:4d}/{n:<2d}"
            + f"{s['ratio_vs_seed_best_mean']:14.3f}{s['wins_vs_seed_best']:3d}/{n:<2d}{s['solo_gain_bound_pct']:+10.1f}%")


def main() -> None:
    """``python bench/drl_seeds.py --servers 6 --k 12``: one part of the table on its own (written
    to ``bench/results/drl_seeds_SERVERS.json``), for a loaded machine where the whole of
    ``bench/drl.py`` takes too long."""
    import argparse
    import json
    from pathlib import Path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", choices=("6", "30", "all"), default="all")
    ap.add_argument("--k", type=int, default=12, help="seeds per pattern")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--extra", default="", help="comma-separated extra policy columns")
    args = ap.parse_args()
    if args.k < 1 or args.workers < 1:
        ap.error("--k and --workers must be >= 1")
    patterns = {"6": PATTERNS6, "30": PATTERNS30, "all": PATTERNS6 + PATTERNS30}[args.servers]
    extra = tuple(p for p in args.extra.split(",") if p)
    res = run(patterns, args.k, args.workers, extra)
    show(res)
    out = Path(__file__).resolve().parent / "results" / f"drl_seeds_{args.servers}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
