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
from ..engine.alloc import take_many
from .placement import Draft
from .placement_rows import less_times, row_of
from .spread import place_with, start_or_resume, waiting_in_order
from .params import build


_add = np.add.reduce  # (ndarray.sum / mean's reduction without the method wrapper)

_GroupInfo = tuple[bytes, np.ndarray, int, float]  # shape key, worker demand, start size, normalised size
#: a waiting job's row: its worker shape's id, start size (workers), normalised size, then what its remaining
#: time is estimated from (reported iterations, own seconds per iteration, declared iterations, model id,
#: seconds run, and under the oracle the true iterations and duration)
_COLS = ("shape", "need", "size", "done", "own_it", "iters", "model", "executed", "total", "dur")


#: the ledger's tolerance in a fit (``engine.alloc.fit_counts``: ``floor((free + EPS) / demand)`` per node)
_EPS = 1e-9


class _Cols:
    """The table's columns (:data:`_COLS`) at the rows a round reads, each gathered when first read: ``pos`` the
    rows of ``table`` (columns x rows), or None when ``table`` holds just these rows."""

    __slots__ = ("table", "pos", "n", "_got")

    def __init__(self, table: np.ndarray, pos: np.ndarray | None) -> None:
        self.table, self.pos = table, pos
        self.n = table.shape[1] if pos is None else len(pos)
        self._got: list[np.ndarray | None] = [None] * len(_COLS)

    def __getitem__(self, c: int) -> np.ndarray:
        col = self._got[c]
        if col is None:
            col = self._got[c] = self.table[c] if self.pos is None else self.table[c].take(self.pos)
        return col

    def at(self, c: int, k: int) -> float:
        """Column ``c`` of the ``k``-th row, without gathering the column."""
        col = self._got[c]
        if col is not None:
            return float(col[k])
        return float(self.table[c, k if self.pos is None else self.pos[k]])


def room_slack(total: list[float], n_nodes: int) -> list[float]:
    """Per resource: what :func:`could_take` adds to a free total so that it bounds the tasks the nodes take
    from above: the fit's tolerance on every node (``n_nodes * EPS``) and far more than the rounding of a
    sum of floats (``1e-9`` of the total)."""
    return [n_nodes * _EPS + 1e-9 * (1.0 + abs(t)) for t in total]


def could_take(total: list[float], slack: list[float], demand: list[tuple[int, float]], n: int) -> bool:
    """False only when the nodes cannot take ``n`` tasks of ``demand`` together (its needed resources as
    ``(column, amount)``), judged from the free room summed over the nodes (``total``, with ``slack`` from
    :func:`room_slack`): a node takes at most ``floor((free + EPS) / amount)`` tasks in each needed resource
    (``fit_counts``), so the nodes together at most ``(total + n_nodes * EPS) / amount``. True is no promise:
    the room may be split across nodes."""
    for c, v in demand:
        if total[c] + slack[c] < n * v:
            return False
    return True


def alignment(free: np.ndarray, capacity: np.ndarray, demand: np.ndarray,
              safe: np.ndarray | None = None) -> np.ndarray:
    """Per node: dot product of the capacity-normalised demand and free vectors (``safe``: the capacity with
    inf for 0, if the caller has it)."""
    if safe is None:
        safe = np.where(capacity > 0, capacity, np.inf)
    return ((demand / safe) * (free / safe)).sum(axis=1)


def aligned_chooser(fit: np.ndarray, free: np.ndarray, capacity: np.ndarray, demand: np.ndarray,
                    n: int) -> list[int] | None:
    """Tasks one at a time, each on the feasible node with the best alignment now."""
    if fit.sum() < n:
        return None
    safe = np.where(capacity > 0, capacity, np.inf)
    score = alignment(free, capacity, demand, safe)
    score[fit <= 0] = -np.inf
    return aligned_tasks(score, fit, free, safe, demand, n)


def aligned_tasks(score: np.ndarray, fit: np.ndarray, free: np.ndarray, safe: np.ndarray, demand: np.ndarray,
                  n: int) -> list[int]:
    """:func:`aligned_chooser`'s nodes for ``n`` tasks, given the alignment per node now (``score``, -inf where
    ``fit`` takes no task; overwritten) and enough room (``fit.sum() >= n``)."""
    node = int(score.argmax())
    out: list[int] = [node]
    if n > 1:  # (the copies below only serve the later tasks)
        left = fit.astype(np.int64)
        f = free.copy()
        for _ in range(n - 1):
            left[node] -= 1
            f[node] -= demand
            score[node] = -np.inf if left[node] <= 0 else \
                float(((demand / safe[node]) * (f[node] / safe[node])).sum())
            node = int(score.argmax())
            out.append(node)
    return out


def reserve_fits(view: ClusterView, w: np.ndarray, placement: Placement) -> bool:
    """Whether ``Draft(view).reserve(job, placement)`` succeeds for a job without parameter servers whose workers
    have the demand row ``w``, without making the draft: :meth:`Draft.reserve <.placement.Draft.reserve>`'s test on
    the ledger's rows, the same float operations (a node's ``k`` tasks taken from its free row by
    :func:`~.placement_rows.less_times`, their GPU shares from its device row by
    :func:`~cohabit.engine.alloc.take_many`) with nothing written back (``tests/test_tetris_index.py`` compares the
    two answers)."""
    counts: dict[int, int] = {}
    for node in placement:
        counts[node] = counts.get(node, 0) + 1
    as_list, exact = row_of(w)
    g = view.gpu_col
    free, dev = view.free, view.device_free
    for node, k in counts.items():
        if less_times(free[node].tolist(), as_list, k, exact) is None:
            return False
    if g is not None:
        share = as_list[g]
        for node, k in counts.items():
            if take_many(dev[node].tolist(), [share] * k) is None:
                return False
    return True


class Tetris(BasePolicy):
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
        # one row per waiting job (the columns of _COLS; stored column by column: the table is _COLS x rows, so
        # that a column of the rows a round gathers is contiguous), kept until the job starts or ends: what a round reads
        # of a waiting job does not change while it waits. Rows are appended in arrival order (the queue's own
        # order) and marked dead when their job leaves, so while every row was made at arrival the live rows
        # are the queue in order and a round reads them with one mask, no look-up per job (see _queue_rows)
        self._slot: dict[str, int] = {}  # job id -> its row
        self._ids: list[str | None] = []  # per row: its job (None: dead)
        self._live = np.zeros(0, dtype=bool)
        self._end = 0  # rows used
        self._table = np.empty((len(_COLS), 0))
        self._declared_rows = 0  # live rows whose job declares its iterations (column "iters" finite)
        self._ran_rows = 0  # live rows whose job has run (column "executed" not 0)
        self._n_live = 0  # live rows
        # the live rows by (workers, size) (columns "need", "size"): [how many, the rows in table order (dead ones
        # too, until the table is rewritten), the first one that may be live]; see _pick_grouped
        self._groups_live: dict[tuple[float, float], list] = {}
        self._ordered = True  # every live row was made at its job's arrival (so the rows are in queue order)
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
            self._slot, self._ids, self._end, self._ordered = {}, [], 0, True
            self._table, self._live = np.empty((len(_COLS), 0)), np.zeros(0, dtype=bool)
            self._declared_rows = self._ran_rows = self._n_live = 0
            self._groups_live = {}
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
        if self._end == self._table.shape[1]:
            self._compact()
            if self._end >= self._table.shape[1] // 2:  # (still at least half full: room doubled)
                old = self._table.shape[1]
                grown = np.empty((len(_COLS), max(2 * old, 64)))
                grown[:, :old] = self._table
                live = np.zeros(grown.shape[1], dtype=bool)
                live[:old] = self._live
                self._table, self._live = grown, live
        i = self._slot[job.id] = self._end
        self._end += 1
        self._ids.append(job.id)
        self._table[:, i] = row
        self._live[i] = True
        self._count_row(row[5], row[7], 1)
        grp = self._groups_live.get((row[1], row[2]))
        if grp is None:
            grp = self._groups_live[(row[1], row[2])] = [0, [], 0]
        grp[0] += 1
        grp[1].append(i)
        return i

    def _drop_row(self, job_id: str) -> None:
        i = self._slot.pop(job_id, None)
        if i is not None:
            self._ids[i] = None
            self._live[i] = False
            self._count_row(self._table[5, i], self._table[7, i], -1)
            self._groups_live[(self._table[1, i], self._table[2, i])][0] -= 1

    def _count_row(self, iters: float, executed: float, sign: int) -> None:
        """Count a live row made (``sign`` 1) or dropped (-1) in :attr:`_declared_rows` and :attr:`_ran_rows`."""
        self._n_live += sign
        if math.isfinite(iters):
            self._declared_rows += sign
        if executed != 0:
            self._ran_rows += sign

    def _regroup(self) -> None:
        """:attr:`_groups_live` made afresh from the live rows ``0 .. _end`` (after the table was rewritten)."""
        groups: dict[tuple[float, float], list] = {}
        live = self._live[:self._end].nonzero()[0].tolist()
        for i, need, size in zip(live, self._table[1].take(live).tolist(), self._table[2].take(live).tolist()):
            grp = groups.get((need, size))
            if grp is None:
                grp = groups[(need, size)] = [0, [], 0]
            grp[0] += 1
            grp[1].append(i)
        self._groups_live = groups

    def _compact(self) -> None:
        """Drop the dead rows (their jobs left), keeping the live ones in their order."""
        end = self._end
        keep = self._live[:end].nonzero()[0]
        if len(keep) == end:
            return
        n = len(keep)
        self._table[:, :n] = self._table[:, keep]
        self._live[:n] = True
        self._live[n:end] = False
        self._ids = [i for i in self._ids if i is not None]
        self._slot = dict(zip(self._ids, range(n)))
        self._end = n
        self._regroup()

    def _reorder(self, waiting: list[JobView]) -> None:
        """Rewrite the table with the rows of ``waiting`` (every one made) in that order."""
        at = [self._slot[j.id] for j in waiting]
        n = len(at)
        self._table[:, :n] = self._table[:, at]
        self._live[:n] = True
        self._live[n:self._end] = False
        self._ids = [j.id for j in waiting]
        self._slot = dict(zip(self._ids, range(n)))
        self._end = n
        self._ordered = True
        self._n_live = n
        self._regroup()

    def _queue_rows(self, view: ClusterView) -> np.ndarray | None:
        """The rows of the waiting jobs in queue order, as row numbers of the table, read from the table's
        live mask alone, or None when that mask may not be the queue: only while every live row was made at
        its job's arrival (rows are appended as jobs arrive, as the queue appends them) and the live rows
        are as many as the pending jobs, with none paused. Rows only leave with their jobs (a start the
        policy planned, an end), and a pending job leaves the queue only by such a start or an end, so the
        live rows are a subset of the queue and equal counts mean equal sets (the argument of
        :meth:`_in_step`)."""
        if view.paused or not self._ordered or view is not self._view:
            return None
        end = self._end
        live = self._live[:end]
        if end > 64 and 2 * len(view.pending) < end:  # (more dead rows than live ones: dropped first)
            self._compact()
            end = self._end
            live = self._live[:end]
        pos = live.nonzero()[0]  # (np.flatnonzero without its Python wrapper)
        return pos if len(pos) == len(view.pending) else None

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
        return [start_or_resume(job, placement)]

    def _pick_grouped(self, view: ClusterView, fit: tuple[np.ndarray, np.ndarray, float, int]) -> int | None:
        """:meth:`_pick_one`'s first pick from the groups of the live rows (:attr:`_groups_live`): the table row of
        the job it picks, -1 if none is feasible, None if the groups cannot tell.

        Every job of a group has the same ``p`` (:meth:`_srtf_term`: ``1 - mean * size / top``, with ``top`` the
        largest ``mean * size``; the same float operations on the same floats), so a group's score is one float:
        with ``eps == 0`` (no ``epsilon``, no history, every feasible ``p`` 0, or alignment 0) the pick is the
        first feasible row; otherwise the scores ``a + eps * p`` are monotone in ``p`` and the pick is the first
        row of the groups with the largest feasible ``p``, provided no job of a smaller ``p`` can round to the
        same score: ``eps`` is known up to the rounding of the means (within ``delta``, far above the error of
        a sum of ``count`` terms), and the gap ``eps * (p1 - p2)`` to the next ``p`` must exceed ``1e-12`` of the
        score (each score is rounded twice, ~4.4e-16 of it). Otherwise None (the rows decide)."""
        _, _, a, room = fit
        mean = view.history.mean_run_time()
        if mean is not None and mean < 0:
            return None
        live = self._live
        feas: list[tuple[float, int, int]] = []  # per feasible group: its mean * size, count, first row
        top = -math.inf
        for (need, size), grp in self._groups_live.items():
            c = grp[0]
            if not c:
                continue
            work = 0.0 if mean is None else mean * size
            if work > top:
                top = work
            if need <= room:
                rows, h = grp[1], grp[2]
                while not live[rows[h]]:
                    h += 1
                grp[2] = h
                feas.append((work, c, rows[h]))
        if not feas:
            return -1
        if self.epsilon <= 0 or mean is None or not a > 0:
            return min(r for _, _, r in feas)  # (eps == 0)
        ps = [(1.0 - w / top if top > 0 else 1.0, c, r) for w, c, r in feas]
        p1 = max(p for p, _, _ in ps)
        if not p1 > 0:
            return min(r for _, _, r in ps)  # (every feasible p 0: eps == 0)
        lower = [p for p, _, _ in ps if p < p1]
        if lower:
            if a < 1e-250:
                return None
            p2 = max(lower)
            count = sum(c for _, c, _ in ps)
            eps = self.epsilon * a * count / sum(c * p for p, c, _ in ps)
            delta = (8 * count + 8 * len(ps) + 128) * 2.0 ** -53
            if not eps * (1 - delta) * (p1 - p2) > 1e-12 * (a + eps * (1 + delta) * p1):
                return None
        return min(r for p, _, r in ps if p == p1)

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

    def _pick_one(self, fit: tuple[np.ndarray, np.ndarray, float, int], rows: _Cols, need_max: int, p: np.ndarray,
                  alive: np.ndarray | None) -> int:
        """:meth:`_pick_any` when every waiting job has the one shape of ``fit``: every alignment is its best
        ``a``, so a job is feasible when its workers fit the shape's room (all of them when the room takes
        ``need_max``, the most any waiting job needs: no mask), ``eps`` divides the mean of ``count`` copies of
        ``a`` (summed as ``ndarray.mean`` sums them) by the mean ``p``, and the score is ``a + eps * p`` (the same
        floats as over the gathered alignments). With ``eps == 0`` every feasible score is ``a``: the first
        feasible job. -1 when none is feasible."""
        _, _, a, room = fit
        n_rows = rows.n
        feasible: np.ndarray | None = None  # (None: every job)
        if alive is not None or room < need_max:
            feasible = rows[1] <= room
            if alive is not None:
                feasible &= alive
            count = int(np.count_nonzero(feasible))
            if not count:
                return -1
            if count == n_rows:
                feasible = None
        else:
            count = n_rows
        eps = 0.0
        if self.epsilon > 0:
            p_mean = _add(p if feasible is None else p[feasible]) / count
            if p_mean > 0:
                eps = self.epsilon * (_add(np.full(count, a)) / count) / p_mean
        if eps == 0:
            return 0 if feasible is None else int(feasible.argmax())  # (ties: earliest arrival)
        score = eps * p
        score += a
        if feasible is not None:
            score = np.where(feasible, score, -np.inf)
        return int(score.argmax())  # ties: earliest arrival (argmax takes the first)

    def _pick_any(self, fits: dict[int, tuple[np.ndarray, np.ndarray, float, int]], idx: np.ndarray,
                  need: np.ndarray, p: np.ndarray, alive: np.ndarray | None) -> int:
        """The job (its row's position) with the best ``alignment + eps * p`` among the alive jobs whose shape
        has room for their workers (eq. of §3.3, ``eps`` scaled by the mean alignment over the mean ``p`` of
        the feasible jobs); -1 when none is feasible."""
        n_shapes = len(self._shape_rows)
        best = np.full(n_shapes, -np.inf)
        room = np.zeros(n_shapes, dtype=np.int64)
        for s, (_, _, b, got) in fits.items():
            best[s], room[s] = b, got
        a = best[idx]
        feasible = (room[idx] >= need) & np.isfinite(a)
        if alive is not None:
            feasible &= alive
        count = int(np.count_nonzero(feasible))
        if not count:
            return -1
        eps = 0.0
        if self.epsilon > 0:  # (the means as ndarray.mean makes them: the pairwise sum over the count)
            p_mean = _add(p[feasible]) / count
            if p_mean > 0:
                eps = self.epsilon * (_add(a[feasible]) / count) / p_mean
        score = np.where(feasible, a + eps * p, -np.inf)
        return int(score.argmax())  # ties: earliest arrival (argmax takes the first)

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
