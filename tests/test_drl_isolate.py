"""The ``isolate`` rule of the task-by-task loop (``policies.drl.isolate``): hand-coded, a
parameter of drl and LIF alike, read from the placement state only."""

from __future__ import annotations


import numpy as np
import pytest

from cohabit.policies import make_policy
from cohabit.policies.drl.isolate import narrow, unshared_room
from cohabit.policies.drl.state import PlacementState, new_entry
from cohabit.policies.drl.taskwise import place_new
from cohabit.policies.params import PolicyParamError

W = np.array([0.5, 0.25, 0.1])  # a worker: 1 of 2 GPUs, 2 of 8 cores, 10% of memory


def _state(m: int = 4, running_on: tuple[int, ...] = (0,), workers: int = 2) -> PlacementState:
    free = np.ones((m, 3))
    run = new_entry("r", "vgg-16", True, len(running_on), 0, W.copy(), np.zeros(3), m, placed=running_on, new=False)
    for s in running_on:
        free[s] -= W
    new = new_entry("n", "wlm", True, workers, 0, W.copy(), np.zeros(3), m)
    return PlacementState(free, [run, new])


def _lowest(state, job, mask):  # a chooser that takes the lowest valid action (server 0 first)
    return int(np.flatnonzero(mask)[0])


def test_isolate_keeps_a_new_job_off_busy_servers_when_it_fits_elsewhere_and_compact_keeps_it_together():
    placed, _ = place_new(_state(), _lowest, isolate="never")
    assert 0 in {s for s in np.flatnonzero(placed[0].placed_w)}  # the paper's masks: beside the running job
    state = _state()
    assert list(unshared_room(state, state.jobs[1])) == [False, True, True, True]
    placed, _ = place_new(_state(), lambda st, j, m: int(np.flatnonzero(m)[-1]), isolate="idle")
    assert placed[0].placed_w[0] == 0
    # compact: the second worker goes beside the first although a chooser would spread it
    spread = lambda st, j, m: int(np.flatnonzero(m)[-1]) if j.placed_w.sum() == 0 else int(np.flatnonzero(m)[0])
    placed, _ = place_new(_state(), spread, isolate="compact")
    assert list(placed[0].placed_w) == [0, 0, 0, 2]
    placed, _ = place_new(_state(), spread, isolate="idle")
    assert placed[0].placed_w[0] == 0 and placed[0].placed_w[3] == 1  # "idle" alone does not keep it together


def test_isolate_leaves_every_valid_action_open_when_the_job_must_share():
    state = _state(m=2, running_on=(0,), workers=2)  # one free server holds only 2 workers ...
    assert unshared_room(state, state.jobs[1]) is not None
    state = _state(m=2, running_on=(0,), workers=3)  # ... not 3: the job shares server 0 whatever
    assert unshared_room(state, state.jobs[1]) is None
    mask = state.mask(state.jobs[1])
    assert (narrow(mask, state.jobs[1], None, "compact") == mask).all()
    placed, _ = place_new(state, _lowest, isolate="compact")
    assert placed and placed[0].placed_w.sum() == 3
    # a job that must share: compact still keeps its tasks together where they fit, idle does not
    spread = lambda st, j, m: int(np.flatnonzero(m)[-1]) if j.placed_w.sum() == 0 else int(np.flatnonzero(m)[0])
    state = _state(m=3, running_on=(0, 1), workers=3)
    assert unshared_room(state, state.jobs[1]) is None
    placed, _ = place_new(state, spread, isolate="compact")
    assert list(placed[0].placed_w) == [1, 0, 2]
    placed, _ = place_new(_state(m=3, running_on=(0, 1), workers=3), spread, isolate="idle")
    assert list(placed[0].placed_w) == [1, 1, 1]


def test_drl_auto_isolates_on_30_servers_only_and_bad_values_are_refused():
    drl = make_policy("drl")
    assert (drl.isolate_for(30), drl.isolate_for(6)) == ("compact", "never")
    assert make_policy("drl:isolate=idle").isolate_for(30) == "idle"
    assert make_policy("lif-quad").isolate_for(30) == "never"
    with pytest.raises(PolicyParamError, match="isolate must be one of never, idle, compact"):
        make_policy("lif-line:isolate=auto")
