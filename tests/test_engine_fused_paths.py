"""The engine's per-action shortcuts against its general path, on random workloads (issue 18, speed14a).

* The raw use-sample channel (``SimBackend.open_usage_channel`` / ``take_used``, ``Record.append_used_rows``): a
  backend whose ``advance`` is overridden keeps the ``USED`` event path; both must give the same record, row
  for row (the samples first after each advance, at its time).
* A plain run's usage level kept per its inputs (``SimBackend._plain_level``): only for a run alone on its
  devices; a backend that never takes it (``_alone`` always False) must give the same record. A run launched
  alone on its devices skips ``_reschedule`` (``SimBackend.launch_shortcut``): the same record again. A time-shared
  run's level kept per its inputs and device cap (``SimBackend.kept_shared_levels``, naive's co-locations) and its
  speed factor kept per model mix (``SimBackend._share_factor``): the same.
* The handlers' state checks and the record's row appenders (``append_progress``, ``append_alloc``,
  ``append_paused``, ``append_decision``, ``append_submitted``) run in both; a refused action must be refused with the same message.
"""

from __future__ import annotations

import random

import pytest

from cohabit.engine import actions as A
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind, Record
from cohabit.policies import make_policy
from cohabit.policies.base import BasePolicy
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import shared_speed
from cohabit.sim.runner import config_for
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.job import JobSpec, TaskGroup


class _General(SimBackend):
    """The simulator on its general paths: use samples as ``USED`` events (``advance`` overridden), every
    usage level made by ``_levels`` step by step (no run counts as alone), every launch through ``_reschedule``,
    every time-shared speed from ``shared_speed`` (no kept factor per model mix)."""

    launch_shortcut = False
    kept_shared_levels = False

    def advance(self, until: float):  # type: ignore[no-untyped-def]
        return super().advance(until)

    def _alone(self, r):  # type: ignore[no-untyped-def]
        return False

    def _share_factor(self, run, others):  # type: ignore[no-untyped-def]
        return shared_speed(run.spec, [self._runs[o].spec for o in sorted(others)], run.alloc.nodes, self.cfg)


def _jobs(seed: int, n: int = 40) -> list[TraceJob]:
    rng = random.Random(seed)
    out = []
    t = 0.0
    for i in range(n):
        workers = rng.choice((1, 1, 1, 2, 2, 4, 8))
        gpu = rng.choice((1.0, 1.0, 1.0, 0.5)) if workers == 1 else 1.0
        spec = JobSpec(id=f"j{i:03d}", model=rng.choice(("vgg16", "resnet18", "bert")), architecture="allreduce",
                       submit_time=t, workers=TaskGroup(count=workers, demand=Resources(gpu=gpu, cpu=2, mem_gb=8)))
        used = rng.choice((None, {"cpu": 0.5}, {"cpu": 0.25, "mem_gb": 0.75}))
        truth = JobTruth(iterations=rng.randint(200, 3000), duration=rng.uniform(50.0, 2000.0),
                         ref_workers=workers, used=used)
        out.append(TraceJob(spec, truth))
        t += rng.expovariate(1 / 40.0)
    return out


def _rows(rec: Record) -> list[tuple]:
    """Every row but a decision's wall-clock milliseconds."""
    return [(e.time, e.kind, e.job, {} if e.kind is EventKind.DECISION else e.data) for e in rec]


def _run(backend_cls: type[SimBackend], jobs: list[TraceJob], policy: str) -> tuple[Scheduler, list[tuple]]:
    cluster = ClusterSpec.homogeneous("c", 2, Resources(gpu=4, cpu=32, mem_gb=128))
    backend = backend_cls(jobs, config_for(cluster))
    sched = Scheduler(cluster, make_policy(policy), backend)
    sched.run([j.spec for j in jobs])
    return sched, _rows(sched.record)


@pytest.mark.parametrize("policy", ["tiresias", "gandiva", "srtf", "naive"])
@pytest.mark.parametrize("seed", [1, 2])
def test_shortcuts_give_the_general_paths_record(policy: str, seed: int) -> None:
    jobs = _jobs(seed)
    fast, rows = _run(SimBackend, jobs, policy)
    general, want = _run(_General, jobs, policy)
    assert fast._take_used is not None and general._take_used is None  # (each side took its own path)
    kinds = {r[1] for r in want}
    assert EventKind.USED in kinds and EventKind.PROGRESS in kinds
    if policy not in ("srtf", "naive"):
        assert EventKind.PAUSED in kinds or EventKind.RESUMED in kinds or policy == "gandiva"
    if policy == "naive":  # (time-shared GPUs: the kept levels of shared runs, _kept_level, are taken)
        assert any(r[3].get("colocated_with") for r in want if r[1] is EventKind.STARTED)
    assert len(rows) == len(want)
    for i, (got, exp) in enumerate(zip(rows, want)):
        assert got == exp, f"row {i}: {got} != {exp}"
        assert [type(v) for v in got[3].values()] == [type(v) for v in exp[3].values()]


def test_time_shared_devices_take_the_general_level() -> None:
    """Two jobs time-sharing a device: neither is alone, so each level is capped over both (the shortcut for a
    run alone would leave each at its full busy share)."""
    jobs = [TraceJob(JobSpec(id=j, model="vgg16", architecture="allreduce",
                             workers=TaskGroup(count=1, demand=Resources(gpu=1, cpu=2))),
                     JobTruth(iterations=1000, duration=400.0, ref_workers=1)) for j in ("a", "b")]

    class Share(BasePolicy):
        name = "share"

        def decide(self, view):  # type: ignore[no-untyped-def, override]
            if "a" in view.pending:
                return [A.Start("a", (0,))]
            if "b" in view.pending:
                return [A.Colocate(("b", "a"), (0,))]
            return []

    cluster = ClusterSpec.homogeneous("c", 1, Resources(gpu=1, cpu=8))
    recs = []
    for cls in (SimBackend, _General):
        sched = Scheduler(cluster, Share(), cls(jobs, config_for(cluster)), strict=True)
        sched.run([j.spec for j in jobs])
        recs.append(_rows(sched.record))
    assert recs[0] == recs[1]
    shared = [r[3]["used"]["gpu"] for r in recs[0] if r[1] is EventKind.USED and r[3]["used"].get("gpu")]
    assert shared and min(shared) < 1.0 - 1e-9  # (the device was shared: some sample shows less than all of it)


def test_a_run_rescheduled_alone_on_a_shared_device_gets_the_capped_level() -> None:
    """A speed change of one job (a goodput epoch, the machine's load) while another time-shares its device:
    the one-job reschedule must not take the level of a run alone."""
    from cohabit.engine.ledger import Ledger

    jobs = [TraceJob(JobSpec(id=j, model="vgg16", architecture="allreduce",
                             workers=TaskGroup(count=1, demand=Resources(gpu=1, cpu=2))),
                     JobTruth(iterations=1000, duration=400.0, ref_workers=1)) for j in ("a", "b")]
    cluster = ClusterSpec.homogeneous("c", 1, Resources(gpu=1, cpu=8))
    levels = []
    for cls in (SimBackend, _General):
        ledger = Ledger(cluster)
        row = ledger.vector(jobs[0].spec.workers.demand)
        backend = cls(jobs, config_for(cluster))
        backend.launch(jobs[0].spec, ledger.allocate("a", (0,), [row]), 0.0, from_checkpoint=False)
        backend.launch(jobs[1].spec, ledger.allocate("b", (0,), [row], share_gpus=True), 10.0, from_checkpoint=False)
        backend._reschedule({"a"}, 50.0)
        levels.append(dict(backend._runs["a"].level))
    assert levels[0] == levels[1]
    assert levels[0]["gpu"] < 1.0 - 1e-9  # (capped: the device is shared)


def test_refused_actions_keep_their_messages() -> None:
    """Start of a running job, Resume of a pending one, Pause of a paused one, an unknown job, a wrong size."""
    jobs = _jobs(3, n=3)

    class Wrong(BasePolicy):
        name = "wrong"

        def __init__(self) -> None:
            self.turn = 0

        def decide(self, view):  # type: ignore[no-untyped-def, override]
            self.turn += 1
            if self.turn == 1:
                return [A.Start("j000", (0,) * jobs[0].spec.workers.count), A.Resume("j001", (0,)),
                        A.Pause("nobody"), A.Start("j002", (0,) * (jobs[2].spec.workers.count + 1))]
            if self.turn == 2:
                return [A.Start("j000", (0,)), A.Pause("j000"), A.Pause("j000")]
            return []

    reasons = []
    for cls in (SimBackend, _General):
        sched = Scheduler(ClusterSpec.homogeneous("c", 2, Resources(gpu=8, cpu=64, mem_gb=256)), Wrong(),
                          cls(jobs, config_for(ClusterSpec.homogeneous("c", 2, Resources(gpu=8, cpu=64)))))
        sched.run([j.spec for j in jobs[:1]] + [j.spec.model_copy(update={"submit_time": 0.0}) for j in jobs[1:]])
        reasons.append([e.data["reason"] for e in sched.record if e.kind is EventKind.ACTION_REJECTED])
    assert reasons[0] == reasons[1]
    text = " | ".join(reasons[0])
    assert "is running, needs to be pending" in text and "is pending, needs to be paused" in text
    assert "unknown job 'nobody'" in text and "is paused, needs to be running" in text
    assert "placement gives" in text


@pytest.mark.parametrize("seed", [5, 6])
def test_row_appenders_store_what_append_stores(seed: int) -> None:
    """``append_progress``, ``append_alloc``, ``append_paused``, ``append_decision``, ``append_submitted``,
    ``append_used_rows`` (one call for several samples) against ``append`` with the same keywords: the same events, values and value types."""
    rng = random.Random(seed)
    fast, slow = Record(), Record()
    levels = [{"gpu": 1.0, "cpu": 2.0}, {"gpu": 0.5}, {"mem_gb": 8.0, "gpu": 0.0}]
    allocs = [{"gpu": 1.0, "cpu": 2.0}, {"gpu": 8.0, "cpu": 16.0}]
    t = 0.0
    for _ in range(600):
        t += rng.choice((0.0, 0.0, 1.5))
        job = f"j{rng.randrange(5)}"
        op = rng.randrange(7)
        if op == 0:
            it, itt = rng.uniform(0, 1e4), rng.choice((0.25, 1.0 / 3.0))
            if rng.random() < 0.1:
                it = int(it)  # (not a float: the generic row)
            fast.append_progress(t, job, it, itt)
            slow.append(t, EventKind.PROGRESS, job, iterations=it, iter_time=itt)
        elif op == 1:
            kind = rng.choice((EventKind.STARTED, EventKind.RESUMED))
            alloc, nodes = rng.choice(allocs), [rng.randrange(4) for _ in range(rng.randint(1, 3))]
            fast.append_alloc(t, kind, job, alloc, nodes)
            slow.append(t, kind, job, alloc=alloc, nodes=nodes)
        elif op == 2:
            fast.append_paused(t, job, "preempted")
            slow.append(t, EventKind.PAUSED, job, reason="preempted")
        elif op == 5:
            tenant = rng.choice(("default", "a", 7))  # (7: not a string)
            weight = rng.choice((1.0, 2.5, 1))  # (1: not a float)
            deadline = rng.choice((None, t + 100.0, int(t) + 100, [t]))  # (a list: shared by content)
            demand = rng.choice(allocs + [dict(allocs[0])])  # (a copy: shared by content, not by identity)
            fast.append_submitted(t, job, tenant, weight, deadline, demand)
            slow.append(t, EventKind.SUBMITTED, job, tenant=tenant, weight=weight, deadline=deadline, demand=demand)
        elif op == 3:
            ms = rng.random()
            fast.append_decision(t, ms)
            slow.append(t, EventKind.DECISION, None, ms=ms)
        else:
            rows = []
            for _ in range(rng.randint(0, 4)):
                since = rng.uniform(0, t) if t else 0.0
                until = t if rng.random() < 0.9 else int(t)  # (an int: the generic row)
                rows.append((t, f"j{rng.randrange(5)}", rng.choice(levels), since, until))
            fast.append_used_rows(t, rows, kept=rng.random() < 0.5)
            for _, j, used, since, until in rows:
                slow.append(t, EventKind.USED, j, used=dict(used), since=since, until=until)
    assert len(fast) == len(slow) and fast.kind_counts() == slow.kind_counts()
    for a, b in zip(fast, slow):
        assert (a.time, a.kind, a.job, a.data) == (b.time, b.kind, b.job, b.data)
        assert list(a.data) == list(b.data) and [type(v) for v in a.data.values()] == [type(v) for v in b.data.values()]
    assert fast.columns(EventKind.SUBMITTED)[1] == slow.columns(EventKind.SUBMITTED)[1]
    demands = fast.columns(EventKind.SUBMITTED)[1][3]
    assert len({id(d) for d in demands}) == len({id(d) for d in slow.columns(EventKind.SUBMITTED)[1][3]})
    with pytest.raises(ValueError, match="time-ordered: submitted"):
        fast.append_submitted(t - 1.0, "j0", "a", 1.0, None, allocs[0])
    with pytest.raises(ValueError, match="time-ordered: progress"):
        fast.append_progress(t - 1.0, "j0", 1.0, 1.0)
    with pytest.raises(ValueError, match="time-ordered: used"):
        fast.append_used_rows(t - 1.0, [(t, "j0", levels[0], 0.0, 1.0)])


def test_device_caps_equal_device_factor_over_each_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """``SimBackend._device_cap`` sums the two shares of a device shared by two jobs inline, in its own order, once per
    other job: at every call of naive co-location runs (up to 2 and 3 jobs a GPU) it must equal the smallest
    ``usage.device_factor`` of the shares on each of the run's devices, in the device's set order."""
    from cohabit.sim.usage import device_factor

    calls = []
    capped = []
    original = SimBackend._device_cap

    def checked(self, r):  # type: ignore[no-untyped-def]
        got = original(self, r)
        want = min(device_factor([self._runs[j].unit * self._runs[j].busy for j in self._device_jobs[d]])
                   for d in r.devices)
        assert got == want
        calls.append(got)
        if got < 1.0:
            capped.append(got)
        return got

    monkeypatch.setattr(SimBackend, "_device_cap", checked)
    for seed in (1, 2, 3):
        _run(SimBackend, _jobs(seed, 60), "naive")
        _run(SimBackend, _jobs(seed, 60), "naive:max_jobs_per_gpu=3")
    assert len(calls) > 50 and capped  # (devices whose jobs together would use more than all of it)
