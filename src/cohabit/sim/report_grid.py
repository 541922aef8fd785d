"""The simulator's shared report grid: periodic progress reports of every running job at the global
multiples of the report interval, kept as segments and computed only when the engine takes them.

A job joins after its first-iteration report at its current speed (``SimBackend``) and leaves when
its speed or placement changes (it reports its first iteration again, then rejoins), when it halts,
or after its last grid time before its finish. While it is a member its progress is linear:
``done(t) = done0 + (t - t0) * rate`` (``SimBackend._Run``), and its training loss follows its truth's
curve ``1 / (a * min(done / total, 1) + b) + c`` (``JobTruth.loss_at``). So a member's reports are one
*segment*: grid indices ``k_first .. k_last`` (grid time ``k x every``) and the numbers kept at its
join. A grid time's pass costs nothing per plain member (it only ends the members whose last report it
was); :meth:`ReportGrid.take` computes the reports of the passes done so far that were not taken yet,
one short loop per segment, when the engine reads them (``Scheduler``: at a policy's round, before a
job's state changes, or at every pass for a policy that takes each report as it comes). Members whose
reports carry more than the loss (Pollux's goodput statistics, subtask timers: ``plain=False``) are
reported at every pass, as before.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

_EPS = 1e-9

# a segment: [k_next (first index not taken), k_last, done0, t0, rate, total, a, b, c, k_first]
_NEXT, _LAST, _DONE0, _T0, _RATE, _TOTAL, _A, _B, _C, _FIRST = range(10)


def report_grid_after(t: float, every: float) -> float:
    """The next periodic report time after ``t``: the first global multiple of ``every`` later than ``t``
    (a multiple within 1e-9 of ``t`` counts as ``t`` itself). Every running job reports on this one grid,
    as agents that push metrics to a round-based scheduler that reads the latest at its round: the jobs'
    reports land in one turn and the policy decides once per grid time, not once per job's own clock."""
    return (_index_after(t, every)) * every


def _index_after(t: float, every: float) -> int:
    """Index ``k`` of :func:`report_grid_after` (the grid time is ``k * every``)."""
    return math.floor(t / every + 1e-9) + 1


class ReportGrid:
    """The members of the report grid of interval ``every`` seconds (see the module docstring), in the
    order they joined, and the plain members' segments whose reports were not taken yet."""

    def __init__(self, every: float) -> None:
        self.every = every
        # live members: job -> (segment, run or None for a plain member), in join order
        self._members: dict[str, tuple[list[Any], Any]] = {}
        self._others: dict[str, tuple[list[Any], Any]] = {}  # the members that are not plain
        # plain jobs -> their segments with reports not taken yet (oldest first), in the order they joined
        self._open: dict[str, list[list[Any]]] = {}
        self._expire: dict[int, list[tuple[str, list[Any]]]] = {}  # k_last -> members whose last report it is
        self.k_done = -1  # index of the last grid pass done (reports up to it have happened)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, job: str) -> bool:
        return job in self._members

    def join(self, job: str, run: Any, t: float, *, done0: float, t0: float, rate: float, total: float,
             loss: tuple[float, float, float], plain: bool) -> float | None:
        """``job`` reports next at the first grid time after ``t``; returns that time, or None (and does
        not join) when that is not before its finish. ``plain``: it reports its loss only (the other
        members' reports are built by the caller from ``run`` at each pass)."""
        every = self.every
        finish = t0 + (total - done0) / rate
        k = _index_after(t, every)
        due = k * every
        cut = finish - _EPS
        if due >= cut:
            return None
        last = math.floor(cut / every)  # the last k with k * every < cut, exactly as the comparisons go
        while last * every >= cut:
            last -= 1
        while (last + 1) * every < cut:
            last += 1
        self.leave(job)
        seg = [k, last, done0, t0, rate, total, *loss, k]
        self._members[job] = (seg, None if plain else run)
        if plain:
            segs = self._open.get(job)
            if segs is not None and all(s[_NEXT] > s[_LAST] for s in segs):
                del self._open[job]  # (all taken: it rejoins at the end of the order)
                segs = None
            if segs is None:
                self._open[job] = [seg]
            else:
                segs.append(seg)
        else:
            self._others[job] = (seg, run)
        self._expire.setdefault(last, []).append((job, seg))
        return due

    def leave(self, job: str) -> None:
        """``job`` reports no more on the grid after the passes done so far (no-op if not a member)."""
        m = self._members.pop(job, None)
        if m is None:
            return
        seg = m[0]
        if seg[_LAST] > self.k_done:
            seg[_LAST] = self.k_done
        self._others.pop(job, None)

    def grid_pass(self, k: int) -> tuple[bool, list[tuple[Any, float]], float | None]:
        """The pass of grid index ``k`` (time ``k * every``): whether any plain member is live (its
        reports are taken later, :meth:`take`), ``(run, iterations)`` of the other members due now, and
        the next grid time any member is due (None: no member left). Members whose last report this was
        leave the grid."""
        self.k_done = k
        t = k * self.every
        other: list[tuple[Any, float]] = []
        for seg, run in self._others.values():
            if seg[_FIRST] <= k:
                done0, t0 = seg[_DONE0], seg[_T0]
                other.append((run, done0 + (t - t0) * seg[_RATE] if t > t0 else done0))
        plain = len(self._members) > len(self._others)
        for job, seg in self._expire.pop(k, ()):
            m = self._members.get(job)
            if m is not None and m[0] is seg:
                del self._members[job]
                self._others.pop(job, None)
        if not self._members:
            return plain, other, None
        return plain, other, (k + 1) * self.every

    def pending(self, job: str | None = None) -> bool:
        """Whether any report (of ``job``, or of anyone) happened and was not taken yet."""
        segs = self._open.get(job) if job is not None else None
        if job is not None and segs is None:
            return False
        k = self.k_done
        for s in (segs if segs is not None else (s for ss in self._open.values() for s in ss)):
            if s[_NEXT] <= min(s[_LAST], k):
                return True
        return False

    def take(self, job: str | Sequence[str] | None = None, *, chunked: bool = False
             ) -> Iterable[tuple[str, int, list[float], list[float], float, float, float, float]]:
        """The reports of ``job`` (None: of every job; a sequence of ids: of each of them with reports
        :meth:`pending`, in that order, as one take per job would give them) at the passes done so far, not
        taken before, oldest first per job: ``(job, k0, iterations, losses, iter_time, done0, t0, rate)`` per
        segment, the reports at grid times ``(k0 + i) * every``; ``iterations[i] = done0 + (t_i - t0) * rate``.
        ``chunked``: an iterator that computes the segments a chunk of about :data:`_CHUNK` reports at a time,
        as it is read (the same numbers), so a fold after a long quiet spell (half a million reports at once on
        10,000 Philly jobs under SLAQ) never holds them all; else a list."""
        if job is None:
            todo = list(self._open.items())
        elif isinstance(job, str):
            segs = self._open.get(job)
            if segs is None:
                return []
            todo = [(job, segs)]
        else:
            opened, pending = self._open, self.pending
            todo = [(jid, opened[jid]) for jid in job if pending(jid)]
        k_done, members = self.k_done, self._members
        due: list[tuple[str, list[Any], int, int]] = []  # (job, segment, first k, last k)
        count = 0
        for jid, segs in todo:
            live = members.get(jid)
            live_seg = live[0] if live is not None else None
            keep = []
            for seg in segs:
                k0, last = seg[_NEXT], seg[_LAST]
                stop = last if last < k_done else k_done
                if k0 <= stop:
                    due.append((jid, seg, k0, stop))
                    count += stop - k0 + 1
                    seg[_NEXT] = stop + 1
                if seg is live_seg or seg[_NEXT] <= seg[_LAST]:
                    keep.append(seg)
            if keep:
                if len(keep) != len(segs):
                    segs[:] = keep
            else:
                del self._open[jid]
        if not due:
            return []
        if chunked and count > _CHUNK:
            return _chunks(due, self.every)
        return (_reports_numpy if count >= _NUMPY_FROM else _reports_python)(due, self.every)


#: reports a chunked take computes at once (:meth:`ReportGrid.take`)
_CHUNK = 16384


def _chunks(due: list[tuple[str, list[Any], int, int]], every: float
            ) -> Iterator[tuple[str, int, list[float], list[float], float, float, float, float]]:
    """The reports of ``due`` (in order), computed in chunks of consecutive segments of about ``_CHUNK``
    reports (a longer segment alone) as they are read."""
    part: list[tuple[str, list[Any], int, int]] = []
    count = 0
    for d in due:
        part.append(d)
        count += d[3] - d[2] + 1
        if count >= _CHUNK:
            yield from (_reports_numpy if count >= _NUMPY_FROM else _reports_python)(part, every)
            part, count = [], 0
    if part:
        yield from (_reports_numpy if count >= _NUMPY_FROM else _reports_python)(part, every)


#: reports taken at once from which one numpy pass is cheaper than a Python step per report (measured:
#: ~0.1 us per report and ~0.3 us per segment in Python, ~20 us + ~0.03 us per report in numpy)
_NUMPY_FROM = 400


def _reports_python(due: list[tuple[str, list[Any], int, int]], every: float
                    ) -> list[tuple[str, int, list[float], list[float], float, float, float, float]]:
    """:meth:`ReportGrid.take`'s reports, one Python step per report."""
    out = []
    for jid, seg, k0, stop in due:
        done0, t0, rate, total, a, b, c = seg[_DONE0:_FIRST]
        iters = []
        losses = []
        for k in range(k0, stop + 1):
            t = k * every
            done = done0 + (t - t0) * rate if t > t0 else done0
            f = done / total
            iters.append(done)
            losses.append(1.0 / (a * (f if f < 1.0 else 1.0) + b) + c)
        out.append((jid, k0, iters, losses, 1.0 / rate, done0, t0, rate))
    return out


def _reports_numpy(due: list[tuple[str, list[Any], int, int]], every: float
                   ) -> list[tuple[str, int, list[float], list[float], float, float, float, float]]:
    """:func:`_reports_python` in one numpy pass: the same IEEE operations in the same order per report
    (numpy's elementwise ``+ - * /`` round as Python's floats do), so the same numbers bit for bit."""
    n = np.array([stop - k0 + 1 for _, _, k0, stop in due], dtype=np.int64)
    cols = np.array([seg[_DONE0:_FIRST] for _, seg, _, _ in due], dtype=np.float64)  # done0 t0 rate total a b c
    k0s = np.array([k0 for _, _, k0, _ in due], dtype=np.int64)
    ends = np.cumsum(n)
    starts = ends - n
    k = np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(starts - k0s, n)
    t = k * every
    done0, t0, rate, total, a, b, c = (np.repeat(cols[:, i], n) for i in range(7))
    done = np.where(t > t0, done0 + (t - t0) * rate, done0)
    f = done / total
    loss = 1.0 / (a * np.where(f < 1.0, f, 1.0) + b) + c
    iters_all, loss_all = done.tolist(), loss.tolist()
    out = []
    for (jid, seg, k0, _), lo, hi in zip(due, starts.tolist(), ends.tolist()):
        rate_ = seg[_RATE]
        out.append((jid, k0, iters_all[lo:hi], loss_all[lo:hi], 1.0 / rate_, seg[_DONE0], seg[_T0], rate_))
    return out
