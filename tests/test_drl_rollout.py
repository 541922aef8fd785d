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
