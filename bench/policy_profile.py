"""Where a learning-curve policy's CPU goes on the contended Philly run (issue 18): cProfile around
``simulate`` and, per round, how many jobs its snapshot holds in each state (running, paused, pending).

    python bench/policy_profile.py slaq 10000 [--cluster philly-512] [--top 40] [--no-profile]

Prints the CPU seconds, the snapshots and their rows by job state, the load average, and (unless
``--no-profile``) cProfile's cumulative and internal-time tables. Numbers in docs/speed.md
("Seventh session") came from this script.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("policy")
    ap.add_argument("size", type=int)
    ap.add_argument("--cluster", default="philly-512")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--no-profile", action="store_true", help="count rows only (no cProfile overhead)")
    args = ap.parse_args()

    from cohabit.policies import make_policy
    from cohabit.policies.optimus import JobModels
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    rows: collections.Counter[str] = collections.Counter()
    real = JobModels.snapshot_of

    def counted(self, jobs, now, view, **kw):  # type: ignore[no-untyped-def]
        snap = real(self, jobs, now, view, **kw)
        rows["snapshots"] += 1
        for code, name in ((0, "pending"), (1, "running"), (2, "paused")):
            rows[name] += int((snap.state == code).sum())
        return snap

    JobModels.snapshot_of = counted  # type: ignore[method-assign]
    jobs = load_trace("philly_82k", "philly", limit=args.size).jobs
    cluster = cluster_from_arg(args.cluster)
    prof = None if args.no_profile else cProfile.Profile()
    c0 = time.process_time()
    if prof is not None:
        prof.enable()
    simulate(jobs, cluster, make_policy(args.policy))
    if prof is not None:
        prof.disable()
    cpu = time.process_time() - c0
    print(f"{args.policy} {args.size} jobs on {args.cluster}: {cpu:.2f} CPU s "
          f"({'profiled' if prof else 'not profiled'}), rows {dict(rows)}, load average {os.getloadavg()[0]:.1f}")
    if prof is not None:
        stats = pstats.Stats(prof)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
