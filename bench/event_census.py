"""What a simulation's loop turns are made of: record rows by kind, and the scheduler's turns by what woke them.

For each policy, one in-process run (the same ``simulate`` as ``cohabit simulate``) with the simulator's
``advance`` and the policy's ``decide`` wrapped (counting only: nothing they return is changed). A turn is
classed by what woke the loop: ``backend:<kinds>`` (the simulator reported events: ``progress``, a job's first
measured iteration after each launch or resume, ``finished``, grid ``reports``), ``arrival`` (a submit time, no
backend event), or ``wake/tick`` (the policy's ``next_decision_time`` or ``tick_interval``); and by whether the
policy's plan was empty. Every turn appends one ``decision`` row to the record, and the decision count is part
of a run's pinned fingerprint (``cohabit.report.fingerprint``): a turn that plans nothing is still a result.
It also says which hooks the policy declares (a progress event is delivered to ``on_progress`` only if it has one).

    python bench/event_census.py [--trace bench/reference/inputs/muri_trace1.csv --format muri
        --cluster muri-n8g8] [--policies fifo,srtf,tiresias] [--limit N]
"""

from __future__ import annotations

import argparse
import collections
from typing import Any


def census(trace: str, fmt: str | None, cluster_arg: str, policy_name: str,
           limit: int | None = None) -> dict[str, Any]:
    """Record rows by kind and turns by (what woke the loop, empty plan or not) of one run."""
    from cohabit.policies import make_policy
    from cohabit.sim.backend import SimBackend
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    load = load_trace(trace, fmt, limit=limit)
    arrivals = {j.spec.submit_time for j in load.jobs}
    turns: collections.Counter[tuple[str, str]] = collections.Counter()
    woke = ["start"]
    plain_advance = SimBackend.advance

    def advance(self: SimBackend, until: float) -> tuple[float, list[Any]]:
        reached, events = plain_advance(self, until)
        if events:
            woke[0] = "backend:" + "+".join(sorted({str(e.kind) for e in events}))
        else:
            woke[0] = "arrival" if reached in arrivals else "wake/tick"
        return reached, events

    policy = make_policy(policy_name)
    plain_decide = type(policy).decide

    def decide(self: Any, view: Any) -> Any:
        plan = plain_decide(self, view)
        turns[(woke[0], "actions" if plan else "empty")] += 1
        return plan

    SimBackend.advance = advance  # type: ignore[method-assign]
    type(policy).decide = decide  # type: ignore[method-assign]
    try:
        out = simulate(load.jobs, cluster_from_arg(cluster_arg), policy)
    finally:
        SimBackend.advance = plain_advance  # type: ignore[method-assign]
        type(policy).decide = plain_decide  # type: ignore[method-assign]
    rows = {str(k): n for k, n in sorted(out.result.record.kind_counts().items(), key=lambda kv: str(kv[0]))}
    hooks = [h for h in ("on_arrival", "on_progress", "on_finish", "next_decision_time", "wants_reports")
             if getattr(policy, h, None) is not None]
    return {"policy": policy_name, "jobs": len(load.jobs), "rows": rows, "turns": dict(turns), "hooks": hooks,
            "tick_interval": getattr(policy, "tick_interval", None),
            "report_interval": getattr(policy, "report_interval", None)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default="bench/reference/inputs/muri_trace1.csv")
    ap.add_argument("--format", default="muri")
    ap.add_argument("--cluster", default="muri-n8g8")
    ap.add_argument("--policies", default="fifo,srtf,tiresias")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    for name in args.policies.split(","):
        c = census(args.trace, args.format, args.cluster, name, args.limit)
        total = sum(c["turns"].values())
        empty = sum(n for (_, plan), n in c["turns"].items() if plan == "empty")
        print(f"{name}: {c['jobs']} jobs, {sum(c['rows'].values())} record rows {c['rows']}")
        print(f"  {total} turns, {empty} with an empty plan; hooks {', '.join(c['hooks']) or '-'}; "
              f"tick {c['tick_interval']}, report interval {c['report_interval']}")
        for (woke, plan), n in sorted(c["turns"].items()):
            print(f"    {woke:28} {plan:8} {n:8,}")


if __name__ == "__main__":
    main()
