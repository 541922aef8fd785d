"""Pause + resume overhead on RayBackend next to LocalBackend (issue 4, items 3 and 7).

For a numpy job (mlr) and a torch job (torch-mlp), each about
``--seconds`` long, :func:`sim_vs_real.overhead` runs the job alone
uninterrupted and then paused + resumed twice, once per backend (RayBackend
twice: ``ray-cold`` with ``warm_actors=0``, every task a new actor, and
``ray-warm`` with the default pool of one warm actor per Ray node and kind,
which a resume takes); it reports
the wall-time overhead, the direct per-pause cost (checkpoint + stop, then
relaunch to the first progress report) and the work lost. RayBackend starts
its own one-node Ray instance (object store 100 MB, no dashboard).

Ray binds to the machine's external address: run this inside a loopback-only
network namespace::

    ip netns add cb; ip netns exec cb ip link set lo up
    PYTHONPATH=src ip netns exec cb python bench/ray_overhead.py
    ip netns del cb

CPU time: the task processes of LocalBackend are this process's children
and are counted per run (``cpu_s`` columns). Ray's actors are children of its
raylet, which this process starts and reaps only at ``ray.shutdown()``, so for
Ray only the total CPU of the whole Ray part (driver + Ray's processes) is
given. Writes JSON to ``bench/results/ray_overhead.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_vs_real import overhead, sized  # noqa: E402

from cohabit.runtime.local import LocalBackend  # noqa: E402

console = Console(width=140)
JOBS = (("ov-mlr", {"name": "mlr"}, "mlr"), ("ov-torch", {"name": "torch-mlp"}, "torch-mlp"))


def seconds_per_iteration(wl: dict[str, Any], steps: int = 300) -> float:
    """Measured in this process (one torch thread, as a task gets), to size the jobs."""
    import torch

    from cohabit.runtime.workloads import WorkloadContext, build, parse_config

    torch.set_num_threads(1)
    w = build(parse_config("size", wl), WorkloadContext("size", seed=0, iterations=steps + 10))
    w.step()
    t0 = time.perf_counter()
    for _ in range(steps):
        w.step()
    return (time.perf_counter() - t0) / steps


def total_cpu_s() -> float:
    """CPU seconds of this process and all its reaped descendants."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=12.0, help="approximate length of each job alone")
    ap.add_argument("--json", type=Path, default=Path("bench/results/ray_overhead.json"))
    args = ap.parse_args()
    import ray

    from cohabit.runtime.ray_backend import RayBackend, connect

    jobs = [sized(name, wl, model, args.seconds, seconds_per_iteration(wl)) for name, wl, model in JOBS]
    rows: list[dict[str, Any]] = []
    for job in jobs:
        rows.append({"backend": "local", **overhead(job, args.seconds, LocalBackend)})
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    cpu0, t0 = total_cpu_s(), time.perf_counter()
    connect(num_cpus=1)  # one Ray instance for every run (each RayBackend reuses it)
    try:
        for label, warm in (("ray-cold", 0), ("ray-warm", 1)):
            for job in jobs:
                rows.append({"backend": label, "warm_actors": warm,
                             **overhead(job, args.seconds, functools.partial(RayBackend, warm_actors=warm))})
    finally:
        ray.shutdown()
    ray_part = {"wall_s": time.perf_counter() - t0, "cpu_s_driver_and_ray": total_cpu_s() - cpu0}
    table = Table(title="pause + resume overhead (2 pauses per job)", title_justify="left")
    for col in ("backend", "job", "alone (s)", "with 2 pauses (s)", "wall overhead", "per pause (s)",
                "halt (s)", "relaunch->progress (s)", "lost its", "cpu overhead (s)"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["backend"], r["job"], f"{r['uninterrupted_wall_s']:.2f}", f"{r['with_2_pauses_wall_s']:.2f}",
                      f"{r['wall_overhead_s'] / r['uninterrupted_wall_s']:.1%}", f"{r['per_pause_resume_s']:.2f}",
                      " ".join(f"{h:.2f}" for h in r["halt_s"]),
                      " ".join(f"{x:.2f}" for x in r["resume_launch_to_first_progress_s"]),
                      str(r["work_lost_iterations"]),
                      f"{r['cpu_overhead_s']:.2f}" if r["backend"] == "local" else "n/a (see total)")
    console.print(table)
    console.print(f"Ray part: {ray_part['wall_s']:.1f} s wall, {ray_part['cpu_s_driver_and_ray']:.1f} s CPU "
                  f"(driver + Ray's processes, all runs)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"seconds": args.seconds, "runs": rows, "ray_part": ray_part}, indent=2,
                                    default=str))
    console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
