"""Where srtf's and tiresias' decisions spend their CPU (issue 18): every ``decide`` timed (``time.process_time``)
and sorted by what kind of round it was, beside the whole simulation's CPU time.

    python bench/las_rounds.py tiresias muri          # the Muri artifact's trace1 on muri-n8g8
    python bench/las_rounds.py tiresias-gittins 10000  # the first 10,000 Philly jobs on philly-512
    [--before SRC]                                      # the same on another checkout's src/, in a child first

Round kinds: ``plan`` (it started, resumed or paused a job), and rounds with an empty plan: tiresias' ``quiet``
(answered from the last round: ``_still_quiet``), ``no-walk`` (ended before its walk: ``_nothing_starts``, if the
code has it), ``walked`` (walked its lists and planned nothing); srtf's ``settled`` (``_settled_now``) and
``full``. Timing every call adds ~1 us to each. Prints one table per run with the load average.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time


def run(policy: str, where: str) -> None:
    from cohabit.policies import make_policy
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    if where == "muri":
        jobs, cluster = load_trace("bench/reference/inputs/muri_trace1.csv", "muri").jobs, cluster_from_arg("muri-n8g8")
    else:
        jobs, cluster = load_trace("philly_82k", "philly", limit=int(where)).jobs, cluster_from_arg("philly-512")
    pol = make_policy(policy)
    cls = type(pol)
    seen: dict[str, bool] = {}

    def flag(name: str) -> None:  # the answer of a round-skipping check, noted for the round's kind
        real = getattr(cls, name, None)
        if real is None:
            return

        def noted(self, *a):  # type: ignore[no-untyped-def]
            got = real(self, *a)
            seen[name] = got
            return got
        setattr(cls, name, noted)

    for name in ("_still_quiet", "_nothing_starts", "_settled_now"):
        flag(name)
    real_decide = cls.decide
    stats: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    clock = time.process_time

    def decide(self, view):  # type: ignore[no-untyped-def]
        seen.clear()
        t = clock()
        plan = real_decide(self, view)
        d = clock() - t
        if plan:
            kind = "plan"
        elif seen.get("_still_quiet"):
            kind = "quiet"
        elif seen.get("_nothing_starts"):
            kind = "no-walk"
        elif seen.get("_settled_now"):
            kind = "settled"
        elif "_still_quiet" in seen:
            kind = "walked"
        else:
            kind = "full" if "_settled_now" in seen or not policy.startswith("tiresias") else "no waiting job"
        s = stats[kind]
        s[0] += 1
        s[1] += d
        return plan

    cls.decide = decide
    c0 = clock()
    out = simulate(jobs, cluster, pol)
    cpu = clock() - c0
    total = sum(s[1] for s in stats.values())
    print(f"{policy} on {where}: {cpu:.2f} CPU s, decide {total:.2f} ({100 * total / cpu:.0f}%), "
          f"{len(out.result.record):,} events; load average {os.getloadavg()[0]:.1f}")
    print(f"  {'round':16} {'rounds':>8} {'CPU s':>7} {'us each':>8}")
    for kind, (n, t) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
        print(f"  {kind:16} {int(n):8,} {t:7.3f} {1e6 * t / max(n, 1):8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("policy")
    ap.add_argument("where", help="'muri' (trace1) or a number of Philly jobs on philly-512")
    ap.add_argument("--before", metavar="SRC", help="also run on the code in SRC (a src/ directory), first")
    args = ap.parse_args()
    if args.before:
        print("before:", flush=True)
        subprocess.run([sys.executable, __file__, args.policy, args.where], check=True,
                       env={**os.environ, "PYTHONPATH": args.before})
        print("after:", flush=True)
    run(args.policy, args.where)


if __name__ == "__main__":
    main()
