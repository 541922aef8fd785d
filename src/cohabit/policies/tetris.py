"""Tetris: multi-resource packing (Grandl et al., "Multi-Resource Packing for Cluster
Schedulers", SIGCOMM'14).

**Alignment** (§3.2): for a task with peak demand vector ``d`` and a machine
with free vector ``f``, both normalised by the machine's capacity, the
alignment score is the dot product ``sum_r (d_r / C_r) * (f_r / C_r)`` over
every resource of the cluster. Among the waiting jobs and the machines that
can take one of their tasks, Tetris picks the best-scoring (job, machine)
pair, reserves, and repeats until nothing else fits. A job here is a gang of
identical workers (plus parameter servers): its score is that of its first
task's best machine, and its tasks are then placed one at a time on the
machine with the best alignment given what the earlier tasks took (parameter
servers likewise, with their own demand).

**SRTF blend** (§3.3): ``score = alignment + eps * p`` where ``p`` in [0, 1]
favours jobs with less *remaining work* (remaining time x the job's demand,
normalised by cluster capacity; ``p = 1 - work / max work`` among the
candidates, 0 for unknown). As in the paper, ``eps`` is scaled by the mean
alignment over the mean ``p`` of the candidates, so ``epsilon=1`` weighs the
two terms equally on average and ``epsilon=0`` is pure packing. Remaining time
is estimated from observable data only, the way :class:`~.srtf.SRTF` does
(declared iterations x measured or historical seconds per iteration, else the
mean finished run time minus time run so far); ``use_oracle=True`` reads the
true lengths instead (the policy is then named ``tetris[oracle]`` and needs
``--oracle``).

**Fairness knob** (§3.4): with ``fairness=f`` in [0, 1), only the
``ceil((1 - f) * #jobs)`` waiting jobs whose tenants are furthest below their
fair share (lowest weighted dominant share, as in DRF) are candidates;
``f=0`` (default) is the efficiency-only Tetris.

Non-preemptive: running tasks are never paused (Tetris packs free resources).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Set as AbstractSet
from operator import itemgetter

import numpy as np

from ..engine.actions import Placement, Plan
from ..engine.job import JobView
from ..engine.oracle import Oracle
from ..engine.view import ClusterView
from .base import BasePolicy
from .drf import TenantBook, job_usage
from .placement import Draft
from .spread import place_with, start_or_resume, waiting_in_order
from .params import build
from .tetris_room import _EPS, aligned_chooser, aligned_tasks, alignment, could_take, reserve_fits, room_slack
from .tetris_rows import _COLS, RowPicks, WaitingRows, _Cols, _add

__all__ = ["Tetris", "make", "aligned_chooser", "aligned_tasks", "alignment", "could_take", "reserve_fits",
           "room_slack"]


_GroupInfo = tuple[bytes, np.ndarray, int, float]  # shape key, worker demand, start size, normalised size


class Tetris(WaitingRows, RowPicks, BasePolicy):
    """Alignment packing with the SRTF blend and the fairness knob (see module doc)."""

    def __init__(self, epsilon: float = 1.0, fairness: float = 0.0, use_oracle: bool = False) -> None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or not math.isfinite(epsilon) \
                or epsilon < 0:
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        if isinstance(fairness, bool) or not isinstance(fairness, int | float) or not 0 <= fairness < 1:
            raise ValueError(f"fairness must lie in [0, 1), got {fairness!r}")
        if not isinstance(use_oracle, bool):
            raise ValueError(f"use_oracle must be True or False, got {use_oracle!r}")
        self.epsilon = float(epsilon)
        self.fairness = float(fairness)
        self.uses_oracle = use_oracle
        self._book = TenantBook()
        self._view: ClusterView | None = None
        self._groups: dict[tuple[int, int, int | None], tuple[object, object, _GroupInfo]] = {}
        self._new_table()  # the waiting jobs' rows (tetris_rows.WaitingRows)
        self._shape_ids: dict[bytes, int] = {}
        self._shape_rows: list[np.ndarray] = []
        self._shape_keys: list[bytes] = []  # per shape id: its demand row's bytes
        self._w_safe: list[np.ndarray] = []  # per shape id: its demand row / the capacity (alignment's factor)
        self._safe = np.zeros((0, 0))  # the capacity with inf for 0 (alignment's divisor), per view
        self._models: dict[str, int] = {}
        self._oracle: Oracle | None = None
        self._inv = np.zeros(0)
        # the waiting jobs by worker shape (demand row bytes, workers): a round in which no waiting shape
        # fits anywhere plans nothing, and is answered from these without a pass over the queue
        self._by_shape: dict[tuple[bytes, int], tuple[np.ndarray, set[str]]] = {}
        self._indexed: dict[str, tuple[bytes, int]] = {}  # job id -> its key in _by_shape
        self._summary: dict[bytes, tuple[int, int]] | None = None  # see _waiting_shapes
        self._checked = False  # this round found the index in step with the queue already
        # a shape of the index became non-empty (bumped by _index): with the ledger's room version, the key of
        # the last "nothing fits" answer (_none_fit), which stays true while neither moves
        self._shape_stamp = 0
        self._none_fit: tuple[int, int] | None = None
        # the key (as _none_fit) of this round's open answer of _nothing_fits: decide's first pick keeps it as
        # "nothing fits" if it finds no feasible job
        self._open: tuple[int, int] | None = None
        # the ledger's free room summed over the nodes and its slack, if this round's _nothing_fits made them
        self._free_sum: tuple[list[float], list[float]] | None = None
        # per demand row (its bytes): the resources it needs as (column, amount), for could_take
        self._needs: dict[bytes, list[tuple[int, float]]] = {}
        self._n_nodes = 0
        self._hist: tuple[tuple[int, int], np.ndarray] = ((-1, -1), np.zeros(0))  # see _remaining
        self.name = "tetris[oracle]" if use_oracle else "tetris"

    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        if self.fairness > 0:
            self._book.see(job, view)
        self._index(view, job)
        if job.id not in self._slot:
            self._row(view, job)  # (what a round reads of a job that never ran: the same now as at its round)
        else:
            self._ordered = False  # (a job seen before arrives again: its row is not at the queue's end)

    def _index(self, view: ClusterView, job: JobView) -> None:
        key, w, n, _ = self._info(view, job)
        hit = self._by_shape.get((key, n))
        if hit is None:
            hit = self._by_shape[(key, n)] = (w, set())
        if not hit[1]:
            self._shape_stamp += 1  # a shape not in the queue before: it may fit
        hit[1].add(job.id)
        self._indexed[job.id] = (key, n)
        self._summary = None

    def _unindex(self, job_id: str) -> None:
        shape = self._indexed.pop(job_id, None)
        if shape is not None:
            self._by_shape[shape][1].discard(job_id)
            self._summary = None

    def _waiting_shapes(self) -> dict[bytes, tuple[int, int]]:
        """Per demand row with jobs in the index: the fewest and the most workers any of them needs (kept until
        the index changes)."""
        out = self._summary
        if out is None:
            out = self._summary = {}
            for (row_key, n), (_, ids) in self._by_shape.items():
                if ids:
                    hit = out.get(row_key)
                    out[row_key] = (n, n) if hit is None else (min(hit[0], n), max(hit[1], n))
        return out

    def _in_step(self, view: ClusterView, waiting_ids: AbstractSet[str], count: int) -> bool:
        """The index holds exactly the ``count`` waiting jobs ``waiting_ids`` (a set-like view).

        Without paused jobs the counts decide, with no pass over the queue: the index gains every admitted
        job (``on_arrival``) and loses every job that ends (``on_finish``) or that a plan starts, while a
        pending job leaves the queue only by ending or by a start that was carried out; so the index is a
        subset of the queue (a refused start leaves a pending job outside it) and equal counts mean equal
        sets. With paused jobs the sets are compared (C speed)."""
        if view is not self._view or count != len(self._indexed):
            return False
        return not view.paused or self._indexed.keys() >= waiting_ids

    def _nothing_fits(self, view: ClusterView) -> bool:
        """True when the index holds exactly the waiting jobs and none of their shapes fits the free
        capacity now: the first pick of :meth:`decide` would find no feasible job (room < workers or
        no node with room for one task), so the round plans nothing. False when unsure.

        A true answer is kept while the ledger's room version stays (room only shrank: a shape that did not
        fit still does not) and no shape joined the waiting jobs (only jobs of shapes already waiting arrived,
        or jobs left): then the shapes are not checked again. Otherwise the free room summed over the nodes
        answers (:func:`could_take`: no shape's workers fit the total, the usual "nothing fits" on a full
        cluster, with no per-node fit). When some shape could take its workers by the total, the per-node fits
        are read by :meth:`decide`'s first pick, on the same free capacity and the same shapes: if it finds no
        feasible job, it keeps the answer "nothing fits" as this method would have."""
        if view.paused or not self._in_step(view, view.pending.keys(), len(view.pending)):
            return False
        self._checked = True  # (decide need not compare the index with the queue again this round)
        key = (view.room_version, self._shape_stamp)
        if key == self._none_fit:
            return True
        total, slack = self._free_sum = self._summed_room(view)  # (kept for decide: the same ledger this round)
        needs = self._needs
        for row_key, (n, _) in self._waiting_shapes().items():  # (a shape's fewest workers: could_take is
            if could_take(total, slack, needs[row_key], n):  # monotone in the count)
                self._open = key  # (decide's first pick reads the per-node fits: it keeps a "nothing fits")
                return False
        self._none_fit = key  # (no shape's workers fit in the free total: none fits the nodes)
        return True

    def bind_oracle(self, oracle: Oracle) -> None:
        self._oracle = oracle

    # ------------------------------------------------------------ candidates
    def _candidates(self, view: ClusterView, waiting: list[JobView]) -> list[JobView]:
        if self.fairness <= 0 or len(waiting) <= 1:
            return waiting
        shares = self._book.shares(view, waiting)
        keep = math.ceil((1.0 - self.fairness) * len(waiting))
        ranked = sorted(waiting, key=lambda j: (shares.share(j.spec.tenant), j.seq))
        return ranked[:keep]

    def _info(self, view: ClusterView, job: JobView) -> _GroupInfo:
        """Per task group (trace loaders share them between jobs): shape key, worker demand,
        start size, and total demand normalised by the cluster's capacity."""
        if view is not self._view:
            self._view, self._groups, self._models = view, {}, {}
            self._none_fit = None  # (another ledger: its room version is not comparable)
            self._needs = {}
            self._n_nodes = int(view.capacity.shape[0])
            self._safe = np.where(view.capacity > 0, view.capacity, np.inf)
            self._safe.flags.writeable = False
            self._hist = ((-1, -1), np.zeros(0))  # (and another history)
            self._new_table()
            self._shape_ids, self._shape_rows, self._shape_keys, self._w_safe = {}, [], [], []
            total = view.capacity.sum(axis=0)
            self._inv = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)
        spec = job.spec
        key = (id(spec.workers), id(spec.ps), spec.n_min)
        hit = self._groups.get(key)
        if hit is None or hit[0] is not spec.workers or hit[1] is not spec.ps:
            w = view.demand_vector(job)
            n = view.target_workers(job)
            size = float((job_usage(view, job, n) * self._inv).sum())
            hit = self._groups[key] = (spec.workers, spec.ps, (w.tobytes(), w, n, size))
            self._needs.setdefault(hit[2][0], [(c, v) for c, v in enumerate(w.tolist()) if v > _EPS])
        return hit[2]

    def _row(self, view: ClusterView, job: JobView) -> int:
        """A table row for waiting ``job`` (see :data:`_COLS`); returns its index."""
        key, w, n, size = self._info(view, job)
        sid = self._shape_ids.get(key)
        if sid is None:
            sid = self._shape_ids[key] = len(self._shape_rows)
            self._shape_rows.append(w)
            self._shape_keys.append(key)
            self._w_safe.append(w / self._safe)
        spec = job.spec
        total = dur = math.nan
        if self._oracle is not None:
            total = float(self._oracle.total_iterations(job.id))
            d = self._oracle.duration(job.id)
            dur = math.nan if d is None else float(d)
        m = self._models.setdefault(spec.model, len(self._models))
        row = (sid, n, size, job.reported_iterations, job.iter_time or math.nan,
               math.nan if spec.iterations is None else float(spec.iterations), m, job.executed_time(view.now),
               total, dur)
        return self._add_row(job.id, row)

    def _rows_of(self, view: ClusterView, jobs: list[JobView], ids: Iterable[str]) -> np.ndarray:
        """The table rows of waiting ``jobs`` (whose ids, in the same order, are ``ids``), made where missing, as
        columns (``_COLS`` x jobs)."""
        ids = ids if isinstance(ids, list) else list(ids)
        if not ids:
            return np.empty((len(_COLS), 0))
        try:  # (every row made already, the usual case: one C-level look-up of all of them)
            at = itemgetter(*ids)(self._slot)
            at = [at] if len(ids) == 1 else at
        except KeyError:  # (rows made now are not at their jobs' places in the queue: the table is unordered)
            self._ordered = False
            slot = self._slot
            for k, j in enumerate(ids):  # (made first: making one may compact the table, moving the others)
                if j not in slot:
                    self._row(view, jobs[k])
                    slot = self._slot
            at = [self._slot[j] for j in ids]
        return self._table.take(np.fromiter(at, dtype=np.int64, count=len(ids)), axis=1)  # (take: a faster gather)

    def _remaining(self, view: ClusterView, jobs: list[JobView], rows: _Cols | None = None,
                   declared: bool | None = None) -> np.ndarray:
        """Remaining seconds of waiting ``jobs``: :meth:`SRTF.remaining <.srtf.SRTF.remaining>`
        vectorised. A waiting job's own numbers are read once and kept while it waits (its row); what
        comes from history (mean seconds per iteration per model, mean run time) is looked up per round.
        ``rows``: their table rows as columns (``_COLS`` x jobs), if the caller has them; ``declared``:
        :meth:`_declared` of the rows, if the caller has it."""
        if rows is None:
            rows = _Cols(self._rows_of(view, jobs, [j.id for j in jobs]), None)
        if self._oracle is None and not (self._declared(rows) if declared is None else declared):
            # (no declared lengths: every estimate is the fallback below, which np.where would pick anyway)
            mean = view.history.mean_run_time()
            if mean is None:
                return np.full(rows.n, math.inf)
            return np.maximum(mean - rows[7], 0.0)  # (column 7: "executed", a float array)
        done, own_it, iters, model, executed, total, dur = (rows[c] for c in range(3, 10))
        models = self._models
        key = (len(view.history), len(models))  # (the history only grows: the same length, the same means)
        if self._hist[0] != key:
            self._hist = (key, np.array([view.history.mean_iter_time(name) or math.nan for name in models]))
        hist = self._hist[1]
        it = np.where(own_it > 0, own_it, hist[model.astype(np.int64)] if hist.size else math.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            if self._oracle is not None:
                left = np.maximum(total - done, 0.0)
                rem = np.where(own_it > 0, left * own_it,
                               np.where(np.isfinite(dur), dur * np.maximum(1.0 - done / total, 0.0),
                                        np.where(np.isfinite(it), left * it, math.inf)))
            else:
                mean = view.history.mean_run_time()
                fallback = math.inf if mean is None else np.maximum(mean - executed, 0.0)
                rem = np.where(np.isfinite(iters) & np.isfinite(it), np.maximum(iters - done, 0.0) * it, fallback)
        return np.asarray(rem, dtype=float)

    def _srtf_term(self, view: ClusterView, rows: _Cols, declared: bool, ran: bool = True) -> np.ndarray:
        """``p`` per job (a row of ``rows`` each): 1 for no remaining work, 0 for the most (or unknown).
        ``declared``: :meth:`_declared` of the rows; ``ran``: False when no job of them has run (column
        "executed" all 0)."""
        n_jobs = rows.n
        if self.epsilon == 0 or not n_jobs:
            return np.zeros(n_jobs)
        if self._oracle is None and not declared:  # every estimate the mean-run-time one: known, or none is
            mean = view.history.mean_run_time()
            if mean is None:  # (every estimate unknown)
                return np.zeros(n_jobs)
            # work: _remaining's max(mean - executed, 0) times the size; with nothing executed that is mean
            # (a mean of run times is >= 0), so mean * size gives the same floats
            work = mean * rows[2] if not ran and mean >= 0 else self._remaining(view, [], rows, False) * rows[2]
            top = work.max()  # (every work finite: the fallback's max(mean - run, 0) times a finite size)
            return 1.0 - work / top if top > 0 else np.ones(n_jobs)
        work = self._remaining(view, [], rows, True) * rows[2]
        known = np.isfinite(work)
        p = np.zeros(n_jobs)
        if known.any():
            top = work[known].max()
            p[known] = 1.0 - work[known] / top if top > 0 else 1.0
        return p

    @staticmethod
    def _declared(rows: _Cols) -> bool:
        """Some job of ``rows`` (columns) declares its iterations (else every estimate is the mean-run-time
        fallback)."""
        return bool(np.isfinite(rows[5]).any())

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._drop_row(job.id)
        self._unindex(job.id)

    # ---------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Plan:
        self._checked, self._open, self._free_sum = False, None, None
        if self.fairness <= 0 and self._nothing_fits(view):  # (the fairness book must see every round)
            return []
        if not view.pending and not view.paused:
            return []
        if self._checked and self._grouped_ok(view):
            plan = self._decide_grouped(view)
            if plan is not None:
                return plan
        pos = None  # the waiting jobs' rows in queue order, when the table's live mask is the queue
        if self.fairness <= 0 and not view.paused and \
                (self._checked or self._in_step(view, view.pending.keys(), len(view.pending))):
            pos = self._queue_rows(view)
        waiting: list[JobView] = []
        if pos is None:  # (the general path: the queue listed, the rows looked up by id)
            waiting = list(waiting_in_order(view))
            ids = view.pending.keys() if not view.paused else {j.id for j in waiting}
            if not self._checked and not self._in_step(view, ids, len(waiting)):
                self._by_shape, self._indexed, self._summary = {}, {}, None  # out of step (a refused start): rebuilt
                for job in waiting:
                    self._index(view, job)
            jobs = self._candidates(view, waiting)
            rows = _Cols(self._rows_of(view, jobs, ids if jobs is waiting and not view.paused else
                                       [j.id for j in jobs]), None)
            if not self._ordered and not view.paused and self.fairness <= 0 and len(self._slot) == len(waiting):
                self._reorder(waiting)  # (rows made out of arrival order: the table in queue order again)
            declared, ran = self._declared(rows), True
        else:  # every waiting job is a candidate (no fairness knob), its row read in queue order by the mask
            rows = _Cols(self._table, pos)  # (a column gathered when read: take, ~10x faster than [:, pos])
            jobs = waiting
            declared, ran = self._declared_rows > 0, self._ran_rows > 0  # (the live rows are the waiting jobs')
        ids_at, pending = self._ids, view.pending

        def job_at(k: int) -> JobView:
            return jobs[k] if pos is None else pending[ids_at[pos[k]]]  # type: ignore[index]
        draft = Draft(view)
        n_rows = rows.n
        # jobs by worker shape: alignment is computed once per shape and pick
        if pos is not None or jobs is waiting:  # the index holds exactly these jobs (checked or rebuilt above)
            counts = self._waiting_shapes()
            sids = sorted(self._shape_ids[key] for key in counts)
            need_min = min(lo for lo, _ in counts.values()) if counts else 0
            need_max = max(hi for _, hi in counts.values()) if counts else 0
        else:
            sids = np.unique(rows[0]).astype(np.int64).tolist()
            need_min = int(rows[1].min()) if n_rows else 0
            need_max = int(rows[1].max()) if n_rows else 0
        # (no pick needs fewer workers than need_min, nor more than need_max)
        # one worker shape (e.g. every Philly job: one GPU per worker): every job's alignment is that shape's, so
        # a pick needs no gather per job (_pick_one)
        single = len(sids) == 1
        shapes = [(s, self._shape_rows[s]) for s in sids]
        p = self._srtf_term(view, rows, declared, ran)
        alive: np.ndarray | None = None  # jobs not picked yet (None: all of them)
        left = n_rows  # jobs still alive
        plan: Plan = []
        room_sum: tuple[list[float], list[float]] | None = None  # the draft's free room summed over nodes, slack
        needs = self._needs
        while left:
            free = draft.free_now  # (read only: `Draft.free` would make the draft drop its fit memo)
            fits = self._shape_fits(draft, shapes, free, need_min)
            if not fits:  # no job is feasible (the test below would find none): no pass over the jobs
                self._keep_nothing_fits(plan, left, n_rows)
                break
            if single:
                k = self._pick_one(fits[sids[0]], rows, need_max, p, alive)
            else:
                k = self._pick_any(fits, rows[0].astype(np.int64), rows[1], p, alive)
            if k < 0:
                self._keep_nothing_fits(plan, left, n_rows)
                break
            if alive is None:
                alive = np.ones(n_rows, dtype=bool)
            alive[k] = False
            left -= 1
            job = job_at(k)
            n = int(rows.at(1, k))
            sid = sids[0] if single else int(rows.at(0, k))
            if room_sum is None:
                room_sum = self._free_sum or self._summed_room(view)
            total, slack = room_sum
            w = self._shape_rows[sid].tolist()
            after = [t - n * v for t, v in zip(total, w)]  # (its parameter servers' room left in: a bound)
            # once it started, may a shape still take need_min by the summed room alone? If not, the per-node
            # fits of a next pick would find no feasible job: the round ends with this start
            more = any(could_take(after, slack, needs[self._shape_keys[s]], need_min) for s, _ in shapes)
            placement = self._place(draft, job, fits[sid], free, n, more)
            if placement is not None:
                plan.append(start_or_resume(job, placement))
                self._unindex(job.id)
                self._drop_row(job.id)  # it runs: its numbers change (read afresh if it waits again)
                if not more:
                    self._none_fit_after(view)
                    break
                room_sum = (after, slack)
        return plan

    def _grouped_ok(self, view: ClusterView) -> bool:
        """Whether the round's first pick may be made by groups (:meth:`_pick_grouped`): no fairness knob,
        nothing paused, the index in step with the queue (checked this round) and the live rows the queue in
        order (as :meth:`_queue_rows` requires), one worker shape, no oracle, no declared iterations and no job
        that ran (every ``p`` then follows from the job's workers and size alone)."""
        return self.fairness <= 0 and not view.paused and self._ordered and view is self._view \
            and self._n_live == len(view.pending) and self._oracle is None and not self._declared_rows \
            and not self._ran_rows and len(self._waiting_shapes()) == 1

    def _decide_grouped(self, view: ClusterView) -> Plan | None:
        """The usual round, one start or none, decided without a pass over the queue: the first pick by groups
        (:meth:`_pick_grouped`); when it starts a job after which, by the summed room, no shape may take another
        (the round's last start, checked by :func:`reserve_fits`), or when no job is feasible, that is the
        round's plan. None when the round is not that simple (the pick is undecided by groups, a next pick may
        follow, or the start is refused): :meth:`decide` then plans it in full (nothing was changed)."""
        ((row_key, (need_min, _)),) = self._waiting_shapes().items()
        sid = self._shape_ids[row_key]
        draft = Draft(view)
        free = draft.free_now
        fits = self._shape_fits(draft, [(sid, self._shape_rows[sid])], free, need_min)
        if not fits:
            self._keep_nothing_fits([], 0, 0)
            return []
        r = self._pick_grouped(view, fits[sid])
        if r is None:
            return None
        if r < 0:
            self._keep_nothing_fits([], 0, 0)
            return []
        job = view.pending[self._ids[r]]  # type: ignore[index]
        n = int(self._table[1, r])
        total, slack = self._free_sum or self._summed_room(view)
        after = [t - n * v for t, v in zip(total, self._shape_rows[sid].tolist())]
        if could_take(after, slack, self._needs[row_key], need_min):
            return None  # (a next pick may find room: the full round)
        placement = self._place(draft, job, fits[sid], free, n, False)
        if placement is None:
            return None
        self._unindex(job.id)
        self._drop_row(job.id)
        self._none_fit_after(view)
        return [start_or_resume(job, placement)]

    def _none_fit_after(self, view: ClusterView) -> None:
        """The round ends because, by the summed room less its starts, no waiting shape could take its fewest
        workers: that is "nothing fits" for the ledger once the plan is applied, kept under the key the next
        round reads (starts neither bump the room version nor the shape stamp). Kept only while the index is
        the queue: a refused start leaves its job pending outside the index, so the next round is out of step
        and does not read it. A next round that would have summed the ledger's room afresh finds nothing
        feasible too (the bound is sound), and keeps the same key: the same plan and the same answer."""
        if not view.paused and self.fairness <= 0:
            self._none_fit = (view.room_version, self._shape_stamp)

    def _summed_room(self, view: ClusterView) -> tuple[list[float], list[float]]:
        """The ledger's free room summed over the nodes, and its :func:`room_slack`."""
        total = view.free_total.tolist()
        return total, room_slack(total, self._n_nodes)

    def _shape_fits(self, draft: Draft, shapes: list[tuple[int, np.ndarray]], free: np.ndarray,
                    need_min: int) -> dict[int, tuple[np.ndarray, np.ndarray, float, int]]:
        """Per shape that has a node for one task and room for ``need_min`` of them on the draft now: its fit
        and alignment per node (-inf where the fit takes no task), its best alignment and its room (tasks).
        A shape left out takes no waiting job (each needs at least ``need_min`` workers)."""
        out: dict[int, tuple[np.ndarray, np.ndarray, float, int]] = {}
        scaled: np.ndarray | None = None
        for s, w in shapes:
            fit = draft.tasks_fit(w)
            # (a demand that needs some resource takes a bounded count per node; else the fit is huge)
            got = int(_add(fit) if self._needs[self._shape_keys[s]] else np.minimum(fit, 1 << 40).sum())
            if got > 0 and got >= need_min:
                if scaled is None:
                    scaled = free / self._safe  # (alignment's free / capacity, once per pick)
                # alignment(free, cap, w, safe), row by row: the same values on the nodes the fit takes a task
                score = np.where(fit > 0, (self._w_safe[s] * scaled).sum(axis=1), -np.inf)
                out[s] = (fit, score, float(score.max()), got)
        return out

    def _keep_nothing_fits(self, plan: Plan, left: int, n_rows: int) -> None:
        """The round's first pick found no feasible job: if :meth:`_nothing_fits` left this round open (the
        index is the queue, nothing paused, no fairness knob: the pick read every waiting shape's per-node fit
        on the ledger's free capacity, as the draft is still pristine), that is its answer "nothing fits",
        kept under the same key."""
        if self._open is not None and not plan and left == n_rows:
            self._none_fit = self._open

    def _place(self, draft: Draft, job: JobView, fit_score: tuple[np.ndarray, np.ndarray, float, int],
               free: np.ndarray, n: int, more: bool = True) -> Placement | None:
        """``place_with(draft, job, aligned_chooser, n_workers=n)`` for the job just picked, whose shape's fit
        and alignment per node (``fit_score``) the pick computed on this draft: a job without parameter servers
        takes the nodes :func:`aligned_tasks` gives from them (its shape has room for ``n`` tasks: the pick
        checked it) and reserves them; a refused reservation leaves the draft as it was. Unlike ``place_with``,
        a refusal is not noted in the draft's memo of failed shapes (kept in the ledger while the draft is
        pristine), and that memo is not read: after the pick found ``n`` tasks' room, the reservation of tasks
        within each node's fit is refused only if a float remainder lands within rounding of the ledger's
        tolerance (none in the pinned runs; ``tests/test_tetris_index.py`` compares with ``place_with``). Jobs
        with parameter servers go through ``place_with``. The round's last start (``more`` False: no pick follows)
        on a pristine draft is only checked (:func:`reserve_fits`), not written into a draft nobody reads."""
        view = draft.view
        if job.spec.num_ps > 0 and view.ps_demand_vector(job) is not None:
            return place_with(draft, job, aligned_chooser, n_workers=n)
        fit, score, _, _ = fit_score
        w = view.demand_vector(job)
        pristine = draft.pristine
        placement: Placement = tuple(aligned_tasks(score, fit, free, self._safe, w, n))
        if not more and draft.pristine:
            return placement if reserve_fits(view, w, placement) else None
        if not draft.reserve(job, placement):
            draft.undo_failed_reserve(pristine)
            return None
        return placement


def make(oracle: bool = False, **params: object) -> Tetris:
    return build(Tetris, params, policy="tetris", fixed={"use_oracle": oracle})
