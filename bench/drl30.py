"""Harmony-DRL on the 30-server preset (Bao et al., ToN'22, §VII-C, Fig. 14): how much room
placement has, every policy's average JCT, and the 30-server reward model's prediction error.
Writes ``bench/results/drl30.json`` and prints tables.

    python bench/drl30.py                      # the three seed-101 workloads (bench/drl.py's drl-30 rows)
    python bench/drl30.py --before DIR         # + 'drl-before': DIR/policy-30.pt (+ JSON)
    python bench/drl30.py --seeds 101 102      # more seeds

Per workload (``drl_workload.generate(30, n_servers=30)``, 1-10 workers / PS per job):

* **bounds**: ``solo bound`` (:func:`cohabit.sim.drl_bounds.solo_bound`): every job at its best
  solo speed (alone on an empty cluster, as local as the servers allow) and never queued: no
  policy can go below it. ``no interference``: each policy simulated with the co-location
  coefficients at 0 (:func:`~cohabit.sim.drl_bounds.no_interference_world`; jobs still pay for
  spreading): what its own queueing and spreading cost without interference.
* **JCT**: average JCT (intervals of 20 min) of every policy, with the mean wait (first start -
  submission) and mean run time over the solo bound's run time (slowdown).

``--experts``: the DAgger teachers run as policies (training-time choosers) on the same
workloads: LIF-Quad, the lookahead expert scored by ``reward-30.pt``
(:class:`cohabit.learn.drl_expert.LookaheadExpert`, horizon 3) and the same lookahead scored by
the simulator's own speeds (:class:`ObservedScorer`, a perfect reward model; this bench only).

Reward model (``data/drl/reward-30.pt`` when present): mean relative error and share within
10% on fresh samples of 30-server placements (a seed training never used; the same
random/packed/spread mix as training, ``sim.drl_samples``), beside LIF-Line / LIF-Quad on the
same jobs. CPU seconds by ``time.process_time``; the load average is printed beside every table.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from cohabit.policies import make_policy
from cohabit.sim.drl_bounds import no_interference_world, solo_bound, solo_runtime
from cohabit.sim.drl_workload import ARRIVALS, generate
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.spec.cluster import preset

OUT = Path(__file__).resolve().parent / "results" / "drl30.json"
POLICIES = ("drl", "lb", "tetris", "tiresias", "lif-line", "lif-quad")
DATA = Path(__file__).resolve().parents[1] / "src" / "cohabit" / "data" / "drl"
M = 30


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_one(jobs: list, spec: str, world: object | None = None) -> dict[str, float]:
    """Average JCT, wait and slowdown (run time / solo-bound run time) of one policy, intervals."""
    t = time.process_time()
    cfg = SimConfig(interference=world) if world is not None else None
    res = simulate(jobs, preset("drl-30"), make_policy(spec), config=cfg)
    jr = res.metrics.jobs
    solo = {j.spec.id: solo_runtime(j) for j in jobs}
    run = [(e - s) / solo[i] for i, s, e, st in zip(jr.ids, jr.start, jr.end, jr.states) if st == "finished"]
    return {"avg_jct": res.metrics.avg_jct / 1200.0, "wait": float(np.nanmean(jr.queueing)) / 1200.0,
            "slowdown": float(np.mean(run)), "cpu_s": time.process_time() - t}


def workload_table(workloads: dict[str, list], before: Path | None) -> dict[str, dict]:
    names = (("drl-before",) if before is not None else ()) + POLICIES
    out: dict[str, dict] = {}
    for wname, jobs in workloads.items():
        row: dict = {"jobs": len(jobs), "solo_bound": solo_bound(jobs), "policies": {}, "no_interference": {}}
        for p in names:
            spec = p if p != "drl-before" else f"drl:weights={before / 'policy-30.pt'}"
            row["policies"][p] = run_one(jobs, spec)
            row["no_interference"][p] = run_one(jobs, spec, no_interference_world(M))["avg_jct"]
        best = min(row["policies"][p]["avg_jct"] for p in POLICIES if p != "drl")
        row["best_baseline"] = best
        for p in names:
            row["policies"][p]["vs_best_baseline_pct"] = 100.0 * (best - row["policies"][p]["avg_jct"]) / best
        out[wname] = row
    print(f"\nAverage JCT (intervals of 20 min) on drl-30; {load()}")
    print(f"{'workload':22s}{'solo bound':>11s}" + "".join(f"{p:>12s}" for p in names))
    for wname, row in out.items():
        print(f"{wname:22s}{row['solo_bound']:11.2f}" + "".join(f"{row['policies'][p]['avg_jct']:12.2f}" for p in names))
        print(f"{'  vs best baseline':33s}" + "".join(f"{row['policies'][p]['vs_best_baseline_pct']:+11.1f}%"
                                                    for p in names))
        print(f"{'  no interference':33s}" + "".join(f"{row['no_interference'][p]:12.2f}" for p in names))
        print(f"{'  mean wait':33s}" + "".join(f"{row['policies'][p]['wait']:12.2f}" for p in names))
        print(f"{'  run time / solo bound':33s}" + "".join(f"{row['policies'][p]['slowdown']:12.2f}" for p in names))
    return out


class ObservedScorer:
    """Sum over a candidate's jobs of their normalised speed in the simulator's physics: what a
    perfect reward model would predict (a lookahead scorer for the expert comparison only)."""

    def __init__(self, m: int) -> None:
        from cohabit.sim.drl_physics import InterferenceWorld

        self.cores = {s: 8.0 for s in range(m)}
        self.world = InterferenceWorld(node_cores=(8.0,) * m)

    def __call__(self, cands: list) -> np.ndarray:
        from cohabit.sim.drl_physics import Placed, base_speed, speeds

        out = np.zeros(len(cands))
        for i, c in enumerate(cands):
            placed = [Placed(mo, ar, {s: int(n) for s, n in enumerate(pw) if n},
                             {s: int(n) for s, n in enumerate(pp) if n}) for mo, ar, _, _, pw, pp in c]
            got = speeds(placed, self.cores, self.world)
            out[i] = sum(g / base_speed(mo, ar, w, p) for g, (mo, ar, w, p, _, _) in zip(got, c))
        return out


def expert_table(workloads: dict[str, list]) -> dict[str, dict[str, float]]:
    """Average JCT of each DAgger teacher placing on its own (``RecordingPolicy`` with no actor)."""
    import torch

    from cohabit.learn.drl_dagger import RecordingPolicy
    from cohabit.learn.drl_expert import LookaheadExpert, load_reward

    torch.set_num_threads(1)
    experts = {"lif-quad": lambda: make_policy("lif-quad"),
               "look-observed": lambda: RecordingPolicy(None, LookaheadExpert(ObservedScorer(M), horizon=3), 1.0,
                                                         np.random.default_rng(0))}
    if (DATA / "reward-30.pt").is_file():
        net = load_reward(DATA / "reward-30.pt", M)
        experts["look-reward-30"] = lambda: RecordingPolicy(None, LookaheadExpert(net, horizon=3), 1.0,
                                                            np.random.default_rng(0))
    out: dict[str, dict[str, float]] = {}
    for wname, jobs in workloads.items():
        out[wname] = {}
        for name, make in experts.items():
            t = time.process_time()
            out[wname][name] = simulate(jobs, preset("drl-30"), make()).metrics.avg_jct / 1200.0
            out[wname][f"{name}_cpu_s"] = time.process_time() - t
    names = list(experts)
    print(f"\nTeachers as policies, average JCT (intervals); {load()}")
    print(f"{'workload':22s}" + "".join(f"{n:>16s}" for n in names))
    for wname, row in out.items():
        print(f"{wname:22s}" + "".join(f"{row[n]:16.2f}" for n in names))
    return out


def reward_errors(n: int, seed: int) -> dict | None:
    """The 30-server reward model's error on fresh samples, beside LIF's on the same jobs."""
    path = DATA / "reward-30.pt"
    if not path.is_file():
        print("\nno data/drl/reward-30.pt: reward-model errors skipped")
        return None
    import torch

    from cohabit.learn.drl_reward import errors, lif_rows, predict
    from cohabit.learn.drl_expert import load_reward
    from cohabit.models.interference import LIFModel
    from cohabit.sim.drl_samples import samples

    torch.set_num_threads(1)
    t = time.process_time()
    data = samples(n, seed=seed, m=M, max_tasks=10, mix=True)
    label = np.array([j.speed for s in data for j in s])
    out = {"reward_model": errors(predict(load_reward(path, M), data), label)}
    for kind in ("line", "quad"):
        model = LIFModel.load(kind)
        rows = [r for s in data for r in lif_rows(s, model)]
        pred = np.array([max(0.05, 1.0 - model.slowdown(mo, c, b)) for mo, c, b, _ in rows])
        out[f"lif_{kind}"] = errors(pred, np.array([1.0 - r[3] for r in rows]))
    out["cpu_s"] = time.process_time() - t
    print(f"\nSpeed prediction on {len(label)} jobs of {n} fresh 30-server placements (seed {seed}); {load()}")
    print(f"{'model':14s}{'rel. error':>12s}{'within 10%':>12s}")
    for k, v in out.items():
        if isinstance(v, dict):
            print(f"{k:14s}{100 * v['relative_error']:11.1f}%{100 * v['within_10pct']:11.1f}%")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="folder with earlier policy-30.pt (+ JSON): a 'drl-before' column")
    ap.add_argument("--seeds", type=int, nargs="+", default=[101])
    ap.add_argument("--samples", type=int, default=300, help="fresh placements for the reward-model errors")
    ap.add_argument("--experts", action="store_true", help="also run the DAgger teachers as policies")
    args = ap.parse_args()
    workloads = {f"{a} seed {s}": generate(30, arrival=a, seed=s, n_servers=M) for s in args.seeds for a in ARRIVALS}
    result = {"jct_intervals": workload_table(workloads, args.before),
              "prediction": reward_errors(args.samples, 54321), "load_average": os.getloadavg()}
    if args.experts:
        result["experts"] = expert_table(workloads)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
