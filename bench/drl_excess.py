"""Where a policy's average JCT goes above the solo bound on Harmony-DRL's workloads (Bao et al.,
ToN'22, §VII), per finished job, in 20-minute intervals (sessions drl18a, drl19a)::

    JCT = solo + wait (held + queued) + run excess (layout + co-location)

* ``solo``: the job's solo run time (``sim.drl_bounds.solo_runtime``: alone, as locally as the
  servers allow; the bound no placement beats).
* ``held``: the part of the wait after the hold rule (``policies/drl/hold.py``) first refused the job
  (its tasks were drawn, spread, and no compact room was free); ``queued``: the rest of the wait.
* ``layout``: how much longer the job would run *alone on the placement it got* than its solo time
  (``sim.drl_physics.speeds`` of that one job on empty servers): spread beyond the least cross-server
  share, or cores over-subscribed by its own tasks.
* ``co-location``: the rest of its run time, i.e. what the other jobs on its servers cost it.

The placements are those of the policy's own ``Start`` actions (what a scheduler observes); the
speeds are the simulator's (this is a diagnosis, not a policy). Split by the job's GPUs and whether
it ran on more servers than it needs (``hold.min_span``). A chooser is a policy name of the registry
with ``@hold=S``, ``@layout=fit`` suffixes as in ``bench/drl_teachers.py``.

    python bench/drl_excess.py --choosers drl,lif-line:order=short@hold=inf --arrival poisson --seeds 94000-94047
    python bench/drl_excess.py --servers 30 --rate-scale matched --seeds 91000-91023

Writes ``bench/results/drl_excess_<size><arrival>_<seeds><tag>.json`` (per chooser: the mean of each part,
per GPU count, and CPU seconds) and prints the table with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from cohabit.engine.actions import Start
from cohabit.sim.drl_bounds import solo_runtime
from cohabit.sim.drl_physics import Placed, speeds, world_for
from cohabit.sim.drl_workload import INTERVAL_S
from cohabit.sim.runner import SimOutcome
from cohabit.sim.truth import TraceJob
from cohabit.spec.cluster import ClusterSpec

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("solo", "held", "queued", "layout", "coloc")


class Recorder:
    """Wraps a task-by-task policy: the time and full placement of every ``Start`` it returns, and
    when the hold rule first refused each job (``taskwise.enforce`` patched for the recorder's life)."""

    def __init__(self, policy) -> None:
        from cohabit.policies.drl import taskwise

        self.policy, self.starts, self.held = policy, {}, {}
        self._mod, self._orig, now = taskwise, taskwise.enforce, [0.0]
        inner = policy.decide

        def decide(view):
            now[0] = view.now
            plan = inner(view)
            for a in plan:
                if isinstance(a, Start):
                    self.starts[a.job] = (view.now, tuple(a.placement))
            return plan

        def enforce(state, entry, choose, rule):
            ok = self._orig(state, entry, choose, rule)
            if not ok:
                self.held.setdefault(entry.key, now[0])
            return ok

        policy.decide = decide
        taskwise.enforce = enforce

    def close(self) -> None:
        self._mod.enforce = self._orig


def placed_of(job: TraceJob, placement: Sequence[int]) -> Placed:
    """The job as the interference model sees it on ``placement`` (workers first)."""
    spec = job.spec
    n_ps = spec.num_ps
    n_w = len(placement) - n_ps
    workers: dict[int, int] = {}
    ps: dict[int, int] = {}
    for i, s in enumerate(placement):
        side = workers if i < n_w else ps
        side[int(s)] = side.get(int(s), 0) + 1
    return Placed(job.truth.app, spec.architecture == "allreduce", workers, ps)


def excess(jobs: Sequence[TraceJob], res: SimOutcome, starts: dict, held: dict,
           cluster: ClusterSpec) -> list[dict[str, float]]:
    """One row per finished job: the parts of the module docstring (intervals) and its GPUs and span."""
    from cohabit.policies.drl.hold import min_span, span
    from cohabit.policies.drl.state import new_entry

    world = world_for(cluster)
    cores = {i: world.cores(i) for i in range(len(cluster.nodes))}
    cap = np.array([[float(n.capacity.get("gpu", 0)), float(n.capacity["cpu"]), float(n.capacity["mem_gb"])]
                    for n in cluster.nodes])
    by_id = {j.spec.id: j for j in jobs}
    jr = res.metrics.jobs
    rows = []
    for i, q, s, e, st in zip(jr.ids, jr.queueing, jr.start, jr.end, jr.states):
        if st != "finished":
            continue
        job = by_id[i]
        spec = job.spec
        solo = solo_runtime(job)
        t_start, placement = starts[i]
        pl = placed_of(job, placement)
        alone = job.truth.iterations / speeds([pl], cores, world)[0]
        held_s = max(0.0, t_start - held[i]) if i in held else 0.0
        held_s = min(held_s, q)
        wd = spec.workers.demand
        pd = spec.ps.demand if spec.ps is not None else wd
        entry = new_entry(i, spec.model, spec.num_ps == 0, len(placement) - spec.num_ps, spec.num_ps,
                          np.array([float(wd.get("gpu", 0)), float(wd.get("cpu", 0)), float(wd.get("mem_gb", 0))]),
                          np.array([float(pd.get("gpu", 0)), float(pd.get("cpu", 0)), float(pd.get("mem_gb", 0))]),
                          len(cluster.nodes), placed=placement, new=False)
        rows.append({"job": i, "gpus": spec.workers.count * float(wd.get("gpu", 0)),
                     "allreduce": spec.num_ps == 0, "spread": span(entry) > min_span(cap, entry),
                     "solo": solo / INTERVAL_S, "held": held_s / INTERVAL_S, "queued": (q - held_s) / INTERVAL_S,
                     "layout": (alone - solo) / INTERVAL_S, "coloc": (e - s - alone) / INTERVAL_S})
    return rows


def summary(rows: Sequence[dict]) -> dict[str, float]:
    """Mean of each part per job, the JCT, and the same by GPUs (``g1_layout`` ...) and spread jobs,
    each group's sum divided by all jobs (so the groups add up to the whole)."""
    n = len(rows)
    out = {p: sum(r[p] for r in rows) / n for p in PARTS}
    out["jct"] = sum(out[p] for p in PARTS)
    for g in (1, 2, 3):
        for p in ("held", "queued", "layout", "coloc"):
            out[f"g{g}_{p}"] = sum(r[p] for r in rows if round(r["gpus"]) == g) / n
    out["spread_jobs"] = sum(r["spread"] for r in rows) / n
    out["spread_run_excess"] = sum(r["layout"] + r["coloc"] for r in rows if r["spread"]) / n
    out["ps_layout"] = sum(r["layout"] for r in rows if not r["allreduce"]) / n
    return out


def one(task: tuple[str, str, int, int, float]) -> tuple[str, int, dict[str, float], float]:
    """(chooser, seed, :func:`summary` of one workload, CPU seconds)."""
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from drl_teachers import apply_rules  # noqa: E402 (a sibling script)

    from cohabit.policies import make_policy
    from cohabit.sim.drl_workload import generate
    from cohabit.sim.runner import simulate
    from cohabit.spec.cluster import preset

    name, arrival, seed, servers, scale = task
    t0 = time.process_time()
    base, *rules = name.split("@")
    rec = Recorder(apply_rules(make_policy(base), rules))
    try:
        jobs = generate(30, arrival=arrival, seed=seed, n_servers=servers, rate_scale=scale)
        cluster = preset("drl" if servers == 6 else f"drl-{servers}")
        res = simulate(jobs, cluster, rec.policy)
        rows = excess(jobs, res, rec.starts, rec.held, cluster)
    finally:
        rec.close()
    got = summary(rows)
    got["avg_jct"] = res.metrics.avg_jct / INTERVAL_S
    return name, seed, got, time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--choosers", default="drl,lif-line:order=short@hold=inf")
    ap.add_argument("--arrival", default="poisson", choices=("uniform", "poisson", "bursty"))
    ap.add_argument("--seeds", default="94000-94047", help="A-B, inclusive")
    ap.add_argument("--servers", type=int, default=6, choices=(6, 30))
    ap.add_argument("--rate-scale", default="1", help="arrival rates times this; 'matched': LOAD_MATCHED_30")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    from cohabit.sim.drl_workload import LOAD_MATCHED_30

    a, b = (int(x) for x in args.seeds.split("-"))
    scale = LOAD_MATCHED_30 if args.rate_scale == "matched" else float(args.rate_scale)
    names = [n for n in args.choosers.split(",") if n]
    tasks = [(n, args.arrival, s, args.servers, scale) for n in names for s in range(a, b + 1)]
    w0 = time.time()
    with ProcessPoolExecutor(args.workers) as ex:
        got = list(ex.map(one, tasks))
    load = os.getloadavg()
    print(f"{args.servers} servers x{scale:.3f}, {args.arrival} {args.seeds}: intervals per job, mean over workloads; "
          f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}; {time.time() - w0:.0f} s wall")
    print("| chooser | JCT | solo | held | queued | layout | co-location | 1 / 2 / 3-GPU run excess | spread jobs "
          "(their run excess) | cpu s |")
    out: dict = {"arrival": args.arrival, "seeds": [a, b], "servers": args.servers, "rate_scale": scale,
                 "load": load, "choosers": {}}
    for n in names:
        mine = [g for c, _, g, _ in got if c == n]
        mean = {k: float(np.mean([m[k] for m in mine])) for k in mine[0]}
        cpu = sum(t for c, _, _, t in got if c == n)
        out["choosers"][n] = {"mean": mean, "cpu_s": cpu,
                              "per_seed_jct": [m["avg_jct"] for m in mine]}
        g = " / ".join(f"{mean[f'g{k}_layout'] + mean[f'g{k}_coloc']:.3f}" for k in (1, 2, 3))
        print(f"| {n} | {mean['avg_jct']:.3f} | {mean['solo']:.3f} | {mean['held']:.3f} | {mean['queued']:.3f} | "
              f"{mean['layout']:.3f} | {mean['coloc']:.3f} | {g} | {mean['spread_jobs']:.2f} "
              f"({mean['spread_run_excess']:.3f}) | {cpu:.0f} |")
    RESULTS.mkdir(exist_ok=True)
    size = "" if args.servers == 6 else f"{args.servers}_"
    path = RESULTS / f"drl_excess_{size}{args.arrival}_{a}-{b}{args.tag}.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
