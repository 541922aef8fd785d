"""Allocated vs used shares: metrics from ``used`` records, the simulator's ground truth of use,
``truth.used`` in cohabit traces, and that policies never see any of it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cohabit.engine import actions as A
from cohabit.engine.backend import BackendEventKind
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind, Record
from cohabit.policies import make_policy
from cohabit.policies.base import BasePolicy
from cohabit.report.metrics import compute_metrics
from cohabit.report.table import comparison_table
from cohabit.sim.backend import SimBackend
from cohabit.sim.harmony_workload import harmony_cluster, ps_job
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.traces import TraceRowError, load_trace
from cohabit.sim.traces.native import dump
from cohabit.sim.truth import JobTruth, PSTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.cluster import PRESETS
from cohabit.spec.job import JobSpec, TaskGroup


# ----------------------------------------------------------------------------- metrics


def _record() -> Record:
    """Job a holds gpu 2 / cpu 8 on [0, 10]; it uses 1 GPU on [0, 5], 2 on [5, 10], 2 cores throughout."""
    r = Record()
    r.append(0, EventKind.SUBMITTED, "a")
    r.append(0, EventKind.STARTED, "a", alloc={"gpu": 2, "cpu": 8})
    r.append(5, EventKind.USED, "a", used={"gpu": 1.0, "cpu": 2.0}, since=0.0, until=5.0)
    r.append(10, EventKind.USED, "a", used={"gpu": 2.0, "cpu": 2.0}, since=5.0, until=10.0)
    r.append(10, EventKind.FINISHED, "a")
    return r


CAP = {"gpu": 4, "cpu": 16, "mem_gb": 32}


def test_used_share_is_the_time_weighted_use_and_differs_from_allocation() -> None:
    m = compute_metrics(_record(), CAP)
    assert m.allocated == pytest.approx({"gpu": 0.5, "cpu": 0.5, "mem_gb": 0.0})
    assert m.used == pytest.approx({"gpu": (1 * 5 + 2 * 5) / (4 * 10), "cpu": 2 * 10 / (16 * 10)})
    assert "mem_gb" not in m.used  # nothing measured memory: unknown, not zero
    d = m.to_json(series=True)
    assert d["used_share"]["mem_gb"] is None and d["used_share"]["gpu"] == pytest.approx(0.375)
    assert d["allocated_share"]["gpu"] == pytest.approx(0.5)
    s = m.used_series
    area = sum((s.times[i + 1] - s.times[i]) * s.fractions["gpu"][i] for i in range(len(s) - 1)) / 10
    assert area == pytest.approx(m.used["gpu"])
    assert list(s.fractions["gpu"][:2]) == pytest.approx([0.25, 0.5])


def test_used_samples_are_clipped_to_the_horizon() -> None:
    m = compute_metrics(_record(), CAP, horizon=5.0)
    assert m.used["gpu"] == pytest.approx(1 / 4)  # only the [0, 5] sample, at 1 GPU of 4


def test_table_names_allocated_and_used_columns() -> None:
    m = compute_metrics(_record(), CAP)
    headers = [str(c.header).replace("\n", " ") for c in comparison_table({"p": m}).columns]
    assert "alloc gpu" in headers and "used gpu" in headers and "used cpu" in headers


# ----------------------------------------------------------------------------- simulator truth

TRACE = """\
cluster: tiresias
jobs:
  - id: lazy
    workers: {count: 1, demand: {gpu: 1, cpu: 4, mem_gb: 16}}
    truth: {duration: 100, used: {cpu: 0.25, mem_gb: 0.5}}
"""


def test_truth_used_fractions_become_the_used_share(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(TRACE)
    jobs = load_trace(path, "cohabit").jobs
    cluster = PRESETS["tiresias"]()
    out = simulate(jobs, cluster, make_policy("fifo"))
    m = out.metrics
    assert m.used["cpu"] == pytest.approx(0.25 * m.allocated["cpu"], rel=1e-9)
    assert m.used["mem_gb"] == pytest.approx(0.5 * m.allocated["mem_gb"], rel=1e-9)
    assert m.used["gpu"] == pytest.approx(m.allocated["gpu"], rel=1e-9)  # alone, consolidated: always computing
    assert m.allocated["cpu"] > 0


def test_truth_used_names_must_be_demanded_resources(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(TRACE.replace("used: {cpu: 0.25", "used: {cpus: 0.25"))
    with pytest.raises(TraceRowError) as e:
        load_trace(path, "cohabit")
    text = str(e.value)
    assert "t.yaml:5" in text and "jobs[0].truth.used" in text and "'cpus'" in text and "cpu" in text


def test_truth_used_round_trips_through_dump(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(TRACE)
    jobs = load_trace(path, "cohabit").jobs
    again = tmp_path / "again.yaml"
    dump(jobs, again)
    assert load_trace(again, "cohabit").jobs[0].truth.used == {"cpu": 0.25, "mem_gb": 0.5}


class Script(BasePolicy):
    """Starts each job once on a fixed placement."""

    name = "script"

    def __init__(self, placements: dict[str, tuple[int, ...]]) -> None:
        self.placements = placements

    def decide(self, view):  # type: ignore[no-untyped-def, override]
        return [A.Start(j, self.placements[j]) for j in view.pending if j in self.placements]


def _gpu_job(id: str, workers: int, model: str = "vgg16", duration: float = 500.0) -> TraceJob:
    spec = JobSpec(id=id, model=model, architecture="allreduce",
                   workers=TaskGroup(count=workers, demand=Resources(gpu=1, cpu=2)))
    return TraceJob(spec, JobTruth(iterations=1000, duration=duration, ref_workers=workers))


def test_a_spread_job_uses_its_gpus_only_part_of_the_time() -> None:
    """4 workers on 4 nodes instead of one: the GPUs wait for communication for the part of the
    time the measured consolidation factor says; allocation does not change."""
    cluster = ClusterSpec.homogeneous("c", 4, Resources(gpu=4, cpu=16))
    cfg = SimConfig(gpus_per_node=4)
    factor = cfg.spread.speed_factor("vgg16", 4) / cfg.spread.speed_factor("vgg16", 1)
    assert factor < 0.95
    spread = Scheduler(cluster, Script({"j": (0, 1, 2, 3)}), SimBackend([_gpu_job("j", 4)], cfg), strict=True)
    packed = Scheduler(cluster, Script({"j": (0, 0, 0, 0)}), SimBackend([_gpu_job("j", 4)], cfg), strict=True)
    ms = compute_metrics(spread.run([_gpu_job("j", 4).spec]).record, cluster.capacity)
    mp = compute_metrics(packed.run([_gpu_job("j", 4).spec]).record, cluster.capacity)
    assert ms.allocated["gpu"] == pytest.approx(mp.allocated["gpu"]) == pytest.approx(0.25)  # the whole run
    assert mp.used["gpu"] == pytest.approx(0.25)
    assert ms.used["gpu"] == pytest.approx(0.25 * factor, rel=1e-6)
    assert "cpu" not in ms.used  # no ground truth of a GPU job's CPU use


def test_an_isolated_ps_job_uses_cpu_and_link_by_its_subtask_times() -> None:
    """Harmony PS job alone on m machines: COMP takes t_cpu1/m, PULL+PUSH t_net per iteration, so
    the machines' CPU is busy (t_cpu1/m) / (t_cpu1/m + t_net) of the time and the link
    t_net / (t_cpu1/m + t_net); memory: its input and twice its model, spread over m."""
    m, c1, net = 4, 40.0, 5.0
    truth = PSTruth(t_cpu1=c1, t_pull=net / 2, t_push=net / 2, input_gb=8.0, model_gb=1.0)
    tj = ps_job("ps", truth, 50, n_machines=m)
    cluster = harmony_cluster(m)
    sched = Scheduler(cluster, Script({"ps": tuple(range(m)) + (0,)}), SimBackend([tj], SimConfig()), strict=True)
    rec = sched.run([tj.spec]).record
    used = [e for e in rec if e.kind is EventKind.USED]
    assert used, "the simulator reported no use"
    it = c1 / m + net
    busy = used[-1].data["used"]
    assert busy["cpu"] == pytest.approx(m * 8 * (c1 / m) / it, rel=1e-6)
    assert busy["net_gbps"] == pytest.approx(m * 1.1 * net / it, rel=1e-6)
    assert busy["mem_gb"] == pytest.approx(8.0 + 2 * 1.0, rel=1e-6)
    loading = used[0].data["used"]  # before progress starts: input loading holds memory, computes nothing
    assert used[0].data["until"] > used[0].data["since"] and loading["cpu"] == 0.0 and loading["mem_gb"] > 0
    mt = compute_metrics(rec, cluster.capacity)
    assert mt.allocated["cpu"] == mt.allocated["mem_gb"] == mt.allocated["net_gbps"]  # whole machines
    assert mt.used["cpu"] < mt.allocated["cpu"] and mt.used["mem_gb"] < mt.allocated["mem_gb"]
    assert len({round(mt.used[r], 6) for r in ("cpu", "mem_gb", "net_gbps")}) == 3


def test_jobs_time_sharing_a_gpu_use_at_most_the_device() -> None:
    """Gandiva-style sharing: the guest owns no GPU, yet the device's use by both stays <= 1."""
    jobs = [_gpu_job(f"j{i}", 1, model="resnet50", duration=200.0 * (i + 1)) for i in range(2)]
    from cohabit.sim.profiles.colocation import shared_gpu_speed

    assert sum(shared_gpu_speed(["resnet50", "resnet50"])) > 1.0  # together faster than one alone
    cluster = ClusterSpec.homogeneous("c", 1, Resources(gpu=1, cpu=8))

    class Share(BasePolicy):
        name = "share"

        def decide(self, view):  # type: ignore[no-untyped-def, override]
            pend = sorted(view.pending)
            return [A.Colocate((p,), (0,), mode="share") for p in pend]

    sched = Scheduler(cluster, Share(), SimBackend(jobs, SimConfig(gpus_per_node=1)), strict=True)
    rec = sched.run([j.spec for j in jobs]).record
    both = [e for e in rec if e.kind is EventKind.USED and e.data["since"] == 0.0]  # while both run
    level = {e.job: e.data["used"]["gpu"] for e in both}
    assert set(level) == {"j0", "j1"} and sum(level.values()) == pytest.approx(1.0)  # the pair's speeds sum > 1
    alone = [e.data["used"]["gpu"] for e in rec if e.kind is EventKind.USED and e.data["since"] > 0.0]
    assert alone and alone[-1] == pytest.approx(1.0)  # the survivor alone keeps the device busy
    m = compute_metrics(rec, cluster.capacity)
    assert m.used["gpu"] <= 1.0 + 1e-9


# ----------------------------------------------------------------------------- the barrier


class _Blind(SimBackend):
    """SimBackend without its use reports."""

    def advance(self, until: float):  # type: ignore[no-untyped-def]
        t, events = super().advance(until)
        return t, [e for e in events if e.kind is not BackendEventKind.USED]

    def drain_usage(self, now: float):  # type: ignore[no-untyped-def]
        super().drain_usage(now)
        return []


class _Watcher(BasePolicy):
    """FIFO that writes down everything it is shown at every decision."""

    name = "watch"

    def __init__(self) -> None:
        self.inner = make_policy("srtf")
        self.seen: list[tuple] = []

    def decide(self, view):  # type: ignore[no-untyped-def, override]
        for j in view.jobs.values():
            self.seen.append((view.now, j.id, str(j.state), j.iterations_done(view.now), j.iter_time,
                              j.comp_time, j.comm_time, tuple(sorted(j.allocation.items())),
                              tuple(sorted(j.metrics))))
        return self.inner.decide(view)


def test_use_reports_change_nothing_a_policy_sees() -> None:
    """The same run with and without USED events: identical views at identical decisions."""
    jobs = [_gpu_job(f"j{i}", 1 + i % 3, duration=100.0 + 37 * i) for i in range(8)]
    jobs = [TraceJob(j.spec.model_copy(update={"submit_time": 20.0 * i}), j.truth) for i, j in enumerate(jobs)]
    cluster = ClusterSpec.homogeneous("c", 2, Resources(gpu=4, cpu=16))
    runs = []
    for backend_cls in (SimBackend, _Blind):
        w = _Watcher()
        rec = Scheduler(cluster, w, backend_cls(jobs, SimConfig(gpus_per_node=4))).run([j.spec for j in jobs]).record
        runs.append((w.seen, [(e.time, e.kind, e.job) for e in rec if e.kind is not EventKind.USED]))
    assert runs[0][0] and runs[0] == runs[1]
    assert math.isfinite(runs[0][1][-1][0])


def test_pack_members_split_their_one_device() -> None:
    """Liu's Pack: two jobs trained jointly on one GPU use that one GPU between them."""

    class PackThem(BasePolicy):
        name = "pack-them"

        def __init__(self) -> None:
            self.done = False

        def decide(self, view):  # type: ignore[no-untyped-def, override]
            if self.done:
                return []
            self.done = True
            return [A.Pack(("a", "b"), (0, 0))]

    def pjob(id: str, iters: int) -> TraceJob:
        spec = JobSpec(id=id, model="mlp3", batch_size=32, iterations=iters,
                       workers=TaskGroup(count=1, demand=Resources(gpu=1, cpu=2, mem_gb=8, gpu_mem_gb=4)))
        return TraceJob(spec, JobTruth(iterations=iters, duration=float(iters)))

    cluster = ClusterSpec.homogeneous("p", 1, Resources(gpu=2, cpu=16, mem_gb=128, gpu_mem_gb=32))
    out = simulate([pjob("a", 50), pjob("b", 100)], cluster, PackThem(),
                   config=SimConfig(checkpoint_s=0, restore_s=0), strict=True)
    rec = out.result.record
    packed = {e.job: e.data["used"]["gpu"] for e in rec if e.kind is EventKind.USED and e.data["since"] == 0.0}
    assert packed == pytest.approx({"a": 0.5, "b": 0.5})
    assert out.metrics.used["gpu"] == pytest.approx(out.metrics.allocated["gpu"])
