"""Draft's cheap refusals (issue 18): the free-total memo and ``exhausted`` never refuse a job that
fits, and do refuse every job once the free total is below every admitted job's first worker."""

from __future__ import annotations

import numpy as np

from cohabit.engine.loop import Scheduler
from cohabit.policies.placement import Draft
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import SimConfig

from conftest import small_cluster, trace_job


class _Hold:
    """A policy that starts nothing: the test drives a Draft on its view by hand."""

    name = "hold"

    def decide(self, view):  # noqa: ANN001, ANN201
        return []


def _view(jobs, nodes=2, gpus=4):
    cluster = small_cluster(nodes, gpus)
    sched = Scheduler(cluster, _Hold(), SimBackend(jobs, SimConfig()))
    for tj in jobs:
        sched._arrive(tj.spec)
    return sched.view


def test_task_floor_is_the_smallest_admitted_worker_demand() -> None:
    view = _view([trace_job("a", 4, 10), trace_job("b", 2, 10), trace_job("c", 8, 10)])
    rows = [view.demand_vector(j) for j in view.pending.values()]
    assert np.array_equal(view.task_floor, np.min(rows, axis=0))
    assert not view.task_floor.flags.writeable


def test_exhausted_only_when_no_first_worker_fits() -> None:
    jobs = [trace_job("big", 4, 10), trace_job("small", 1, 10), trace_job("mid", 2, 10)]
    view = _view(jobs)  # 2 nodes x 4 GPUs
    d = Draft(view)
    big, small, mid = (view.pending[j] for j in ("big", "small", "mid"))
    assert d.place(big) is not None and not d.exhausted()
    assert d.place(mid) is not None and d.place(small) is not None  # 7 of 8 GPUs taken
    assert not d.exhausted()  # one GPU left: the 1-GPU job's shape would still fit
    assert d.place(mid) is None and d.place(small) is not None
    assert d.exhausted() and d.place(small) is None and d.place(big) is None


def test_a_shape_refused_on_the_free_total_fits_again_after_room_is_given_back() -> None:
    jobs = [trace_job("a", 4, 10), trace_job("b", 4, 10), trace_job("c", 4, 10)]
    view = _view(jobs)
    d = Draft(view)
    a, b, c = (view.pending[j] for j in ("a", "b", "c"))
    saved = d.save()
    assert d.place(a) is not None and d.place(b) is not None
    assert d.place(c) is None  # remembered as no room
    d.restore(saved)  # room grew: the memo is cleared
    assert d.place(c) is not None


def test_the_draft_and_its_scratch_ledger_are_one_free_capacity() -> None:
    # one planning scratch (issue 18): room the draft reserves is gone in its ledger(), room the
    # ledger allocates is gone in the draft, and the scheduler's own ledger is untouched
    view = _view([trace_job("a", 4, 10), trace_job("b", 4, 10), trace_job("c", 4, 10)])
    a, b, c = view.pending.values()
    draft = Draft(view)
    p = draft.place(a)
    assert p is not None
    led = draft.ledger()
    g = view.gpu_col
    assert led.free[:, g].sum() == 4.0  # 8 GPUs, a took 4
    led.allocate(b.id, [1] * 4 if p[0] == 0 else [0] * 4, [view.demand_vector(b)] * 4)
    assert draft.free_now[:, g].sum() == 0.0 and draft.exhausted()
    assert draft.place(c) is None
    assert view.free[:, g].sum() == 8.0 and not view.running


def test_the_draft_fits_follow_every_write_of_the_draft() -> None:
    """A dirty draft keeps each cached row's fits until it writes its arrays (issue 18): every
    reserve, give-back and restore, and any write through ``free`` (handed out writable), shows."""
    jobs = [trace_job("a", 2, 10), trace_job("b", 1, 10)]
    view = _view(jobs, nodes=1, gpus=4)
    d = Draft(view)
    a, b = view.pending["a"], view.pending["b"]
    w = view.demand_vector(b)
    saved = d.save()
    assert d.place(a) is not None
    assert d.tasks_fit(w).tolist() == [2] and d.tasks_fit(w) is d.tasks_fit(w)  # kept while nothing changes
    assert d.reserve(b, (0,))
    assert d.tasks_fit(w).tolist() == [1]
    d.restore(saved)
    assert d.tasks_fit(w).tolist() == [4]
    free = d.free  # a policy may plan into the arrays itself, at any later time
    assert d.tasks_fit(w).tolist() == [4]
    free[0] -= 3 * w
    d._dev[0, :3] = 0.0  # (and into the devices, as naive's device model does)
    assert d.tasks_fit(w).tolist() == [1]


def test_checkpoint_restores_the_room_it_was_taken_on() -> None:
    """``Draft.checkpoint`` copies nothing while the draft is pristine (restore copies the ledger's room back) and
    is a save otherwise: either way restore puts back the room as it was at the checkpoint, and the fits read
    afterwards are the fresh ones. Fails if a dirty draft's checkpoint is taken as pristine."""
    from cohabit.engine.ledger import fit_counts
    from cohabit.policies.placement import PristineMark

    jobs = [trace_job("big", 4, 10), trace_job("small", 1, 10), trace_job("mid", 2, 10)]
    view = _view(jobs, nodes=3, gpus=4)
    big, small, mid = (view.pending[j] for j in ("big", "small", "mid"))
    d = Draft(view)
    assert d.tasks_fit(view.demand_vector(small)) is not None
    mark = d.checkpoint()
    assert isinstance(mark, PristineMark)
    assert d.place(big) is not None and d.place(mid) is not None
    d.restore(mark)
    assert np.array_equal(d.free_now, view.free) and np.array_equal(d._arrays()[1], view.device_free)
    for job in (big, small, mid):
        w = view.demand_vector(job)
        assert np.array_equal(d.tasks_fit(w), fit_counts(view.free, view.device_free, w, view.gpu_col))
    assert d.place(big) is not None  # dirty now: the checkpoint is a save of this room
    room, dev = d.free_now.copy(), d._arrays()[1].copy()
    saved = d.checkpoint()
    assert not isinstance(saved, PristineMark)
    assert d.place(mid) is not None and d.place(small) is not None
    d.restore(saved)
    assert np.array_equal(d.free_now, room) and np.array_equal(d._arrays()[1], dev)
    w = view.demand_vector(mid)
    assert np.array_equal(d.tasks_fit(w), fit_counts(room, dev, w, view.gpu_col))
