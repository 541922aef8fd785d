"""A PS worker's iteration as Harmony sees it: PULL, COMP, PUSH in the gate, (de)serialisation outside.

Server and worker run in threads of this process (the same code as the task
processes, with socketpair channels), so the worker's gate and its
encode/decode calls can be observed directly.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from cohabit.engine.ledger import Ledger
from cohabit.runtime.channel import Channel
from cohabit.runtime.ps import client as ps_client
from cohabit.runtime.ps.launch import PSLaunch
from cohabit.runtime.ps.task import run_task
from cohabit.runtime.subtask import NullGate, SubtaskKind
from cohabit.runtime.worker import worker_config
from cohabit.runtime.workloads import parse_config
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.job import JobSpec, TaskGroup


class RecordingGate:
    """Records the subtasks in order; ``inside`` is the kind running now (None between subtasks)."""

    def __init__(self) -> None:
        self.order: list[SubtaskKind] = []
        self.inside: SubtaskKind | None = None
        self.closed = False
        self.spent: dict[SubtaskKind, float] = {k: 0.0 for k in SubtaskKind}

    @contextmanager
    def subtask(self, kind: SubtaskKind) -> Any:
        assert self.inside is None, f"{kind} entered inside {self.inside}"
        self.order.append(kind)
        self.inside = kind
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[kind] += time.perf_counter() - t0
            self.inside = None

    def close(self) -> None:
        self.closed = True


def test_ps_worker_runs_pull_comp_push_in_its_gate_and_serialises_outside(tmp_path, monkeypatch) -> None:
    iterations = 6
    gate = RecordingGate()
    coded_inside: list[str] = []
    real_encode, real_decode = ps_client.encode, ps_client.decode

    def encode(*a: Any, **k: Any) -> bytes:
        if gate.inside is not None:
            coded_inside.append(f"encode in {gate.inside}")
        return real_encode(*a, **k)

    def decode(*a: Any, **k: Any) -> Any:
        if gate.inside is not None:
            coded_inside.append(f"decode in {gate.inside}")
        return real_decode(*a, **k)

    monkeypatch.setattr(ps_client, "encode", encode)
    monkeypatch.setattr(ps_client, "decode", decode)
    monkeypatch.setattr(ps_client, "make_gate", lambda cfg, **kw: gate)

    got = _run_pair(tmp_path, iterations)
    msgs = {role: [m["type"] for m in got[role]] for role in got}
    assert msgs["server"] == ["ready", "finished"] and msgs["worker"][0] == "ready"
    assert msgs["worker"][-1] == "finished"
    assert gate.order == [SubtaskKind.PULL, SubtaskKind.COMP, SubtaskKind.PUSH] * iterations
    assert coded_inside == [] and gate.closed


class QueueingGate(NullGate):
    """A NullGate that keeps every subtask waiting ``wait_s`` before admitting it (as Harmony's queues may)."""

    def __init__(self, wait_s: float) -> None:
        super().__init__()
        self.wait_s = wait_s

    @contextmanager
    def subtask(self, kind: SubtaskKind) -> Iterator[None]:
        time.sleep(self.wait_s)  # queueing: not work
        with super().subtask(kind):
            yield


def test_ps_worker_reports_time_inside_subtasks_not_queue_waiting(tmp_path, monkeypatch) -> None:
    wait = 0.04
    monkeypatch.setattr(ps_client, "make_gate", lambda cfg, **kw: QueueingGate(wait))
    got = _run_pair(tmp_path, 12)
    reports = [m for m in got["worker"] if m["type"] == "progress"]
    assert reports
    for r in reports:
        # every iteration waited 3 * wait before its subtasks; none of it is compute or communication
        assert r["iter_time"] >= 3 * wait
        assert r["compute_s"] + r["comm_s"] <= r["iter_time"] - 3 * wait * 0.95, r
        assert r["compute_s"] > 0 and r["comm_s"] > 0


def _run_pair(tmp_path, iterations: int) -> dict[str, list[dict[str, Any]]]:
    """One ps-lasso server and one worker in threads; every message each sent, by role."""
    d = Resources(cpu=0.5, mem_gb=0.1)
    spec = JobSpec(id="g", architecture="ps", workers=TaskGroup(count=1, demand=d), ps=TaskGroup(count=1, demand=d),
                   iterations=iterations, workload={"name": "ps-lasso"})
    plan = _plan(tmp_path, spec)
    ends: list[socket.socket] = []
    threads = []
    for rank in (1, 0):  # the server first
        mine, theirs = socket.socketpair()
        ends.append(mine)
        threads.append(threading.Thread(target=run_task, args=(Channel(theirs), _config(tmp_path, spec, plan, rank, None))))
        threads[-1].start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()
    msgs = {}
    for end, role in zip(ends, ("server", "worker"), strict=True):
        msgs[role] = Channel(end).recv_ready()
        end.close()
    return msgs


def _plan(tmp_path, spec: JobSpec) -> PSLaunch:
    """One worker on node 0, one server on node 1, no bandwidth limit."""
    led = Ledger(ClusterSpec.homogeneous("g", 2, Resources(cpu=1, mem_gb=1)))
    return PSLaunch.plan(spec, led.allocate(spec.id, (0, 1), [led.vector(spec.workers.demand)] * 2),
                         net_dir=tmp_path / "net", rates=[None, None])


def _config(tmp_path, spec: JobSpec, plan: PSLaunch, rank: int, gate: dict | None) -> dict:
    cfg = worker_config(job=spec.id, rank=rank, world_size=1, workload=parse_config(spec.id, spec.workload),
                        iterations=spec.iterations, epochs=None, batch_size=None, threads=1,
                        store_root=str(tmp_path), from_checkpoint=False, report_interval=0.01,
                        checkpoint_interval=0, fsync=False)
    cfg.update(ps=plan.section(rank), subtask_gate=gate)
    return cfg


@pytest.mark.parametrize("bad, fragment", [
    ({"kind": "telepathy"}, "subtask_gate.kind: expected one of"),
    ({"kind": "none", "x": 1}, "kind 'none' takes no options"),
])
def test_ps_worker_with_a_bad_gate_config_fails_fatally(tmp_path, bad, fragment) -> None:
    d = Resources(cpu=0.5, mem_gb=0.1)
    spec = JobSpec(id="g", architecture="ps", workers=TaskGroup(count=1, demand=d), ps=TaskGroup(count=1, demand=d),
                   iterations=3, workload={"name": "ps-lasso"})
    mine, theirs = socket.socketpair()
    assert run_task(Channel(theirs), _config(tmp_path, spec, _plan(tmp_path, spec), 0, bad)) == 3
    (msg,) = Channel(mine).recv_ready()
    mine.close()
    assert msg["type"] == "error" and msg["fatal"] and fragment in msg["reason"]
