"""Harmony-DRL's lookahead expert (reward-model scores of completed candidates) and the DAgger
trainer that fits the actor to it in the simulator (tiny runs)."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.learn.drl_expert import LIFScorer, LookaheadExpert, complete
from cohabit.policies.drl.state import PlacementState, new_entry


# tiny networks: one intra-op thread (two on a loaded 2-core machine cost 10x)
pytestmark = pytest.mark.usefixtures("torch_one_thread")


W = np.array([0.5, 0.25, 0.25])  # a worker: 1 of 2 GPUs, 2 of 8 cores, 12 of 48 GB
P = np.array([0.0, 0.125, 0.125])


def _job(key: str, workers: int, ps: int, m: int = 4, placed: tuple[int, ...] = (), new: bool = True):
    return new_entry(key, "vgg-16", ps == 0, workers, ps, W.copy(), P.copy(), m, placed=placed, new=new)


def test_complete_consolidates_on_the_jobs_server_and_refuses_what_does_not_fit():
    job = _job("a", 2, 2)
    free = np.ones((4, 3))
    pw, pp = np.zeros(4, np.int64), np.zeros(4, np.int64)
    pw[2] = 1
    free[2] -= W
    got = complete(free, job, pw, pp)
    assert got is not None
    assert got[0].tolist() == [0, 0, 2, 0] and got[1].tolist() == [0, 0, 2, 0]  # all on server 2
    assert free[2].tolist() == (np.ones(3) - W).tolist()  # the caller's array is untouched
    # server 2 has no GPU left for the second worker: it goes to the fullest server with room
    free[2, 0] = 0.0
    free[1] = [0.5, 0.5, 0.5]
    got = complete(free, job, pw, pp)
    assert got is not None and got[0].tolist() == [0, 1, 1, 0]
    # no GPU anywhere: the job cannot be completed
    free[:, 0] = 0.0
    assert complete(free, job, pw, pp) is None


class _Scorer:
    """Scores every candidate alike; keeps the candidates it was shown."""

    def __init__(self) -> None:
        self.seen: list[list] = []

    def __call__(self, cands):
        self.seen.append(cands)
        return np.zeros(len(cands))


def test_expert_takes_the_best_scored_valid_action_and_never_a_masked_one():
    state = PlacementState(np.ones((4, 3)), [_job("a", 2, 1)])
    job = state.jobs[0]
    mask = state.mask(job)
    mask[0::2] = [False, True, False, True]  # servers 0 and 2 closed to workers
    expert = LookaheadExpert(lambda cands: np.arange(len(cands), dtype=float))  # the last candidate wins
    a = expert(state, job, mask)
    assert mask[a] and a == int(np.flatnonzero(mask)[-1])
    assert not expert.hopeless
    s = expert.scores(state, job, mask)
    assert np.isneginf(s[~mask]).all() and np.isfinite(s[mask]).all()


def test_expert_sees_the_waiting_jobs_within_its_horizon():
    later = _job("b", 1, 0)
    state = PlacementState(np.ones((4, 3)), [_job("a", 1, 1), later])
    scorer = _Scorer()
    LookaheadExpert(scorer, horizon=0)(state, state.jobs[0], state.mask(state.jobs[0]))
    assert all(len(c) == 1 for c in scorer.seen[0])
    scorer = _Scorer()
    LookaheadExpert(scorer, horizon=1)(state, state.jobs[0], state.mask(state.jobs[0]))
    assert all(len(c) == 2 and c[1][:4] == ("vgg-16", True, 1, 0) for c in scorer.seen[0])


def test_expert_is_hopeless_when_no_action_lets_the_job_complete():
    state = PlacementState(np.ones((2, 3)), [_job("a", 3, 0, m=2)])
    state.free[:, 0] = [0.5, 0.5]  # two GPUs in all for three workers
    expert = LookaheadExpert(lambda cands: np.zeros(len(cands)))
    mask = state.mask(state.jobs[0])
    a = expert(state, state.jobs[0], mask)
    assert expert.hopeless and mask[a]


def test_lif_scorer_prefers_a_consolidated_job_to_a_spread_one():
    from cohabit.models.interference import LIFModel

    together = [("vgg-16", False, 2, 2, np.array([2, 0, 0, 0]), np.array([2, 0, 0, 0])),
                ("resnet-50", False, 1, 1, np.array([0, 1, 0, 0]), np.array([0, 1, 0, 0]))]
    spread = [("vgg-16", False, 2, 2, np.array([1, 1, 0, 0]), np.array([0, 0, 1, 1])),
              ("resnet-50", False, 1, 1, np.array([0, 1, 0, 0]), np.array([0, 1, 0, 0]))]
    got = LIFScorer(LIFModel.load("quad"))([together, spread])
    assert got.shape == (2,) and got[0] > got[1]


def test_expert_with_the_shipped_reward_model_consolidates_a_lone_job():
    from cohabit.learn.drl_expert import load_reward
    from cohabit.policies.drl.policy import shipped

    expert = LookaheadExpert(load_reward(shipped("reward.pt"), 6))
    job = new_entry("a", "vgg-16", False, 2, 2, W.copy(), P.copy(), 6)
    state = PlacementState(np.ones((6, 3)), [job])
    while not job.complete:
        state.apply(job, expert(state, job, state.mask(job)))
    # alone on an empty cluster, VGG-16 (communication heavy) runs fastest on one server
    assert int(((job.placed_w + job.placed_p) > 0).sum()) == 1


def test_recording_policy_records_expert_labels_and_lets_the_actor_act():
    from cohabit.learn.drl_dagger import RecordingPolicy

    calls = {"expert": 0}

    def expert(state, job, mask):
        calls["expert"] += 1
        return int(np.flatnonzero(mask)[-1])

    pol = RecordingPolicy(None, expert, beta=0.0, rng=np.random.default_rng(0))
    state = PlacementState(np.ones((4, 3)), [_job("a", 1, 1)])
    job = state.jobs[0]
    mask = state.mask(job)
    assert pol.choose(state, job, mask) == int(np.flatnonzero(mask)[-1])  # no actor: the expert acts
    assert len(pol.samples) == 1 and pol.samples[0].action == int(np.flatnonzero(mask)[-1])
    one = np.zeros_like(mask)
    one[0] = True
    pol.choose(state, job, one)
    assert len(pol.samples) == 1  # a single valid action is not recorded
    assert calls["expert"] == 2


def test_dagger_round_trip_in_the_simulator(tmp_path):
    """Two rounds on tiny workloads: the expert's round, then the actor's with expert labels; the
    report carries both validations and the actor plays valid placements in the simulator."""
    import torch

    from cohabit.learn import drl_dagger
    from cohabit.policies import make_policy
    from cohabit.sim.drl_workload import generate
    from cohabit.sim.runner import simulate
    from cohabit.spec.cluster import preset

    actor, report = drl_dagger.dagger(m=6, rounds=1, episodes=2, intervals=2, epochs=1, teacher="lif-quad",
                                      workers=1, seed=0, log=lambda s: None)
    assert [r["round"] for r in report["rounds"]] == [0, 1]
    assert report["rounds"][0]["new_samples"] > 0 and report["rounds"][1]["samples"] > report["rounds"][0]["samples"]
    assert np.isfinite(report["expert_validation"]["mean"]) and np.isfinite(report["best_validation_mean"])
    path = tmp_path / "p.pt"
    torch.save(actor.state_dict(), path)
    path.with_suffix(".json").write_text('{"servers": 6, "heads": 8}')
    res = simulate(generate(2, seed=77), preset("drl"), make_policy(f"drl:weights={path}"))
    assert res.metrics.jobs_finished == res.metrics.jobs_submitted


def test_train_drl_dagger_refuses_bad_options(tmp_path):
    from typer.testing import CliRunner

    from cohabit.cli import app

    r = CliRunner().invoke(app, ["train", "drl-dagger", "--teacher", "oracle", "--out", str(tmp_path / "x.pt")])
    assert r.exit_code != 0 and "--teacher" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["train", "drl-dagger", "--servers", "7", "--out", str(tmp_path / "x.pt")])
    assert r.exit_code != 0 and "--servers" in r.output


def test_recording_policy_skips_states_the_expert_finds_hopeless():
    """A waiting job's decisions, where no action lets it complete, carry arbitrary labels."""
    from cohabit.learn.drl_dagger import RecordingPolicy

    state = PlacementState(np.ones((2, 3)), [_job("a", 3, 0, m=2)])
    state.free[:, 0] = [0.5, 0.5]  # two GPUs for three workers
    expert = LookaheadExpert(lambda cands: np.zeros(len(cands)))
    pol = RecordingPolicy(None, expert, beta=1.0, rng=np.random.default_rng(0))
    job = state.jobs[0]
    pol.choose(state, job, state.mask(job))
    assert expert.hopeless and pol.samples == []
    state.free[:, 0] = [1.0, 1.0]
    pol.choose(state, job, state.mask(job))
    assert not expert.hopeless and len(pol.samples) == 1


@pytest.mark.parametrize("order", ["short", "arrival"])
def test_dagger_episodes_offer_pending_jobs_in_the_order_drl_decides_in(order, monkeypatch):
    """The training states are the deciding states: with ``order=short`` the recorder's loop
    offers the pending jobs by least estimated solo time, with ``arrival`` in submission order."""
    from cohabit.learn import drl_dagger
    from cohabit.policies.drl.online import load_solo
    from cohabit.policies.drl.order import solo_estimate

    solo = load_solo()
    seen: list[list[float]] = []

    def begin(self, state, view):
        new = [view.pending[e.key] for e in state.jobs if e.new]
        if len(new) > 1:
            seen.append([solo_estimate(j, solo) if order == "short" else j.spec.submit_time for j in new])

    monkeypatch.setattr(drl_dagger.RecordingPolicy, "begin", begin)
    cfg = {"m": 6, "teacher": "lif-quad", "horizon": 0, "intervals": 8, "tie": 0.0, "margin": 0.0, "order": order,
           "arrival": "bursty", "seed": 5, "beta": 1.0}
    drl_dagger.episode((None, None, cfg))
    assert seen and all(k == sorted(k) for k in seen)
    assert any(k != sorted(k, reverse=True) for k in seen)  # not all ties: the check could fail


def test_train_drl_dagger_refuses_bad_order_and_validation(tmp_path):
    from typer.testing import CliRunner

    from cohabit.cli import app

    r = CliRunner().invoke(app, ["train", "drl-dagger", "--order", "random", "--out", str(tmp_path / "x.pt")])
    assert r.exit_code != 0 and "--order" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["train", "drl-dagger", "--validation", "0", "--out", str(tmp_path / "x.pt")])
    assert r.exit_code != 0 and "--validation" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["train", "drl-dagger", "--isolate", "always", "--out", str(tmp_path / "x.pt")])
    assert r.exit_code != 0 and "--isolate" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["train", "drl-dagger", "--cost-weight", "-1", "--out", str(tmp_path / "x.pt")])
    assert r.exit_code != 0 and "--cost-weight" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("isolate", ["compact", "never"])
def test_dagger_episodes_decide_with_the_isolation_rule_drl_uses(isolate):
    """The recorder places with the masks ``drl`` decides with: a random actor (beta 0) under
    ``isolate=compact`` never starts a job beside another while the cluster has room to keep it
    apart (at most the jobs that had to share); without the rule it does."""
    import torch

    from cohabit.learn import drl_dagger
    from cohabit.policies.drl.nets import PolicyNet

    torch.manual_seed(0)
    sd = PolicyNet(6).state_dict()
    cfg = {"m": 6, "teacher": "lif-quad", "horizon": 0, "intervals": 3, "tie": 0.0, "margin": 0.0, "order": "short",
           "arrival": "uniform", "seed": 7, "beta": 0.0, "isolate": isolate}
    shared = []
    inner = drl_dagger.RecordingPolicy.decide

    def decide(self, view):
        assert self.isolate == isolate
        busy = {s for j in view.running.values() for s in j.placement}
        plan = inner(self, view)
        for a in plan:
            shared.append(bool(set(a.placement) & busy) and len(busy) < 6)
            busy |= set(a.placement)
        return plan

    drl_dagger.RecordingPolicy.decide = decide
    try:
        drl_dagger.episode((sd, None, cfg))
    finally:
        drl_dagger.RecordingPolicy.decide = inner
    assert shared
    if isolate == "compact":
        assert not any(shared[:3])  # the first jobs on an empty cluster always fit apart
    else:
        assert any(shared)


def test_selectable_refuses_a_round_that_buys_one_pattern_with_another():
    """``--select poisson``: a round may be kept only if every other pattern's validation mean
    stays within ``1 + guard`` of the initial actor's; ``mean`` selection has no such guard."""
    from cohabit.learn.drl_dagger import selectable

    init = {"mean uniform": 2.0, "mean poisson": 1.5, "mean bursty": 3.0}
    ok = {"mean uniform": 2.03, "mean poisson": 1.2, "mean bursty": 2.9}
    worse = {"mean uniform": 2.1, "mean poisson": 1.2, "mean bursty": 2.9}
    assert selectable(ok, init, "poisson", 0.02)
    assert not selectable(worse, init, "poisson", 0.02)  # uniform 5% worse
    assert selectable(worse, init, "poisson", 0.06)
    assert selectable(worse, init, "mean", 0.0)
    assert selectable(worse, None, "poisson", 0.0)  # no initial actor to compare with


def test_dagger_trains_on_the_given_arrivals_and_selects_by_pattern_within_the_guard(monkeypatch, tmp_path):
    """Training episodes cycle ``arrivals`` (validation still scores every pattern); with
    ``select='poisson'`` the kept weights are the best Poisson round whose other patterns stay
    within the guard, not the best Poisson round overall; every round's weights are saved."""
    import torch

    from cohabit.learn import drl_dagger, drl_rl
    from cohabit.policies.drl.nets import PolicyNet

    torch.manual_seed(0)
    init = tmp_path / "init.pt"
    torch.save(PolicyNet(6).state_dict(), init)
    fits = {"n": 0}
    trained: list[str] = []
    # validation means per fit count: round 1 best on Poisson but uniform 10% worse; round 2 within the guard
    table = {0: {"uniform": 2.0, "poisson": 1.5, "bursty": 3.0}, 1: {"uniform": 2.2, "poisson": 1.0, "bursty": 3.0},
             2: {"uniform": 2.0, "poisson": 1.3, "bursty": 3.0}, 3: {"uniform": 2.0, "poisson": 1.4, "bursty": 2.0}}

    def episode(args):
        sd, _, cfg = args
        if cfg.get("record", True):
            trained.append(cfg["arrival"])
            return [], 1.0
        return [], table[fits["n"]][cfg["arrival"]]

    def imitate(actor, data, **kw):
        fits["n"] += 1
        with torch.no_grad():
            next(actor.parameters()).fill_(float(fits["n"]))  # a marker of the round
        return {"heldout_agreement": 1.0}

    monkeypatch.setattr(drl_dagger, "episode", episode)
    monkeypatch.setattr(drl_rl, "imitate", imitate)
    kw = dict(m=6, rounds=3, episodes=3, intervals=2, epochs=1, teacher="lif-quad", init=init, first_round=1,
              workers=1, seed=0, log=lambda s: None, expert_validation=False, arrivals=("poisson",))
    actor, report = drl_dagger.dagger(select="poisson", guard=0.02, save_rounds=tmp_path / "r", **kw)
    assert trained == ["poisson"] * 9
    assert float(next(actor.parameters()).detach().flatten()[0]) == 2.0  # round 2, not round 1
    assert report["best_validation_mean"] == 1.3
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["round-1.pt", "round-2.pt", "round-3.pt"]
    fits["n"] = 0
    actor, _ = drl_dagger.dagger(select="mean", **kw)  # least mean over all: round 3
    assert float(next(actor.parameters()).detach().flatten()[0]) == 3.0


def test_train_drl_dagger_refuses_bad_arrivals_and_select(tmp_path):
    from typer.testing import CliRunner

    from cohabit.cli import app

    for opt, val in (("--arrivals", "poisson,steady"), ("--select", "median"), ("--guard", "-0.1"),
                     ("--anchor", "steady")):
        r = CliRunner().invoke(app, ["train", "drl-dagger", opt, val, "--init", str(tmp_path / "i.pt"),
                                     "--out", str(tmp_path / "x.pt")])
        assert r.exit_code != 0 and opt in r.output and "Traceback" not in r.output, (opt, r.output)


def test_anchor_episodes_are_labelled_by_the_initial_actor_not_the_teacher(monkeypatch):
    """``--anchor uniform``: a uniform training episode records the anchor network's own argmax as
    every label and never consults the teacher; a Poisson episode still asks the teacher."""
    import torch

    from cohabit.learn import drl_dagger
    from cohabit.policies.drl.nets import PolicyNet

    torch.manual_seed(0)
    actor_sd, anchor_sd = PolicyNet(6).state_dict(), PolicyNet(6).state_dict()
    asked = {"teacher": 0}

    def teacher(state, job, mask):
        asked["teacher"] += 1
        return int(np.flatnonzero(mask)[-1])

    monkeypatch.setattr(drl_dagger, "make_expert", lambda *a, **k: teacher)
    given: list[int] = []  # the anchor's choices in the states that are recorded (more than one valid action)
    inner = drl_dagger.ActorChooser.__call__

    def call(self, state, job, mask):
        a = inner(self, state, job, mask)
        if mask.sum() > 1:
            given.append(a)
        return a

    monkeypatch.setattr(drl_dagger.ActorChooser, "__call__", call)
    cfg = {"m": 6, "teacher": "rollout", "horizon": 0, "intervals": 3, "order": "short", "arrival": "uniform",
           "seed": 3, "beta": 0.5, "anchor": ("uniform",), "anchor_sd": anchor_sd}
    samples, _ = drl_dagger.episode((actor_sd, None, cfg))
    assert samples and asked["teacher"] == 0
    assert [s.action for s in samples] == given
    drl_dagger.episode((actor_sd, None, {**cfg, "arrival": "poisson"}))
    assert asked["teacher"] > 0


def test_rollout_actor_places_in_the_teachers_rollouts_not_the_current_actor(monkeypatch):
    """``--rollout-actor W``: the rollout teacher is built with W's network (a fixed teacher), while
    the episode's own decisions stay the current actor's."""
    import torch

    from cohabit.learn import drl_dagger
    from cohabit.policies.drl.nets import PolicyNet

    torch.manual_seed(0)
    actor_sd, placer_sd = PolicyNet(6).state_dict(), PolicyNet(6).state_dict()
    got = []

    def make_expert(teacher, m, reward_sd, horizon, actor, *a, **k):
        got.append(actor)
        return lambda state, job, mask: int(np.flatnonzero(mask)[0])

    monkeypatch.setattr(drl_dagger, "make_expert", make_expert)
    cfg = {"m": 6, "teacher": "rollout", "horizon": 0, "intervals": 2, "order": "short", "arrival": "uniform",
           "seed": 3, "beta": 0.0}
    drl_dagger.episode((actor_sd, None, {**cfg, "placer_sd": placer_sd}))
    drl_dagger.episode((actor_sd, None, cfg))
    with_placer, without = got
    key = next(k for k in placer_sd if not torch.equal(placer_sd[k], actor_sd[k]))  # randomly initialised
    assert torch.equal(with_placer.state_dict()[key], placer_sd[key])
    assert torch.equal(without.state_dict()[key], actor_sd[key])


def test_train_drl_dagger_refuses_futures_and_rollout_actor_without_the_rollout_teacher(tmp_path):
    from typer.testing import CliRunner

    from cohabit.cli import app

    w = tmp_path / "w.pt"
    w.write_bytes(b"x")
    for extra in (["--futures", "4"], ["--futures", "-1", "--teacher", "rollout"], ["--rollout-actor", str(w)],
                  ["--rollout-actor", str(tmp_path / "none.pt"), "--teacher", "rollout"]):
        r = CliRunner().invoke(app, ["train", "drl-dagger", *extra, "--init", str(w), "--out", str(tmp_path / "x.pt")])
        opt = extra[0]
        assert r.exit_code != 0 and opt in r.output and "Traceback" not in r.output, (extra, r.output)
