"""Optimus' admission of waiting jobs read by shape group, not row by row (issue 18, twelfth session).

:meth:`JobModels.admit_waiting <.job_models.JobModels.admit_waiting>` admits waiting jobs at their minimum
in queue order: the longest prefix whose running sum of minimums fits the free room, then, among the next
``scan`` rows (the back-filling window), each row whose minimum fits the room left at that moment
(:func:`~.targets.admit_in_order`). Read row by row, a round gathers the minimums of the whole window
(``cut + 512`` rows) although it admits about one job: at 82k jobs the queue is thousands long, so every
round reads 512 rows or more.

Jobs of one shape (:attr:`ClusterView.pending_by_shape`: the same worker row, target size, server row and
server count) and the same ``n_min`` have the same minimum, the same float row. So the back-filling scan is
a walk over the shape groups: a group whose minimum does not fit the room left never fits again (the room
only shrinks), and the next row the scan admits is the earliest next member, by queue position, of the
groups that fit; rows in between belong to groups that do not fit and change nothing. The prefix is read
as before (its running sum in small chunks: ``cumsum`` adds left to right, so the chunks give the same
sums), then the scan's admissions subtract the same rows in the same order: the same jobs and the same
floats, for every trace (``tests/test_admit_index.py`` compares with the row-by-row read on random
queues).

What is kept between rounds (:class:`AdmitIndex`): per shape group, its members' common ``n_min`` and its
minimum row, as Python floats. Each pending job is checked once, at the first round after it joined the queue
(new jobs go last with a larger position than any before them: the queue's tail down to the highest position
checked is what joined since). A group whose members differ in ``n_min`` (elastic jobs of one shape), paused
jobs ahead of the pending ones, a free room not in float64, or an explicit list of waiting jobs make the
caller take the row-by-row read.

The prefix and the scan are computed on Python floats: ``cumsum`` and the scan add and subtract one row at a
time, left to right, in IEEE-754 double precision, as Python's floats do, so the running sums, the tests
(``<= free + EPS``) and the room left are the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import islice

import numpy as np

from ..engine.job import JobView
from ..engine.view import ClusterView
from .targets import EPS, _fits

Costs = Callable[[ClusterView, Sequence[str]], np.ndarray]


class _Group:
    """What :class:`AdmitIndex` keeps of one shape group: the group's mapping (the engine makes a new one
    when an emptied group comes back), its members' common ``n_min`` (None: they differ) and their minimum."""

    __slots__ = ("members", "n_min", "cost")

    def __init__(self, members: Mapping[str, JobView] | None, n_min: int, cost: list[float]) -> None:
        self.members = members
        self.n_min: int | None = n_min
        self.cost = cost


class AdmitIndex:
    """Per shape group of the pending queue: the members' common ``n_min`` and minimum (see the module
    docstring), and :meth:`admit`, the admission read by group."""

    def __init__(self) -> None:
        self._groups: dict[Hashable, _Group] = {}
        self._checked = -1  # the highest pending position whose job was checked into its group

    def _sync(self, view: ClusterView, costs: Costs) -> bool:
        """Check the jobs that joined the pending queue since the last call into their groups (newest first,
        down to the highest position checked before). False when a job is not in the group of its shape."""
        pending = view.pending
        if not pending:
            return True
        position = view.pending_position
        checked = self._checked
        top = position(next(reversed(pending)))  # type: ignore[call-overload]
        if top <= checked:
            return True
        shapes, shape_key, groups = view.pending_by_shape, view.shape_key, self._groups
        for jid in reversed(pending):  # type: ignore[call-overload]
            if position(jid) <= checked:
                break
            job = pending[jid]
            key = shape_key(job)
            members = shapes.get(key)
            if members is None or jid not in members:
                return False
            lo = job.spec.min_workers
            g = groups.get(key)
            if g is None or g.members is not members:  # a new group (or one made again after it emptied)
                groups[key] = _Group(members, lo, costs(view, [jid])[0].tolist())
            elif g.n_min != lo:
                g.n_min = None
        self._checked = top
        return True

    def admit(self, view: ClusterView, free: np.ndarray, scan: int, costs: Costs
              ) -> tuple[list[JobView], np.ndarray] | None:
        """:func:`~.targets.admit_in_order` over the pending queue's minimums (``costs``: each job's
        minimum row, :meth:`JobModels._first_cost`), read by shape group: the admitted jobs in queue order
        and the room left, the same jobs and floats as the row-by-row read. None when it cannot tell (paused
        jobs wait, ``free`` is not float64, the shape groups do not cover the queue, or a group's members
        differ in ``n_min``)."""
        if view.paused or free.dtype != np.float64 or not self._sync(view, costs):
            return None
        pending = view.pending
        n = len(pending)
        groups = self._groups
        live: list[tuple[_Group, Mapping[str, JobView]]] = []
        total = 0
        for key, members in view.pending_by_shape.items():
            g = groups.get(key)
            if g is None or g.members is not members or g.n_min is None:
                return None
            total += len(members)
            live.append((g, members))
        if total != n:
            return None
        # the prefix: jobs in queue order while the running sum of their minimums fits free + EPS
        free_l = free.tolist()
        bound = [f + EPS for f in free_l]
        total_l = [0.0] * len(free_l)
        admitted: list[JobView] = []
        shape_key = view.shape_key
        items = iter(pending.items())
        first = None
        for jid, job in items:
            cum = [a + b for a, b in zip(total_l, groups[shape_key(job)].cost)]
            if not all(a <= b for a, b in zip(cum, bound)):
                first = jid
                break
            total_l = cum
            admitted.append(job)
        cut = len(admitted)
        r = [f - a for f, a in zip(free_l, total_l)] if cut else free_l
        if first is None:
            return admitted, np.array(r, dtype=np.float64)
        # the back-filling window: rows cut .. end - 1 of the queue, by position
        end = min(n, cut + scan)
        position = view.pending_position
        start = position(first)
        span = end - 1 - cut  # (rows from the first that does not fit to the window's last)
        last: float | None = math.inf if end == n else start if span == 0 else None  # (found when needed)

        def in_window(pos: int) -> bool:
            """Whether the pending job at ``pos`` (>= ``start``) lies in the window. Positions are distinct
            integers increasing along the queue, so a job ``pos - start`` positions after the first is at
            most that many rows after it: within ``span`` it is in the window without looking further.
            Only past that is the window's last row found (up to ``scan`` rows read, once a round)."""
            nonlocal last
            if pos - start <= span:
                return True
            if last is None:
                last = position(next(islice(items, span - 1, None))[0])
            return pos <= last

        # the groups that fit the room left, each with its next member in the window: [position, id, the
        # members after it, minimum]
        heads: list[list] = []
        for g, members in live:
            cost = g.cost
            if not _fits(cost, r):
                continue
            it = iter(members)
            for jid in it:
                pos = position(jid)
                if pos >= start:
                    if in_window(pos):
                        heads.append([pos, jid, it, cost])
                    break
        jobs = view.jobs
        while heads:
            head = min(heads)
            cost = head[3]
            if not _fits(cost, r):
                heads.remove(head)  # (the room only shrinks: the group never fits again)
                continue
            r = [x - y for x, y in zip(r, cost)]
            admitted.append(jobs[head[1]])
            nxt = next(head[2], None)
            if nxt is None or not in_window(position(nxt)):
                heads.remove(head)
            else:
                head[0], head[1] = position(nxt), nxt
        return admitted, np.array(r, dtype=np.float64)
