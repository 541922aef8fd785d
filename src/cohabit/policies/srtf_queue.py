"""SRTF's waiting jobs without a declared length, kept ordered across decision rounds.

Such a job's estimate is ``max(mean - run_time, 0)`` (``mean``: the mean finished run time,
which moves at every finish; ``inf`` before the first finish), and its run time is fixed while it
waits. Subtracting from a fixed ``mean`` is monotone in floating point, so the order by descending
run time is the order by estimate for every ``mean``; only estimates that round (or clamp) to the
same value tie, and those ties are contiguous in that order and broken by arrival ``seq`` here.
So a round reads the queue in estimate order without re-estimating or re-sorting all of it.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator, KeysView
from typing import Generic, TypeVar

T = TypeVar("T")


class MeanQueue:
    """Job ids ordered by ``(-run_time, seq)``, read as ``(estimate, seq, id)`` in estimate order."""

    def __init__(self) -> None:
        self._key: dict[str, tuple[float, int, str]] = {}
        self._sorted: list[tuple[float, int, str]] = []

    @property
    def ids(self) -> KeysView[str]:
        """The ids held (a set-like view)."""
        return self._key.keys()

    def add(self, job_id: str, run_time: float, seq: int) -> None:
        """Hold ``job_id`` with its (fixed while waiting) run time; replaces an earlier entry."""
        self.discard(job_id)
        key = (-run_time, seq, job_id)
        self._key[job_id] = key
        insort(self._sorted, key)

    def discard(self, job_id: str) -> None:
        """Drop ``job_id`` if held."""
        key = self._key.pop(job_id, None)
        if key is not None:
            del self._sorted[bisect_left(self._sorted, key)]

    def first_estimate(self, mean: float | None) -> float:
        """The smallest estimate held (``inf`` when empty or ``mean`` is None)."""
        if mean is None or not self._sorted:
            return math.inf
        return max(mean - (-self._sorted[0][0]), 0.0)

    def ordered(self, mean: float | None) -> Iterator[tuple[float, int, str]]:
        """``(max(mean - run_time, 0.0), seq, id)`` ascending by (estimate, seq), lazily; ``inf``
        estimates in ``seq`` order when ``mean`` is None. Do not add or discard while iterating."""
        if mean is None:
            for _, seq, job_id in sorted(self._sorted, key=lambda k: k[1]):
                yield math.inf, seq, job_id
            return
        items = self._sorted
        n = len(items)

        def estimate(key: tuple[float, int, str]) -> float:
            return max(mean - (-key[0]), 0.0)

        i = 0
        while i < n:
            r = estimate(items[i])
            # the jobs of this run time (in seq order), found without estimating; if the next run time's
            # estimate is larger, they are the whole block of estimate r (the usual case)
            j = bisect_right(items, (items[i][0], math.inf), lo=i)
            if j < n and estimate(items[j]) <= r:  # other run times share the estimate: find them all
                j = bisect_right(items, r, lo=i, key=estimate)  # estimates only grow along the list
            if items[i][0] == items[j - 1][0]:  # one run time: already in seq order
                for k in range(i, j):
                    _, seq, job_id = items[k]
                    yield r, seq, job_id
            else:  # run times that round (or clamp) to one estimate: by seq across them
                for _, seq, job_id in sorted(items[i:j], key=lambda key: key[1]):
                    yield r, seq, job_id
            i = j


class Streams(Generic[T]):
    """Ascending streams of ``(estimate, seq, item)`` read as one, in ``(estimate, seq)`` order (seqs
    are unique, so the order is total and the same as sorting everything).

    SRTF keeps one droppable stream per placement shape: once a round can pause nobody for the current
    job or any later one, room only shrinks, so a shape that failed to place keeps failing and
    :meth:`skip_rest` drops its stream (the jobs of that shape are not even looked at) instead of
    trying every job of it in turn."""

    __slots__ = ("_its", "_heap", "_last")

    def __init__(self, streams: Iterable[tuple[bool, Iterator[tuple[float, int, T]]]]) -> None:
        self._its: list[tuple[bool, Iterator[tuple[float, int, T]]]] = []
        heap: list[tuple[float, int, int, T]] = []
        for droppable, it in streams:
            first = next(it, None)
            if first is not None:
                heap.append((first[0], first[1], len(self._its), first[2]))
                self._its.append((droppable, it))
        heapq.heapify(heap)
        self._heap = heap
        self._last = -1

    def __iter__(self) -> Streams[T]:
        return self

    def __next__(self) -> tuple[float, int, T]:
        heap = self._heap
        if not heap:
            raise StopIteration
        r, seq, i, item = heap[0]
        nxt = next(self._its[i][1], None)
        if nxt is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (nxt[0], nxt[1], i, nxt[2]))
        self._last = i
        return r, seq, item

    def skip_rest(self) -> None:
        """Read nothing more from the stream the last item came from, if it is droppable."""
        i = self._last
        if i < 0 or not self._its[i][0]:
            return
        self._its[i] = (False, iter(()))
        heap = self._heap
        for k, entry in enumerate(heap):
            if entry[2] == i:  # its next item, already read ahead
                heap[k] = heap[-1]
                heap.pop()
                heapq.heapify(heap)
                break
