"""The record's batched progress reports (:class:`~cohabit.engine.record.Record` keeps them beside its rows):
several jobs' reports at one time as one row of arrays (:class:`ReportsRow`, ``Record.append_reports``), and a
job's reports on the simulator's grid at one speed as one segment (:class:`Segments`, ``Record.append_segment``);
reading the record gives one ``progress`` event per report all the same."""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator

import numpy as np


class ReportsRow:
    """One row of the record holding several jobs' ``progress`` events at one time: the job ids and
    their ``iterations`` and ``iter_time`` as arrays (about 24 bytes per report instead of ~130)."""

    __slots__ = ("jobs", "iterations", "iter_time")

    def __init__(self, jobs: list[str], iterations: array, iter_time: array) -> None:
        self.jobs = jobs
        self.iterations = iterations
        self.iter_time = iter_time

    def __len__(self) -> int:
        return len(self.jobs)



class Segments:
    """A record's report segments: per segment the job, its first grid index ``k0``, the number of reports
    ``n``, the grid interval and the job's linear progress ``(done0, t0, rate)``; report ``i`` is at time
    ``t = (k0 + i) * every`` with ``iterations = done0 + (t - t0) * rate`` (``done0`` when ``t <= t0``) and
    ``iter_time = 1 / rate``: the simulator's grid reports (``sim.report_grid``), ~6 bytes per report on a
    contended run instead of ~24 in a row. A segment that continues the job's last one is merged into it."""

    __slots__ = ("jobs", "k0", "n", "every", "done0", "t0", "rate", "last", "total")

    def __init__(self) -> None:
        self.jobs: list[str] = []
        self.k0 = array("q")
        self.n = array("q")
        self.every = array("d")
        self.done0 = array("d")
        self.t0 = array("d")
        self.rate = array("d")
        self.last: dict[str, int] = {}  # job -> index of its last segment
        self.total = 0  # reports

    def add(self, job: str, k0: int, n: int, every: float, done0: float, t0: float, rate: float) -> None:
        i = self.last.get(job)
        if (i is not None and self.k0[i] + self.n[i] == k0 and self.every[i] == every and self.rate[i] == rate
                and self.done0[i] == done0 and self.t0[i] == t0):
            self.n[i] += n
        else:
            self.last[job] = len(self.jobs)
            self.jobs.append(job)
            self.k0.append(k0)
            self.n.append(n)
            self.every.append(every)
            self.done0.append(done0)
            self.t0.append(t0)
            self.rate.append(rate)
        self.total += n

    def last_time(self) -> float | None:
        """The time of the last report of any segment (None when there is none)."""
        if not self.jobs:
            return None
        k0 = np.frombuffer(self.k0, dtype=np.int64)
        n = np.frombuffer(self.n, dtype=np.int64)
        return float(((k0 + n - 1) * np.frombuffer(self.every, dtype=np.float64)).max())

    def events(self, i: int) -> Iterator[tuple[float, int, str, float, float]]:
        """``(time, i, job, iterations, iter_time)`` of segment ``i``'s reports, in time order."""
        job, every, done0, t0, rate = self.jobs[i], self.every[i], self.done0[i], self.t0[i], self.rate[i]
        itt = 1.0 / rate
        for k in range(self.k0[i], self.k0[i] + self.n[i]):
            t = k * every
            yield t, i, job, (done0 + (t - t0) * rate if t > t0 else done0), itt

    def by_time(self) -> Iterator[tuple[float, int, str, float, float]]:
        """Every report of every segment, in time order (segment order among equal times)."""
        return heapq.merge(*(self.events(i) for i in range(len(self.jobs))))

    def counts(self) -> list[tuple[float, int]]:
        """``(time, number of reports)`` per distinct time, in time order (one numpy pass per interval)."""
        if not self.jobs:
            return []
        k0 = np.frombuffer(self.k0, dtype=np.int64)
        stop = k0 + np.frombuffer(self.n, dtype=np.int64)
        every = np.frombuffer(self.every, dtype=np.float64)
        out: list[tuple[float, int]] = []
        for e in np.unique(every).tolist():
            sel = every == e
            a, b = k0[sel], stop[sel]
            lo = int(a.min())
            diff = np.zeros(int(b.max()) - lo + 1, dtype=np.int64)
            np.add.at(diff, a - lo, 1)
            np.add.at(diff, b - lo, -1)
            per = np.cumsum(diff)[:-1]
            ks = np.flatnonzero(per)
            out += zip(((ks + lo) * e).tolist(), per[ks].tolist())
        out.sort(key=lambda r: r[0])
        return out
