"""The per-job models of the learning-curve policies (Optimus, SLAQ, Themis; issue 18): loss fits, speed
models and length priors learned from reports (:class:`JobModels`), and what a round reads of them: its
per-job arrays (:class:`~.job_table.Snapshot`, rows of running jobs by columns, of queued jobs from the
per-job table), the waiting jobs admitted at their minimum (:mod:`.job_queue`), and the rigid running jobs'
holdings that let a round be skipped (:mod:`.job_holds`). Split out of :mod:`.optimus` (issue 18's ninth session); :mod:`.optimus` re-exports it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import chain, islice

import numpy as np

from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from ..models.loss_curve import LossCurve
from ..models.loss_fits import LossFits
from ..models.speed import Mode, SpeedModel
from .job_holds import RunningHoldings
from .job_queue import QueueReads
from .job_table import Snapshot, StaticTable


class JobModels(RunningHoldings, QueueReads):
    """Loss fits, speed models and length priors learned from reports, per job.

    ``observe`` is called from a policy's ``on_progress`` hook, so fitting happens when a
    report arrives, never inside a decision; ``forget`` from ``on_finish``. What a decision
    needs per job is cached as plain numbers, so :meth:`snapshot` is one cheap pass.
    ``trust_declared``: take a declared iteration count as the job's length (Themis's jobs
    report their remaining work) instead of capping the loss-curve estimate with it. ``rates``: follow
    each job's loss drops per iteration (the snapshot's ``max_rate`` and ``last_rate``, SLAQ's normaliser;
    0 without).
    """

    def __init__(self, tolerance: float = 0.05, recency: float | None = None, trust_declared: bool = False,
                 rates: bool = False) -> None:
        if not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
            raise ValueError(f"tolerance must be in (0, 1), got {tolerance!r}")
        self.tolerance = float(tolerance)
        self.trust_declared = trust_declared
        # refit when the history grew by 10% since the last fit, from the first fit on (not at every read below
        # 16 points: issue 18's eighth session; the fits read once per round anyway)
        self.loss = LossFits(recency=recency, dense=0, rates=rates)
        self._speed: dict[str, SpeedModel] = {}
        self._abc: dict[str, tuple[float, float, float]] = {}
        # per job: (the loss curve it was computed from, loss-curve estimate of total iterations, beta0,
        # beta1): computed when a snapshot first sees a new curve, not on every report
        self._fit: dict[str, tuple[LossCurve | None, float, float, float]] = {}
        # per job: the (placement, iteration time) of its last speed observation (a repeat changes nothing)
        self._last_speed: dict[str, tuple[tuple[int, ...], float]] = {}
        self._losses: dict[str, list[tuple[float, float]]] = {}  # per job: its reported loss history
        # paused job -> its slot in _table, whose row (StaticTable.freeze) was made at its first round in this
        # pause and holds while no report comes: a paused job's iterations, loss history and speed model move
        # only with reports (a resume without one changes none of them), and every report passes observe_many,
        # which drops the job from here; the prior and the finished jobs' mean length are read every round
        self._frozen: dict[str, int] = {}
        self._static: dict[str, tuple[int, int, int, float, float, str, int, int]] = {}
        self._row_index: dict[bytes, int] = {}
        self._row_list: list[np.ndarray] = []
        self._rows: np.ndarray | None = None  # distinct demand rows, indexed from _static
        self._rows_integral = True  # every row in _rows holds non-negative integers below 2**40
        self._row_of: dict[int, tuple[np.ndarray, int]] = {}  # id of a view's demand array -> (it, its row)
        self._zero_row: int | None = None
        self._table = StaticTable()  # the per-job constants again, as columns (pending jobs' rows in numpy)
        self._iters_by_model: dict[str, tuple[float, int]] = {}
        self._iters_all = (0.0, 0)
        self._iter_time_by_model: dict[str, tuple[float, int]] = {}
        self._hold = None  # (RunningHoldings: the running jobs' holdings, kept between rounds)

    # -- observations
    def observe(self, job: JobView) -> None:
        """Fold one report in: the measured speed into the job's speed model; its loss history is
        followed (:meth:`LossFits.follow`: the points appended are folded in when a round reads the
        fit). Called on every report, so it does only that: the estimates a decision reads are
        derived from the fit when a snapshot needs them."""
        self.observe_many((job,))

    def observe_many(self, jobs: Iterable[JobView]) -> None:
        """:meth:`observe` of each of ``jobs`` (one call for a batch of reports)."""
        losses, last_speed, frozen = self._losses, self._last_speed, self._frozen
        for job in jobs:
            jid = job.id
            if frozen:
                frozen.pop(jid, None)  # a report: the job's row is made afresh at its next paused round
            if jid not in losses:  # the job's loss history: one list the engine appends to
                pts = job.metrics.get("loss")
                if pts:
                    losses[jid] = pts
                    self.loss.follow(jid, pts)  # folded in and fitted when a round reads the curve
            it = job.iter_time
            if not it:
                continue
            placement = job.placement
            last = last_speed.get(jid)
            # the same placement and iteration time as the last observation: SpeedModel.observe of the
            # same (workers, speed) again would change nothing
            if last is not None and last[0] is placement and last[1] == it:
                continue
            last_speed[jid] = (placement, it)
            w = job.n_workers
            if w > 0:
                m = self._speed.get(jid)
                if m is None:
                    m = self._speed[jid] = SpeedModel(speed_mode(job))
                if m.observe(job.spec.num_ps, w, 1.0 / it):
                    self._abc.pop(jid, None)

    def _fit_of(self, jid: str, declared: float) -> tuple[float, float, float, float, float]:
        """``(total iterations estimated by the loss curve, beta0, beta1, max drop rate, last drop
        rate)`` of a job whose loss was observed; the curve-derived part cached per fitted curve."""
        self.loss.track(jid)  # (caught up, its due fit done)
        return tuple(self._fits_of((jid,), (declared,)))  # type: ignore[return-value]

    def forget(self, job: JobView) -> None:
        if job.state is JobState.FINISHED and job.reported_iterations > 0:
            s, n = self._iters_by_model.get(job.spec.model, (0.0, 0))
            self._iters_by_model[job.spec.model] = (s + job.reported_iterations, n + 1)
            s, n = self._iters_all
            self._iters_all = (s + job.reported_iterations, n + 1)
            m = self._speed.get(job.id)
            abc = None if m is None else m.coefficients(job.spec.num_ps)
            if abc is not None and sum(abc) > 0:  # seconds per iteration on one worker, for unseen jobs
                s, n = self._iter_time_by_model.get(job.spec.model, (0.0, 0))
                self._iter_time_by_model[job.spec.model] = (s + sum(abc), n + 1)
        self.loss.drop(job.id)
        self._table.drop(job.id)
        for cache in (self._speed, self._abc, self._fit, self._static, self._last_speed, self._losses, self._frozen):
            cache.pop(job.id, None)  # type: ignore[attr-defined]

    # -- estimates
    def curve(self, job: JobView) -> LossCurve | None:
        return self.loss.get(job.id)

    def coefficients(self, job: JobView) -> tuple[float, float, float]:
        """``(A, B, C)`` of ``1/f(w) = A/w + B + C w`` (s/iteration): the fitted speed model, or
        before any measurement the perfect-scaling prior from finished jobs of the same model
        (1 s per iteration on one worker if none finished)."""
        hit = self._abc.get(job.id)
        if hit is not None:
            return hit
        m = self._speed.get(job.id)
        abc = None if m is None else m.coefficients(job.spec.num_ps)
        if abc is None:
            s, n = self._iter_time_by_model.get(job.spec.model, (0.0, 0))
            return (s / n if n else 1.0, 0.0, 0.0)  # prior: not cached, history may grow
        self._abc[job.id] = abc
        return abc

    def speed(self, job: JobView, w: float) -> float:
        """Predicted iterations/s of ``job`` on ``w`` workers (0 if none)."""
        if w <= 0:
            return 0.0
        a, b, c = self.coefficients(job)
        t = a / w + b + c * w
        return 1.0 / t if t > 0 else 0.0

    def remaining_iterations(self, job: JobView, now: float) -> float:
        """Estimated iterations left (>= 1), per the rule in the module docstring."""
        snap = self.snapshot_of([job], now, None)
        return float(snap.remaining[0])

    def _history_iterations(self, model: str) -> float:
        s, n = self._iters_by_model.get(model, (0.0, 0))
        if not n:
            s, n = self._iters_all
        return s / n if n else math.nan

    def _static_of(self, view: ClusterView | None, job: JobView) -> tuple[int, int, int, float, float, str, int, int]:
        """Per-job constants: seq, n_min, n_max, submit time, declared iterations (nan: none),
        model, and the rows of its worker and parameter-server demand in :attr:`_rows`."""
        hit = self._static.get(job.id)
        if hit is None:
            spec = job.spec
            declared = float(spec.iterations) if spec.iterations is not None else math.nan
            w_row = p_row = 0
            if view is not None:
                w = view.demand_vector(job)  # one array per spec (ClusterView.shape): its row is looked up once
                known = self._row_of.get(id(w))
                if known is not None and known[0] is w:
                    w_row = known[1]
                else:
                    w_row = self._row(w)
                    self._row_of[id(w)] = (w, w_row)
                num_ps = spec.num_ps
                p = view.ps_demand_vector(job) if num_ps else None
                if p is not None:
                    p_row = self._row(p * num_ps)
                else:  # no parameter servers: the zero row
                    if self._zero_row is None:
                        self._zero_row = self._row(np.zeros_like(w))
                    p_row = self._zero_row
            hit = (job.seq, spec.min_workers, spec.max_workers, spec.submit_time, declared, spec.model, w_row, p_row)
            if view is not None:
                self._static[job.id] = hit
        return hit

    def _row(self, v: np.ndarray) -> int:
        key = v.tobytes()
        i = self._row_index.get(key)
        if i is None:
            i = self._row_index[key] = len(self._row_list)
            row = np.array(v, dtype=np.float64)
            self._row_list.append(row)
            self._rows = np.array(self._row_list)
            # every demand row a small non-negative integer: sums of bundles are exact in any order
            self._rows_integral = self._rows_integral and bool(((row >= 0) & (row == np.floor(row)) & (row < 2.0 ** 40)).all())
        return i

    def snapshot(self, view: ClusterView, jobs: Sequence[JobView], *, waiting_tail: int = 0) -> Snapshot:
        """The jobs' state and estimates as arrays, for vectorised allocation. ``waiting_tail``: the last
        ``waiting_tail`` of ``jobs`` are the queue, ``view.paused`` then ``view.pending`` in their order
        (``waiting_jobs(view)``), or its first ``waiting_tail`` jobs: their rows are then found by job id
        without a Python step per job."""
        return self.snapshot_of(jobs, view.now, view, waiting_tail=waiting_tail)

    def snapshot_of(self, jobs: Sequence[JobView], now: float, view: ClusterView | None, *,
                    cached: bool = True, waiting_tail: int = 0) -> Snapshot:
        """:meth:`snapshot` at ``now``. A paused job's row is kept from its first round in that pause
        (only the prior and the finished jobs' mean length, which finishes move, are read again) and
        pending jobs' rows come from :class:`StaticTable` in one numpy pass; ``cached=False`` makes
        every row in Python, the reference ``tests/test_policy_optimus.py`` compares them with."""
        ints: list[int] = []
        flts: list[float] = []
        nan5 = (math.nan, math.nan, math.nan, 0.0, 0.0)
        running, paused = JobState.RUNNING, JobState.PAUSED
        static, abcs, tracks = self._static, self._abc, self.loss.tracks
        hist: dict[str, float] = {}
        prior: dict[str, tuple[float, float, float]] = {}
        ids: list[str] = []
        frozen = self._frozen if view is not None and cached else {}
        pending, speed, table = JobState.PENDING, self._speed, self._table
        slots = table.slots
        fresh_pos: list[int] = []  # rows of pending jobs (never ran: no report, no speed model, no loss fit)
        fresh_slot: list[int] = []
        n_head = len(jobs) - waiting_tail if cached and view is not None else len(jobs)
        items: Iterable[tuple[int, JobView]] = enumerate(jobs[:n_head] if n_head < len(jobs) else jobs)
        live: tuple[list[int], list[JobView]] | None = None
        if cached and view is not None and n_head:  # the running jobs' rows by columns (_running_columns)
            head = jobs[:n_head]
            states = [job.state for job in head]
            pos_run = [i for i, st in enumerate(states) if st is running]
            if pos_run:
                live = (pos_run, [head[i] for i in pos_run])
                if len(pos_run) < n_head:
                    items = ((i, head[i]) for i, st in enumerate(states) if st is not running)
                else:
                    items = iter(())
        tail_ids: list[str] = []
        if n_head < len(jobs):  # the queue's rows by id: kept paused rows and pending rows from the table
            assert view is not None
            items, tail_ids = self._queue_rows(view, n_head, len(jobs), items, fresh_pos, fresh_slot)
        for pos, job in items:
            jid = job.id
            ids.append(jid)
            st = job.state
            if st is pending and cached and view is not None and jid not in tracks and jid not in abcs and jid not in speed:
                slot = slots.get(jid)
                if slot is None:
                    slot = table.add(jid, *(static.get(jid) or self._static_of(view, job)))
                fresh_pos.append(pos)
                fresh_slot.append(slot)
                continue
            if st is paused:  # a paused job's row: the one made at its first round in this pause
                slot = frozen.get(jid)
                if slot is not None:
                    fresh_pos.append(pos)
                    fresh_slot.append(slot)
                    continue
            seq, lo, hi, submit, declared, model, w_row, p_row = static.get(jid) or self._static_of(view, job)
            if st is running:
                code, cur = 1, job.n_workers
            else:
                code, cur = (2 if st is paused else 0), 0
            abc = abcs.get(jid)
            if abc is None:
                if jid in self._speed:
                    abc = self.coefficients(job)
                else:  # the prior depends only on the model
                    abc = prior.get(model)
                    if abc is None:
                        abc = prior[model] = self.coefficients(job)
            h = hist.get(model)
            if h is None:
                h = hist[model] = self._history_iterations(model)
            ints_row = (seq, cur, lo, hi, code, w_row, p_row)
            head = (job.iterations_done(now), submit, declared)
            fit = self._fit_of(jid, declared) if jid in tracks else nan5
            ints.extend(ints_row)
            flts.extend(head)
            flts.extend(abc)
            flts.extend(fit)
            flts.append(h)
            if st is paused and view is not None and cached:
                slot = slots.get(jid)
                if slot is None:
                    slot = table.add(jid, seq, lo, hi, submit, declared, model, w_row, p_row)
                table.freeze(slot, head[0], abc, fit, prior=jid not in abcs)
                frozen[jid] = slot
        n = len(jobs)
        if live is not None:  # (their ids go in at their positions: the Python rows' ids are the others')
            assert view is not None
            run_cols = self._running_columns(view, now, live[1], fresh_pos, fresh_slot, live[0])
            k = len(live[0])
            run_ids = dict(zip(live[0], run_cols[0]))
            others = iter(ids[:n_head - k])  # (the Python rows: the head's other jobs first, in order)
            ids = [run_ids[i] if i in run_ids else next(others) for i in range(n_head)] + ids[n_head - k:]
        if n_head < n:
            ids = ids[:n_head] + tail_ids
        if fresh_pos:
            iv, fv = self._with_fresh(n, ints, flts, fresh_pos, fresh_slot)
            if live is not None:
                pos = live[0]
                iv[1, pos], iv[4, pos] = run_cols[1], 1
                fv[0, pos] = run_cols[2]
                fv[3:6, pos] = np.array(run_cols[3], dtype=np.float64).reshape(len(pos), 3).T
                fv[6:11, pos] = np.array(run_cols[4], dtype=np.float64).reshape(len(pos), 5).T
        else:
            iv = np.array(ints, dtype=np.int64).reshape(n, 7).T
            fv = np.array(flts, dtype=np.float64).reshape(n, 12).T
        return self._assemble(list(jobs), ids, iv, fv, view)

    def _assemble(self, jobs: list[JobView], ids: list[str], iv: np.ndarray, fv: np.ndarray,
                  view: ClusterView | None) -> Snapshot:
        """The snapshot of the int and float columns ``iv`` (7, n) and ``fv`` (12, n) of ``jobs`` (``ids``)."""
        n = len(ids)
        done, submit, declared, a, b, c, total, b0, b1, max_rate, last_rate, hist_iters = fv
        remaining = self._remaining(done, declared, total, hist_iters)
        if view is not None and self._rows is not None:
            worker, ps, cap = self._rows[iv[5]], self._rows[iv[6]], view.capacity.sum(axis=0)
        elif view is not None:  # no job seen yet (an empty snapshot)
            cap = view.capacity.sum(axis=0)
            worker = ps = np.zeros((n, cap.shape[0]))
        else:
            worker = ps = np.zeros((n, 0))
            cap = np.zeros(0)
        return Snapshot(jobs, ids, iv[0], iv[1], iv[2], iv[3], iv[4], done, remaining, a, b, c, submit,
                        declared, b0, b1, max_rate, last_rate, worker, ps, cap)

    def queue_slots(self, view: ClusterView) -> tuple[list[str], list[int]] | None:
        """The view's queue (paused, then pending, in its order) as job ids and per-job table slots, when every
        paused job's row is kept (:meth:`snapshot_of` made it at its first round in this pause); None when
        one is not (a snapshot over the queue makes it). A pending job's slot holds its row already."""
        p_ids = list(view.paused)
        p_slots = list(map(self._frozen.get, p_ids))
        if None in p_slots:
            return None
        q_ids = list(view.pending)
        return p_ids + q_ids, p_slots + self._slots(view, q_ids)  # type: ignore[operator]

    def table_snapshot(self, view: ClusterView, jobs: list[JobView], slots: Sequence[int]) -> Snapshot:
        """The snapshot of queued ``jobs`` whose rows are kept in the per-job table at ``slots``
        (:meth:`queue_slots`): the rows :meth:`snapshot` gives them, read from the table alone."""
        n = len(jobs)
        iv, fv = self._with_fresh(n, [], [], list(range(n)), list(slots))
        return self._assemble(jobs, [job.id for job in jobs], iv, fv, view)

    def prior_times(self, models: np.ndarray) -> np.ndarray:
        """The prior time per iteration on one worker (``a``; ``b = c = 0``) of a job of each per-job table model
        index in ``models``, as :meth:`_with_fresh` reads it: the mean of the finished jobs of that model, else 1 s."""
        names = self._table.models
        out = np.empty(len(names))
        for m in np.flatnonzero(np.bincount(models, minlength=len(names))).tolist():
            s, c = self._iter_time_by_model.get(names[m], (0.0, 0))
            out[m] = s / c if c else 1.0
        return out[models]

    def _running_columns(self, view: ClusterView, now: float, jobs: list[JobView], fresh_pos: list[int],
                         fresh_slot: list[int], pos: list[int]) -> tuple[list[str], list[int], list[float],
                                                                         list[float], list[float]]:
        """The rows of running ``jobs`` (at positions ``pos`` of a snapshot) by columns: their constants (seq,
        ``n_min``, ``n_max``, demand rows, submit time, declared length, the finished jobs' mean length) go
        to ``fresh_pos`` / ``fresh_slot`` to be read from the per-job table with the queue's rows
        (:meth:`_with_fresh`); returned, for the caller to write over the table's: their ids, workers held,
        iterations done, speed coefficients (flat, 3 per job) and loss-fit numbers (flat, 5 per job,
        :meth:`_fit_of`): the numbers the Python row of each would hold, made by one pass per column."""
        ids = [job.id for job in jobs]
        table, static = self._table, self._static
        sl = list(map(table.slots.get, ids))
        if None in sl:  # (not seen by a round while it waited: its constants go into the table)
            for i, (jid, slot) in enumerate(zip(ids, sl)):
                if slot is None:
                    sl[i] = table.add(jid, *(static.get(jid) or self._static_of(view, jobs[i])))
        fresh_pos.extend(pos)
        fresh_slot.extend(sl)  # type: ignore[arg-type]
        cur = [job.n_workers for job in jobs]
        done = [job.iterations_done(now) for job in jobs]
        abcs, coefficients = self._abc, self.coefficients
        abc = list(chain.from_iterable(abcs.get(jid) or coefficients(job) for jid, job in zip(ids, jobs)))
        self.loss.fit_many(ids)  # caught up, and the fits due among them in one stacked pass (the same curves)
        declared = table.declared[np.array(sl, dtype=np.int64)].tolist()
        return ids, cur, done, abc, self._fits_of(ids, declared)

    def _fits_of(self, ids: Sequence[str], declared: Sequence[float]) -> list[float]:
        """:meth:`_fit_of` of each job of ``ids`` (``nan, nan, nan, 0, 0`` for a job whose loss was never
        observed), flat, 5 per job, for jobs that :meth:`LossFits.fit_many` caught up a moment ago (nothing
        new to fold, no fit due: :meth:`LossFits.track` would do nothing), read without it."""
        tracks, memo, tolerance = self.loss.tracks, self._fit, self.tolerance
        nan5 = (math.nan, math.nan, math.nan, 0.0, 0.0)
        out: list[float] = []
        for jid, d in zip(ids, declared):
            t = tracks.get(jid)
            if t is None:
                out.extend(nan5)
                continue
            curve = t.curve
            hit = memo.get(jid)
            if hit is None or hit[0] is not curve:
                total = b0 = b1 = math.nan
                if curve is not None:
                    b0, b1 = curve.beta0, curve.beta1
                    total = curve.iterations_to_converge(tolerance)
                    if d == d:  # a declared count caps the estimate
                        total = min(total, d)
                hit = memo[jid] = (curve, total, b0, b1)
            out.extend((hit[1], hit[2], hit[3], t.max_rate, t.last_rate))
        return out

    def _queue_rows(self, view: ClusterView, h: int, n: int, head: Iterable[tuple[int, JobView]],
                    fresh_pos: list[int], fresh_slot: list[int]) -> tuple[Iterable[tuple[int, JobView]], list[str]]:
        """For a snapshot whose rows ``h:n`` are the queue (paused, then pending, in the view's order), or its
        first ``n - h`` jobs:
        the table slots of the paused jobs with a kept row and of the pending jobs go to ``fresh_pos`` /
        ``fresh_slot``; returns the rows still to make in Python (``head``, then the paused jobs without
        a kept row, in position order) and the queue's job ids."""
        paused, pending = view.paused, view.pending
        if n - h > len(paused) + len(pending):
            raise ValueError(f"waiting_tail={n - h} but the queue holds {len(paused) + len(pending)} jobs")
        p_ids = list(islice(paused, n - h))
        q_ids = list(islice(pending, n - h - len(p_ids)))
        p_slots = list(map(self._frozen.get, p_ids))
        miss: list[tuple[int, JobView]] = []
        if None in p_slots:
            miss = [(h + i, paused[jid]) for i, (jid, slot) in enumerate(zip(p_ids, p_slots)) if slot is None]
            fresh_pos.extend(h + i for i, slot in enumerate(p_slots) if slot is not None)
            fresh_slot.extend(slot for slot in p_slots if slot is not None)
        else:  # every paused job's row kept (the common case): no step per job
            fresh_pos.extend(range(h, h + len(p_ids)))
            fresh_slot.extend(p_slots)  # type: ignore[arg-type]
        table, static = self._table, self._static
        q_slots = list(map(table.slots.get, q_ids))
        if None in q_slots:  # jobs not seen yet: their constants go into the table
            for i, (jid, slot) in enumerate(zip(q_ids, q_slots)):
                if slot is None:
                    q_slots[i] = table.add(jid, *(static.get(jid) or self._static_of(view, pending[jid])))
        start = h + len(p_ids)
        fresh_pos.extend(range(start, start + len(q_ids)))
        fresh_slot.extend(q_slots)  # type: ignore[arg-type]
        return chain(head, miss), p_ids + q_ids

    def _with_fresh(self, n: int, ints: list[int], flts: list[float], fresh_pos: list[int],
                    fresh_slot: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The snapshot's int and float columns, ``(7, n)`` and ``(12, n)``: the rows made in Python
        (``ints``, ``flts``, in order) and, at ``fresh_pos``, rows from the per-job table
        (:class:`StaticTable`) in one numpy pass: pending jobs (nothing done, no speed model, no loss
        fit) and paused jobs whose row was kept (:meth:`StaticTable.freeze`). A row without a fitted
        speed model takes the prior of its job's model, ``(mean iteration time of finished jobs of that
        model, else 1 s, 0, 0)``, and every row the finished jobs' mean length, read now: the same
        numbers the Python row would hold."""
        t = self._table
        sl = np.array(fresh_slot, dtype=np.int64)
        k = n - len(fresh_pos)
        if k:
            fp: np.ndarray | slice = np.array(fresh_pos, dtype=np.int64)  # (positions paired with slots: any order)
            fresh = np.zeros(n, dtype=bool)
            fresh[fp] = True
            rest = ~fresh
            iv = np.empty((7, n), dtype=np.int64)
            fv = np.empty((12, n), dtype=np.float64)
            iv[:, rest] = np.array(ints, dtype=np.int64).reshape(k, 7).T
            fv[:, rest] = np.array(flts, dtype=np.float64).reshape(k, 12).T
            iv[:, fp] = t.ints[:7, sl]
            fv[:, fp] = t.flts[:, sl]
        else:  # every row from the table: gathered in position order, one fancy index per block
            order = np.empty(n, dtype=np.int64)
            order[np.array(fresh_pos, dtype=np.int64)] = sl
            sl, fp = order, slice(None)
            iv = t.ints[:7, sl]
            fv = t.flts[:, sl]
        models = t.model[sl]
        hist = np.empty(len(t.models))
        for m in np.flatnonzero(np.bincount(models, minlength=len(t.models))).tolist():  # (np.unique's set)
            hist[m] = self._history_iterations(t.models[m])
        prior = t.prior[sl]
        if prior.any():
            fv[3, fp] = np.where(prior, self.prior_times(models), fv[3, fp])
            fv[4, fp] = np.where(prior, 0.0, fv[4, fp])
            fv[5, fp] = np.where(prior, 0.0, fv[5, fp])
        fv[11, fp] = hist[models]
        return iv, fv

    def _remaining(self, done: np.ndarray, declared: np.ndarray, total: np.ndarray, hist: np.ndarray) -> np.ndarray:
        """Iterations left: the loss-curve estimate (kept going 5% longer if the job outlives it),
        the declared count, the mean of finished jobs, or as many as done — in that order
        (declared first with ``trust_declared``)."""
        has_decl, has_fit = ~np.isnan(declared), ~np.isnan(total)
        fitted = np.maximum(np.maximum(total - done, 0.05 * done), 1.0)
        decl = np.maximum(declared - done, 1.0)
        fallback = np.where(hist > done, hist - done, np.maximum(done, 1.0))
        if self.trust_declared:
            return np.where(has_decl, decl, np.where(has_fit, fitted, fallback))
        return np.where(has_fit, fitted, np.where(has_decl, decl, fallback))


def speed_mode(job: JobView) -> Mode:
    return "sync" if job.spec.architecture == "ps" and job.spec.num_ps > 0 else "allreduce"
