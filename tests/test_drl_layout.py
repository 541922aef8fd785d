"""``drl``'s layout rule (``policies.drl.layout``, session drl18a): once a job's tasks are all drawn,
its workers and parameter servers per server are chosen again on the servers it spans, for the
highest speed estimated from the LIF profile (a server's tasks share its cores; crossing traffic
costs the communication share)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import cohabit.policies.drl.taskwise as taskwise
from cohabit.engine.actions import Start
from cohabit.models.interference import LIFModel, ModelProfile
from cohabit.policies import make_policy
from cohabit.policies.drl.layout import AUTO, best_counts, check_layout, estimated_speed, fit, layout_for
from cohabit.policies.drl.state import PlacementState, new_entry
from cohabit.sim.drl_workload import LOAD_MATCHED_30, generate
from cohabit.sim.runner import simulate
from cohabit.spec.cluster import preset

# wlm (DL2): declared 1 core and 8 GB per worker (one GPU of two), 1 core and 4 GB per PS; 8 cores, 48 GB
WORKER = np.array([0.5, 1 / 8, 8 / 48])
PS = np.array([0.0, 1 / 8, 4 / 48])
LIF = LIFModel.load("line")
CORES = np.full(2, 8.0)


def _wlm(placed: tuple[int, ...]):
    return new_entry("j", "wlm", False, 2, 8, WORKER, PS, 2, placed=placed, new=False)


def test_estimated_speed_counts_cores_over_subscribed_and_traffic_that_crosses_servers():
    prof = ModelProfile(cpu_worker=1.0, cpu_ps=2.0, comm=0.5)
    assert estimated_speed(prof, False, (1,), (1,), (0.0,), (8.0,)) == pytest.approx(1.0)
    # 1 worker + 4 PS: 9 cores of 8 -> pace 8/9, all local
    assert estimated_speed(prof, False, (1,), (4,), (0.0,), (8.0,)) == pytest.approx(8 / 9)
    # other jobs' cores count too
    assert estimated_speed(prof, False, (1,), (1,), (6.0,), (8.0,)) == pytest.approx(8 / 9)
    # half the worker-PS pairs cross servers: 1 / (1 + 0.5 x 0.5)
    assert estimated_speed(prof, False, (1, 0), (1, 1), (0.0, 0.0), (8.0, 8.0)) == pytest.approx(1 / 1.25)
    # an all-reduce ring over 2 servers of 4 workers: x = 2/4; its workers use worker + PS cores
    assert estimated_speed(prof, True, (2, 2), (0, 0), (0.0, 0.0), (8.0, 8.0)) == pytest.approx(1 / 1.25)
    assert estimated_speed(prof, True, (3,), (0,), (0.0,), (8.0,)) == pytest.approx(8 / 9)


def test_fit_moves_parameter_servers_off_a_server_whose_cores_they_over_subscribe():
    # first fit: both workers and 6 PS on server 0 (8 declared cores: full), 2 PS on server 1; wlm's PS
    # really use ~1.7 cores each, so server 0 runs at ~8 / 11.2 of its pace
    placed = (0, 0) + (0,) * 6 + (1, 1)
    entry = _wlm(placed)
    state = PlacementState(np.ones((2, 3)) - np.outer(entry.placed_w, WORKER) - np.outer(entry.placed_p, PS), [entry])
    prof = LIF.profile("wlm")
    before = estimated_speed(prof, False, (2, 0), (6, 2), (0.0, 0.0), CORES)
    assert before < 0.8
    assert fit(state, entry, LIF, CORES)
    ws, ps = tuple(entry.placed_w), tuple(entry.placed_p)
    assert sum(ws) == 2 and sum(ps) == 8 and ws[0] + ws[1] == 2
    assert estimated_speed(prof, False, ws, ps, (0.0, 0.0), CORES) > before + 0.1
    assert (state.free >= -1e-9).all()  # still within the declared room
    assert state.placement(entry).count(0) + state.placement(entry).count(1) == 10
    assert not fit(state, entry, LIF, CORES)  # already the best: unchanged


def test_fit_keeps_a_layout_nothing_beats_and_respects_the_room():
    entry = _wlm((0, 0, 0, 0, 0, 0, 1, 1, 1, 1))  # 2 workers + 4 PS on 0, 4 PS on 1: no server over its cores
    free = np.ones((2, 3)) - np.outer(entry.placed_w, WORKER) - np.outer(entry.placed_p, PS)
    state = PlacementState(free, [entry])
    assert not fit(state, entry, LIF, CORES)
    # no room on server 1 beyond what the job holds there: best_counts never puts more there
    tight = np.array([[1.0, 1.0, 1.0], [0.0, 4 / 8, 16 / 48]])
    ws, ps = best_counts(tight, entry, LIF.profile("wlm"), (0.0, 0.0), CORES, ((2, 0), (6, 2)))
    assert ps[1] <= 4 and ws[1] == 0


def test_layout_parameter_reaches_the_loop_and_auto_names_the_sizes():
    assert check_layout("fit") == "fit" and check_layout("auto", allow_auto=True) == "auto"
    with pytest.raises(ValueError):
        check_layout("auto")
    assert layout_for("keep", 30) == "keep" and layout_for("fit", 6) == "fit"
    assert layout_for("auto", 8) == "keep"
    for m in (6, 30):
        assert layout_for("auto", m) == AUTO.get(m, "keep")


def test_the_layout_rule_lays_jobs_out_again_and_runs_them_faster(monkeypatch):
    calls = {"fit": 0, "changed": 0}
    inner = taskwise.layout_fit

    def counting(*args, **kwargs):
        calls["fit"] += 1
        changed = inner(*args, **kwargs)
        calls["changed"] += changed
        return changed

    monkeypatch.setattr(taskwise, "layout_fit", counting)
    jobs = generate(30, arrival="poisson", seed=91000, n_servers=30, rate_scale=LOAD_MATCHED_30)
    base = make_policy("lif-line:order=short:isolate=compact")
    base.hold_s = math.inf  # LIF-Line with drl's rules (as bench/drl_teachers.py's NAME@hold=inf)
    keep = simulate(jobs, preset("drl-30"), base).metrics
    assert calls["fit"] == 0
    pol = make_policy("lif-line:order=short:isolate=compact")
    pol.hold_s, pol.layout = math.inf, "fit"
    starts: list[Start] = []
    inner_decide = pol.decide

    def decide(view):
        plan = inner_decide(view)
        starts.extend(a for a in plan if isinstance(a, Start))
        return plan

    pol.decide = decide
    got = simulate(jobs, preset("drl-30"), pol).metrics
    assert calls["fit"] >= len(starts) > 0 and calls["changed"] > 0
    assert got.avg_jct < keep.avg_jct


def test_drl_lays_jobs_out_by_default_on_thirty_servers_only():
    # chosen on the load-matched rack's selection workloads 91000-91023 (better on all three patterns);
    # on 6 servers it was no better on Poisson and worse on uniform ("Session drl18a")
    assert AUTO == {30: "fit"}
    pol = make_policy("drl")
    assert pol.layout_for(30) == "fit" and pol.layout_for(6) == "keep"
    assert make_policy("drl:layout=keep").layout_for(30) == "keep"
