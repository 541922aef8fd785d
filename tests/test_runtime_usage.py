"""Measured use of real jobs: process CPU time, resident memory (runtime/usage.py, LocalBackend)."""

from __future__ import annotations

import os
import resource
import textwrap
import time

import pytest

from cohabit.engine import actions as A
from cohabit.engine.backend import BackendEventKind
from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.base import BasePolicy
from cohabit.runtime.runner import local_cluster, run_local
from cohabit.runtime.usage import UsageMeter, read_proc
from cohabit.spec import Resources
from cohabit.spec.job import JobSpec, TaskGroup

from runtime_helpers import cluster, job, no_orphans  # noqa: F401


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        x += 1


def test_read_proc_sees_this_process() -> None:
    got = read_proc(os.getpid())
    assert got is not None
    cpu, rss = got
    assert cpu > 0 and 0.001 < rss < 64
    assert read_proc(2**22 + 12345) is None  # no such process


def test_meter_turns_cpu_time_into_cores_over_the_interval() -> None:
    meter = UsageMeter()
    t0 = time.monotonic()
    meter.start("a", [os.getpid()], t0)
    c0 = time.process_time()
    _burn(0.3)
    time.sleep(0.2)
    meter.read("a", os.getpid(), time.monotonic())
    spent = time.process_time() - c0
    now = time.monotonic()
    ev = meter.sample("a", now)
    assert ev is not None and ev.kind is BackendEventKind.USED
    d = ev.data
    assert (d["since"], d["until"]) == (t0, now)
    got = d["used"]["cpu"] * (d["until"] - d["since"])
    assert got == pytest.approx(spent, abs=0.05)  # clock-tick resolution
    assert d["used"]["cpu"] < 1.0  # slept part of the interval
    assert d["used"]["mem_gb"] > 0 and "net_gbps" not in d["used"]
    assert meter.sample("a", now) is None  # nothing new


def test_meter_splits_a_shared_process_and_reports_network() -> None:
    meter = UsageMeter()
    t0 = time.monotonic()
    for j in ("a", "b"):
        meter.start(j, [os.getpid()], t0)
    _burn(0.2)
    now = time.monotonic()
    for j in ("a", "b"):
        meter.read(j, os.getpid(), now)
    meter.net("b", 0, 1e8, now)
    meter.net("b", 1, 5e7, now)
    a, b = meter.sample("a", now), meter.sample("b", now)
    assert a is not None and b is not None
    assert a.data["used"]["cpu"] == pytest.approx(b.data["used"]["cpu"])
    assert a.data["used"]["mem_gb"] == pytest.approx(read_proc(os.getpid())[1] / 2, rel=0.2)  # type: ignore[index]
    assert b.data["used"]["net_gbps"] == pytest.approx(2 * 1.5e8 * 8e-9)  # each byte: two node links


def test_a_shared_process_is_read_once_per_instant(monkeypatch) -> None:
    """Sharers of one process split ONE reading per instant: readings a clock tick apart (the
    process ran between them) would give the sharers different CPU (a CI failure, 0.474 vs 0.499)."""
    import cohabit.runtime.usage as usage
    clock = iter(range(0, 1000, 7))  # every read of /proc sees 7 more CPU seconds
    monkeypatch.setattr(usage, "read_proc", lambda pid: (float(next(clock)), 0.5))
    meter = UsageMeter()
    for j in ("a", "b"):
        meter.start(j, [42], 0.0)
    for j in ("a", "b"):
        meter.read(j, 42, 10.0)
    a, b = meter.sample("a", 10.0), meter.sample("b", 10.0)
    assert a is not None and b is not None
    assert a.data["used"]["cpu"] == b.data["used"]["cpu"] == pytest.approx(7 / 2 / 10)


IDLE = textwrap.dedent("""
    import time

    class Idle:
        def __init__(self, ctx, target):
            self.x = 0.0
        def step(self):
            time.sleep(0.05)
            self.x += 1.0
            return {"loss": 1.0 / self.x}
        def state_dict(self):
            return {"x": self.x}
        def load_state_dict(self, s):
            self.x = s["x"]
""")


def _used_cpu_seconds(record) -> float:  # type: ignore[no-untyped-def]
    return sum(e.data["used"]["cpu"] * (e.data["until"] - e.data["since"])
               for e in record if e.kind is EventKind.USED and "cpu" in e.data["used"])


def test_an_idle_real_job_uses_far_less_cpu_than_it_was_allocated(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "idle.py").write_text(IDLE)
    monkeypatch.syspath_prepend(str(pkg))
    spec = job("idle", {"entry": "idle:Idle", "target": 0.0}, 40)
    out = run_local([spec], cluster(1), make_policy("fifo"), root=tmp_path / "run", report_interval=0.2,
                    prewarm=False)
    m = out.metrics
    assert m.jobs_finished == 1
    assert m.allocated["cpu"] == pytest.approx(1.0, rel=0.05)  # one core held for the whole run
    assert 0 < m.used["cpu"] < 0.5 * m.allocated["cpu"]  # sleeping 50 ms per step
    assert 0 < m.used["mem_gb"] < m.allocated["mem_gb"]  # a python process, not 2 GB
    assert sum(e.kind is EventKind.USED for e in out.result.record) >= 2


def test_measured_cpu_seconds_match_what_the_children_spent(tmp_path) -> None:
    """A busy numpy job: the CPU seconds in its USED records are what its process spent (the
    kernel's count for reaped children), less at most the last moments before it exited."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    spec = job("mlr", {"name": "mlr"}, 3000)
    out = run_local([spec], cluster(1), make_policy("fifo"), root=tmp_path, report_interval=0.2, prewarm=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert out.metrics.jobs_finished == 1 and spent > 0.2
    got = _used_cpu_seconds(out.result.record)
    assert 0.8 * spent <= got <= spent + 0.05


class _Place(BasePolicy):
    """Starts every pending job on one fixed placement."""

    name = "place"

    def __init__(self, placement: tuple[int, ...]) -> None:
        self.placement = placement

    def decide(self, view):  # type: ignore[no-untyped-def, override]
        return [A.Start(j, self.placement) for j in view.pending]


@pytest.mark.parametrize("placement, crosses", [((0, 1, 1), True), ((0, 0, 0), False)])
def test_ps_traffic_counts_as_network_use_only_across_nodes(tmp_path, placement, crosses) -> None:
    """Workers on nodes 0 and 1, the server on 1: worker 0's traffic crosses node links (used
    network > 0, within the nodes' budgets); all on node 0: no link is used."""
    small = Resources(cpu=0.25, mem_gb=0.1)
    spec = JobSpec(id="ps", architecture="ps", workers=TaskGroup(count=2, demand=small),
                   ps=TaskGroup(count=1, demand=small), iterations=200, workload={"name": "ps-mlr"},
                   model="ps-mlr")
    cl = local_cluster(2, cores=2, mem_gb=4, net_gbps=0.2)
    out = run_local([spec], cl, _Place(placement), root=tmp_path, report_interval=0.1, prewarm=False,
                    bandwidth_mbps=200)
    m = out.metrics
    assert m.jobs_finished == 1 and m.allocated["net_gbps"] == 0.0  # the job demands no network
    if crosses:
        assert 0 < m.used["net_gbps"] <= 1.05  # the budget holds each node's link to 200 Mbit/s
    else:
        assert m.used["net_gbps"] == 0.0
    assert 0 < m.used["cpu"] and 0 < m.used["mem_gb"]
