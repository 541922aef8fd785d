"""SLAQ's values of the waiting jobs kept between rounds (issue 18, eighteenth session).

A waiting (paused or pending) rigid job's value in a SLAQ round, its predicted normalised loss reduction over the
epoch per dominant share of its one unit (:meth:`.slaq.SLAQ.unit_values`), reads only its row in the per-job table
(:class:`~.job_table.StaticTable`: iterations done, loss fit and drop rates, speed coefficients, declared length,
demand rows; a paused job's row is made at its first round in the pause and holds while it reports nothing), the
prior time per iteration of its model when it has no speed model of its own (which finishes of that model move),
the cluster's capacity and the policy's constants. So the value is kept per table slot with the row's
:attr:`~.job_table.StaticTable.stamp` and the prior it read, and a round computes it again only for the rows
written since, or whose prior moved: every other value is the number the round would compute (the same
elementwise operations on the same numbers), read from the kept column in one fancy index."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..engine.view import ClusterView
from .job_models import JobModels
from .job_table import Snapshot


class QueueValues:
    """Per table slot: the kept value, the stamp of the row it was computed from (-1: none) and the prior it
    read; the cluster capacity they were computed for."""

    def __init__(self, values_of: Callable[[Snapshot], np.ndarray]) -> None:
        self._values_of = values_of  # a snapshot's rows -> each row's value (SLAQ.unit_values)
        self.value = np.zeros(0)
        self.stamp = np.full(0, -1, dtype=np.int64)
        self.prior = np.zeros(0)
        self._total: np.ndarray | None = None
        self._capacity: np.ndarray | None = None
        self.computed = 0  # values computed (rows made stale), for tests and profiles
        self.cost = np.zeros((0, 0))  # per slot: the job's minimum (JobModels.slot_costs), kept with cost_stamp
        self.cost_stamp = np.full(0, -1, dtype=np.int64)

    def costs(self, models: JobModels, sl: np.ndarray) -> np.ndarray:
        """The minimums (:meth:`JobModels.slot_costs`) of the jobs at table slots ``sl``, kept per slot with the
        stamp of the row they were computed from: a slot's constants (``n_min``, demand rows) are written only
        by :meth:`StaticTable.add`, which stamps it, and the demand rows a slot names never change
        (:attr:`JobModels._rows` only grows), so a kept minimum is the one computed now."""
        table = models._table
        cap = table.stamp.shape[0]
        assert models._rows is not None  # (the slots' rows are in the table)
        width = models._rows.shape[1]
        if self.cost.shape != (cap, width):  # the table grew (new slots: no minimum yet)
            kept = self.cost.shape[0] if self.cost.shape[1] == width else 0
            grown = np.zeros((cap, width))
            if kept:
                grown[:kept] = self.cost[:kept]
            self.cost = grown
            stamp = np.full(cap, -1, dtype=np.int64)
            stamp[:kept] = self.cost_stamp[:kept]
            self.cost_stamp = stamp
        stale = self.cost_stamp[sl] != table.stamp[sl]
        if stale.any():
            redo = sl[stale]
            self.cost[redo] = models.slot_costs(redo)
            self.cost_stamp[redo] = table.stamp[redo]
        return self.cost[sl]

    def read(self, models: JobModels, view: ClusterView, ids: Sequence[str], slots: Sequence[int]) -> np.ndarray:
        """The values of the queued jobs ``ids`` at table ``slots`` (:meth:`JobModels.queue_slots`), in order."""
        table = models._table
        cap = table.stamp.shape[0]
        if self.stamp.shape[0] < cap:  # the table grew: new slots have no value yet
            grow = cap - self.stamp.shape[0]
            self.value = np.concatenate([self.value, np.zeros(grow)])
            self.stamp = np.concatenate([self.stamp, np.full(grow, -1, dtype=np.int64)])
            self.prior = np.concatenate([self.prior, np.zeros(grow)])
        capacity = view.capacity
        if capacity is not self._capacity:  # (a view's capacity array is kept while it holds; compared otherwise)
            total = capacity.sum(axis=0)
            if self._total is None or not np.array_equal(total, self._total):
                self.stamp[:] = -1  # (the shares read the capacity)
                self._total = total
            self._capacity = capacity
        sl = np.asarray(slots, dtype=np.int64)
        stale = self.stamp[sl] != table.stamp[sl]
        on_prior = table.prior[sl]
        prior_now = None
        if on_prior.any():
            prior_now = models.prior_times(table.model[sl])
            stale |= on_prior & (self.prior[sl] != prior_now)
        if stale.any():
            at = np.flatnonzero(stale)
            jobs = view.jobs
            redo = sl[at]
            snap = models.table_snapshot(view, [jobs[ids[i]] for i in at.tolist()], redo)
            self.value[redo] = self._values_of(snap)
            self.stamp[redo] = table.stamp[redo]
            if prior_now is not None:
                self.prior[redo] = prior_now[at]
            self.computed += int(at.size)
        return self.value[sl]

