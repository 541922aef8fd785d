"""Harmony-DRL (Bao et al., ToN'22, §VII) in simulation: average JCT of ``drl`` against LB,
Tetris, Tiresias, LIF-Line and LIF-Quad, the reward model's prediction error, inference latency
and training time. Writes ``bench/results/drl.json`` and prints tables.

    python bench/drl.py                 # the three embedded workloads + 2 fresh seeds each (minutes)
    python bench/drl.py --quick         # the embedded workloads only
    python bench/drl.py --quick --before DIR   # + a 'drl-before' column: DIR/policy.pt, DIR/policy-30.pt
    python bench/drl.py --quick --seeds 12 --workers 2   # the multi-seed table on 12 seeds per pattern

**Primary measure** (session drl12, ``bench/drl_seeds.py``, printed first): the mean avg JCT over
``--seeds K`` fresh workloads of every pattern (seeds 300 up, never trained, validated or reported
on before; 12 by default, 4 with ``--quick``), with the paired per-seed ratio of drl to the best
baseline and on how many seeds drl wins; every per-seed number is in the JSON
(``multi_seed``). The single-seed rows below it are kept as they were.

Workloads (``cohabit.sim.drl_workload``, 30 intervals of 20 minutes on the ``drl`` preset, 6
servers with server-level interference, ``cohabit.sim.drl_physics``): ``drl_uniform``,
``drl_poisson`` and ``drl_bursty`` (seeds 0, 1, 2). The shipped weights (``cohabit train
drl-dagger``) were trained on a mix of uniform, Poisson and bursty workloads of seeds 1000 up
(validated on 900-902), so every workload here is one it did not train on; "unseen models" adds
DSSM and Inception-BN jobs it never placed; "drl-30 ..." are the 30-server preset with its own
weights (``policy-30.pt``), seed 101 of each arrival pattern; "drl-30 matched ..." the same
seed at ``drl_workload.LOAD_MATCHED_30`` x the arrival rates, the 6-server testbed's offered load
per GPU (session drl12). ``--before DIR`` adds a
``drl-before`` column (earlier weights) measured in the same run. ``drl`` offers the pending
jobs shortest first (``policies.drl.order``, its default since drl10); the table also runs that
rule on LIF-Line and LIF-Quad (``line short``, ``quad short``) and drl in arrival order (``drl
arrival``), so what the order rule gains is shown apart from what drl's placement gains: "drl vs
best" is against the plain baselines, "vs LIF short" against LIF with the same order; ``drl
no-hold`` is drl without the hold rule (``drl:hold=0``, session drl16), ``drl no-lay`` drl without the
layout rule (``drl:layout=keep``, session drl18a; the same as drl on 6 servers, where it is off), ``drl prior3``
drl with the prior of sessions drl15-18 (``drl:prior=3:weigh=none``: the previous default on 6 servers; on 30
servers, where the default has no prior, it turns a prior of 3 on, so there it is not the previous default, ``drl`` is).
Beside the table: lower bounds per workload (``bench/drl_bounds.py``): every job at its solo
speed without queueing, and no interference with FIFO / backfill queueing on the same cluster.
Table II's ablations come from ``bench/drl_ablations.py``
(its JSON is read when present).
JCT is in intervals (seconds / 1200). Times are CPU seconds (``time.process_time``); the
machine's load average is printed beside every table.

Reward model: fresh random placements (``sim.drl_samples``, a seed the training never used),
mean relative error and share within 10% of the reward network and of the LIF models (paper
Fig. 13: 6.9% and 83% for the reward model). Latency: one policy inference (one task) on one
CPU thread (``torch.set_num_threads(1)``) for states of 5, 10 and 20 concurrent jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from cohabit.policies import make_policy
from cohabit.sim.drl_workload import LOAD_MATCHED_30, MODELS, UNSEEN_MODELS, generate
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec.cluster import preset

OUT = Path(__file__).resolve().parent / "results" / "drl.json"
POLICIES = ("drl", "lb", "tetris", "tiresias", "lif-line", "lif-quad")
#: the pending-job order (``policies.drl.order``) on its own: ``drl`` offers the shortest job first
#: by default; the same rule on LIF-Line / LIF-Quad, and drl in the paper's arrival order. The
#: goal is judged against the plain baselines (``POLICIES``); these rows attribute the gain.
ORDER_ROWS = ("drl:order=arrival", "lif-line:order=short", "lif-quad:order=short")
#: the ``isolate`` rule (``policies.drl.isolate``; ``drl``'s default ``auto`` is ``compact`` on the
#: 30-server rack, ``never`` on 6 servers): drl without it, and LIF-Quad with it (its score already
#: keeps new jobs off shared servers; the rule adds keeping a job's tasks together), so the rule's
#: share of drl's result shows.
ISOLATE_ROWS = ("drl:isolate=never", "lif-quad:isolate=compact")
#: the ``hold`` rule (``policies.drl.hold``; ``drl``'s default ``auto`` is unbounded on 6 servers, off
#: on 30): drl placing a job spread when it must, as before session drl16
HOLD_ROWS = ("drl:hold=0",)
#: the ``layout`` rule (``policies.drl.layout``; ``drl``'s default ``auto`` is ``fit`` on the 30-server
#: rack, ``keep`` on 6 servers): drl keeping the chooser's task counts per server, as before session drl18a
LAYOUT_ROWS = ("drl:layout=keep",)
#: the prior as it was before session drl19a (weight 3, LIF-Line's score unweighted; now 1000 with each job's
#: slowdown weighted by its estimated time left, ``policies.drl.prior``); on 30 servers, where the default has no
#: prior and did not change, this row turns a prior of 3 on
WEIGH_ROWS = ("drl:prior=3:weigh=none",)
DATA = Path(__file__).resolve().parents[1] / "src" / "cohabit" / "data" / "drl"


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def jct_table(workloads: dict[str, list], before: Path | None = None) -> dict[str, dict[str, float]]:
    """Average JCT per workload and policy; ``before``: a folder with earlier ``policy.pt`` /
    ``policy-30.pt`` (+ JSON), run as ``drl-before`` (in arrival order) in the same pass."""
    out: dict[str, dict[str, float]] = {}
    names = (("drl-before",) if before is not None else ()) + POLICIES + ORDER_ROWS + ISOLATE_ROWS + HOLD_ROWS + LAYOUT_ROWS + WEIGH_ROWS
    for wname, jobs in workloads.items():
        thirty = "drl-30" in wname
        cluster = preset("drl-30" if thirty else "drl")
        row: dict[str, float] = {}
        for p in names:
            # drl as it was before: the earlier weights, in arrival order (drl's default until drl10)
            spec = (p if p != "drl-before" else
                    f"drl:weights={before / ('policy-30.pt' if thirty else 'policy.pt')}:order=arrival:isolate=never")
            pol = make_policy(spec)
            t = time.process_time()
            res = simulate(jobs, cluster, pol)
            row[p] = res.metrics.avg_jct / 1200.0
            row[f"{p}_cpu_s"] = time.process_time() - t
        best = min(row[p] for p in POLICIES if p != "drl")
        row["drl_vs_best_baseline_pct"] = 100.0 * (best - row["drl"]) / best
        same = min(row[p] for p in ORDER_ROWS if not p.startswith("drl"))
        row["drl_vs_best_short_order_lif_pct"] = 100.0 * (same - row["drl"]) / same
        if before is not None:
            row["drl_before_vs_best_baseline_pct"] = 100.0 * (best - row["drl-before"]) / best
        out[wname] = row
    print(f"\nAverage JCT (intervals of 20 min), {len(names)} policies; {load()}")
    short = {"drl:order=arrival": "drl arrival", "lif-line:order=short": "line short", "lif-quad:order=short": "quad short",
             "drl:isolate=never": "drl no-iso", "lif-quad:isolate=compact": "quad iso", "drl:hold=0": "drl no-hold",
             "drl:layout=keep": "drl no-lay", "drl:prior=3:weigh=none": "drl prior3"}
    print(f"{'workload':24s}" + "".join(f"{short.get(p, p):>12s}" for p in names) + f"{'drl vs best':>13s}"
          + f"{'vs LIF short':>14s}" + (f"{'before vs best':>16s}" if before is not None else ""))
    for wname, row in out.items():
        print(f"{wname:24s}" + "".join(f"{row[p]:12.2f}" for p in names)
              + f"{row['drl_vs_best_baseline_pct']:+12.1f}%" + f"{row['drl_vs_best_short_order_lif_pct']:+13.1f}%"
              + (f"{row['drl_before_vs_best_baseline_pct']:+15.1f}%" if before is not None else ""))
    return out


def headroom(workloads: dict[str, list]) -> dict[str, dict[str, float]]:
    """Lower bounds per workload (``bench/drl_bounds.py``): solo speed without queueing, and no
    interference with FIFO / backfill queueing on the same cluster."""
    from drl_bounds import bounds, print_bounds

    rows = {w: bounds(jobs, preset("drl-30" if "drl-30" in w else "drl")) for w, jobs in workloads.items()}
    print_bounds(rows)
    return rows


def reward_errors(n: int = 600, seed: int = 12345) -> dict[str, dict[str, float]]:
    import torch

    from cohabit.learn.drl_reward import errors, lif_rows, tokens
    from cohabit.models.interference import LIFModel
    from cohabit.policies.drl.nets import RewardNet, pad_batch
    from cohabit.sim.drl_samples import samples

    net = RewardNet(6)
    net.load_state_dict(torch.load(DATA / "reward.pt", map_location="cpu", weights_only=True))
    net.eval()
    data = samples(n, seed=seed)
    label = np.array([j.speed for s in data for j in s])
    preds = []
    with torch.no_grad():
        for s in data:
            x = tokens(s)
            xb, pad = pad_batch([torch.from_numpy(x)], x.shape[1])
            preds.extend(net(xb, pad)[0, : len(s)].tolist())
    out = {"reward_model": errors(np.array(preds), label)}
    for kind in ("line", "quad"):
        model = LIFModel.load(kind)
        rows = [r for s in data for r in lif_rows(s, model)]
        pred = np.array([max(0.05, 1.0 - model.slowdown(m, c, b)) for m, c, b, _ in rows])
        out[f"lif_{kind}"] = errors(pred, np.array([1.0 - r[3] for r in rows]))
    print(f"\nSpeed prediction on {len(label)} jobs of {n} fresh random placements; {load()}")
    print(f"{'model':14s}{'rel. error':>12s}{'within 10%':>12s}")
    for k, v in out.items():
        print(f"{k:14s}{100 * v['relative_error']:11.1f}%{100 * v['within_10pct']:11.1f}%")
    return out


class _EightCores:
    """What ``begin`` reads of a cluster view for the prior (LIF-Line's cores per server): 6 servers
    of 8 cores, the ``drl`` preset's."""

    capacity = np.full((6, 1), 8.0)
    # (the prior's weights read the jobs' time left: here no job has a view, each weighs one interval)
    running: dict = {}
    pending: dict = {}
    now = 0.0

    @staticmethod
    def resource_index(name: str) -> int | None:
        return 0 if name == "cpu" else None


def latency() -> dict[str, float]:
    import torch

    from cohabit.policies.drl.state import PlacementState, new_entry

    pol = make_policy("drl")
    torch.set_num_threads(1)
    out = {}
    rng = np.random.default_rng(0)
    for n in (5, 10, 20):
        jobs = [new_entry(f"j{i}", "vgg-16", bool(rng.random() < 0.5), 2, 2, np.array([0.5, 0.25, 0.25]),
                          np.array([0.0, 0.125, 0.125]), 6, new=(i == n - 1)) for i in range(n)]
        st = PlacementState(np.full((6, 3), 0.5), jobs)
        job = jobs[-1]
        mask = st.mask(job)
        for _ in range(5):
            pol.probabilities(st, job, mask)
        cpu, wall = [], []
        for _ in range(100):
            t, w = time.process_time(), time.perf_counter()
            pol.probabilities(st, job, mask)
            cpu.append(time.process_time() - t)
            wall.append(time.perf_counter() - w)
        out[f"jobs_{n}_cpu_ms"] = 1000 * statistics.median(cpu)
        out[f"jobs_{n}_wall_ms"] = 1000 * statistics.median(wall)
        # a whole decision of one task with drl's default interference prior (6 servers, 8 cores each)
        pol.begin(st, _EightCores())  # type: ignore[arg-type]
        cpu = []
        for _ in range(100):
            t = time.process_time()
            pol.choose(st, job, mask)
            cpu.append(time.process_time() - t)
        out[f"jobs_{n}_choose_cpu_ms"] = 1000 * statistics.median(cpu)
    print(f"\nOne inference (one task) on one CPU thread, median of 100; {load()}")
    for n in (5, 10, 20):
        print(f"  {n:2d} concurrent jobs: {out[f'jobs_{n}_cpu_ms']:.2f} ms CPU, {out[f'jobs_{n}_wall_ms']:.2f} ms wall; "
              f"with the interference prior (drl's choice) {out[f'jobs_{n}_choose_cpu_ms']:.2f} ms CPU")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--before", type=Path, help="folder with earlier policy.pt / policy-30.pt (+ JSON): a "
                    "'drl-before' column measured in the same run")
    ap.add_argument("--seeds", type=int, default=None, metavar="K",
                    help="fresh workloads per pattern in the multi-seed table (default 12, 4 with --quick; 0: none)")
    ap.add_argument("--workers", type=int, default=2, help="processes for the multi-seed table")
    args = ap.parse_args()
    k = args.seeds if args.seeds is not None else (4 if args.quick else 12)
    if k < 0 or args.workers < 1:
        ap.error("--seeds must be >= 0 and --workers >= 1")
    import drl_seeds

    multi = None
    if k:
        multi = drl_seeds.run(drl_seeds.PATTERNS6 + drl_seeds.PATTERNS30, k, args.workers)
        drl_seeds.show(multi)
    workloads = {f"{n} (embedded)": load_trace(n).jobs for n in ("drl_uniform", "drl_poisson", "drl_bursty")}
    # held out: DSSM and Inception-BN jobs too (models the policy never placed in training)
    workloads["unseen models, uniform"] = generate(30, arrival="uniform", seed=201, models=MODELS + UNSEEN_MODELS)
    workloads["drl-30 uniform seed 101"] = generate(30, arrival="uniform", seed=101, n_servers=30)
    workloads["drl-30 poisson seed 101"] = generate(30, arrival="poisson", seed=101, n_servers=30)
    workloads["drl-30 bursty seed 101"] = generate(30, arrival="bursty", seed=101, n_servers=30)
    for arrival in ("uniform", "poisson", "bursty"):
        workloads[f"drl-30 matched {arrival} s101"] = generate(30, arrival=arrival, seed=101, n_servers=30,
                                                               rate_scale=LOAD_MATCHED_30)
    if not args.quick:
        for arrival in ("uniform", "poisson", "bursty"):
            for seed in (101, 102):
                workloads[f"{arrival} seed {seed}"] = generate(30, arrival=arrival, seed=seed)
    t_cpu = time.process_time()
    result = {"multi_seed": multi, "jct_intervals": jct_table(workloads, args.before), "bounds": headroom(workloads),
              "prediction": reward_errors(), "latency": latency(),
              "training": {k: json.loads((DATA / f"{k}.json").read_text()) for k in ("reward", "policy", "policy-30")},
              "load_average": os.getloadavg()}
    result["cpu_s"] = {"multi_seed_simulations": multi["sim_cpu_s"] if multi else 0.0,
                       "single_rows_and_rest": time.process_time() - t_cpu}
    print(f"\nBench CPU time: {result['cpu_s']['multi_seed_simulations']:.0f} s in the multi-seed simulations "
          f"(worker processes), {result['cpu_s']['single_rows_and_rest']:.0f} s in the rest; {load()}")
    tr = result["training"]
    print(f"\nTraining: reward model {tr['reward']['cpu_s']:.0f} s CPU ({tr['reward']['params']} parameters); "
          f"policy {tr['policy'].get('wall_s', float('nan')):.0f} s wall (last run), "
          f"{len(tr['policy'].get('rounds', []))} DAgger rounds ({tr['policy']['params']} parameters)")
    abl = OUT.parent / "drl_ablations.json"
    if abl.is_file():  # written by bench/drl_ablations.py
        result["ablations"] = json.loads(abl.read_text())
        print(f"\nTable II ablations (bench/drl_ablations.py, {result['ablations']['iterations']} RL iterations each "
              f"from the warm start; load average then {result['ablations']['load_average'][0]:.1f})")
        for name, row in result["ablations"]["rows"].items():
            print(f"  {name:11s} environment {row['env_avg_jct']:.3f}  simulator drl_uniform {row['sim_drl_uniform_avg_jct']:.2f}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
