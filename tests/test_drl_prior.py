"""``drl``'s interference prior (``policies.drl.prior``, session drl15) and its actor ensemble:
``drl:prior=3:weigh=none`` (the default on 6 servers from drl15 to drl19a) takes ``argmax log pi - 3 x LIF-Line
score`` (the default since, weight 1000 with the score weighted by time left: ``test_drl_weigh.py``); ``prior=0`` is
the actor alone; ``ensemble=`` averages the logits of several actors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cohabit.policies import make_policy
from cohabit.policies.drl.nets import PolicyNet
from cohabit.policies.drl.policy import shipped
from cohabit.policies.drl.prior import AUTO, lif_scores, prior_weight, tilted_choice
from cohabit.policies.lif_line import LIFPolicy
from cohabit.sim.drl_workload import generate
from cohabit.sim.runner import simulate
from cohabit.spec.cluster import preset


def test_prior_weight_auto_is_a_thousand_on_six_servers_and_off_elsewhere():
    assert AUTO == {6: 1000.0}
    assert prior_weight(-1.0, 6) == 1000.0
    assert prior_weight(-1.0, 30) == 0.0
    assert prior_weight(0.0, 6) == 0.0 and prior_weight(2.0, 30) == 2.0


def test_tilted_choice_is_the_actor_at_zero_and_least_score_when_heavy():
    mask = np.array([True, True, False, True])
    probs = np.array([0.6, 0.3, 0.0, 0.1])
    scores = np.array([0.5, 0.1, np.inf, 0.0])
    assert tilted_choice(probs, scores, mask, 0.0) == 0
    assert tilted_choice(probs, scores, mask, 100.0) == 3
    # log 0.6 - 3 x 0.5 = -2.01 < log 0.3 - 0.3 = -1.50 > log 0.1 = -2.30
    assert tilted_choice(probs, scores, mask, 3.0) == 1


def _decisions(policy: str):
    """Every (chosen action, actor's argmax, tilted choice at weight 3) of ``policy`` on a short workload."""
    pol = make_policy(policy)
    lif = LIFPolicy("line")
    inner_begin, inner_choose = pol.begin, pol.choose
    seen = []

    def begin(state, view):
        inner_begin(state, view)
        lif.begin(state, view)

    def choose(state, job, mask):
        a = inner_choose(state, job, mask)
        p = pol.probabilities(state, job, mask)
        seen.append((a, int(np.argmax(np.where(mask, p, -1.0))),
                     tilted_choice(p, lif_scores(lif, state, job, mask), mask, 3.0)))
        return a

    pol.begin, pol.choose = begin, choose  # type: ignore[method-assign]
    simulate(generate(12, arrival="uniform", seed=5), preset("drl"), pol)
    return seen


def test_drl_with_drl15s_prior_tilts_the_actor_by_lif_line_scores():
    seen = _decisions("drl:prior=3:weigh=none")
    assert seen and all(a == tilted for a, _, tilted in seen)
    assert any(a != plain for a, plain, _ in seen)  # the prior changes decisions here
    plain = _decisions("drl:prior=0")
    assert all(a == argmax for a, argmax, _ in plain)


def test_ensemble_averages_the_actors_logits(tmp_path):
    torch.manual_seed(0)
    other = PolicyNet(6)
    torch.save(other.state_dict(), tmp_path / "other.pt")
    (tmp_path / "other.json").write_text(json.dumps({"servers": 6, "heads": 8}), encoding="utf-8")
    alone = make_policy("drl:prior=0")
    both = make_policy(f"drl:prior=0:ensemble={tmp_path / 'other.pt'}")
    captured = {}
    inner = both.probabilities

    def spy(state, job, mask):
        captured["state"] = (state, job, mask)
        return inner(state, job, mask)

    both.probabilities = spy  # type: ignore[method-assign]
    simulate(generate(3, arrival="uniform", seed=2), preset("drl"), both)
    state, job, mask = captured["state"]
    with torch.no_grad():
        jobs = torch.from_numpy(state.tokens()).unsqueeze(0)
        dec = torch.from_numpy(state.decision_tokens()).unsqueeze(0)
        args = (jobs, torch.zeros(jobs.shape[:2], dtype=torch.bool), torch.tensor([state.jobs.index(job)]), dec,
                torch.zeros(dec.shape[:2], dtype=torch.bool))
        mean = (alone.net(*args) + other.eval()(*args)) / 2
        want = torch.softmax(mean.masked_fill(~torch.from_numpy(mask).unsqueeze(0), float("-inf")), -1)[0].numpy()
    assert np.allclose(inner(state, job, mask), want, atol=1e-6)
    assert not np.allclose(alone.probabilities(state, job, mask), want, atol=1e-3)
    assert shipped("policy.pt").is_file()


@pytest.mark.parametrize("bad", ["drl:prior=abc"])
def test_prior_must_be_a_number(bad):
    with pytest.raises(Exception):
        make_policy(bad)
