"""Synthetic parameter-server-like jobs in real processes, for testing the Harmony runtime.

Each worker process runs ``iterations`` of PULL (COMM) -> COMP -> PUSH (COMM):
COMP is a fixed amount of CPU work (a pure-Python loop of ``comp_units`` x 10^5
steps, so it slows down when another process shares its core), PULL and PUSH
each send ``comm_bytes / 2`` through the node's link (the node's network budget,
:class:`~.queues.NodeLink`, which the server draws from in chunks). Iterations are BSP, as
in a parameter-server job: a PULL starts with a barrier over the job's workers
(their previous PUSH is on the servers). Logical node ``i`` is pinned to one
core, as in LocalBackend.

Modes: ``pipelined`` (every subtask goes through :class:`~.gate.HarmonyGate`),
``naive`` (no gate: subtasks run as soon as the worker reaches them, links are
drawn with equal priority). :func:`run_jobs` launches a set of jobs, waits for
them and returns what was measured; the clock starts when every worker is up
(a barrier over all of them), so interpreter start-up is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from ..subtask import NullGate, SubtaskKind, make_gate
from .gate import HarmonyGate, LinkClient
from .service import HarmonyService

@dataclass(frozen=True)
class SyntheticJob:
    """``workers`` workers on nodes ``nodes[0..workers-1]``; per iteration ``comp_units`` of CPU work
    and ``comm_bytes`` through the link."""

    id: str
    nodes: tuple[int, ...]
    iterations: int
    comp_units: float
    comm_bytes: int

    def __post_init__(self) -> None:
        if not self.nodes or self.iterations < 1 or self.comp_units < 0 or self.comm_bytes < 0:
            raise ValueError(f"SyntheticJob {self.id!r}: needs nodes, iterations >= 1, comp_units and "
                             f"comm_bytes >= 0, got {self}")


def busy(units: float) -> int:
    """``units`` x 10^5 steps of pure-Python arithmetic (CPU work that cannot be shared away)."""
    x = 0
    for i in range(int(units * 100_000)):
        x += i & 7
    return x


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """One worker: iterations of PULL -> COMP -> PUSH through its gate; returns its timings."""
    gate_cfg = json.loads(args.gate) if args.gate else None
    gate = make_gate(gate_cfg, job=args.job, rank=args.rank, node=args.node)
    link = LinkClient(args.socket, args.node)
    throttle = gate.throttle if isinstance(gate, HarmonyGate) else link.throttle
    iter_times = []
    comp_cpu = 0.0
    link.barrier("__start__", args.start_world, 0)  # every worker of every job is up: the run starts
    t_start = time.monotonic()
    for i in range(args.iterations):
        t0 = time.monotonic()
        with gate.subtask(SubtaskKind.PULL):
            link.barrier(args.job, args.world, i)
            throttle(args.comm_bytes // 2)
        with gate.subtask(SubtaskKind.COMP):
            c0 = time.process_time()
            busy(args.comp_units)
            comp_cpu += time.process_time() - c0
        with gate.subtask(SubtaskKind.PUSH):
            throttle(args.comm_bytes - args.comm_bytes // 2)
        iter_times.append(time.monotonic() - t0)
    spent = gate.spent if isinstance(gate, (HarmonyGate, NullGate)) else {}
    gate.close()
    link.close()
    return {"job": args.job, "rank": args.rank, "node": args.node, "start": t_start, "end": time.monotonic(),
            "iter_s": iter_times, "compute_s": spent.get(SubtaskKind.COMP, 0.0), "comp_cpu_s": comp_cpu,
            "comm_s": spent.get(SubtaskKind.PULL, 0.0) + spent.get(SubtaskKind.PUSH, 0.0)}


def run_jobs(jobs: list[SyntheticJob], mode: str, n_nodes: int, *, link_mbps: float, cores: list[int] | None = None,
             timeout: float = 120.0, hold_s: float = 0.05, nice: int = 0) -> dict[str, Any]:
    """Run ``jobs`` as real processes (all started together) and return per-job finish times, the
    makespan and the node queues' measured busy times (``pipelined`` only: the server measures them).

    ``nice``: scheduling priority of the workers and the server (negative needs privileges; when
    refused, the default is kept and ``reniced`` is False). On a machine shared with other work, a
    node whose queue runs one COMP at a time gets one CFS share against the outside processes while
    naively co-located jobs get one share each; a higher priority for both modes alike stands in for
    the dedicated machines of the paper."""
    if mode not in ("pipelined", "naive"):
        raise ValueError(f"mode must be 'pipelined' or 'naive', got {mode!r}")
    avail = sorted(cores if cores is not None else os.sched_getaffinity(0))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs: list[subprocess.Popen[bytes]] = []
    reniced = nice == 0
    with HarmonyService(n_nodes, link_mbps=link_mbps, hold_s=hold_s, env=env) as svc:
        try:
            t0 = time.monotonic()
            for job in jobs:
                for rank, node in enumerate(job.nodes):
                    gate = json.dumps(svc.gate_config(len(job.nodes), 0)) if mode == "pipelined" else ""
                    cmd = [sys.executable, "-m", "cohabit.runtime.harmony.synthetic", "--job", job.id,
                           "--rank", str(rank), "--node", str(node), "--iterations", str(job.iterations),
                           "--comp-units", repr(job.comp_units), "--comm-bytes", str(job.comm_bytes),
                           "--world", str(len(job.nodes)), "--start-world", str(sum(len(j.nodes) for j in jobs)),
                           "--socket", svc.socket, "--gate", gate]
                    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
                    os.sched_setaffinity(p.pid, {avail[node % len(avail)]})
                    reniced = _renice(p.pid, nice) and _renice(svc.pid, nice)
                    procs.append(p)
            outs = []
            for p in procs:
                out, _ = p.communicate(timeout=max(1.0, timeout - (time.monotonic() - t0)))
                if p.returncode != 0:
                    raise RuntimeError(f"synthetic worker {p.args} exited {p.returncode}")
                outs.append(json.loads(out))
            stats = svc.stats()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    start = min(o["start"] for o in outs)
    finish = {j.id: max(o["end"] for o in outs if o["job"] == j.id) - start for j in jobs}
    return {"mode": mode, "finish_s": finish, "makespan_s": max(finish.values()), "workers": outs, "nodes": stats,
            "loadavg": os.getloadavg()[0], "reniced": reniced}


def _renice(pid: int, nice: int) -> bool:
    if nice == 0:
        return True
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
        return True
    except OSError:
        return False


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="one synthetic PS-like worker (see module docstring)")
    for name, typ in (("--job", str), ("--rank", int), ("--node", int), ("--world", int), ("--start-world", int),
                      ("--iterations", int),
                      ("--comp-units", float), ("--comm-bytes", int), ("--socket", str), ("--gate", str)):
        ap.add_argument(name, type=typ, required=name != "--gate", default="")
    print(json.dumps(worker(ap.parse_args(argv))), flush=True)


if __name__ == "__main__":
    main()
