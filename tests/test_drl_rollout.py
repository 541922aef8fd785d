"""The rollout teacher of drl-dagger (learn/drl_rollout.py): a drained fluid simulation of the
cluster scores each candidate action by the sum of the jobs' completion times."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.learn.drl_rollout import DrainRollout, drain
from cohabit.policies.drl.state import PlacementState, new_entry
from cohabit.sim.drl_physics import InterferenceWorld, Placed, speeds
from cohabit.sim.drl_workload import DEMANDS

CAP = np.array([2.0, 8.0, 48.0])


def _job(key, model, allreduce, workers, ps, m, placed=(), new=True):
    wc, wm, pc, pm = DEMANDS[model]
    wd = np.array([1.0, wc + (1 if allreduce else 0), wm]) / CAP
    pd = np.array([0.0, pc, pm]) / CAP
    e = new_entry(key, model, allreduce, workers, ps, wd, pd, m, placed=placed, new=new)
    return e


def _free(m, jobs):
    free = np.ones((m, 3))
    for j in jobs:
        free -= np.outer(j.placed_w, j.worker_demand) + np.outer(j.placed_p, j.ps_demand)
    return free


def _first(state, job, mask):
    return int(np.flatnonzero(mask)[0])


def _speed_alone(e, m):
    p = Placed(e.model, e.allreduce, {0: e.n_workers}, {0: e.n_ps} if e.n_ps else {})
    return speeds([p], {s: 8.0 for s in range(m)}, InterferenceWorld())[0]


def test_drain_runs_the_queue_after_the_running_job_frees_its_gpus():
    # one server, two GPUs: a running 2-worker all-reduce job, another waiting for both GPUs
    run = _job("a", "resnet-50", True, 2, 0, 1, placed=(0, 0), new=False)
    wait = _job("b", "resnet-50", True, 2, 0, 1)
    v = _speed_alone(run, 1)
    st = PlacementState(_free(1, [run]), [run, wait])
    total = drain(st, {"a": 1000 * v, "b": 500 * v}, _first, InterferenceWorld())
    assert total == pytest.approx(1000 + (1000 + 500), rel=1e-6)  # b starts when a ends
    assert st.jobs[1].placed_w.sum() == 0 and st.free[0, 0] == pytest.approx(0.0)  # the caller's state is untouched


def test_drain_counts_interference_between_co_located_jobs():
    run = _job("a", "cnn-text-classification", False, 1, 1, 1, placed=(0, 0), new=False)
    other = _job("b", "resnext-110", False, 1, 1, 1, placed=(0, 0), new=False)
    st = PlacementState(_free(1, [run, other]), [run, other])
    la, lb = 600 * _speed_alone(run, 1), 600 * _speed_alone(other, 1)
    total = drain(st, {"a": la, "b": lb}, _first, InterferenceWorld())
    alone = drain(st, {"a": la, "b": lb}, _first, InterferenceWorld(a_cpu=0, a_bus=0, a_net=0, a_spread=0,
                                                                      node_cores=(1e12,)))
    assert alone == pytest.approx(1200, rel=1e-6) and total > 1.2 * alone


def test_rollout_expert_keeps_a_cpu_sensitive_job_away_from_a_cpu_hungry_one():
    m = 2
    ctc = _job("ctc", "cnn-text-classification", False, 1, 1, m, placed=(0, 0), new=False)
    new = _job("x", "resnext-110", True, 1, 0, m)
    st = PlacementState(_free(m, [ctc]), [ctc, new])
    expert = DrainRollout(placer=_first)
    expert.left = {"ctc": 1e6, "x": 1e6}
    mask = st.mask(new)
    assert mask[0] and mask[2]  # a worker fits on either server
    s = expert.scores(st, new, mask)
    assert np.isneginf(s[~mask]).all() and s[2] > s[0]
    assert expert(st, new, mask) == 2 and not expert.hopeless


def test_rollout_expert_is_hopeless_when_the_job_cannot_be_completed():
    m = 2
    big = _job("x", "resnet-50", True, 3, 0, m)
    st = PlacementState(np.ones((m, 3)), [big])
    st.free[:, 0] = 0.5  # one GPU per server: two for three workers
    expert = DrainRollout(placer=_first)
    mask = st.mask(big)
    a = expert(st, big, mask)
    assert expert.hopeless and mask[a]


def test_recording_policy_gives_the_rollout_teacher_the_work_left():
    """In the simulator the teacher sees each running job's declared work minus its reported
    progress (RecordingPolicy.begin -> DrainRollout.observe) and its labels are recorded."""
    from cohabit.learn.drl_dagger import RecordingPolicy
    from cohabit.sim.drl_workload import generate
    from cohabit.sim.runner import simulate
    from cohabit.spec.cluster import preset

    jobs = generate(3, arrival="uniform", seed=5)
    work = {j.spec.id: float(j.spec.iterations) for j in jobs}
    expert = DrainRollout(placer=_first)
    seen: list[dict[str, float]] = []
    orig = expert.observe

    def observe(view):
        orig(view)
        seen.append(dict(expert.left))

    expert.observe = observe  # type: ignore[method-assign]
    pol = RecordingPolicy(None, expert, beta=1.0, rng=np.random.default_rng(0))
    res = simulate(jobs, preset("drl"), pol)
    assert res.metrics.jobs_finished == len(jobs)
    assert pol.samples and expert.calls > 0
    # some decision saw a running job with less than its declared work left
    assert any(0 < left < work[k] for d in seen for k, left in d.items())
    assert all(left <= work[k] for d in seen for k, left in d.items())


def test_rollout_label_keeps_the_actors_choice_unless_the_gain_passes_the_margin():
    m = 2
    ctc = _job("ctc", "cnn-text-classification", False, 1, 1, m, placed=(0, 0), new=False)
    new = _job("x", "resnext-110", True, 1, 0, m)
    st = PlacementState(_free(m, [ctc]), [ctc, new])
    mask = st.mask(new)
    strict = DrainRollout(placer=_first, margin=0.0)
    strict.left = {"ctc": 1e6, "x": 1e6}
    assert strict(st, new, mask) == 2 and strict.label(0) == 2  # any gain: the best action
    s = strict.last
    gain = (s[2] - s[0]) / abs(s[0])
    lax = DrainRollout(placer=_first, margin=2 * gain)
    lax.left = strict.left
    assert lax(st, new, mask) == 2 and lax.label(0) == 0  # a gain within the margin: the actor's own
    assert lax.label(2) == 2


def test_train_drl_dagger_rollout_needs_init(tmp_path):
    from typer.testing import CliRunner

    from cohabit.cli import app

    r = CliRunner().invoke(app, ["train", "drl-dagger", "--teacher", "rollout", "--out", str(tmp_path / "x.pt")])
    assert r.exit_code != 0 and "--init" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["train", "drl-dagger", "--teacher", "rollout", "--margin", "-1", "--init",
                                 str(tmp_path / "none.pt"), "--out", str(tmp_path / "x.pt")])
    assert r.exit_code != 0 and "--margin" in r.output


def test_drain_admits_a_later_arrival_at_its_time_and_counts_it_from_there():
    # one server, two GPUs: a running 2-worker job; a job arriving after 300 s waits for both GPUs
    run = _job("a", "resnet-50", True, 2, 0, 1, placed=(0, 0), new=False)
    later = _job("b", "resnet-50", True, 2, 0, 1)
    v = _speed_alone(run, 1)
    st = PlacementState(_free(1, [run]), [run])
    total = drain(st, {"a": 1000 * v, "b": 500 * v}, _first, InterferenceWorld(), arrivals=[(300.0, later)])
    assert total == pytest.approx(1000 + (1000 + 500 - 300), rel=1e-6)  # b from its arrival to its end
    # an arrival into an idle cluster starts at its time, not at 0
    idle = drain(PlacementState(np.ones((1, 3)), []), {"b": 500 * v}, _first, InterferenceWorld(),
                 arrivals=[(300.0, later)])
    assert idle == pytest.approx(500, rel=1e-6)
    assert later.placed_w.sum() == 0  # the caller's entries are untouched


class _View:
    """The parts of a cluster view FutureRollout reads."""

    def __init__(self, now, submitted):
        from types import SimpleNamespace

        from cohabit.spec.cluster import preset
        from cohabit.sim.drl_workload import generate

        self.now = now
        jobs = generate(4, arrival="uniform", seed=3)
        self._specs = [j.spec for j in jobs]
        self.jobs = {s.id: SimpleNamespace(spec=s) for s in self._specs[:submitted]}
        self.running, self.pending = {}, {}
        self.cluster = preset("drl")


def test_future_rollout_samples_only_jobs_seen_at_the_rate_seen(monkeypatch):
    from cohabit.learn import drl_rollout
    from cohabit.policies.drl import taskwise

    made = []

    def entry(view, job):
        made.append(job.spec.id)
        return _job(job.spec.id, job.spec.model, job.spec.num_ps == 0, 1, 1, 6)

    monkeypatch.setattr(taskwise, "job_entry", entry)
    view = _View(now=6000.0, submitted=3)
    # a submitted job whose submit time lies after `now` is not yet seen
    late = list(view.jobs.values())[-1]
    monkeypatch.setattr(late, "spec", late.spec.model_copy(update={"submit_time": 7000.0}))
    fut = drl_rollout.FutureRollout(placer=_first, futures=64, horizon_s=1200.0, seed=1)
    fut.observe(view)
    assert set(fut.seen) == set(made) and len(fut.seen) == 2
    assert fut.rate == pytest.approx(2 / 6000.0)
    counts = [len(f) for f in fut.sampled]
    assert np.mean(counts) == pytest.approx(fut.rate * 1200.0, rel=0.35)  # Poisson(0.4) per future
    keys = {e.model for f in fut.sampled for _, e in f}
    assert keys <= {fut.seen[k][0].model for k in fut.seen}
    assert all(0 <= at <= 1200.0 for f in fut.sampled for at, _ in f)
    # the same clock draws the same futures (labels reproducible)
    again = drl_rollout.FutureRollout(placer=_first, futures=64, horizon_s=1200.0, seed=1)
    again.observe(view)
    assert [[(at, e.model) for at, e in f] for f in again.sampled] == [[(at, e.model) for at, e in f] for f in fut.sampled]


def test_future_rollout_keeps_room_for_the_jobs_it_expects():
    """Two servers, one running 1-GPU job on server 0; a new 1-GPU job: the drain teacher isolates it
    on server 1, while with 2-GPU jobs arriving at once it keeps server 1 whole for them."""
    from cohabit.learn.drl_rollout import FutureRollout

    m = 2
    run = _job("r", "resnext-110", True, 1, 0, m, placed=(0,), new=False)
    new = _job("x", "resnext-110", True, 1, 0, m)
    big = _job("big", "resnet-50", True, 2, 0, m)
    st = PlacementState(_free(m, [run]), [run, new])
    mask = st.mask(new)
    assert mask[0] and mask[2]
    left = {"r": 1e5, "x": 1e5}
    plain = DrainRollout(placer=_first)
    plain.left = left
    assert plain(st, new, mask) == 2  # alone on server 1
    fut = FutureRollout(placer=_first, futures=1)
    fut.left = left
    v = _speed_alone(big, m)
    fut.sampled = [[(1.0, replace_key(big, "f0"))]]
    fut.sampled_left = {"f0": 3000 * v}
    assert fut(st, new, mask) == 0  # beside the running job: server 1 stays whole for the 2-GPU job
    fut.sampled = []
    assert fut(st, new, mask) == 2  # no futures sampled: the drain teacher's choice


def replace_key(e, key):
    from dataclasses import replace

    return replace(e, key=key)
