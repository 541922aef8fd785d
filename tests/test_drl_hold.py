"""``drl``'s hold rule (``policies.drl.hold``, session drl16): a job runs on as few servers as an empty
cluster would give it (placed again there when they fit now), or waits for that room up to ``hold``
seconds; ``hold=auto`` is unbounded on 6 and 30 servers (drl17a); ``hold=0`` is the loop as before; ``starve=k``
bounds the wait at k times the job's estimated solo time."""

from __future__ import annotations

import math

import numpy as np

from cohabit.engine.actions import Start
from cohabit.policies import make_policy
from cohabit.policies.drl.hold import (AUTO, STARVE_AUTO, HoldRule, compact_servers, due, enforce, hold_seconds,
                                      min_span, span, starve_factor)
from cohabit.policies.drl.online import load_solo
from cohabit.policies.drl.order import solo_estimate
from cohabit.policies.drl.state import PlacementState, new_entry
from cohabit.policies.drl.taskwise import capacity_matrix, job_entry
from cohabit.sim.drl_workload import INTERVAL_S, LOAD_MATCHED_30, generate
from cohabit.sim.runner import simulate
from cohabit.spec.cluster import preset

WORKER = np.array([0.5, 0.25, 0.1])  # one GPU of two, 2 cores of 8, ... (the state's normalisation)
PS = np.array([0.0, 0.25, 0.1])
SOLO = load_solo()




def _job(key: str, workers: int, ps: int = 0, placed: tuple[int, ...] = (), m: int = 4):
    return new_entry(key, "resnet-50", ps == 0, workers, ps, WORKER, PS, m, placed=placed, new=not placed)


def _state(running, m: int = 4) -> PlacementState:
    free = np.ones((m, 3))
    for e in running:
        free -= np.outer(e.placed_w, e.worker_demand) + np.outer(e.placed_p, e.ps_demand)
    return PlacementState(free, list(running))


def test_min_span_is_the_fewest_servers_of_an_empty_cluster():
    cap = np.ones((4, 3))
    assert min_span(cap, _job("a", 1)) == 1
    assert min_span(cap, _job("b", 2)) == 1  # two 1-GPU workers on one 2-GPU server
    assert min_span(cap, _job("c", 3)) == 2
    assert min_span(cap, _job("d", 2, ps=2)) == 1  # 4 tasks of 2 cores on an 8-core server
    assert min_span(cap, _job("e", 3, ps=3)) == 2
    assert min_span(np.ones((1, 3)), _job("f", 3)) == 2  # does not fit: one server more than there are


def test_hold_auto_is_unbounded_on_six_and_thirty_servers_and_off_elsewhere():
    assert AUTO == {6: math.inf, 30: math.inf}
    assert hold_seconds(-1.0, 6) == math.inf and hold_seconds(-1.0, 30) == math.inf and hold_seconds(-1.0, 8) == 0.0
    assert hold_seconds(0.0, 6) == 0.0 and hold_seconds(600.0, 30) == 600.0


def _spread(state: PlacementState, entry):
    """Draw ``entry``'s two workers on servers 0 and 1 (as a chooser might) and apply the rule."""
    state.jobs.append(entry)
    state.apply(entry, 0)
    state.apply(entry, 2)
    assert span(entry) == 2


def test_a_spread_job_is_placed_again_on_one_server_when_one_has_room():
    # servers 0 and 1 each hold a 1-GPU job; servers 2 and 3 are free, 3 fuller in other resources
    state = _state([_job("r0", 1, placed=(0,)), _job("r1", 1, placed=(1,))])
    new = _job("n", 2)
    _spread(state, new)
    drawn = []

    def choose(st, job, mask):
        drawn.append(np.flatnonzero(mask).tolist())
        return int(np.flatnonzero(mask)[-1])  # the last valid action: a chooser that would spread if it could

    ok = enforce(state, new, choose, HoldRule(np.ones((4, 3)), lambda e: False))
    assert ok and span(new) == 1
    assert new.placed_w.tolist() in ([0, 0, 2, 0], [0, 0, 0, 2])
    assert all(a // 2 == drawn[0][0] // 2 for d in drawn for a in d)  # only one server was ever offered
    assert np.allclose(state.free.sum(axis=0), 4 - 4 * WORKER)  # the room is counted once


def test_a_spread_job_waits_or_spreads_as_the_hold_says_when_no_server_has_room():
    running = [_job(f"r{s}", 1, placed=(s,), m=2) for s in range(2)]
    for allowed in (False, True):
        state = _state(running, m=2)
        new = _job("n", 2, m=2)
        _spread(state, new)
        asked = []
        ok = enforce(state, new, lambda st, j, mask: 0, HoldRule(np.ones((2, 3)), lambda e: asked.append(e) or allowed))
        assert ok is allowed and asked == [new] and span(new) == 2


def _starts(policy: str, arrival: str = "poisson", seed: int = 431, servers: int = 6, intervals: int = 30):
    """(job, servers, min span, waited seconds, estimated solo seconds) of every start of ``policy`` on a
    busy workload (on 30 servers: the load-matched rack), and whether all finished."""
    jobs = generate(intervals, arrival=arrival, seed=seed, n_servers=servers,
                    rate_scale=LOAD_MATCHED_30 if servers == 30 else 1.0)
    by_id = {j.spec.id: j for j in jobs}
    pol = make_policy(policy)
    inner = pol.decide
    seen = []

    def decide(view):
        plan = inner(view)
        for a in plan:
            if isinstance(a, Start):
                least = min_span(capacity_matrix(view), job_entry(view, view.pending[a.job]))
                seen.append((a.job, len(set(a.placement)), least, view.now - by_id[a.job].spec.submit_time,
                             solo_estimate(view.pending[a.job], SOLO)))
        return plan

    pol.decide = decide  # type: ignore[method-assign]
    res = simulate(jobs, preset("drl" if servers == 6 else f"drl-{servers}"), pol)
    return seen, all(s == "finished" for s in res.metrics.jobs.states)


def test_default_drl_on_six_servers_never_starts_a_job_spread_and_every_job_finishes():
    seen, finished = _starts("drl")
    assert finished and seen
    assert all(servers <= least for _, servers, least, *_ in seen)
    before, finished = _starts("drl:hold=0")
    assert finished and any(servers > least for _, servers, least, *_ in before)  # the rule matters here


def test_a_bounded_hold_spreads_a_job_only_after_it_has_waited_that_long():
    seen, finished = _starts("drl:hold=600")
    spread = [w for _, servers, least, w, _ in seen if servers > least]
    assert finished and spread and min(spread) >= 600 - 1e-6
    assert max(w for *_, w, _ in seen) < 30 * INTERVAL_S


def test_due_is_the_hold_or_k_times_the_estimated_solo_time_whichever_is_sooner():
    assert due(100.0, math.inf, 0.0, 50.0) == math.inf  # no bound: the hold alone
    assert due(100.0, math.inf, 2.0, 50.0) == 200.0
    assert due(100.0, 60.0, 2.0, 50.0) == 160.0  # a shorter hold still wins
    assert due(100.0, math.inf, 2.0, math.inf) == math.inf  # no estimate: no bound
    assert starve_factor(-1.0, 6) == STARVE_AUTO.get(6, 0.0) and starve_factor(3.0, 30) == 3.0


def test_a_held_job_starts_spread_once_it_has_waited_k_times_its_estimated_solo_time():
    seen, finished = _starts("drl:starve=1")
    spread = [(w, est) for _, servers, least, w, est in seen if servers > least]
    assert finished and spread  # without the bound (the default) no job starts spread: see above
    assert all(w >= est - 1e-6 for w, est in spread)  # never before the bound
    # woken at the bound (next_decision_time), not at the next arrival or finish
    assert any(w - est < 1.0 for w, est in spread)


def test_the_hold_on_thirty_servers_is_cheap_and_keeps_jobs_on_their_fewest_servers():
    cap = np.ones((30, 3))
    wide = new_entry("w", "resnet-50", True, 10, 0, WORKER, PS, 30)
    assert min_span(cap, wide) == 5  # ten 1-GPU workers on 2-GPU servers; one first fit per k
    # the rack half full, spread over every server: no 5 servers hold the job, 10 half-free ones do not either
    state = PlacementState(np.ones((30, 3)), [])
    for s in range(30):
        state.apply(r := new_entry(f"r{s}", "resnet-50", True, 1, 0, WORKER, PS, 30), 2 * s)
        state.jobs.append(r)
    state.jobs.append(wide)
    assert compact_servers(state, wide, 5) is None
    for s in range(5, 10):  # five servers freed: exactly those
        state.undo(state.jobs[s])
    servers, plan = compact_servers(state, wide, 5)
    assert servers == [5, 6, 7, 8, 9] and len(plan) == 10
    seen, finished = _starts("drl", "bursty", 20000, servers=30, intervals=6)  # the default holds there too
    assert finished and seen and all(servers <= least for _, servers, least, *_ in seen)
    before, _ = _starts("drl:hold=0", "bursty", 20000, servers=30, intervals=6)
    assert any(servers > least for _, servers, least, *_ in before)  # the rule matters here
