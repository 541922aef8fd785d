"""Teachers of drl-dagger run as policies (the expert decides every task, ``beta = 1``) on validation
workloads, beside plain policies: does a teacher play better than the actor it would train?

    python bench/drl_teachers.py --choosers rollout,future:4:2400,drl,lif-line --arrival poisson --seeds 900-911

A chooser is ``rollout`` (:class:`cohabit.learn.drl_rollout.DrainRollout`, the actor placing in its
rollouts), ``future:S:H`` (:class:`~cohabit.learn.drl_rollout.FutureRollout`: S futures of H seconds
of arrivals sampled from the history seen), ``lookahead`` (the reward-model lookahead), or any policy
name of the registry (``drl``, ``lif-line``, ...); ``NAME@hold=S`` is that task-by-task policy with the
hold rule of ``drl`` (:mod:`cohabit.policies.drl.hold`, S seconds, ``inf`` unbounded) set on it, for
LIF-Line and LIF-Quad, which take no ``hold`` parameter, and for the teachers (``rollout@hold=inf``) (``@hold=S@starve=K`` adds the rule's
starvation bound: spread after K x the job's estimated solo time; ``@layout=fit``: the layout rule of
:mod:`cohabit.policies.drl.layout`). ``--servers 30 --rate-scale matched``
runs the 30-server rack (``drl-30``) at the load-matched rate (``LOAD_MATCHED_30``; or a number). ``--weights`` names the actor (default: the
shipped ``data/drl/policy.pt``). Prints each chooser's mean avg JCT (intervals) and CPU seconds, the
load average beside, and writes ``bench/results/drl_teachers_<arrival>_<seeds>.json``. Training
seeds (1000 up) are never used here; 900-931 are validation seeds, 300-311 the primary measure's.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def apply_rules(pol, rules: list[str]):
    """``pol`` (a task-by-task policy) with the ``@rule=value`` suffixes of a chooser's name set on it:
    ``hold=S``, ``starve=K``, ``layout=keep|fit`` (module docstring)."""
    for rule in rules:
        key, _, value = rule.partition("=")
        setattr(pol, {"hold": "hold_s", "starve": "starve", "layout": "layout"}[key],
                value if key == "layout" else float(value))
    return pol


def one(task: tuple[str, str, int, str | None, int, float]) -> tuple[str, int, float, float, dict[str, float]]:
    """(chooser, seed, avg JCT in intervals, CPU seconds, tail: p95 JCT and largest wait in intervals)
    of one workload."""
    import torch

    torch.set_num_threads(1)
    name, arrival, seed, weights, servers, rate_scale = task
    from cohabit.learn.drl_dagger import DEFAULT_OUT, episode, reward_for
    from cohabit.policies import make_policy
    from cohabit.sim.drl_workload import generate
    from cohabit.sim.runner import simulate
    from cohabit.spec.cluster import preset

    t0 = time.process_time()
    base, *rules = name.split("@")
    teacher, *rest = base.split(":")
    if teacher in ("rollout", "future", "lookahead"):
        sd = torch.load(weights or DEFAULT_OUT / "policy.pt", map_location="cpu", weights_only=True)
        rsd = torch.load(reward_for(6), map_location="cpu", weights_only=True) if teacher == "lookahead" else None
        cfg = {"m": 6, "teacher": "lookahead" if teacher == "lookahead" else "rollout", "horizon": 3,
               "intervals": 30, "order": "short", "isolate": "never", "arrival": arrival, "seed": seed,
               "beta": 1.0, "record": True, "hold": 0.0}
        for rule in rules:  # the teachers take the hold rule only (rollout@hold=inf)
            key, _, value = rule.partition("=")
            if key != "hold":
                raise SystemExit(f"--choosers {name}: a teacher takes @hold=S only, not @{rule}")
            cfg["hold"] = float(value)
        if teacher == "future":
            cfg["futures"] = int(rest[0]) if rest else 4
            cfg["future_horizon_s"] = float(rest[1]) if len(rest) > 1 else 2400.0
        _, jct = episode((sd, rsd, cfg))
        tail: dict[str, float] = {}
    else:
        pol = apply_rules(make_policy(base if weights is None or teacher != "drl" else f"{base}:weights={weights}"),
                          rules)
        jobs = generate(30, arrival=arrival, seed=seed, n_servers=servers, rate_scale=rate_scale)
        m = simulate(jobs, preset("drl" if servers == 6 else f"drl-{servers}"), pol).metrics
        jct = m.avg_jct / 1200.0
        waits = np.asarray(m.jobs.queueing, dtype=float)
        tail = {"p95_jct": float(m.p95_jct) / 1200.0,
                "max_wait": float(np.nanmax(waits)) / 1200.0 if waits.size else 0.0}
    return name, seed, float(jct), time.process_time() - t0, tail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--choosers", default="rollout,future:4:2400,drl,lif-line")
    ap.add_argument("--arrival", default="poisson", choices=("uniform", "poisson", "bursty"))
    ap.add_argument("--seeds", default="900-911", help="A-B, inclusive")
    ap.add_argument("--weights", default=None, help="actor weights (default: the shipped policy.pt)")
    ap.add_argument("--servers", type=int, default=6, choices=(6, 30))
    ap.add_argument("--rate-scale", default="1", help="arrival rates times this; 'matched': LOAD_MATCHED_30")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tag", default="", help="suffix of the JSON file name")
    args = ap.parse_args()
    a, b = (int(x) for x in args.seeds.split("-"))
    names = [n for n in args.choosers.split(",") if n]
    from cohabit.sim.drl_workload import LOAD_MATCHED_30

    scale = LOAD_MATCHED_30 if args.rate_scale == "matched" else float(args.rate_scale)
    tasks = [(n, args.arrival, s, args.weights, args.servers, scale) for n in names for s in range(a, b + 1)]
    w0 = time.time()
    with ProcessPoolExecutor(args.workers) as ex:
        rows = list(ex.map(one, tasks))
    load = os.getloadavg()
    print(f"{args.servers} servers x{scale:.3f}, {args.arrival} seeds {args.seeds}, mean avg JCT (intervals); load average {load[0]:.1f} / {load[1]:.1f}"
          f" / {load[2]:.1f}; {time.time() - w0:.0f} s wall")
    out = {"arrival": args.arrival, "seeds": [a, b], "weights": args.weights, "servers": args.servers,
           "rate_scale": scale, "load": load, "choosers": {}}
    for n in names:
        mine = [r for r in rows if r[0] == n]
        v = [r[2] for r in mine]
        cpu = sum(r[3] for r in mine)
        tails = {k: [r[4][k] for r in mine] for k in (mine[0][4] if mine else {})}
        out["choosers"][n] = {"per_seed": v, "mean": float(np.mean(v)), "cpu_s": cpu,
                              **{f"{k}_per_seed": t for k, t in tails.items()},
                              **{f"{k}_mean": float(np.mean(t)) for k, t in tails.items()}}
        extra = " ".join(f"{k} {np.mean(t):.2f}" for k, t in tails.items())
        print(f"| {n:24s} | {np.mean(v):.3f} | cpu {cpu:6.1f} s | {extra} | " + " ".join(f"{x:.2f}" for x in v))
    RESULTS.mkdir(exist_ok=True)
    size = "" if args.servers == 6 else f"{args.servers}_"
    path = RESULTS / f"drl_teachers_{size}{args.arrival}_{a}-{b}{args.tag}.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
