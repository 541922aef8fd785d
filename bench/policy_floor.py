"""The engine's floor under a policy's schedule: the run replayed with every decision recorded, the policy computing
nothing (issue 18, nineteenth session).

A fresh subprocess (``PYTHONHASHSEED=0``) simulates the policy once, recording the answer of every call the loop
makes to it that returns something (``decide``, ``wants_reports``, ``wants_turn``, ``next_decision_time``), then
again with a stand-in that has the same settings (``tick_interval``, ``report_interval``, ``decision_period``,
...), no hooks, and returns the recorded answers in order. Where the two runs' fingerprints
(``cohabit.report.fingerprint``) are equal, the second run did the engine's, the simulator's and the record's
work of the first and none of the policy's: its CPU is what a policy that cost nothing would take for this
schedule (every answer is read, none is missing), so ``1 - floor / run`` is the policy's share (its rounds, its hooks and the view's reads they trigger),
measured without a profiler or wrappers on the policy. The recording wrappers cost a little in the first run
(one Python call per answer); ``--plain`` times a third, unwrapped run of the policy too.

    python bench/policy_floor.py optimus 10000 [--cluster philly-512] [--plain]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: what the loop asks a policy and reads the answer of (replayed in order)
ASKED = ("decide", "wants_reports", "wants_turn", "next_decision_time")
#: settings the loop or the runner read from a policy (copied to the stand-in)
SETTINGS = ("name", "tick_interval", "report_interval", "decision_period", "first_round", "idle_decisions",
            "adapts_batch", "uses_oracle")


def _child(policy: str, size: str, cluster: str, plain: bool) -> dict[str, object]:
    from cohabit.policies import make_policy
    from cohabit.report.fingerprint import fingerprint
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    limit = None if size == "all" else int(size)
    spec = cluster_from_arg(cluster)
    out: dict[str, object] = {"policy": policy, "jobs": size, "cluster": cluster}

    def run(pol: object) -> tuple[float, dict[str, object]]:
        jobs = load_trace("philly_82k", "philly", limit=limit).jobs
        t0 = time.process_time()
        res = simulate(jobs, spec, pol)  # type: ignore[arg-type]
        return time.process_time() - t0, fingerprint(res.result.record, res.metrics)

    if plain:
        out["plain_s"] = round(run(make_policy(policy))[0], 3)
    real = make_policy(policy)
    answers: dict[str, list[object]] = {name: [] for name in ASKED}
    for name in ASKED:
        fn = getattr(real, name, None)
        if fn is None:
            continue

        def recorded(*args: object, _fn=fn, _log=answers[name]) -> object:  # type: ignore[no-untyped-def]
            got = _fn(*args)
            _log.append(got)
            return got
        setattr(real, name, recorded)
    out["run_s"], want = run(real)

    class StandIn:
        """The policy's settings and recorded answers, no hooks."""

    stand_in = StandIn()
    for name in SETTINGS:
        if hasattr(real, name):
            setattr(stand_in, name, getattr(real, name))
    left = {name: len(log) for name, log in answers.items()}  # (answers not replayed yet)
    for name in ASKED:
        if hasattr(real, name):
            def replayed(*args: object, _it=iter(answers[name]), _name=name) -> object:  # type: ignore[no-untyped-def]
                left[_name] -= 1
                return next(_it)
            setattr(stand_in, name, replayed)
    out["floor_s"], got = run(stand_in)
    out["same"] = got == want and not any(left.values())  # (the same result, every answer read, none missing)
    out["loadavg_1m"] = round(os.getloadavg()[0], 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("policy")
    ap.add_argument("size", help="jobs of philly_82k ('all': every one)")
    ap.add_argument("--cluster", default="philly-512")
    ap.add_argument("--plain", action="store_true", help="time an unwrapped run of the policy too")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.policy, args.size, args.cluster, args.plain)))
        return
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, str(Path(__file__).resolve()), args.policy, args.size, "--cluster", args.cluster, "--child"]
    row = json.loads(subprocess.run(cmd + (["--plain"] if args.plain else []), env=env, capture_output=True,
                                    text=True, check=True).stdout)
    n = 82247 if args.size == "all" else int(args.size)
    plain = f", unwrapped {row['plain_s']:.2f} CPU s" if "plain_s" in row else ""
    print(f"{args.policy} {args.size} on {args.cluster}: run {row['run_s']:.2f} CPU s ({n / row['run_s']:,.0f} jobs/CPU s)"
          f"{plain}; replayed without the policy {row['floor_s']:.2f} CPU s ({n / row['floor_s']:,.0f} jobs/CPU s); "
          f"policy share {1 - row['floor_s'] / row['run_s']:.0%}; same result: {row['same']}; load {row['loadavg_1m']}")


if __name__ == "__main__":
    main()
