"""SLAQ: quality-driven allocation by predicted loss reduction per unit of resource (Zhang et al., SoCC'17).

SLAQ schedules approximate ML training jobs to maximise the system-wide improvement
of model quality. What the paper does, and how it maps here:

* **Normalised quality (§3.1).** Loss scales differ between jobs, so SLAQ normalises a
  job's loss reduction by the largest reduction that job has shown so far. Reports here
  come every ``report_interval`` seconds, not every iteration, so the normaliser is the
  largest observed loss drop *per iteration* between two consecutive reports
  (:meth:`LossFits.max_rate`); a prediction of ``dL`` over ``x`` iterations counts as
  ``dL / max_rate`` — "iterations' worth of the job's best progress".
* **Predicting quality improvement (§3.2).** SLAQ fits each job's loss history (weighing
  recent iterations more) and extrapolates it. We use the loss-curve model shared with
  Optimus, ``l(k) = 1/(beta0 k + beta1) + beta2``, fitted with recency weights
  ``recency ** age``; iterations in the next epoch come from the job's measured speed and
  the NNLS speed model (:mod:`cohabit.models.speed`), as SLAQ predicts iteration time
  for other allocations from measured ones. Before a fit exists (new job, fewer than
  four reports) a job is predicted to keep improving at its last observed normalised
  rate — 1 for a job that has not run: a new job's first iterations are by definition
  its best, which is why SLAQ favours new jobs.
* **Scheduling (§3.3).** Every scheduling epoch (``tick_interval = epoch``) all resources are
  re-assigned: starting from nothing, the next unit goes to the job with the largest
  predicted normalised loss reduction over the epoch per unit of resource (the worker's
  dominant share), until resources run out or no job gains (a max-heap, as the paper's
  greedy). A job's first unit is its minimum (``n_min`` workers plus its parameter
  servers); rigid jobs take their whole size as one unit. Jobs that get nothing are
  paused (checkpointed); leftover room is then given to waiting jobs in arrival order so
  no resource idles while a job waits.

Adaptation: SLAQ's epochs were seconds on Spark, where moving cores is cheap. Here a
changed allocation costs a checkpoint-restore, so the prediction for a job whose size
would change (or that resumes) counts only ``epoch - restart_cost`` seconds of progress,
and the default epoch is 5 minutes. Between epochs, arrivals and departures only start
waiting jobs in free room, by the same ranking.

Quiet epochs (issue 18, ninth session): when no job waits, every running job is rigid and, in exact
arithmetic, all of them fit the cluster at once (:meth:`JobModels.rigid_and_fitting`: integer demands
and capacity, their sum within it), the epoch's greedy and its work-conserving pass hand every job its
one unit whatever the predicted gains (each prefix of any order fits), so every job keeps what it
holds: the epoch is skipped without computing them. ``skip_quiet = False`` runs it
(``tests/test_policy_quiet_rounds.py`` compares both).

Rounds after an arrival or finish that admit nobody (issue 18, fifteenth session): such a round hands the free
room to waiting jobs only; when no waiting job's minimum fits it alone (:meth:`JobModels.admits_none`, the
greedy's own test on the per-job table's minimums), its greedy and its work-conserving pass admit nobody and the
plan is empty, so the round is skipped (``skip_quiet = False`` runs it; ``tests/test_policy_event_rounds.py``
runs each skipped round anyway and compares whole runs). Its reads of the paused jobs' losses wait for the next
round that reads them, with the same numbers (a paused job reports nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain

import numpy as np

from ..engine.actions import Plan
from ..engine.job import JobView
from ..engine.view import ClusterView
from .job_table import Snapshot
from .job_models import JobModels
from .optimus import ObservingPolicy, check_positive
from .params import build
from .slaq_values import QueueValues
from .targets import (GREEDY_SCAN, _fits, admit_in_order, any_waiting, apply_targets, changed_rows, col_min,
                      consolidated_placer, greedy_by_value, room_for_none, rows_within, waiting_jobs)


class SLAQ(ObservingPolicy):
    """See the module docstring. All durations are seconds."""

    keep_values = True  # (False: every round computes its waiting jobs' values afresh; tests compare both)
    reach_only = True  # (False: a kept-value round runs the greedy over every row; tests compare both)

    def __init__(self, epoch: float = 300.0, report_interval: float = 60.0, restart_cost: float = 30.0,
                 recency: float = 0.95) -> None:
        self.tick_interval = check_positive("epoch", epoch)
        self.report_interval = check_positive("report_interval", report_interval)
        self.restart_cost = check_positive("restart_cost", restart_cost, allow_zero=True)
        if not isinstance(recency, (int, float)) or not 0 < recency <= 1:
            raise ValueError(f"recency must be in (0, 1], got {recency!r}")
        self.models = JobModels(recency=float(recency), rates=True)
        self._kept = QueueValues(self.unit_values)  # the waiting jobs' values, kept between rounds
        self.name = "slaq"
        self._next_full = 0.0
        self._event = False

    # prediction
    def predicted_gains(self, snap: Snapshot, w: np.ndarray) -> np.ndarray:
        """Normalised loss reduction each job is predicted to make in the next epoch on ``w[j, i]``
        workers (see the module docstring); 0 where ``w <= 0``."""
        has_fit = ~np.isnan(snap.beta0)
        b0 = np.where(has_fit, snap.beta0, 0.0)
        u = np.where(has_fit, np.maximum(snap.beta0 * snap.done + snap.beta1, 1e-12), 1.0)
        norm = snap.max_rate
        has_fit &= norm > 0
        rate = np.where(norm > 0, snap.last_rate / np.where(norm > 0, norm, 1.0), 1.0)
        cap = np.where(np.isnan(snap.declared), np.inf, np.maximum(snap.declared - snap.done, 0.0))
        restart = (snap.state[:, None] == 2) | ((snap.state[:, None] == 1) & (w != snap.cur[:, None]))
        run = np.maximum(self.tick_interval - np.where(restart, self.restart_cost, 0.0), 0.0)
        x = np.where(w > 0, np.minimum(run / snap.inv_speed(w), cap[:, None]), 0.0)
        bx = b0[:, None] * x
        safe_norm = np.where(has_fit, norm, 1.0)[:, None]
        fitted = bx / (u[:, None] * (u[:, None] + bx)) / safe_norm
        return np.where(has_fit[:, None], fitted, rate[:, None] * x)

    def unit_values(self, snap: Snapshot) -> np.ndarray:
        """Each row's value of its first unit (``n_min`` workers and its parameter servers) as :meth:`targets`
        computes it (:meth:`_values`' first column: the same elementwise operations on each row)."""
        return self._values(snap, 1, snap.bundle(snap.n_min))[:, 0]

    # decision
    def decide(self, view: ClusterView) -> Plan:
        now = view.now
        waiting = any_waiting(view)  # decide runs after every report: no per-job work unless a round is due
        if now >= self._next_full and (waiting or view.running):
            self._next_full = now + self.tick_interval
            self._event = False
            if self._full_round_skipped(view, waiting):
                return []  # a quiet epoch: every running job keeps its unit (see the module docstring)
            waiting_list = waiting_jobs(view)
            return self._round(view, list(chain(view.running.values(), waiting_list)), full=True,
                               waiting_tail=len(waiting_list))
        if self._event and waiting:
            self._event = False
            if room_for_none(view):  # the round below would admit nobody: the same empty plan
                return []
            if self.keep_values:  # the queue read once for the test below and the round
                plan = self._queue_round(view)
                if plan is not None:
                    return plan
            if self.skip_quiet and self.models.admits_none(view, view.free_total):
                return []  # no waiting job's minimum fits the free room: the same empty plan (module docstring)
            waiting_list = waiting_jobs(view)
            return self._round(view, waiting_list, full=False, waiting_tail=len(waiting_list))
        self._event = False
        return []

    def _skips(self, view: ClusterView, waiting: bool) -> bool:
        """A quiet epoch (see the module docstring): nobody waits, every running job rigid and all fit."""
        return not waiting and self.models.rigid_and_fitting(view)

    def targets(self, view: ClusterView, jobs: Sequence[JobView], *, full: bool,
                waiting_tail: int = 0) -> tuple[dict[str, int], list[str], list[str]]:
        """SLAQ's greedy: units to the largest predicted normalised loss reduction per dominant share.

        Unit 0 of a job is its minimum (``n_min`` workers and its parameter servers), unit ``i``
        one more worker. Returns the worker counts, the jobs set higher than they hold by the value of
        their first unit (the order in which they are placed), and the running jobs set lower (in
        running order): the plan acts on these two only. ``waiting_tail``: see :meth:`JobModels.snapshot`.

        A round over the whole queue alone (after an arrival or finish) whose jobs are all rigid reads their
        values kept between rounds (:class:`~.slaq_values.QueueValues`; ``keep_values = False``: made afresh)."""
        if not full and self.keep_values and waiting_tail == len(jobs) == len(view.paused) + len(view.pending):
            got = self._queue_targets(view)
            if got is not None:
                return got
        snap = self.models.snapshot(view, jobs, waiting_tail=waiting_tail)
        free = snap.total.copy() if full else view.free_total.copy()
        width = int((snap.n_max - snap.n_min).max()) + 1 if len(snap) else 0
        width = min(width, int(snap.fits_units(free).max()) + 1) if len(snap) else 0
        if width <= 0:
            return {}, [], []
        first = snap.bundle(snap.n_min)
        return _allot(self._values(snap, width, first), first, snap.worker, free, snap, snap.ids)

    def _values(self, snap: Snapshot, width: int, first: np.ndarray) -> np.ndarray:
        """Each row's marginal value of its units ``0 .. width - 1`` (-inf past ``n_max``): the predicted gain of
        each unit over the one before (unit 0, ``first``: over nothing) per dominant share of it."""
        w = snap.n_min[:, None] + np.arange(width)[None, :]
        valid = w <= snap.n_max[:, None]
        gains = self.predicted_gains(snap, np.where(valid, w, 0))
        # (np.diff(gains, prepend=0.0) and the column of shares built in place: the same subtractions)
        marginal = gains.copy()
        np.subtract(gains[:, 1:], gains[:, :-1], out=marginal[:, 1:])
        cost = np.empty_like(marginal)
        cost[:, 0] = snap.share(first)
        if width > 1:
            cost[:, 1:] = snap.share(snap.worker)[:, None]
        return np.where(valid, marginal / np.maximum(cost, 1e-12), -np.inf)

    def _queue_rows(self, view: ClusterView) -> tuple[list[str], list[int], np.ndarray, np.ndarray] | None:
        """The queue (paused, then pending) as job ids, per-job table slots (a list and an array) and each job's
        minimum (kept, :meth:`QueueValues.costs`), read once for a round over the queue alone; None where a
        paused job's row is not kept yet or a job is elastic (such a round is made from a snapshot)."""
        models = self.models
        q = models.queue_slots(view)
        if q is None or not q[0]:
            return None
        ids, slots = q
        t = models._table
        sl = np.asarray(slots, dtype=np.int64)
        if not (t.lo[sl] == t.hi[sl]).all():
            return None
        return ids, slots, sl, self._kept.costs(models, sl)

    def _queue_targets(self, view: ClusterView, rows: tuple[list[str], list[int], np.ndarray, np.ndarray] | None = None,
                       fits: np.ndarray | None = None) -> tuple[dict[str, int], list[str], list[str]] | None:
        """:meth:`targets` of a round over the free room and the whole queue, every job of it rigid, from the
        per-job table and the kept values (None where a paused job's row is not kept yet, or a job is elastic:
        then computed as before). A rigid job's one unit is its minimum, so the greedy's units are one a row
        (``width`` 1) and their values the kept ones. ``rows``: :meth:`_queue_rows`, read already (``fits``: which
        of them fit the free room, :func:`rows_within`)."""
        if rows is None:
            rows = self._queue_rows(view)
            if rows is None:
                return None
        ids, slots, sl, first = rows
        models = self.models
        t = models._table
        values = self._kept.read(models, view, ids, slots)
        free = view.free_total.copy()
        if self.reach_only and models._rows_integral:
            got = first_fit_reach(values, first, free, t.lo[sl], ids, fits)
            if got is not None:
                return got
        assert models._rows is not None  # (the jobs' rows are in the table)
        return _allot(values[:, None], first, models._rows[t.w_row[sl]], free, _TableRows(t.ints[:5, sl]), ids)

    def _queue_round(self, view: ClusterView) -> Plan | None:
        """The plan of a round over the free room and the queue alone, read once (:meth:`_queue_rows`): empty when
        no waiting job's minimum fits the free room alone (the test of :meth:`JobModels.admits_none` on the same
        minimums), else :meth:`_queue_targets`' plan; None where the queue cannot be read so (then
        :meth:`decide` asks :meth:`JobModels.admits_none` and makes the round from a snapshot)."""
        rows = self._queue_rows(view)
        if rows is None:
            return None
        fits = rows_within(rows[3], view.free_total)
        if self.skip_quiet and not fits.any():
            return []  # no waiting job's minimum fits the free room: the same empty plan (module docstring)
        targets = self._queue_targets(view, rows, fits)
        assert targets is not None
        return self._plan(view, targets)

    def _round(self, view: ClusterView, jobs: list[JobView], *, full: bool, waiting_tail: int = 0) -> Plan:
        return self._plan(view, self.targets(view, jobs, full=full, waiting_tail=waiting_tail))

    def _plan(self, view: ClusterView, got: tuple[dict[str, int], list[str], list[str]]) -> Plan:
        """The plan of :meth:`targets`' answer ``got``."""
        targets, ranked, shrink = got
        jobs_by_id = view.jobs
        return apply_targets(view, targets, [jobs_by_id[jid] for jid in ranked], consolidated_placer,
                             reason="slaq: larger loss reductions elsewhere", shrink=[jobs_by_id[jid] for jid in shrink])


class _TableRows:
    """The columns :func:`_allot` reads of a round's rows (a snapshot's), from the per-job table's int block."""

    def __init__(self, ints: np.ndarray) -> None:
        self.seq, self.cur, self.n_min, _, self.state = ints


def _allot(values: np.ndarray, first: np.ndarray, worker: np.ndarray, free: np.ndarray, rows: Snapshot | _TableRows,
           ids: list[str]) -> tuple[dict[str, int], list[str], list[str]]:
    """SLAQ's greedy over a round's unit ``values`` (then, work-conserving, the jobs left out in arrival order)
    and what it returns (:meth:`SLAQ.targets`): ``first`` each row's minimum, ``worker`` one worker's demand,
    ``rows`` the rows' ``seq``, ``cur``, ``n_min`` and ``state``."""
    counts, free = greedy_by_value(values, first, worker, free)
    # work conservation: jobs left out take leftover room, in arrival order
    left = np.flatnonzero(counts == 0)
    if left.size:
        left = left[np.argsort(rows.seq[left], kind="stable")]
        ok, free = admit_in_order(first[left], free)
        counts[left[ok]] = 1
    n = np.where(counts > 0, rows.n_min + counts - 1, 0)
    ranked = np.argsort(-values[:, 0], kind="stable")
    targets = dict(zip(ids, n.tolist()))
    shrink, _ = changed_rows(rows.state, rows.cur, n)
    cur = rows.cur
    return targets, [ids[i] for i in ranked[n[ranked] > cur[ranked]]], [ids[i] for i in shrink.tolist()]


#: units :func:`first_fit_reach` hands out or passes over before it gives up and the whole greedy runs
REACH_STEPS = 16


def first_fit_reach(values: np.ndarray, first: np.ndarray, free: np.ndarray, n_min: np.ndarray, ids: list[str],
                    fits: np.ndarray | None = None) -> tuple[dict[str, int], list[str], list[str]] | None:
    """:func:`_allot` of a round over the free room and a queue of rigid jobs (one unit a row: ``values`` and
    ``first``, each row's value and minimum; ``n_min`` each row's workers), walking the rows in the greedy's order
    only as far as the free room reaches; None where that cannot be shown to give :func:`_allot`'s answer (then
    the caller runs it). Issue 18, nineteenth session.

    Why the same answer. Every number here is an integer below ``2 ** 53`` (the caller checks that the demand rows
    are, :attr:`JobModels._rows_integral`; ``free`` is checked here), so every sum and difference is exact and the
    order in which costs are added or subtracted does not matter. Then :func:`greedy_by_value` over one unit a row
    is first-fit: its entries (rows of value ``> 0``, by decreasing value, ties to the lower row) from the first
    on, each taken when its cost fits what is left (the longest prefix whose running sum fits is the run of
    entries first-fit takes before its first refusal; its back-filling scan takes, of the next 512 entries, each
    that fits what is left, and stops once not even the smallest minimum fits), as far as entry ``cut + 512``, where
    ``cut >= 0`` is the prefix's length. The work-conserving pass (:func:`admit_in_order` over the rows left out,
    in arrival order) admits nobody when no row left out fits the room left. So first-fit in the greedy's order,
    stopped once the smallest minimum of the rows that fit ``free`` at all (``low``; a row that does not fit
    ``free`` never fits what is left) does not fit what is left, gives :func:`_allot`'s answer when (1) the last
    row it takes is among the first 512 entries (so inside the greedy's scan whatever ``cut`` is: a row past
    it, which the greedy never reaches, is never taken), and (2) it stopped on ``low``, or it ran out of entries
    and no row left out fits what is left (so the work-conserving pass adds nobody). Both are checked; so is
    ``REACH_STEPS``. The entries are found one at a time by ``argmax`` (its first maximum: the lower row on
    ties, as the greedy's stable sort), so the greedy's sort of every row, its running sums, the pass in arrival
    order and its sort go, and rows past the room's reach are read once, by the comparisons that pick the
    next entry. ``fits``: ``rows_within(first, free)`` if known. ``tests/test_slaq_reach.py`` compares with
    :func:`_allot` (and whole runs)."""
    if not len(ids) or not all(f == math.floor(f) and abs(f) < 2.0 ** 52 for f in free.tolist()):
        return None
    if fits is None:
        fits = rows_within(first, free)
    if not fits.any():
        return None
    cand = np.where(fits & (values > 0), values, -np.inf)  # (NaN and values <= 0: not in the greedy)
    low = col_min(first[fits])  # the smallest minimum of the rows that fit the free room at all
    r = free.tolist()
    taken: list[int] = []
    exhausted = False
    for _ in range(REACH_STEPS):
        if not _fits(low, r):
            exhausted = True
            break
        i = int(np.argmax(cand))
        if cand[i] == -np.inf:
            break  # no entry left that fits the free room
        cand[i] = -np.inf
        c = first[i].tolist()
        if _fits(c, r):
            r = [x - y for x, y in zip(r, c)]
            taken.append(i)
    else:
        if not _fits(low, r):
            exhausted = True
        elif cand.max() > -np.inf:
            return None  # the room reaches past REACH_STEPS entries: the whole greedy
    if not exhausted:  # every entry seen: the work-conserving pass must find no row left out that fits
        left = fits.copy()
        left[taken] = False
        if left.any() and rows_within(first[left], np.array(r)).any():
            return None
    if taken:  # (1): the last row taken among the greedy's first 512 entries
        last = taken[-1]
        v = values[last]
        if int(np.count_nonzero(values > v)) + int(np.count_nonzero(values[:last] == v)) >= GREEDY_SCAN:
            return None
    targets = dict.fromkeys(ids, 0)
    for i in taken:
        targets[ids[i]] = int(n_min[i])
    return targets, [ids[i] for i in taken], []


def make(oracle: bool = False, **params: object) -> SLAQ:
    """SLAQ predicts from observed losses only; ``oracle`` is ignored."""
    return build(SLAQ, params, policy="slaq")

