"""The engine's fast paths for the common case (issue 18, session 13): a plain allocation of tasks that all
demand one read-only row of whole GPUs, taken from its placement's signature, and the release of an
allocation whose whole GPUs nobody else holds. Each must leave the ledger exactly as the general path
leaves it: free rows, devices, device holders and counts, allocations, per-node sums, the node log and
version counters, and the same refusals."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.engine.ledger import AllocationError, Ledger
from cohabit.spec.cluster import ClusterSpec, NodeSpec
from cohabit.spec.resources import Resources


def _cluster(n: int, gpus: int) -> ClusterSpec:
    caps = [Resources({"gpu": float(gpus), "cpu": 32.0, "mem_gb": 128.0}) for _ in range(n)]
    return ClusterSpec(name="t", nodes=[NodeSpec(name=f"n{i}", capacity=c) for i, c in enumerate(caps)])


class _General(Ledger):
    """The ledger with its fast paths switched off: every allocation and release takes the general path."""

    def _allocate_plain(self, job, placement, demands):  # type: ignore[no-untyped-def, override]
        return None

    def _release_plain(self, job, alloc):  # type: ignore[no-untyped-def, override]
        return False


def _state(led: Ledger) -> tuple:
    return (led.free.tobytes(), led.device_free.tobytes(), led.dev_jobs.tobytes(),
            {k: dict(v) for k, v in led.dev_shares.items()},
            {j: (a.slots, a.total) for j, a in led.allocations.items()},
            {j: {n: r.tobytes() for n, r in per.items()} for j, per in led._per_node.items()},
            {n: set(v) for n, v in led._node_jobs.items()}, led.version, led.grown, list(led._node_log),
            led._touches)


def _step(led: Ledger, op: str, *args: object, **kw: object) -> object:
    try:
        return ("ok", getattr(led, op)(*args, **kw))
    except AllocationError as exc:
        return ("refused", str(exc))


@pytest.mark.parametrize("seed", range(6))
def test_fast_paths_leave_what_the_general_path_leaves(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cluster = _cluster(6, 4 if seed % 2 else 8)
    fast, slow = Ledger(cluster, max_share=3), _General(cluster, max_share=3)
    demands = [Resources({"gpu": g, "cpu": c, "mem_gb": m})
               for g, c, m in ((1.0, 4.0, 16.0), (2.0, 8.0, 32.0), (0.5, 2.0, 8.0), (0.0, 4.0, 8.0),
                               (1.0, 30.0, 16.0), (3.0, 1.0, 1.0))]
    held: list[str] = []
    seen = {"fast-alloc": 0, "refused": 0, "guests": 0}
    for step in range(700):
        r = rng.random()
        if held and r < 0.4:
            job = held.pop(int(rng.integers(len(held))))
            a, b = _step(fast, "release", job), _step(slow, "release", job)
            seen["guests"] += bool(a[1])
        else:
            job = f"j{step}"
            demand = demands[int(rng.integers(len(demands)))]
            n = int(rng.integers(1, 6))
            placement = tuple(int(x) for x in rng.integers(0, 6, size=n))
            if rng.random() < 0.5:
                placement = tuple(sorted(placement))  # each node's tasks one after the other (the usual case)
            if rng.random() < 0.05:
                placement = placement[:-1] + (6,)  # a node out of range
            rows = [fast.vector(demand)] * n
            rows_slow = [slow.vector(demand)] * n
            share = rng.random() < 0.15  # Colocate: time-sharing guests, whose owners' release is general
            before = fast.version
            a = _step(fast, "allocate", job, placement, rows, share_gpus=share)
            b = _step(slow, "allocate", job, placement, rows_slow, share_gpus=share)
            if a[0] == "ok":
                held.append(job)
                seen["fast-alloc"] += (not share and fast._sigs.get((placement, id(rows[0]))) is not None)
            else:
                seen["refused"] += 1
            assert fast.version == before + 1
        assert a[0] == b[0] and (a[0] == "ok" or a[1] == b[1]), (a, b)
        if a[0] == "ok" and a[1] is not None and not isinstance(a[1], list):
            assert a[1].slots == b[1].slots and a[1].total == b[1].total  # type: ignore[union-attr]
        assert _state(fast) == _state(slow), f"step {step}"
        fast.check()
    assert seen["fast-alloc"] > 50 and seen["refused"] > 20 and seen["guests"] > 0, seen


def test_a_job_whose_gpus_are_time_shared_is_released_by_the_general_path() -> None:
    """The fast release applies only when the job holds its devices alone: a guest on one of them
    inherits it (a ``reallocated`` event), which only the general path does."""
    led = Ledger(_cluster(2, 4))
    row = led.vector(Resources({"gpu": 1.0, "cpu": 1.0, "mem_gb": 1.0}))
    led.allocate("owner", (0, 0, 0, 0), [row] * 4)  # every GPU of node 0: the guest must time-share one
    led.allocate("guest", (0,), [row], share_gpus=True)
    assert led.release("owner") == ["guest"]
    assert led.owned("guest")["gpu"] == 1.0
    led.check()


def test_task_rows_shared_per_shape_keep_each_jobs_parameter_server_count() -> None:
    """The scheduler's task rows are one list per (demand, workers, parameter servers): two jobs with the same
    worker and parameter-server demand but different PS counts get their own rows."""
    from cohabit.engine.loop import Scheduler
    from cohabit.sim.backend import SimBackend
    from cohabit.sim.truth import JobTruth, TraceJob
    from cohabit.spec.job import JobSpec, TaskGroup

    class Idle:
        name = "idle"

        def decide(self, view):  # type: ignore[no-untyped-def]
            return []

    demand = Resources({"cpu": 2.0, "mem_gb": 4.0})
    specs = [JobSpec(id=j, architecture="ps", iterations=10, workers=TaskGroup(count=2, demand=demand),
                     ps=TaskGroup(count=n, demand=demand)) for j, n in (("a", 1), ("b", 2), ("c", 1))]
    jobs = [TraceJob(s, JobTruth(iterations=10, duration=10.0)) for s in specs]
    sched = Scheduler(_cluster(2, 4), Idle(), SimBackend(jobs))
    for s in specs:
        sched._arrive(s)
    rows = {j: sched._task_vectors(j, 2) for j in "abc"}
    assert [len(rows[j]) for j in "abc"] == [3, 4, 3]
    assert rows["a"] is rows["c"]  # (one list per shape)


def test_launch_rates_kept_per_job_equal_the_formulas_on_every_placement() -> None:
    """The simulator keeps a trace job's consolidation factor and solo rate for its last (tasks, nodes spanned):
    a relaunch on another spread, or with another config, gets the formulas' values, not the kept ones."""
    from dataclasses import replace

    from cohabit.sim.backend import SimBackend
    from cohabit.sim.physics import SimConfig, consolidation_factor, solo_rate
    from cohabit.sim.truth import JobTruth, TraceJob
    from cohabit.spec.job import JobSpec, TaskGroup

    spec = JobSpec(id="j", model="resnet50", iterations=1000, architecture="allreduce",
                   workers=TaskGroup(count=4, demand=Resources({"gpu": 1.0, "cpu": 1.0, "mem_gb": 1.0})))
    truth = JobTruth(iterations=1000, duration=1000.0, ref_workers=4)
    cfg = SimConfig(gpus_per_node=4)
    backend = SimBackend([TraceJob(spec, truth)], cfg)
    led = Ledger(_cluster(4, 4))
    row = led.vector(spec.workers.demand)
    seen = set()
    t = 0.0
    for step, placement in enumerate([(0, 0, 0, 0), (0, 0, 1, 1), (0, 1, 2, 3), (2, 2, 2, 2), (1, 1, 3, 3),
                                      (0, 0, 2, 2)]):
        if step == 5:  # (the shape of the launch before, on a replaced config: nothing kept from before)
            backend.cfg = replace(cfg, slowdown=2.0)
        alloc = led.allocate("j", placement, [row] * 4)
        backend.launch(spec, alloc, t, from_checkpoint=step > 0)
        run = backend._runs["j"]
        c = consolidation_factor(spec, truth, alloc, backend.cfg)
        assert (run.consolidation, run.solo) == (c, solo_rate(spec, truth, alloc, backend.cfg, consolidation=c))
        seen.add(run.solo)
        t += 10.0
        backend.halt("j", t, checkpoint=True)
        led.release("j")
    assert len(seen) >= 3  # (the spreads and the config do change the rate)
