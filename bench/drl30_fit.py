"""Can the 30-server actor fit LIF-Quad, and does fitting it help in closed loop? (``docs/drl.md``,
"The 30-server rack"). Writes ``bench/results/drl30_fit.json`` and prints a table.

    python bench/drl30_fit.py [--epochs 12] [--init src/cohabit/data/drl/policy-30.pt]

1. LIF-Quad places three 30-interval ``drl-30`` workloads (seeds 5000-5002, uniform / Poisson /
   bursty) through the ``drl`` placement loop (``learn.drl_dagger.episode``); every decision is
   recorded with its strictly equivalent actions (``LIFExpert``, ``--tie 1e-9``).
2. The actor (``--init``) is fitted on 90% of them (``learn.drl_rl.imitate``, set
   cross-entropy), and its agreement (argmax among the equivalent actions) on the training split
   and on the 10% held out is printed every 3 epochs.
3. The fitted actor places the DAgger validation workloads (seeds 900-902 of each pattern) and
   the bench's seed 101: average JCT in intervals, beside the initial actor's.

CPU seconds by ``time.process_time``; the load average is printed beside the table.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "drl30_fit.json"
DATA = Path(__file__).resolve().parents[1] / "src" / "cohabit" / "data" / "drl"


def main() -> None:
    import torch

    from cohabit.learn.drl_dagger import VALIDATION_SEEDS, episode
    from cohabit.learn.drl_rl import _good, _tensors, imitate
    from cohabit.policies.drl.nets import PolicyNet, masked_log_probs
    from cohabit.sim.drl_workload import ARRIVALS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--init", type=Path, default=DATA / "policy-30.pt")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.process_time()
    cfg = {"m": 30, "teacher": "lif-quad", "horizon": 0, "intervals": 30, "tie": 1e-9}
    data = []
    for i, a in enumerate(ARRIVALS):
        data += episode((None, None, {**cfg, "arrival": a, "seed": 5000 + i, "beta": 1.0}))[0]
    order = np.random.default_rng(0).permutation(len(data))
    cut = int(0.9 * len(data))
    train, held = [data[i] for i in order[:cut]], [data[i] for i in order[cut:]]

    def agree(net: torch.nn.Module, d: list) -> float:
        hit = 0
        with torch.no_grad():
            for b in range(0, len(d), 256):
                jobs, jpad, cur, dec, dpad, mask, _ = _tensors(d[b: b + 256])
                pred = masked_log_probs(net(jobs, jpad, cur, dec, dpad), mask).argmax(1)
                hit += int(_good(d[b: b + 256]).gather(1, pred.unsqueeze(1)).sum())
        return hit / len(d)

    def closed_loop(sd: dict) -> dict[str, float]:
        out = {}
        for a in ARRIVALS:
            for s in (*VALIDATION_SEEDS, 101):
                out[f"{a}-{s}"] = episode((sd, None, {**cfg, "tie": 0.0, "arrival": a, "seed": s, "beta": 0.0}))[1]
        out["validation_mean"] = float(np.mean([v for k, v in out.items() if not k.endswith("-101")]))
        return out

    net = PolicyNet(30)
    net.load_state_dict(torch.load(args.init, map_location="cpu", weights_only=True))
    net.eval()
    before = closed_loop({k: v.clone() for k, v in net.state_dict().items()})
    curve = [{"epochs": 0, "train": agree(net, train), "held_out": agree(net, held)}]
    for k in range(0, args.epochs, 3):
        imitate(net, train, epochs=min(3, args.epochs - k), seed=k, lr=5e-4, log=lambda s: None)
        curve.append({"epochs": min(k + 3, args.epochs), "train": agree(net, train), "held_out": agree(net, held)})
    after = closed_loop({k: v.clone() for k, v in net.state_dict().items()})
    lif = closed_loop_lif(ARRIVALS, VALIDATION_SEEDS)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n{len(data)} LIF-Quad decisions ({len(train)} train, {len(held)} held out); load average {load}")
    for c in curve:
        print(f"  after {c['epochs']:2d} epochs: agreement train {c['train']:.3f}, held out {c['held_out']:.3f}")
    print(f"{'workload':16s}{'lif-quad':>10s}{'actor before':>14s}{'fitted':>10s}")
    for key in before:
        print(f"{key:16s}{lif[key]:10.3f}{before[key]:14.3f}{after[key]:10.3f}")
    result = {"decisions": len(data), "curve": curve, "lif_quad": lif, "before": before, "after": after,
              "cpu_s_main": time.process_time() - t0, "load_average": os.getloadavg(), "init": str(args.init)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


def closed_loop_lif(arrivals: tuple[str, ...], seeds: tuple[int, ...]) -> dict[str, float]:
    """LIF-Quad itself on the same workloads."""
    from cohabit.policies import make_policy
    from cohabit.sim.drl_workload import generate
    from cohabit.sim.runner import simulate
    from cohabit.spec.cluster import preset

    out = {}
    for a in arrivals:
        for s in (*seeds, 101):
            jobs = generate(30, arrival=a, seed=s, n_servers=30)
            out[f"{a}-{s}"] = simulate(jobs, preset("drl-30"), make_policy("lif-quad")).metrics.avg_jct / 1200.0
    out["validation_mean"] = float(np.mean([v for k, v in out.items() if not k.endswith("-101")]))
    return out


if __name__ == "__main__":
    main()
