"""The learning-curve policies' reads of the queue from the per-job table (issue 18): :class:`QueueReads`, the
part of :class:`~.job_models.JobModels` that finds the waiting jobs a round can admit at their minimum (Optimus'
admission window and shape groups), whether none can be (SLAQ's and Themis' event rounds), and each queued job's
slot and minimum in the per-job table, without a snapshot row per job. Split out of :mod:`.job_models` when it
passed 600 lines (issue 18, eighteenth session)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import chain, islice

import numpy as np

from ..engine.job import JobView
from ..engine.view import ClusterView
from .admit_index import AdmitIndex
from .job_table import StaticTable
from .targets import ADMIT_SCAN, EPS, admit_in_order, below_floor, rows_within


class QueueReads:
    """The queue's reads from the per-job table (a base of :class:`~.job_models.JobModels`, which sets the
    attributes below and :meth:`_static_of`)."""

    _rows: np.ndarray | None
    _table: StaticTable
    _static: dict[str, tuple[int, int, int, float, float, str, int, int]]
    _static_of: Callable[[ClusterView | None, JobView], tuple[int, int, int, float, float, str, int, int]]

    def admission_window(self, view: ClusterView, waiting: Sequence[JobView] | None, free: np.ndarray,
                         scan: int = ADMIT_SCAN) -> int:
        """How many of ``waiting`` (in order; None: the view's queue, paused then pending, read by job id)
        :func:`admit_in_order` can admit into ``free``: up to the first whose minimum's cumulative demand
        (the same running sum) does not fit, plus the ``scan`` it back-fills from; later jobs are never
        admitted, so a round need not look at them. Read in chunks, so a long queue behind a full cluster
        costs one chunk per round."""
        return len(self._window(view, waiting, free, scan)[0])

    def _window(self, view: ClusterView, waiting: Sequence[JobView] | None, free: np.ndarray,
                scan: int) -> tuple[list[str], list[np.ndarray]]:
        """:meth:`admission_window`'s jobs (ids, in queue order) and their minimums (:meth:`_first_cost`), in
        chunks: the chunks' rows, from the first, cover the window (and may run past it)."""
        if waiting is None:
            n = len(view.paused) + len(view.pending)
            ids: Iterator[str] = chain(view.paused, view.pending)
        else:
            n = len(waiting)
            ids = (job.id for job in waiting)
        carry = np.zeros_like(free)
        start = 0
        seen: list[str] = []
        costs: list[np.ndarray] = []
        while start < n:
            chunk = list(islice(ids, scan))
            cost = self._first_cost(view, chunk)
            seen += chunk
            costs.append(cost)
            cum = np.cumsum(np.vstack([carry[None, :], cost]), axis=0)[1:]
            bad = ~(cum <= free + EPS).all(axis=1)
            if bad.any():
                end = min(n, start + int(np.argmax(bad)) + scan)
                if end > len(seen):  # the back-filling scan reaches into the next chunk
                    more = list(islice(ids, end - len(seen)))
                    seen += more
                    costs.append(self._first_cost(view, more))
                return seen[:end], costs
            carry = cum[-1]
            start += len(chunk)
        return seen, costs

    _admit_index: AdmitIndex | None = None  # (admit_waiting's, made at its first read of the view's queue)

    def admit_waiting(self, view: ClusterView, waiting: Sequence[JobView] | None, free: np.ndarray,
                      scan: int = ADMIT_SCAN) -> tuple[list[JobView], np.ndarray]:
        """The waiting jobs (``waiting`` in order; None: the view's queue, read by job id) that
        :func:`admit_in_order` admits at their minimum into ``free``, in queue order, and the capacity left:
        their minimums read from the per-job table (:meth:`_first_cost`), so a round makes snapshot rows for
        the admitted jobs only (a job not admitted gets nothing, and a round never looks at it again). When
        ``free`` is below :attr:`ClusterView.task_floor` in some resource (with ``EPS``, as
        :func:`~.targets.room_for_none`), no waiting job's minimum fits and the queue is not read."""
        if below_floor(free, view.task_floor):
            return [], free
        if waiting is None:  # read by shape group (admit_index): the same jobs and floats, without the window's rows
            index = self._admit_index
            if index is None:
                index = self._admit_index = AdmitIndex()
            hit = index.admit(view, free, scan, self._first_cost)
            if hit is not None:
                self._slots(view, [job.id for job in hit[0]])  # (admitted: in the table, as the rows read them)
                return hit
        ids, costs = self._window(view, waiting, free, scan)
        if not ids:
            return [], free
        cost = costs[0] if len(costs) == 1 else np.concatenate(costs)
        ok, rem = admit_in_order(cost[:len(ids)], free, scan)
        jobs = view.jobs
        return [jobs[ids[i]] for i in np.flatnonzero(ok).tolist()], rem

    def admits_none(self, view: ClusterView, free: np.ndarray) -> bool:
        """Whether no waiting job's minimum (:meth:`_first_cost`, from the per-job table) fits ``free`` alone by
        the greedy's test (``<= free + EPS``): then a round over ``free`` admits nobody (issue 18, 15th session)."""
        ids = list(chain(view.paused, view.pending))
        return not ids or not bool(rows_within(self._first_cost(view, ids), free).any())

    def _first_cost(self, view: ClusterView, ids: Sequence[str]) -> np.ndarray:
        """Each job's minimum, ``n_min`` workers plus its parameter servers, as
        :meth:`Snapshot.bundle` computes it (the constants read from :class:`StaticTable`)."""
        return self.slot_costs(self._slots(view, ids))

    def slot_costs(self, slots: Sequence[int] | np.ndarray) -> np.ndarray:
        """:meth:`_first_cost` of the jobs at per-job table ``slots``."""
        table, rows = self._table, self._rows
        assert rows is not None  # set by _static_of
        idx = np.asarray(slots, dtype=np.int64)
        return rows[table.w_row[idx]] * table.lo[idx][:, None] + rows[table.p_row[idx]]

    def _slots(self, view: ClusterView, ids: Sequence[str]) -> list[int]:
        """Each job's slot in the per-job table (:class:`StaticTable`), the constants of jobs not seen yet
        added to it (what :meth:`rigid_hold` reads of a running job, and a round's rows of a pending one)."""
        table = self._table
        sl = list(map(table.slots.get, ids))
        if None in sl:  # jobs not seen yet: their constants go into the table
            static, jobs = self._static, view.jobs
            for i, (jid, slot) in enumerate(zip(ids, sl)):
                if slot is None:
                    sl[i] = table.add(jid, *(static.get(jid) or self._static_of(view, jobs[jid])))
        return sl
