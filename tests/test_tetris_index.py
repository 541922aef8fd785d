"""Tetris' index of the waiting jobs by shape (issue 18): kept in step with the queue without a pass over
it, including when the scheduler refuses a start the policy planned."""

from __future__ import annotations

import zlib
from collections.abc import Set as AbstractSet

import numpy as np
import pytest

from cohabit.engine.apply import ActionError
from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.engine.view import ClusterView
from cohabit.policies import tetris
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
    """Checks every "nothing fits" answer (from the summed free room, kept from an earlier round, or kept by
    decide's first pick) against the per-node fits of every waiting shape, read afresh from the ledger."""

    kept = 0
    claimed = 0
    preset = 0  # kept answers a round that ended by the summed room less its starts left (_none_fit_after)

    def _none_fit_after(self, view: ClusterView) -> None:
        super()._none_fit_after(view)
        self._preset = self._none_fit

    def _nothing_fits(self, view: ClusterView) -> bool:
        kept = self._none_fit is not None and self._none_fit == (view.room_version, self._shape_stamp)
        preset = kept and self._none_fit is getattr(self, "_preset", None)
        claimed = super()._nothing_fits(view)
        if claimed:
            for (_, n), (w, ids) in self._by_shape.items():
                if ids:
                    fit = view.tasks_fit(w)
                    assert not (fit > 0).any() or int(np.minimum(fit, 1 << 40).sum()) < n, (view.now, kept, n)
            _CheckedNothingFits.kept += kept
            _CheckedNothingFits.preset += preset
            _CheckedNothingFits.claimed += 1
        return claimed


def test_a_nothing_fits_answer_is_that_of_the_per_node_fits() -> None:
    """The answer "no waiting shape fits" (from the free room summed over the nodes, or kept while room only
    shrinks and no new shape waits, kept from a first pick that found no feasible job, or left by a round that
    ended because the summed room less its starts takes no waiting shape) is that of the per-node fits; the
    schedule is the same as without the summed-room answers (fails if the bound is too strict, if a first pick
    keeps "nothing fits" after it planned, or if a round leaves "nothing fits" after a start that left room)."""
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace

    jobs = load_trace("philly_82k", "philly", limit=600).jobs
    checked = simulate(jobs, _cluster(), _CheckedNothingFits())
    real = simulate(jobs, _cluster(), Tetris())
    assert _CheckedNothingFits.kept > 100 and _CheckedNothingFits.claimed > 300
    assert _CheckedNothingFits.preset > 50
    assert fingerprint(checked.result.record, checked.metrics) == fingerprint(real.result.record, real.metrics)


class _Unbounded(Tetris):
    """Tetris without the summed-room answers: every round reads the per-node fits (the definition)."""

    def decide(self, view):  # type: ignore[no-untyped-def,override]
        with _no_bound():
            return super().decide(view)


class _no_bound:
    """Within it, :func:`~cohabit.policies.tetris.could_take` never rules a shape out; counts the rulings."""

    ruled_out = 0

    def __enter__(self) -> None:
        self.saved = tetris.could_take
        tetris.could_take = self._never

    def __exit__(self, *exc: object) -> None:
        tetris.could_take = self.saved

    def _never(self, total, slack, demand, n):  # type: ignore[no-untyped-def]
        if not self.saved(total, slack, demand, n):
            _no_bound.ruled_out += 1
        return True


@pytest.mark.parametrize("cluster", ["muri-n8g8", "cpu-bound"])
def test_the_summed_room_changes_no_schedule(cluster: str) -> None:
    """With the summed free room ruling out shapes (the "nothing fits" answer, and the end of a round once a
    start left no room for the smallest waiting job) the schedule is the one every round's per-node fits give
    (fails if the bound rules out a shape that fits, e.g. without the fit's tolerance or with a larger need)."""
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import ClusterSpec, Resources, cluster_from_arg

    jobs = load_trace("philly_82k", "philly", limit=700).jobs
    spec = (cluster_from_arg(cluster) if cluster != "cpu-bound"  # (5 tasks of 4 CPUs per node: CPU binds first)
            else ClusterSpec.homogeneous("cpu-bound", 6, Resources(gpu=8, cpu=20, mem_gb=512)))
    _no_bound.ruled_out = 0
    plain = simulate(jobs, spec, _Unbounded())
    assert _no_bound.ruled_out > 100  # (rounds the bound would have answered)
    real = simulate(jobs, spec, Tetris())
    assert fingerprint(plain.result.record, plain.metrics) == fingerprint(real.result.record, real.metrics)


def test_could_take_bounds_the_per_node_fits_from_above() -> None:
    """:func:`could_take` says no only where the nodes' fits (``fit_counts``, with its tolerance) add up to
    fewer tasks: nodes each a hair (within the tolerance) under one task's demand take one task each."""
    from cohabit.engine.alloc import fit_counts

    rng = np.random.default_rng(7)
    for _ in range(400):
        nodes = int(rng.integers(1, 70))
        demand = np.round(rng.uniform(0, 2, 3), int(rng.integers(0, 3))) * (rng.uniform(size=3) < 0.8)
        unit = np.where(demand > 0, demand, 1.0)
        free = unit * rng.integers(0, 4, (nodes, 3)) - rng.choice([0.0, 0.9e-9, 2e-9], (nodes, 3))
        free = np.maximum(free, -1e-9)
        fit = int(np.minimum(fit_counts(free, np.zeros((nodes, 0)), demand, None), 1 << 40).sum())
        total = free.sum(axis=0).tolist()
        need = [(c, v) for c, v in enumerate(demand.tolist()) if v > 1e-9]
        for n in (1, fit, fit + 1):
            if not tetris.could_take(total, tetris.room_slack(total, nodes), need, n):
                assert fit < n, (free, demand, n)
    free = np.full((64, 1), 0.1 - 0.9e-9)  # (each takes one task of 0.1: within the fit's tolerance)
    total = free.sum(axis=0).tolist()
    assert int(fit_counts(free, np.zeros((64, 0)), np.array([0.1]), None).sum()) == 64
    assert tetris.could_take(total, tetris.room_slack(total, 64), [(0, 0.1)], 64)


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


class _ViaPlaceWith(Tetris):
    """Places every pick with ``place_with(draft, job, aligned_chooser)`` (the definition), not from the pick's
    own fit and alignment."""

    def _place(self, draft, job, fit_score, free, n, more=True):  # type: ignore[no-untyped-def,override]
        from cohabit.policies.spread import place_with

        return place_with(draft, job, tetris.aligned_chooser, n_workers=n)


def test_a_pick_is_placed_as_place_with_places_it() -> None:
    """The nodes a pick takes come from the fit and alignment its pick computed on the same draft, as
    ``place_with`` with :func:`~cohabit.policies.tetris.aligned_chooser` would choose them (fails if the pick's
    arrays are stale, e.g. kept from an earlier pick of the round)."""
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import ClusterSpec, Resources

    jobs = load_trace("philly_82k", "philly", limit=700).jobs
    spec = ClusterSpec.homogeneous("cpu-bound", 6, Resources(gpu=8, cpu=20, mem_gb=512))
    want = simulate(jobs, spec, _ViaPlaceWith())
    got = simulate(jobs, spec, Tetris())
    assert fingerprint(got.result.record, got.metrics) == fingerprint(want.result.record, want.metrics)


def test_reserve_fits_answers_as_a_draft_reserves() -> None:
    """:func:`~cohabit.policies.tetris.reserve_fits` (the round's last start, checked without a draft) answers as
    ``Draft.reserve`` on a pristine draft, for every placement of one to three tasks per node of whole-GPU and
    half-GPU workers: on a node whose devices hold fractional shares (its free GPU column, 2.35, counts room no
    two whole devices have: fails without the device test), a node whose CPUs are left within the ledger's
    tolerance of two tasks' (fails without the row test), and an empty node."""
    import itertools

    from test_policy_tetris import job, view_with

    from cohabit.policies.placement import Draft

    fillers = {f"F{i}": job(f"F{i}", 0.55, 1, 8, duration=1e5) for i in range(3)}  # node 0: devices .45 .45 .45 1
    fillers["C"] = job("C", 0, 32 - 2 * 3.1 + 5e-10, 8, duration=1e5)  # node 1: 6.2 - 5e-10 CPUs free
    where = {"F0": 0, "F1": 0, "F2": 0, "C": 1}
    pending = [job("W", 1, 3.1, 8, submit=1.0, workers=3), job("H", 0.5, 3.1, 8, submit=1.0, workers=3)]
    view, _ = view_with(fillers, where, pending, nodes=3)
    answers = set()
    for jid in ("W", "H"):
        pend = view.pending[jid]
        w = view.demand_vector(pend)
        for k in range(1, 4):
            for placement in itertools.product(range(3), repeat=k):
                got = tetris.reserve_fits(view, w, placement)
                assert got == Draft(view).reserve(pend, placement), (jid, placement)
                answers.add((jid, placement, got))
    assert ("W", (0, 0), False) in answers and ("W", (1, 1), True) in answers and ("W", (2, 2, 2), True) in answers
    assert ("W", (1, 1, 1), False) in answers and ("H", (0, 0), True) in answers and ("H", (0, 0, 0), False) in answers


class _PickCompared(Tetris):
    """Makes every one-shape pick also with ``_pick_any`` (the alignments gathered per job, as every pick was
    made before) and checks both choose the same job; counts the kinds of picks seen."""

    seen: dict[str, int] = {}

    def _pick_one(self, fit, rows, need_max, p, alive):  # type: ignore[no-untyped-def,override]
        got = super()._pick_one(fit, rows, need_max, p, alive)
        want = self._pick_any({int(rows.at(0, 0)): fit}, rows[0].astype(np.int64), rows[1], p, alive)
        assert got == want, (got, want)
        kind = "none" if got < 0 else "later" if alive is not None else \
            "all" if fit[3] >= need_max else "some"
        kind += "-eps0" if not p.any() else ""
        _PickCompared.seen[kind] = _PickCompared.seen.get(kind, 0) + 1
        return got


def test_a_one_shape_pick_is_the_pick_over_the_gathered_alignments() -> None:
    """Every Philly job has one worker shape, so a pick reads no alignment per job (``Tetris._pick_one``); in
    whole runs it must choose the job the general pick chooses: in first picks where every job is feasible (no
    mask), where some are not, in later picks of a round, where none is, and with ``eps == 0``."""
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    _PickCompared.seen = {}
    jobs = load_trace("philly_82k", "philly", limit=1500).jobs
    simulate(jobs, cluster_from_arg("philly-512"), _PickCompared())
    simulate(jobs[:700], _cluster(), _PickCompared())
    seen = _PickCompared.seen
    assert all(seen.get(k, 0) >= 5 for k in ("all-eps0", "some", "later", "later-eps0", "none", "none-eps0")), seen


def test_one_shape_picks_on_random_rows() -> None:
    """``_pick_one`` against ``_pick_any`` on random rows: worker counts 1-8, rooms 0-9 (around the most any job
    needs), ``p`` with ties and zeros, alignments with and without ties to ``p``'s scale, some jobs already
    picked, and ``p`` a few ulps apart where the scores' ties depend on the last bits of ``eps`` (fails if the
    room is compared with one worker fewer than the most any job needs, if the picked jobs are not masked, or if
    the mean alignment is summed over one copy more)."""
    rng = np.random.default_rng(7)
    pol = Tetris()
    pol._shape_rows = [np.ones(3)]  # (one shape: _pick_any sizes its arrays by the shapes)
    kinds = set()
    for trial in range(3000):
        n = int(rng.integers(1, 12))
        table = np.zeros((len(tetris._COLS), n + 3))
        table[1, :n] = rng.integers(1, 9, n)
        pos = None if trial % 2 else np.arange(n)
        rows = tetris._Cols(table[:, :n] if pos is None else table, pos)
        p = rng.choice([0.0, 0.25, 0.5, 1.0], n) if trial % 3 else rng.random(n)
        if trial % 7 == 0:
            p[:] = 0.0
        a = float(rng.choice([0.0, 0.3, 1e-17, 2.0]))
        if trial % 5 == 0:  # p a few ulps apart: whether a + eps * p ties depends on eps's last bits
            p = 0.5 + rng.integers(0, 6, n) * 2.0 ** -53
            a = float(rng.choice([1.0, 2.0, 3.0, 5.0]))
        room = int(rng.integers(0, 10))
        alive = None if trial % 4 else rng.random(n) < 0.7
        fit = (np.zeros(4), np.zeros(4), a, room)
        got = pol._pick_one(fit, rows, int(table[1, :n].max()), p, alive)
        want = pol._pick_any({0: fit}, np.zeros(n, dtype=np.int64), rows[1], p, alive)
        assert got == want, (trial, got, want)
        kinds.add((got >= 0, alive is None and room >= table[1, :n].max()))
    assert kinds == {(True, True), (True, False), (False, False)}


class _GroupedCompared(Tetris):
    """Makes every grouped first pick also over the rows (``_pick_one`` on the live rows, as the full round reads
    them) and checks both choose the same row; counts the answers."""

    seen: dict[str, int] = {}

    def _pick_grouped(self, view, fit):  # type: ignore[no-untyped-def,override]
        got = super()._pick_grouped(view, fit)
        pos = self._live[:self._end].nonzero()[0]
        rows = tetris._Cols(self._table, pos)
        p = self._srtf_term(view, rows, False, False)
        k = self._pick_one(fit, rows, int(rows[1].max()), p, None)
        want = -1 if k < 0 else int(pos[k])
        kind = "undecided" if got is None else "none" if got < 0 else "eps0" if not p.any() else "picked"
        _GroupedCompared.seen[kind] = _GroupedCompared.seen.get(kind, 0) + 1
        assert got is None or got == want, (got, want)
        return got


def test_a_grouped_pick_is_the_pick_over_the_rows() -> None:
    """The round's first pick made from the groups of the waiting rows (one ``p`` per workers and size) is the
    pick over the rows, in whole runs: jobs picked by the SRTF blend and with ``eps == 0``."""
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    _GroupedCompared.seen = {}
    jobs = load_trace("philly_82k", "philly", limit=1500).jobs
    simulate(jobs, cluster_from_arg("philly-512"), _GroupedCompared())
    simulate(jobs[:700], _cluster(), _GroupedCompared())
    seen = _GroupedCompared.seen
    assert all(seen.get(k, 0) >= 5 for k in ("picked", "eps0")), seen


def test_grouped_picks_on_ulp_close_sizes() -> None:
    """``_pick_grouped`` against ``_pick_one`` on random tables whose sizes lie a few ulps apart (so are the
    ``p``), with alignments that make ``a + eps * p`` round to ties or not, and rooms that take no job: a grouped
    answer is the rows' answer, and near ties are left undecided (fails without the gap test, or with a gap bound of the order of the
    rounding itself)."""
    from types import SimpleNamespace

    rng = np.random.default_rng(11)
    pol = Tetris()
    undecided = decided = none = 0
    for trial in range(1500):
        n = int(rng.integers(1, 40))
        table = np.zeros((len(tetris._COLS), n + 5))
        table[1, :n] = rng.integers(1, 4, n)
        base = float(rng.choice([0.25, 0.3, 1.0 / 3.0]))
        table[2, :n] = base * (1.0 + rng.integers(0, 4, n) * 2.0 ** -52) * (1 if trial % 3 else table[1, :n])
        pol._table, pol._live, pol._end = table, np.zeros(n + 5, dtype=bool), n
        pol._live[:n] = rng.random(n) < 0.8
        pol._live[int(rng.integers(0, n))] = True
        pol._regroup()
        mean = float(rng.choice([3600.0, 1.0, 7.5]))
        view = SimpleNamespace(history=SimpleNamespace(mean_run_time=lambda m=mean: m))
        a = float(rng.choice([0.5, 1.0, 3.0, 1e3]))
        room = int(rng.integers(0, 4))
        fit = (np.zeros(1), np.zeros(1), a, room)
        got = pol._pick_grouped(view, fit)  # type: ignore[arg-type]
        pos = pol._live[:n].nonzero()[0]
        rows = tetris._Cols(table, pos)
        k = pol._pick_one(fit, rows, int(rows[1].max()), pol._srtf_term(view, rows, False, False), None)
        want = -1 if k < 0 else int(pos[k])
        if got is None:
            undecided += 1
        else:
            decided += 1
            none += got < 0
            assert got == want, (trial, got, want)
    assert undecided >= 20 and decided >= 500 and none >= 20, (undecided, decided, none)
