"""Tetris' table of waiting jobs (see :mod:`.tetris`): one row per waiting job, stored column by column, read by
a round with one mask while the rows are the queue in order, and the picks a round makes from them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..engine.job import JobView
    from ..engine.view import ClusterView

_add = np.add.reduce  # (ndarray.sum / mean's reduction without the method wrapper)

#: a waiting job's row: its worker shape's id, start size (workers), normalised size, then what its remaining
#: time is estimated from (reported iterations, own seconds per iteration, declared iterations, model id,
#: seconds run, and under the oracle the true iterations and duration)
_COLS = ("shape", "need", "size", "done", "own_it", "iters", "model", "executed", "total", "dur")


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


class WaitingRows:
    """The table of waiting jobs' rows (a mixin of :class:`~.tetris.Tetris`, which makes the rows: ``_row``).

    One row per waiting job (the columns of :data:`_COLS`; the table is ``_COLS`` x rows, so that a column of
    the rows a round gathers is contiguous), kept until the job starts or ends: what a round reads of a waiting
    job does not change while it waits. Rows are appended in arrival order (the queue's own order) and marked
    dead when their job leaves, so while every row was made at arrival the live rows are the queue in order
    and a round reads them with one mask, no look-up per job (:meth:`_queue_rows`)."""

    epsilon: float
    _shape_rows: list[np.ndarray]

    def _new_table(self) -> None:
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

    def _add_row(self, job_id: str, row: tuple[float, ...]) -> int:
        """Append ``row`` (see :data:`_COLS`) for waiting ``job_id``; returns its index."""
        if self._end == self._table.shape[1]:
            self._compact()
            if self._end >= self._table.shape[1] // 2:  # (still at least half full: room doubled)
                old = self._table.shape[1]
                grown = np.empty((len(_COLS), max(2 * old, 64)))
                grown[:, :old] = self._table
                live = np.zeros(grown.shape[1], dtype=bool)
                live[:old] = self._live
                self._table, self._live = grown, live
        i = self._slot[job_id] = self._end
        self._end += 1
        self._ids.append(job_id)
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
        """Count a live row made (``sign`` 1) or dropped (-1) in :attr:`_n_live`, :attr:`_declared_rows` and
        :attr:`_ran_rows`."""
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


class RowPicks:
    """A round's pick among the waiting rows (a mixin of :class:`~.tetris.Tetris`): the job with the best
    ``alignment + eps * p`` (§3.3), by groups of rows, over one worker shape's rows, or over every shape's."""

    epsilon: float
    _shape_rows: list[np.ndarray]
    _groups_live: dict[tuple[float, float], list]
    _live: np.ndarray

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
