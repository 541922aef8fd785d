"""Harmony-DRL's 30-server variant: the reward model's samples and command (``--servers 30``),
the LIF expert's equally good actions and the imitation loss over them (tiny runs)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cohabit.policies.drl.state import PlacementState, new_entry
from cohabit.sim.drl_samples import _pick, samples

pytestmark = pytest.mark.usefixtures("torch_one_thread")

W = np.array([0.5, 0.25, 0.25])
P = np.array([0.0, 0.125, 0.125])


def test_placement_rules_of_the_mixed_samples():
    """pack: the job's own server first, ties to the least room; isolate: the job's own server
    first, ties to the most room; spread: the most room."""
    free = np.array([[1.0, 1.0, 1.0], [0.5, 0.5, 0.5], [0.2, 0.2, 0.2], [0.9, 0.9, 0.9]])
    room = np.array([0, 1, 2, 3])
    mine = np.array([0, 0, 0, 0])
    rng = np.random.default_rng(0)
    assert _pick("pack", room, free, mine, rng) == 2
    assert _pick("isolate", room, free, mine, rng) == 0
    assert _pick("spread", room, free, mine, rng) == 0
    mine = np.array([0, 1, 0, 1])  # the job already has a task on servers 1 and 3
    assert _pick("pack", room, free, mine, rng) == 1
    assert _pick("isolate", room, free, mine, rng) == 3
    assert _pick("spread", room, free, mine, rng) == 0


def test_thirty_server_samples_have_large_jobs_and_consolidated_ones():
    data = samples(30, seed=4, m=30, max_tasks=10, max_jobs=16, mix=True)
    jobs = [j for s in data for j in s]
    assert all(len(j.placed_w) == 30 for j in jobs)
    assert max(j.n_workers for j in jobs) > 3 and max(j.n_ps for j in jobs) > 3  # §VII-C: 1-10
    assert all(1 <= j.n_workers <= 10 and sum(j.placed_w) == j.n_workers for j in jobs)
    assert max(len(s) for s in data) <= 16
    # some multi-task jobs sit on a single server (packed / isolated), others are spread
    hosts = [int(np.count_nonzero(np.add(j.placed_w, j.placed_p))) for j in jobs if j.n_workers + j.n_ps >= 2]
    assert 1 in hosts and max(hosts) >= 3
    assert all(0.0 < j.speed <= 1.0 + 1e-9 for j in jobs)
    # the 6-server default stays the paper's random placements of 1-3 tasks
    assert max(j.n_workers for s in samples(20, seed=4) for j in s) <= 3


def test_train_drl_reward_for_thirty_servers(tmp_path):
    from typer.testing import CliRunner

    from cohabit.cli import app
    from cohabit.learn.drl_expert import load_reward

    r = CliRunner().invoke(app, ["train", "drl-reward", "--servers", "30", "--samples", "20", "--epochs", "1",
                                 "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reward-30.json", "reward-30.pt"]  # lif.json untouched
    meta = json.loads((tmp_path / "reward-30.json").read_text())
    assert meta["servers"] == 30 and meta["samples"]["max_tasks"] == 10 and meta["samples"]["mix"] is True
    assert load_reward(tmp_path / "reward-30.pt", 30).m == 30
    r = CliRunner().invoke(app, ["train", "drl-reward", "--servers", "7", "--out", str(tmp_path)])
    assert r.exit_code != 0 and "--servers" in r.output and "Traceback" not in r.output


def test_shipped_thirty_server_reward_model_matches_its_json():
    from cohabit.learn.drl_dagger import reward_for
    from cohabit.learn.drl_expert import load_reward

    path = reward_for(30)
    assert path.name == "reward-30.pt" and reward_for(6).name == "reward.pt"
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["servers"] == 30 and {"relative_error", "within_10pct"} <= set(meta["reward_model"])
    assert load_reward(path, 30).m == 30


def test_set_cross_entropy_counts_every_equally_good_action():
    import torch

    from cohabit.learn.drl_rl import set_cross_entropy

    p = torch.tensor([[0.5, 0.3, 0.2]])
    good = torch.tensor([[False, True, True]])
    assert float(set_cross_entropy(p.log(), good)) == pytest.approx(-np.log(0.5))
    one = torch.tensor([[False, True, False]])
    assert float(set_cross_entropy(p.log(), one)) == pytest.approx(-np.log(0.3))


def test_lif_expert_acts_as_lif_quad_and_names_its_ties():
    """The same action as the LIF-Quad teacher; on an empty cluster every server ties."""
    from cohabit.learn.drl_env import lif_teacher
    from cohabit.learn.drl_expert import LIFExpert

    ex, ref = LIFExpert("quad"), lif_teacher("quad")
    state = PlacementState(np.ones((8, 3)), [])
    for k, (model, w, p) in enumerate([("vgg-16", 3, 2), ("resnet-50", 2, 0), ("cnn-text-classification", 2, 1)]):
        job = new_entry(f"j{k}", model, p == 0, w, p, W.copy(), P.copy(), 8)
        state.jobs.append(job)
        while not job.complete:
            mask = state.mask(job)
            a = ex(state, job, mask)
            assert a == ref(state, job, mask) and ex.good[a] and not (ex.good & ~mask).any()
            if k == 0 and job.placed_w.sum() == 0:
                assert ex.good[0::2].all()  # the first worker: any empty server
            state.apply(job, a)
        job.new = False


def test_imitation_agreement_counts_ties_and_recording_keeps_them():
    """A decision whose teacher names several equally good actions is matched by any of them."""
    import torch

    from cohabit.learn.drl_dagger import RecordingPolicy
    from cohabit.learn.drl_expert import LIFExpert
    from cohabit.learn.drl_rl import imitate
    from cohabit.policies.drl.nets import PolicyNet

    pol = RecordingPolicy(None, LIFExpert("quad"), beta=1.0, rng=np.random.default_rng(0))
    models = ["vgg-16", "resnet-50", "seq2seq", "wlm", "resnext-110", "cnn-text-classification"]
    for k in range(30):  # a lone job's first worker on an empty cluster: any server will do
        state = PlacementState(np.ones((8, 3)), [])
        job = new_entry(f"j{k}", models[k % 6], k % 2 == 0, 1 + k % 3, 1 + k % 2, W.copy(), P.copy(), 8)
        state.jobs.append(job)
        pol.choose(state, job, state.mask(job))
    assert len(pol.samples) == 30 and all(s.good is not None and s.good[s.action] for s in pol.samples)
    torch.manual_seed(0)
    net = PolicyNet(8)
    tied = imitate(net, pol.samples, epochs=0, log=lambda s: None)["heldout_agreement"]
    for s in pol.samples:
        s.good = None
    alone = imitate(net, pol.samples, epochs=0, log=lambda s: None)["heldout_agreement"]
    assert tied == 1.0
    assert tied > alone


def test_dagger_first_round_needs_init_weights(tmp_path):
    from typer.testing import CliRunner

    from cohabit.cli import app
    from cohabit.learn import drl_dagger

    r = CliRunner().invoke(app, ["train", "drl-dagger", "--teacher", "lif-quad", "--first-round", "1",
                                 "--out", str(tmp_path / "x.pt")])
    assert r.exit_code != 0 and "--first-round" in r.output and "Traceback" not in r.output
    with pytest.raises(ValueError, match="init"):
        drl_dagger.dagger(m=6, rounds=1, episodes=1, intervals=1, teacher="lif-quad", workers=1, first_round=1,
                          log=lambda s: None)


def test_lif_expert_ties_never_split_a_job_the_rule_keeps_together():
    """LIF-Quad scores a job's second worker beside its first like one on an empty server; only
    its lowest-index tie-break keeps the job together, so an empty server is not equally good."""
    from cohabit.learn.drl_expert import LIFExpert

    ex = LIFExpert("quad")
    state = PlacementState(np.ones((8, 3)), [])
    job = new_entry("a", "vgg-16", False, 3, 2, W.copy(), P.copy(), 8)
    state.jobs.append(job)
    state.apply(job, ex(state, job, state.mask(job)))
    mask = state.mask(job)
    s = ex.scores(state, job, mask)
    assert s[0] == pytest.approx(s[2])  # the rule's score: beside the first worker = on an empty server
    assert ex(state, job, mask) == 0 and np.flatnonzero(ex.good).tolist() == [0]


def test_cost_weighted_dagger_weighs_a_state_by_the_teachers_score_gap_to_the_actors_choice():
    """``--cost-weight``: 1 + w x (teacher's score of its action - of the actor's), 1 where the
    actor's action is one of the teacher's equally good ones; the fit's loss is the weighted mean."""
    import torch

    from cohabit.learn.drl_dagger import RecordingPolicy
    from cohabit.learn.drl_expert import LIFExpert
    from cohabit.learn.drl_rl import set_cross_entropy

    ex = LIFExpert("quad")
    state = PlacementState(np.ones((4, 3)), [])
    busy = new_entry("r", "cnn-text-classification", True, 1, 0, W.copy(), P.copy(), 4, placed=(0,), new=False)
    state.free[0] -= W
    job = new_entry("n", "resnext-110", True, 1, 0, W.copy(), P.copy(), 4)
    state.jobs += [busy, job]
    mask = state.mask(job)
    target = ex(state, job, mask)
    assert target == 2  # an empty server, not beside the busy one (action 0)
    pol = RecordingPolicy(None, ex, beta=1.0, rng=np.random.default_rng(0), cost_weight=10.0)
    gap = float(ex.last_scores[target] - ex.last_scores[0])
    assert gap > 0
    assert pol.weight(0, target, ex.good) == pytest.approx(1.0 + 10.0 * gap)
    assert pol.weight(4, target, ex.good) == 1.0  # another empty server: as good as the teacher's
    assert RecordingPolicy(None, ex, 1.0, np.random.default_rng(0)).weight(0, target, ex.good) == 1.0
    logp = torch.tensor([[0.5, 0.5], [0.9, 0.1]]).log()
    good = torch.tensor([[True, False], [False, True]])
    w = torch.tensor([1.0, 3.0])
    assert float(set_cross_entropy(logp, good, w)) == pytest.approx((-np.log(0.5) - 3 * np.log(0.1)) / 4)
