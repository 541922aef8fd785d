"""``drl:weigh=left`` (``policies.drl.prior``, session drl19a): the LIF-Line score of the prior with each
job's predicted slowdown weighted by its estimated run time left, so a new task is kept off a long job's
servers rather than a short one's."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cohabit.policies import make_policy
from cohabit.policies.drl.online import load_solo, solo_key
from cohabit.policies.drl.prior import check_weigh, lif_scores, remaining_intervals, tilted_choice, weigh_for
from cohabit.policies.drl.state import PlacementState, new_entry
from cohabit.policies.lif_line import LIFPolicy

MODEL = "resnet-50"


def _job(iterations: float | None, done: float = 0.0, model: str = MODEL, workers: int = 1, ps: int = 0):
    spec = SimpleNamespace(model=model, num_ps=ps, workers=SimpleNamespace(count=workers), iterations=iterations)
    return SimpleNamespace(spec=spec, iterations_done=lambda now: done)


def test_remaining_intervals_are_declared_iterations_not_yet_done_over_the_profiled_solo_speed():
    solo = load_solo()
    speed = solo[MODEL][solo_key(True, 1, 0)]
    view = SimpleNamespace(now=500.0, running={"a": _job(3000.0 * speed, done=1200.0 * speed)},
                           pending={"b": _job(600.0 * speed), "c": _job(None), "d": _job(10.0, model="unknown")})
    got = remaining_intervals(view, solo)
    assert got["a"] == pytest.approx(1.5)  # 3000 s of work, 1200 s of it reported done: 1800 s = 1.5 intervals
    assert got["b"] == pytest.approx(0.5)  # pending: nothing done
    assert got["c"] == 1.0 and got["d"] == 1.0  # no declared iterations / no profile: one interval


def _two_servers_each_with_one_job():
    """Two servers, each holding a running one-worker job of the same model; a new one-worker job."""
    m = 2
    wd = np.array([0.5, 0.125, 0.1])
    long_job = new_entry("long", MODEL, True, 1, 0, wd, wd, m, placed=(0,), new=False)
    short_job = new_entry("short", MODEL, True, 1, 0, wd, wd, m, placed=(1,), new=False)
    new = new_entry("new", MODEL, True, 1, 0, wd, wd, m)
    free = np.ones((m, 3)) - wd
    state = PlacementState(free, [long_job, short_job, new])
    lif = LIFPolicy("line")
    lif._cores = {0: 8.0, 1: 8.0}
    return state, new, lif


def test_the_weighted_score_keeps_a_new_task_off_the_server_of_the_job_with_most_time_left():
    state, new, lif = _two_servers_each_with_one_job()
    mask = np.array([True, False, True, False])  # a worker on server 0 or on server 1
    plain = lif_scores(lif, state, new, mask)
    assert plain[0] == pytest.approx(plain[2])  # alike to LIF-Line: the lower index wins the tie
    weights = {"long": 10.0, "short": 0.1, "new": 1.0}
    got = lif_scores(lif, state, new, mask, weights)
    assert np.isinf(got[1]) and np.isinf(got[3])
    assert got[2] < got[0]  # beside the short job costs less time than beside the long one
    # the same weights for every job give LIF-Line's score times that weight (nothing else changes)
    same = lif_scores(lif, state, new, mask, {"long": 2.0, "short": 2.0, "new": 2.0})
    assert same[[0, 2]] == pytest.approx(2.0 * plain[[0, 2]])
    probs = np.array([0.5, 0.0, 0.5, 0.0])
    assert tilted_choice(probs, got, mask, 1000.0) == 2 and tilted_choice(probs, plain, mask, 1000.0) == 0


def test_weigh_is_checked_and_auto_follows_the_table():
    assert check_weigh("left") == "left" and check_weigh("auto", allow_auto=True) == "auto"
    with pytest.raises(ValueError, match="weigh must be one of"):
        check_weigh("reward")
    with pytest.raises(ValueError, match="weigh must be one of"):
        make_policy("drl:weigh=sometimes")
    assert weigh_for("none", 6) == "none" and weigh_for("left", 30) == "left"
    assert weigh_for("auto", 30) == "none"


def test_default_drl_on_six_servers_takes_the_weighted_lif_line_choice_and_the_rack_keeps_its_actor():
    """On 6 servers every choice of the default ``drl`` is ``argmax log pi - 1000 x weighted score`` (the
    weights: each job's estimated time left at that decision), some differ from the unweighted choice; on
    the 30-server rack neither the prior nor the weights are on."""
    from cohabit.policies.drl.prior import AUTO, WEIGH_AUTO
    from cohabit.sim.drl_workload import generate
    from cohabit.sim.runner import simulate
    from cohabit.spec.cluster import preset

    assert AUTO == {6: 1000.0} and WEIGH_AUTO == {6: "left"}
    pol = make_policy("drl")
    inner_begin, inner_choose = pol.begin, pol.choose
    lif = LIFPolicy("line")
    weights: dict[str, float] = {}
    choices = []

    def begin(state, view):
        inner_begin(state, view)
        lif.begin(state, view)
        weights.clear()
        weights.update(remaining_intervals(view, load_solo()))

    def choose(state, job, mask):
        a = inner_choose(state, job, mask)
        p = pol.probabilities(state, job, mask)
        choices.append((a, tilted_choice(p, lif_scores(lif, state, job, mask, weights), mask, 1000.0),
                        tilted_choice(p, lif_scores(lif, state, job, mask), mask, 1000.0)))
        return a

    pol.begin, pol.choose = begin, choose  # type: ignore[method-assign]
    simulate(generate(12, arrival="poisson", seed=431), preset("drl"), pol)
    assert choices and pol.weigh_now == "left" and pol.prior_w == 1000.0
    assert all(a == weighted for a, weighted, _ in choices)
    assert any(weighted != plain for _, weighted, plain in choices)  # the weights change decisions here
    rack = make_policy("drl")
    simulate(generate(2, arrival="poisson", seed=5, n_servers=30), preset("drl-30"), rack)
    assert rack.weigh_now == "none" and rack.prior_w == 0.0
