"""Helpers for the real-execution tests: tiny job specs and a guard against leftover child processes."""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cohabit.engine.backend import BackendEvent, BackendEventKind
from cohabit.engine.ledger import Ledger
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.job import JobSpec, TaskGroup


def children(pid: int | None = None) -> set[int]:
    """Live (non-zombie) child processes of ``pid`` (default: this process), from /proc."""
    me = os.getpid() if pid is None else pid
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(entry))
    return out


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    """Fail a test that leaves a child process alive; kill such children by pid first."""
    before = children()
    yield
    deadline = time.monotonic() + 5.0
    left = children() - before
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = children() - before
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"child processes survived the test: {sorted(left)}"


def cluster(nodes: int = 2, cpu: float = 1) -> ClusterSpec:
    return ClusterSpec.homogeneous("local", nodes, Resources(cpu=cpu, mem_gb=2))


def job(id: str, workload: dict[str, Any], iterations: int, *, submit: float = 0.0, workers: int = 1,
        model: str | None = None) -> JobSpec:
    return JobSpec(
        id=id, submit_time=submit, architecture="single" if workers == 1 else "allreduce",
        workers=TaskGroup(count=workers, demand=Resources(cpu=1, mem_gb=0.5)), iterations=iterations,
        workload=workload, model=model or str(workload.get("name", "custom")),
    )


def allocate(cl: ClusterSpec, spec: JobSpec, nodes: tuple[int, ...], ledger: Ledger | None = None) -> Any:
    led = ledger or Ledger(cl)
    v = led.vector(spec.workers.demand)
    return led.allocate(spec.id, nodes, [v] * len(nodes))


def wait_for(backend: Any, pred: Any, timeout: float = 60.0) -> list[BackendEvent]:
    """Advance ``backend`` until ``pred(events_so_far)`` is true; returns all events seen."""
    seen: list[BackendEvent] = []
    deadline = time.monotonic() + timeout
    while not pred(seen):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s; events: {[(e.kind, e.job, e.data) for e in seen][-5:]}")
        _, events = backend.advance(backend.now() + 0.5)
        seen += events
    return seen


#: Backend events that end a job's run (not PROGRESS or USED).
ENDS = frozenset({BackendEventKind.FINISHED, BackendEventKind.FAILED, BackendEventKind.EVICTED})


def ended(job_id: str) -> Any:
    def pred(events: list[BackendEvent]) -> bool:
        return any(e.job == job_id and e.kind in ENDS for e in events)

    return pred


def final_event(events: list[BackendEvent], job_id: str) -> BackendEvent:
    return next(e for e in events if e.job == job_id and e.kind in ENDS)


def losses(events: list[BackendEvent], job_id: str) -> list[float]:
    return [e.data["metrics"]["loss"] for e in events
            if e.job == job_id and e.kind is BackendEventKind.PROGRESS and "loss" in e.data.get("metrics", {})]


INF = math.inf


def kill_and_recover(backend: Any, job_id: str, timeout: float = 90.0) -> Any:
    """SIGKILL ``job_id``'s first task once it has a checkpoint; check it restarts from it and finishes.

    Returns the job's final status (``restarts``, ``reason``) for backend-specific checks.
    """
    wait_for(backend, lambda ev: backend.store.latest(job_id) is not None and any(
        e.kind is BackendEventKind.PROGRESS for e in ev), 60.0)
    pid = backend.status[job_id].pids[0]
    assert pid > 0 and pid in backend.pids()
    os.kill(pid, signal.SIGKILL)
    events = wait_for(backend, ended(job_id), timeout)
    assert final_event(events, job_id).kind is BackendEventKind.FINISHED
    restart = next(t for t in backend.timings if t["kind"] == "restart")
    assert restart["checkpoint_iteration"] > 0
    restored = [t["restored_iteration"] for t in backend.timings if t["kind"] == "start"]
    assert restored[-1] == restart["checkpoint_iteration"]
    st = backend.status[job_id]
    assert st.restarts == 1
    return st
