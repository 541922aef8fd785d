"""The simulator's shared report grid: periodic progress reports of every running job at the global
multiples of the report interval, computed for all jobs due at one grid time in one pass.

A job joins after its first-iteration report at its current speed (``SimBackend``) and leaves when
its speed or placement changes (it reports its first iteration again, then rejoins), when it halts,
or when its next grid time is not before its finish. While it is a member its progress is linear:
``done(t) = done0 + (t - t0) * rate`` (``SimBackend._Run``), and its training loss follows its truth's
curve ``1 / (a * min(done / total, 1) + b) + c`` (``JobTruth.loss_at``), so a grid time's reports
are a few float operations per member from numbers kept at its join.
"""

from __future__ import annotations

import math
from typing import Any

_EPS = 1e-9


def report_grid_after(t: float, every: float) -> float:
    """The next periodic report time after ``t``: the first global multiple of ``every`` later than ``t``
    (a multiple within 1e-9 of ``t`` counts as ``t`` itself). Every running job reports on this one grid,
    as agents that push metrics to a round-based scheduler that reads the latest at its round: the jobs'
    reports land in one turn and the policy decides once per grid time, not once per job's own clock."""
    return (math.floor(t / every + 1e-9) + 1) * every


class ReportGrid:
    """The members of the report grid of interval ``every`` seconds (see the module docstring), in the
    order they joined.

    One Python pass over the members per grid time: a numpy pass over flat columns was measured slower
    here (~20 members report at a time on the contended Philly runs; 15 array operations cost more
    than the loop)."""

    def __init__(self, every: float) -> None:
        self.every = every
        # job -> [run, next grid time, done0, t0, rate, total, finish, a, b, c, plain]
        self._members: dict[str, list[Any]] = {}

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, job: str) -> bool:
        return job in self._members

    def join(self, job: str, run: Any, t: float, *, done0: float, t0: float, rate: float, total: float,
             loss: tuple[float, float, float], plain: bool) -> float | None:
        """``job`` reports next at the first grid time after ``t``; returns that time, or None (and does
        not join) when that is not before its finish. ``plain``: it reports its loss only (the other
        members' reports are built by the caller from ``run``)."""
        finish = t0 + (total - done0) / rate
        due = report_grid_after(t, self.every)
        if due >= finish - _EPS:
            return None
        self._members.pop(job, None)
        self._members[job] = [run, due, done0, t0, rate, total, finish, *loss, plain]
        return due

    def leave(self, job: str) -> None:
        """``job`` reports no more on the grid (no-op if it was not a member)."""
        self._members.pop(job, None)

    def reports(self, t: float) -> tuple[list[str], list[float], list[float], list[float], list[tuple[Any, float]],
                                         float | None]:
        """The reports due at grid time ``t``: the plain members' ``(jobs, iterations, iter_time, loss)``
        columns, ``(run, iterations)`` of the other members due, and the next grid time any member is
        due (None: no member left). Members whose finish is not after ``t``, or whose next grid time is
        not before their finish, leave the grid."""
        nxt = report_grid_after(t, self.every)
        jobs: list[str] = []
        iters: list[float] = []
        iter_time: list[float] = []
        loss: list[float] = []
        other: list[tuple[Any, float]] = []
        gone: list[str] = []
        soonest = math.inf
        late = t + _EPS
        for jid, m in self._members.items():
            run, due, done0, t0, rate, total, finish, a, b, c, plain = m
            if due > late:  # (joined with a later time: its first report was at this grid time)
                if due < soonest:
                    soonest = due
                continue
            if t >= finish - _EPS:  # its finish is due now or earlier: that is its report
                gone.append(jid)
                continue
            done = done0 + (t - t0) * rate if t > t0 else done0
            if plain:
                f = done / total
                jobs.append(jid)
                iters.append(done)
                iter_time.append(1.0 / rate)
                loss.append(1.0 / (a * (f if f < 1.0 else 1.0) + b) + c)
            else:
                other.append((run, done))
            if nxt < finish - _EPS:
                m[1] = nxt
                if nxt < soonest:
                    soonest = nxt
            else:
                gone.append(jid)
        for jid in gone:
            del self._members[jid]
        return jobs, iters, iter_time, loss, other, (soonest if soonest < math.inf else None)
