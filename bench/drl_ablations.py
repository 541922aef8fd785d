"""Table II of Bao et al. (ToN'22) on this machine, small: the same short reinforcement-learning
run from the shipped weights (the LIF-Quad imitation warm start) with one component removed
each, scored by the greedy policy's average JCT in the training environment (simulator speeds,
fixed workloads) and in the simulator on ``drl_uniform``. Writes ``bench/results/drl_ablations.json``.

    python bench/drl_ablations.py [--iterations 10]

Variants: ``full``; ``no-value`` (moving-average baseline instead of the value network);
``no-explore`` (no job-aware epsilon exploration); ``no-replay`` (the latest episodes' samples
only); ``one-head`` (1 attention head; it starts from the same weights, whose 128-wide attention
projections are then read as one head instead of eight). Each run keeps its best evaluated
weights, as ``cohabit train drl`` does. CPU seconds of the main process and the load average are
printed beside the table. Short runs on a loaded machine: differences of a few percent are noise.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from cohabit.learn.drl_env import evaluate
from cohabit.learn.drl_rl import train
from cohabit.policies.drl.policy import DRLPolicy, shipped
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec.cluster import preset

OUT = Path(__file__).resolve().parent / "results" / "drl_ablations.json"
VARIANTS = {"full": {}, "no-value": {"use_value": False}, "no-explore": {"explore": False},
            "no-replay": {"replay": False}, "one-head": {"heads": 1}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()
    torch.set_num_threads(1)
    init = shipped("policy.pt")
    trace = load_trace("drl_uniform").jobs
    seeds = [20_000 + i for i in range(3)]
    rows: dict[str, dict[str, float]] = {}
    for name in args.variants.split(","):
        t0 = time.process_time()
        net, report = train(iterations=0, online=args.iterations, workers=1, episodes=2, updates=16, intervals=20,
                            seed=5, init=init, lr=1e-5, eps0=0.05, eval_every=5, eval_seeds=3, eval_intervals=20,
                            patience=100, log=lambda s: None, **VARIANTS[name])
        env = evaluate(net, 6, seeds, 20, "uniform", rules=("drl",))["drl"]
        pol = DRLPolicy()
        pol.net, pol._nets = net, {6: (net, {})}
        sim = simulate(trace, preset("drl"), pol).metrics.avg_jct / 1200.0
        rows[name] = {"env_avg_jct": env, "sim_drl_uniform_avg_jct": sim, "cpu_s": time.process_time() - t0,
                      "iterations": report["iterations_done"]}
        print(f"{name:11s} env {env:.3f}  sim drl_uniform {sim:.2f}  {rows[name]['cpu_s']:.0f} s CPU", flush=True)
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"iterations": args.iterations, "init": "data/drl/policy.pt (imitation warm start)",
                               "eval_seeds": seeds, "rows": rows, "load_average": load}, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
