"""Harmony-DRL's training environment and trainer: states as the policy sees them, return
normalisation, the imitation warm start and the convergence criterion (tiny runs)."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.learn.drl_env import Speeds, lif_teacher, normalise_returns, run_episode
from cohabit.sim.drl_workload import INTERVAL_S, generate


# tiny networks: one intra-op thread (two on a loaded 2-core machine cost 10x)
pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _first_interval_jobs(n: int = 3):
    jobs = [j for j in generate(6, arrival="uniform", seed=3) if j.spec.submit_time < INTERVAL_S][:n]
    assert len(jobs) == n
    return jobs


def test_episode_states_hold_every_new_job_of_the_interval():
    """As in the simulator (taskwise.state_from_view), the first inference of an interval already
    sees all of the interval's new jobs (u_n = 1), not only the job being placed."""
    jobs = _first_interval_jobs(3)
    res = run_episode(None, Speeds(None, 6), jobs, 6, 1, np.random.default_rng(0), 0.0, rule="bp", record=True)
    first = res.samples[0]
    assert first.jobs.shape[0] == 3
    assert first.jobs[:, -1].tolist() == [1.0, 1.0, 1.0]  # all three flagged new
    assert first.current == 0
    # once the first job is whole it is no longer new; the next job's first inference shows that
    tasks0 = jobs[0].spec.workers.count + jobs[0].spec.num_ps
    nxt = res.samples[tasks0]
    assert nxt.current == 1 and nxt.jobs[0, -1] == 0.0 and nxt.jobs[1:, -1].tolist() == [1.0, 1.0]


def test_returns_are_normalised_per_episode():
    jobs = generate(3, arrival="uniform", seed=2)
    res = run_episode(None, Speeds(None, 6), jobs, 6, 3, np.random.default_rng(0), 0.0, rule="lb", record=True)
    raw = [s.ret for s in res.samples]
    normalise_returns(res.samples)
    got = np.array([s.ret for s in res.samples])
    assert got.mean() == pytest.approx(0.0, abs=1e-9) and got.std() == pytest.approx(1.0, abs=1e-4)
    assert np.argsort(got).tolist() == np.argsort(raw).tolist()  # an affine map: order kept


def test_teacher_plays_through_the_episode_and_its_actions_are_recorded():
    jobs = generate(3, arrival="uniform", seed=5)
    teacher = lif_teacher("quad")
    res = run_episode(None, Speeds(None, 6), jobs, 6, 3, np.random.default_rng(0), 0.0, rule=teacher, record=True)
    assert res.samples and all(s.mask[s.action] for s in res.samples)


def test_imitation_fits_the_teacher():
    import torch

    from cohabit.learn.drl_rl import _tensors, imitate
    from cohabit.policies.drl.nets import PolicyNet, masked_log_probs

    torch.manual_seed(0)
    data = []
    for seed in (1, 2):
        res = run_episode(None, Speeds(None, 6), generate(4, arrival="uniform", seed=seed), 6, 4,
                          np.random.default_rng(seed), 0.0, rule=lif_teacher("quad"), record=True)
        data += res.samples
    net = PolicyNet(6)

    def nll() -> float:
        jobs, jpad, cur, dec, dpad, mask, act = _tensors(data)
        with torch.no_grad():
            return float(-masked_log_probs(net(jobs, jpad, cur, dec, dpad), mask).gather(1, act.unsqueeze(1)).mean())

    before = nll()
    out = imitate(net, data, epochs=12, seed=0, lr=1e-3, batch=16, log=lambda s: None)
    after = nll()
    assert after < 0.6 * before, (before, after)
    assert out["samples"] == len(data) and 0.0 <= out["heldout_agreement"] <= 1.0


def test_training_stops_converged_when_evaluations_no_longer_improve_and_keeps_the_best():
    from cohabit.learn.drl_rl import train

    # a learning rate of ~0: the greedy policy cannot change, so no evaluation gains 1%
    policy, report = train(iterations=0, online=6, workers=1, episodes=1, updates=1, intervals=2, seed=0,
                           lr=1e-12, eval_every=1, eval_seeds=1, eval_intervals=2, patience=2, log=lambda s: None)
    conv = report["convergence"]
    assert conv["converged"] is True
    assert report["iterations_done"] == 2  # stopped after `patience` stale evaluations, not after 6
    assert [e["iteration"] for e in conv["evaluations"]] == [0, 1, 2]
    assert conv["best_avg_jct"] == pytest.approx(min(e["avg_jct"] for e in conv["evaluations"]))
    assert set(report["eval_reference"]) == {"bp", "lb", "lif-quad"}


def test_online_reward_retraining_lowers_the_error_on_the_observed_jobs():
    """drl:online=true retrains the reward model once per interval from the speeds the running jobs
    report (over their profiled solo speed); after each update its error on them is lower."""
    from cohabit.policies import make_policy
    from cohabit.sim.runner import simulate
    from cohabit.spec.cluster import preset

    jobs = generate(5, arrival="uniform", seed=11)
    pol = make_policy("drl:online=true")
    out = simulate(jobs, preset("drl"), pol)
    assert out.metrics.jobs_finished == len(jobs)
    log = pol.online_reward.log
    assert len(log) >= 3
    assert all(e["jobs"] >= 1 for e in log)
    assert all(e["after"] < e["before"] for e in log), log
    # the observations are the jobs' reported speeds: never above their profiled solo speed here
    labels = np.concatenate([o.label[np.isfinite(o.label)] for o in pol.online_reward.window])
    assert labels.size and (labels > 0).all() and (labels <= 1.0 + 1e-6).all()
