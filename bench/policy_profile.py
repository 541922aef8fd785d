"""Where a learning-curve policy's CPU goes on the contended Philly run (issue 18): cProfile around
``simulate`` and, per round, how many jobs its snapshot holds in each state (running, paused, pending).

    python bench/policy_profile.py slaq 10000 [--cluster philly-512] [--top 40] [--no-profile] [--phases]

Prints the CPU seconds, the snapshots and their rows by job state, the load average, and (unless
``--no-profile``) cProfile's cumulative and internal-time tables. ``--phases`` (instead of cProfile):
CPU seconds in each phase of the policy (its decisions, rounds, snapshots and their running and queued
rows, catch-up of followed losses, loss fits, greedy, plans) and of the report path it depends on (the
simulator's take, the engine's fold, freezing finished jobs' histories, the metrics pass), timed with ``process_time`` around each call, per call and
per job. ``--memory`` (instead of cProfile): the memory still held at the end of the run, by the
source file that allocated it (``tracemalloc``), and the policy's per-job tables. Numbers in
docs/speed.md ("Seventh session", "Eighth session") came from this script.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import time
import tracemalloc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("policy")
    ap.add_argument("size", type=int)
    ap.add_argument("--cluster", default="philly-512")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--no-profile", action="store_true", help="count rows only (no cProfile overhead)")
    ap.add_argument("--phases", action="store_true", help="CPU per phase of the policy instead of cProfile")
    ap.add_argument("--memory", action="store_true", help="memory held at the end by allocating file (tracemalloc)")
    args = ap.parse_args()
    phases = _time_phases() if args.phases else None

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

    if not args.phases:  # (the row counts would add their own numpy work to the phases)
        JobModels.snapshot_of = counted  # type: ignore[method-assign]
    jobs = load_trace("philly_82k", "philly", limit=args.size).jobs
    cluster = cluster_from_arg(args.cluster)
    prof = None if args.no_profile or args.phases or args.memory else cProfile.Profile()
    if args.memory:
        tracemalloc.start(1)
        mem0 = tracemalloc.take_snapshot()
    policy = make_policy(args.policy)
    c0 = time.process_time()
    if prof is not None:
        prof.enable()
    out = simulate(jobs, cluster, policy)
    if prof is not None:
        prof.disable()
    cpu = time.process_time() - c0
    print(f"{args.policy} {args.size} jobs on {args.cluster}: {cpu:.2f} CPU s "
          f"({'profiled' if prof else 'not profiled'}), rows {dict(rows)}, load average {os.getloadavg()[0]:.1f}")
    if args.memory:
        mem1 = tracemalloc.take_snapshot()
        now, peak = tracemalloc.get_traced_memory()
        print(f"  traced at the end {now / 1e6:.1f} MB (peak {peak / 1e6:.1f} MB; the record and the jobs still held)")
        for st in mem1.compare_to(mem0, "filename")[:12]:
            print(f"  {st.size_diff / 1e6:8.2f} MB {st.count_diff:9d} blocks  {st.traceback[0].filename}")
        models = getattr(policy, "models", None)
        if models is not None:
            print(f"  per-job table: {models._table.used} slots of {len(models._table.seq)}, loss tracks "
                  f"{len(models.loss.tracks)}, speed models {len(models._speed)}")
    if phases is not None:
        spent, calls = phases
        for k in ("decide", "targets", "snapshot", "running-cols", "queue-rows", "catch-up", "fits", "fit_many", "greedy",
                  "apply_targets", "rho_table", "observe_many", "wants_reports", "take", "fold", "freeze",
                  "metrics"):
            if calls[k]:
                print(f"  {k:14} {spent[k]:7.2f} CPU s {spent[k] / cpu:6.1%}  calls {calls[k]:8d}  "
                      f"{spent[k] / calls[k] * 1e6:8.1f} us/call  {spent[k] / args.size * 1e6:7.1f} us/job")
    if prof is not None:
        stats = pstats.Stats(prof)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)


def _time_phases() -> tuple[collections.Counter[str], collections.Counter[str]]:
    """Wrap the policies' phases with CPU timers (nested phases count in their callers too)."""
    from cohabit.models import loss_fits
    from cohabit.policies import optimus, slaq, themis

    spent: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()

    def wrap(owner: object, name: str, label: str) -> None:
        real = getattr(owner, name)

        def timed(*a, **kw):  # type: ignore[no-untyped-def]
            c = time.process_time()
            try:
                return real(*a, **kw)
            finally:
                spent[label] += time.process_time() - c
                calls[label] += 1

        setattr(owner, name, timed)

    for cls in (optimus.Optimus, slaq.SLAQ, themis.Themis):
        wrap(cls, "decide", "decide")
        wrap(cls, "targets", "targets")
        if hasattr(cls, "_allocate"):
            wrap(cls, "_allocate", "targets")
    for mod in (optimus, slaq, themis):
        wrap(mod, "apply_targets", "apply_targets")
    wrap(optimus.JobModels, "snapshot_of", "snapshot")
    wrap(optimus.JobModels, "observe_many", "observe_many")
    wrap(loss_fits.LossFits, "_catch_up", "catch-up")
    wrap(loss_fits.LossFits, "_fit_due", "fits")
    wrap(loss_fits.LossFits, "fit_many", "fit_many")
    wrap(themis.Themis, "rho_table", "rho_table")
    wrap(optimus.JobModels, "_running_columns", "running-cols")
    wrap(optimus.JobModels, "_queue_rows", "queue-rows")
    for mod in (slaq, themis):
        if hasattr(mod, "greedy_by_value"):
            wrap(mod, "greedy_by_value", "greedy")
    for cls in (optimus.Optimus, slaq.SLAQ, themis.Themis):  # (the engine asks before each decide)
        if "wants_reports" in vars(cls) or any("wants_reports" in vars(b) for b in cls.__mro__[1:]):
            wrap(cls, "wants_reports", "wants_reports")
    # the engine's report path these policies depend on: the simulator's take, the fold into the jobs and
    # the record, the freeze of a finished job's history, and the metrics pass
    from cohabit.engine import loop, series
    from cohabit.sim import backend, runner
    wrap(backend.SimBackend, "take_reports", "take")
    wrap(loop.Scheduler, "_fold_segments", "fold")
    wrap(series.MetricSeries, "freeze", "freeze")
    wrap(runner, "compute_metrics", "metrics")
    return spent, calls


if __name__ == "__main__":
    main()
