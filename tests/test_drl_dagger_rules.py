"""``cohabit train drl-dagger`` with the rules ``drl`` decides with on 6 servers (session drl17b): the
hold rule (:mod:`cohabit.policies.drl.hold`) and the LIF-Line prior (:mod:`cohabit.policies.drl.prior`)
in the training and validation episodes, so that the actor is trained and chosen where it plays."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SEED, INTERVALS = 431, 12  # a Poisson workload where the hold and the prior each change drl's JCT


def _shipped_sd():
    import torch

    from cohabit.learn.drl_dagger import DEFAULT_OUT

    return torch.load(DEFAULT_OUT / "policy.pt", map_location="cpu", weights_only=True)


def _episode(hold: float, prior: float, beta: float = 0.0, record: bool = False, weigh: str = "none") -> float:
    from cohabit.learn import drl_dagger

    cfg = {"m": 6, "teacher": "lif-line", "horizon": 0, "intervals": INTERVALS, "order": "short",
           "arrival": "poisson", "seed": SEED, "beta": beta, "record": record, "hold": hold, "prior": prior,
           "weigh": weigh}
    return drl_dagger.episode((_shipped_sd(), None, cfg))[1]


def _drl(params: str = "") -> float:
    from cohabit.policies import make_policy
    from cohabit.sim.drl_workload import generate
    from cohabit.sim.runner import simulate
    from cohabit.spec.cluster import preset

    pol = make_policy("drl" + params)
    return simulate(generate(INTERVALS, arrival="poisson", seed=SEED), preset("drl"), pol).metrics.avg_jct / 1200.0


def test_validation_episode_with_hold_and_prior_plays_exactly_as_the_drl_default():
    """The DAgger validation of an actor (beta 0) with ``hold=inf, prior=3`` is ``drl`` with that prior
    (``drl:prior=3:weigh=none``, the default before drl19a) on 6 servers, to the last digit; without either
    rule it is another policy (so the check can fail)."""
    default = _drl(":prior=3:weigh=none")
    assert _episode(math.inf, 3.0) == pytest.approx(default, rel=1e-12)
    assert _episode(0.0, 3.0) == pytest.approx(_drl(":hold=0:prior=3:weigh=none"), rel=1e-12)
    assert _episode(math.inf, 0.0) == pytest.approx(_drl(":prior=0"), rel=1e-12)
    assert _episode(0.0, 3.0) != pytest.approx(default, rel=1e-6)
    assert _episode(math.inf, 0.0) != pytest.approx(default, rel=1e-6)


def test_validation_episode_with_weigh_left_plays_exactly_as_todays_drl_default():
    """Since drl19a ``drl``'s default on 6 servers is ``prior=1000:weigh=left``: the DAgger validation with
    ``--prior 1000 --weigh left`` (and ``hold=inf``) must play it to the last digit, and the unweighted prior
    must not (fails if the episode drops ``weigh`` or the recording policy ignores its weights)."""
    default = _drl()
    assert _episode(math.inf, 1000.0, weigh="left") == pytest.approx(default, rel=1e-12)
    assert _episode(math.inf, 1000.0) == pytest.approx(_drl(":weigh=none"), rel=1e-12)
    assert _episode(math.inf, 1000.0) != pytest.approx(default, rel=1e-6)


def test_recorded_episode_with_hold_never_starts_a_job_spread(monkeypatch):
    """With the hold rule in the loop, the recorder (teacher and actor acting, states recorded) starts
    no job on more servers than ``min_span``; without it some job starts spread on this workload."""
    from cohabit.learn import drl_dagger
    from cohabit.policies.drl.hold import min_span
    from cohabit.policies.drl.taskwise import capacity_matrix, job_entry

    for hold, spreads in ((math.inf, False), (0.0, True)):
        spread: list[bool] = []
        inner = drl_dagger.RecordingPolicy.decide

        def decide(self, view, inner=inner, spread=spread):
            plan = inner(self, view)
            for a in plan:
                need = min_span(capacity_matrix(view), job_entry(view, view.pending[a.job]))
                spread.append(len(set(a.placement)) > need)
            return plan

        monkeypatch.setattr(drl_dagger.RecordingPolicy, "decide", decide)
        _episode(hold, 3.0, beta=0.5, record=True)
        monkeypatch.undo()
        assert spread and any(spread) == spreads


def test_train_drl_dagger_refuses_bad_hold_and_prior(tmp_path):
    from typer.testing import CliRunner

    from cohabit.cli import app

    for opt, val in (("--hold", "-1"), ("--hold", "soon"), ("--prior", "-2")):
        r = CliRunner().invoke(app, ["train", "drl-dagger", opt, val, "--out", str(tmp_path / "x.pt")])
        assert r.exit_code != 0 and "--hold" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["train", "drl-dagger", "--weigh", "reward", "--out", str(tmp_path / "x.pt")])
    assert r.exit_code != 0 and "--weigh must be one of none, left" in r.output and "Traceback" not in r.output
