"""Tetris' index of the waiting jobs by shape (issue 18): kept in step with the queue without a pass over
it, including when the scheduler refuses a start the policy planned."""

from __future__ import annotations

import zlib
from collections.abc import Set as AbstractSet

from cohabit.engine.apply import ActionError
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.engine.view import ClusterView
from cohabit.policies.tetris import Tetris
from cohabit.report.fingerprint import fingerprint
from cohabit.report.metrics import compute_metrics
from cohabit.sim.backend import SimBackend
from cohabit.sim.runner import config_for


class _Refusing(Scheduler):
    """Refuses the first start of every third job, as a cluster may refuse a placement."""

    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)  # type: ignore[arg-type]
        self.refused: set[str] = set()

    def _start(self, action):  # type: ignore[no-untyped-def,override]
        if zlib.crc32(action.job.encode()) % 3 == 0 and action.job not in self.refused:
            self.refused.add(action.job)
            raise ActionError(f"{action.job}: refused (test)")
        super()._start(action)


class _Compared(Tetris):
    """Compares the index with the queue in full every round (the check before it was incremental)."""

    def _in_step(self, view: ClusterView, waiting_ids: AbstractSet[str], count: int) -> bool:
        return view is self._view and count == len(self._indexed) and self._indexed.keys() >= waiting_ids


def _cluster():  # type: ignore[no-untyped-def]
    from cohabit.spec import cluster_from_arg

    return cluster_from_arg("muri-n8g8")


def _run(policy: Tetris):  # type: ignore[no-untyped-def]
    from cohabit.sim.traces import load_trace

    jobs = load_trace("philly_82k", "philly", limit=400).jobs
    cluster = _cluster()
    sched = _Refusing(cluster, policy, SimBackend(jobs, config_for(cluster, None)))
    result = sched.run([j.spec for j in jobs])
    return result, sched.refused


def test_a_refused_start_puts_the_job_back_in_the_index() -> None:
    got, refused = _run(Tetris())
    want, refused_too = _run(_Compared())
    assert refused and refused == refused_too
    assert sum(e.kind is EventKind.ACTION_REJECTED for e in got.record) == len(refused)
    cap = _cluster().capacity
    assert fingerprint(got.record, compute_metrics(got.record, cap)) == \
        fingerprint(want.record, compute_metrics(want.record, cap))


class _CheckedNothingFits(Tetris):
    """Checks every "nothing fits" answer, the kept ones included, against the shapes checked afresh."""

    kept = 0

    def _nothing_fits(self, view: ClusterView) -> bool:
        kept = self._none_fit is not None and self._none_fit == (view.room_version, self._shape_stamp)
        claimed = super()._nothing_fits(view)
        if claimed:
            self._none_fit = None
            assert super()._nothing_fits(view), (view.now, kept)
            _CheckedNothingFits.kept += kept
        return claimed


def test_a_kept_nothing_fits_answer_is_the_fresh_one() -> None:
    """The answer "no waiting shape fits" is kept while room only shrinks and no new shape waits (a finish, or
    an arrival of a shape not waiting before, makes it check again); the schedule is that of checking afresh."""
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace

    jobs = load_trace("philly_82k", "philly", limit=600).jobs
    checked = simulate(jobs, _cluster(), _CheckedNothingFits())
    real = simulate(jobs, _cluster(), Tetris())
    assert _CheckedNothingFits.kept > 100
    assert fingerprint(checked.result.record, checked.metrics) == fingerprint(real.result.record, real.metrics)


class _OrderChecked(Tetris):
    """Checks, at every round, that the rows a round reads by the table's live mask are the queue in order."""

    read = 0

    def decide(self, view):  # type: ignore[no-untyped-def,override]
        if not view.paused and self._in_step(view, view.pending.keys(), len(view.pending)):
            pos = self._queue_rows(view)
            if pos is not None:
                assert [self._ids[i] for i in pos] == list(view.pending), view.now
                _OrderChecked.read += 1
        return super().decide(view)


def test_rows_read_by_the_mask_are_the_queue_in_order_after_refused_starts() -> None:
    """A refused start leaves its job waiting without a row; its row, made again, is not at the job's place in
    the queue, so the table is rewritten in queue order before a round reads it by the live mask (fails if the
    table is read out of order)."""
    got, refused = _run(_OrderChecked())
    assert refused and _OrderChecked.read > 50
