"""Harmony-DRL: state and action space, the drl and LIF policies, and the trainers (tiny)."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.engine.actions import Start
from cohabit.models.interference import LIFModel, ModelProfile, fit
from cohabit.policies import make_policy
from cohabit.policies.drl.state import L, PlacementState, decision_dim, heuristic_action, job_dim, new_entry
from cohabit.sim.drl_workload import generate
from cohabit.sim.runner import simulate
from cohabit.spec.cluster import preset

W_DEMAND = np.array([0.5, 0.25, 0.25])
P_DEMAND = np.array([0.0, 0.125, 0.125])


def _state(*jobs):
    return PlacementState(np.ones((6, 3)), list(jobs))


def test_all_reduce_jobs_never_get_parameter_server_actions():
    ar = new_entry("a", "wlm", True, 2, 3, W_DEMAND, P_DEMAND, 6)
    st = _state(ar)
    mask = st.mask(ar)
    assert ar.n_ps == 0 and not mask[1::2].any() and mask[0::2].all()
    ps = new_entry("p", "vgg-16", False, 1, 1, W_DEMAND, P_DEMAND, 6)
    st = _state(ps)
    st.apply(ps, 0)  # its one worker on server 0
    m = st.mask(ps)
    assert not m[0::2].any() and m[1::2].all()  # no worker left: only PS actions


def test_mask_follows_free_room_and_undo_restores_it():
    job = new_entry("j", "resnet-50", False, 3, 1, W_DEMAND, P_DEMAND, 6)
    st = _state(job)
    before = st.free.copy()
    st.apply(job, 0)
    st.apply(job, 0)  # server 0's two GPUs are taken
    assert not st.mask(job)[0] and st.mask(job)[2]
    st.apply(job, 3)  # a PS on server 1
    assert st.placement(job) == (0, 0, 1)
    assert len(st.decisions) == 3 and st.decision_tokens().shape == (3, decision_dim(6))
    st.undo(job)
    assert np.allclose(st.free, before) and st.decisions == [] and job.placed_w.sum() == 0
    tok = st.tokens()
    assert tok.shape == (1, job_dim(6)) and tok[0, :L].sum() == 1.0 and tok[0, -1] == 1.0  # u_n = new


def test_heuristics_pack_or_spread():
    job = new_entry("j", "resnet-50", False, 1, 1, W_DEMAND, P_DEMAND, 6)
    st = _state(job)
    st.free[2] -= 0.2  # server 2 is the fullest
    st.free[4] += 0.0
    mask = st.mask(job)
    assert heuristic_action(st, job, mask, "bp") == 2 * 2
    assert heuristic_action(st, job, mask, "lb") != 2 * 2


def _run(policy: str, n: int = 12):
    jobs = generate(4, arrival="uniform", seed=7)[:n]
    plans = []
    pol = make_policy(policy)
    inner = pol.decide

    def spy(view):
        plan = inner(view)
        plans.append(plan)
        return plan

    pol.decide = spy  # type: ignore[method-assign]
    out = simulate(jobs, preset("drl"), pol)
    return jobs, plans, out, pol


def test_drl_policy_places_new_jobs_one_inference_per_task_and_never_moves_them():
    jobs, plans, out, pol = _run("drl", 3)
    assert out.metrics.jobs_finished == 3
    actions = [a for p in plans for a in p]
    assert all(isinstance(a, Start) for a in actions)  # new jobs only: nothing is moved or paused
    tasks = {j.spec.id: j.spec.workers.count + j.spec.num_ps for j in jobs}
    assert sorted(a.job for a in actions) == sorted(tasks)
    for a in actions:
        assert len(a.placement) == tasks[a.job]
    # three jobs arriving on an empty 6-server cluster all fit at once: exactly one inference per task
    assert pol.inferences == sum(tasks.values())


def test_drl_refuses_a_cluster_of_another_size():
    from cohabit.policies.drl.state import PlacementState as PS

    pol = make_policy("drl")
    with pytest.raises(ValueError, match="trained for 6 or 30 servers"):
        pol.begin(PS(np.ones((12, 3)), []), None)  # type: ignore[arg-type]


def test_lif_fit_recovers_least_squares_coefficients_and_policy_avoids_cpu_pressure():
    rng = np.random.default_rng(0)
    rows = [("a", c, b, 0.1 + 0.5 * c + 0.2 * b) for c, b in rng.uniform(0, 1, (40, 2))]
    theta = fit(rows, "line")["a"]
    assert np.allclose(theta, [0.1, 0.5, 0.2], atol=1e-9)
    quad = fit([("a", c, b, 0.3 * c * c) for c, b in rng.uniform(0, 1, (40, 2))], "quad")["a"]
    assert np.allclose(quad, [0, 0, 0, 0.3, 0, 0], atol=1e-9)
    model = LIFModel({"hot": ModelProfile(6.0, 1.0, 0.1), "x": ModelProfile(1.0, 1.0, 0.1)},
                     {"hot": [0, 0.5, 0.0], "x": [0, 0.5, 0.0]}, "line")
    assert model.predict_speed("x", [(1.0, 0.0)]) == pytest.approx(0.5)
    # the LIF policy puts a new job's task next to the fewest CPU cores in use
    pol = make_policy("lif-line")
    pol.model = model
    pol._cores = {s: 8.0 for s in range(6)}
    hot = new_entry("h", "hot", True, 1, 0, W_DEMAND, P_DEMAND, 6, placed=(0,), new=False)
    cold = new_entry("c", "x", True, 1, 0, W_DEMAND, P_DEMAND, 6, placed=(1,), new=False)
    job = new_entry("n", "x", True, 1, 0, W_DEMAND, P_DEMAND, 6)
    st = PlacementState(np.ones((6, 3)), [hot, cold, job])
    mask = np.zeros(12, dtype=bool)
    mask[[0, 2]] = True  # only servers 0 (CTC-like hot job) and 1 allowed
    assert pol.choose(st, job, mask) == 2


def test_lif_policies_run_on_the_drl_workload():
    for name in ("lif-line", "lif-quad"):
        _, plans, out, _ = _run(name)
        assert out.metrics.jobs_finished == 12
        assert all(isinstance(a, Start) for p in plans for a in p)


def test_reward_training_and_episode_returns_tiny():
    from cohabit.learn.drl_reward import train_reward
    from cohabit.learn.drl_rl import GAMMA, Speeds, run_episode
    from cohabit.policies.drl.nets import PolicyNet

    net, lif, report = train_reward(40, 1, seed=1, log=lambda s: None)
    assert 0 <= report["reward_model"]["within_10pct"] <= 1 and report["reward_model"]["relative_error"] > 0
    assert set(lif) == {"profiles", "line", "quad"}
    jobs = generate(3, arrival="uniform", seed=2)
    res = run_episode(PolicyNet(6), Speeds(net, 6), jobs, 6, 3, np.random.default_rng(0), 0.5)
    assert res.samples and len(res.rewards) == 3
    # discounted returns over inferences: Q_i = r_i + gamma Q_{i+1}, r_i the reward of i's interval
    rets = [s.ret for s in res.samples]
    steps = [rets[i] - GAMMA * rets[i + 1] for i in range(len(rets) - 1)] + [rets[-1]]
    assert all(any(abs(x - r) < 1e-6 for r in res.rewards) for x in steps)
    for s in res.samples:
        assert s.mask[s.action]


def test_shipped_reward_model_predicts_speeds_better_than_lif():
    """The shipped reward network beats both LIF fits on fresh random placements (paper Fig. 13)."""
    import torch

    from cohabit.learn.drl_reward import errors, lif_rows, tokens
    from cohabit.policies.drl.nets import RewardNet
    from cohabit.policies.drl.policy import shipped
    from cohabit.sim.drl_samples import samples

    net = RewardNet(6)
    net.load_state_dict(torch.load(shipped("reward.pt"), map_location="cpu", weights_only=True))
    net.eval()
    data = samples(60, seed=777)
    with torch.no_grad():
        pred = np.concatenate([net(torch.from_numpy(tokens(s)).unsqueeze(0),
                                   torch.zeros(1, len(s), dtype=torch.bool))[0].numpy() for s in data])
    label = np.array([j.speed for s in data for j in s])
    ours = errors(pred, label)["relative_error"]
    for kind in ("line", "quad"):
        model = LIFModel.load(kind)
        rows = [r for s in data for r in lif_rows(s, model)]
        lif = np.array([max(0.05, 1.0 - model.slowdown(m, c, b)) for m, c, b, _ in rows])
        assert ours < errors(lif, label)["relative_error"]
    assert ours < 0.15
