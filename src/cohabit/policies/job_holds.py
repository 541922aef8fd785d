"""What the rigid running jobs of the learning-curve policies hold (issue 18): :class:`RunningHoldings`, the part
of :class:`~.job_models.JobModels` that sums the running jobs' bundles from the per-job table (a round of
rigid jobs reads the room left without its rows: Optimus' quiet and rigid rounds, SLAQ's quiet epochs,
Themis' renewals), and keeps that sum between rounds, brought up to date by the running set's journal
(issue 18, seventeenth session). Split out of :mod:`.job_models` when it passed 600 lines."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..engine.view import ClusterView
from .job_table import StaticTable

#: :meth:`RunningHoldings.rigid_hold`'s kept holdings stay below this: sums of integers there are exact in any order
HOLD_EXACT = 2.0 ** 52


class RunningHoldings:
    """The running jobs' holdings from the per-job table (a base of :class:`~.job_models.JobModels`, which
    sets the attributes below: the distinct demand rows, whether all of them are integers, the table)."""

    _rows: np.ndarray | None
    _rows_integral: bool
    _table: StaticTable
    # the running jobs' holdings (rigid_hold of the whole set): (view, journal mark, bundle per job, their sum)
    _hold: tuple[ClusterView, int, dict[str, list[float]], list[float]] | None = None

    @property
    def rows_integral(self) -> bool:
        """Whether every demand row seen holds non-negative integers (below 2**40): sums and differences of
        bundles of them, and of a capacity of integers, are then exact in any order."""
        return self._rows_integral

    def rigid_hold(self, view: ClusterView, ids: Iterable[str] | None = None) -> np.ndarray | None:
        """What the running jobs (or the running jobs ``ids``) hold, summed over them, if every one is rigid
        (``n_min == n_max``, so it holds its minimum: the engine keeps a job's workers in ``[n_min, n_max]``)
        and has a slot in the per-job table: their bundles (:meth:`Snapshot.bundle` of ``n_min``) from the
        table's constants in one numpy pass, without a row per job. None otherwise (an elastic job, one not
        seen by a round, or none)."""
        whole = ids is None
        if whole:
            if self._rows_integral:
                kept = self._kept_hold(view)
                if kept is not False:
                    return kept
            ids = view.running
        if self._rows is None:
            return None
        t = self._table
        sl = list(map(t.slots.get, ids))
        if not sl or None in sl:
            return None
        idx = np.array(sl, dtype=np.int64)
        lo = t.lo[idx]
        if not (lo == t.hi[idx]).all():
            return None
        rows = self._rows
        bundles = rows[t.w_row[idx]] * lo[:, None] + rows[t.p_row[idx]]
        held = bundles.sum(axis=0)
        if whole and self._rows_integral and view.running_mark is not None and held.max() < HOLD_EXACT:
            self._hold = (view, view.running_mark, dict(zip(ids, bundles.tolist())), held.tolist())
        return held

    def _kept_hold(self, view: ClusterView) -> np.ndarray | None | bool:
        """:meth:`rigid_hold` of the whole running set from the holdings kept at its last call, brought up to
        date by the running set's journal (:meth:`ClusterView.running_changes`: each job that started adds its
        bundle, each that stopped takes its own off); False when they cannot be (no holdings kept, a journal
        gap, or a job that started unseen or elastic: the caller sums afresh). Kept only while every demand
        row holds integers (:attr:`rows_integral`) and the sums stay below :data:`HOLD_EXACT`: then every sum
        and difference of bundles is exact in any order, so these are the floats numpy's sum gives
        (issue 18, seventeenth session)."""
        memo = self._hold
        if memo is None or memo[0] is not view:
            return False
        changes = view.running_changes(memo[1])
        if changes is None:
            return False
        bundles, total = memo[2], memo[3]
        if changes:
            self._hold = None  # (until brought up to date below)
            running, t, rows = view.running, self._table, self._rows
            assert rows is not None
            for jid in dict.fromkeys(changes):
                if (jid in running) == (jid in bundles):
                    continue  # (left and came back, or came and left, since the mark)
                if jid in running:
                    slot = t.slots.get(jid)
                    if slot is None or t.lo[slot] != t.hi[slot]:
                        return False
                    b = (rows[t.w_row[slot]] * t.lo[slot] + rows[t.p_row[slot]]).tolist()
                    bundles[jid] = b
                    total = [x + y for x, y in zip(total, b)]
                else:
                    total = [x - y for x, y in zip(total, bundles.pop(jid))]
            if max(total) >= HOLD_EXACT:
                return False
            self._hold = (view, view.running_mark, bundles, total)
        if not bundles:
            return None
        return np.array(total)

    def rigid_and_fitting(self, view: ClusterView) -> bool:
        """Whether every running job is rigid (:meth:`rigid_hold`) and, in exact arithmetic, all of them fit
        the cluster's capacity at once: every demand row and the capacity's sum are integers (so every sum
        and difference of them that a round computes is exact, whatever its order, and ``EPS`` changes no
        comparison), and the summed minimums are within the capacity. Then a round that hands every job its
        minimum in any order admits all of them (each prefix of the order fits: costs are non-negative)."""
        if not self._rows_integral:
            return False
        held = self.rigid_hold(view)
        if held is None:
            return False
        total = view.capacity.sum(axis=0)
        return bool(((total == np.floor(total)) & (total < 2.0 ** 50) & (held <= total)).all())
