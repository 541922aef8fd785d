"""Tiresias's waiting jobs in priority order, kept across rounds, one sorted list per (queue, shape).

A round walks the waiting jobs by priority key ``(queue, -Gittins index, queue entry, arrival)``
(:class:`Walk` merges the lists). Jobs of one queue and one placement shape behave alike in a round:
once one of them can neither be placed (its shape failed, or fewer GPUs are free than it needs) nor
preempt (no GPUs held by lower queues, or its shape's preemption failed), every later one of the list
fails the same way until a preemption succeeds (only then do room, failures and victims change). The
round parks such a list (:meth:`Walk.park`) instead of visiting each of its jobs (on a contended
cluster thousands of waiting jobs per round), and takes the parked lists up again after a successful
preemption (:meth:`Walk.unpark`), from the job being handled then: the ones it passed over would have
been visited to no effect.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterator

from .tiresias_preempt import Rec

#: (queue, placement shape): the jobs of one list
StreamKey = tuple[int, tuple[bytes, int, bool]]
Key = tuple[int, float, float, int]


def _key_of(rec: Rec) -> Key:
    return rec.key


class WaitingOrder:
    """The waiting jobs by key, one sorted list per (queue, shape), and the count of each GPU size."""

    def __init__(self) -> None:
        self._keys: dict[StreamKey, list[Key]] = {}
        self._recs: dict[StreamKey, list[Rec]] = {}
        self.sizes: dict[float, int] = {}  # GPU size -> number of waiting jobs of that size
        self._walkable: list[tuple[bool, list[Rec]]] | None = None  # see walkable: None once a list came or went

    def add(self, rec: Rec) -> None:
        """Insert a waiting job under its current key (``rec.key[0]`` is its queue)."""
        sk = (rec.key[0], rec.shape)
        keys = self._keys.get(sk)
        if keys is None:
            keys = self._keys[sk] = []
            self._recs[sk] = []
            self._walkable = None
        i = bisect_left(keys, rec.key)
        keys.insert(i, rec.key)
        self._recs[sk].insert(i, rec)
        self.sizes[rec.gpus] = self.sizes.get(rec.gpus, 0) + 1

    def remove(self, rec: Rec) -> None:
        """Take a job out (its key must be the one it was inserted with)."""
        sk = (rec.key[0], rec.shape)
        keys, recs = self._keys[sk], self._recs[sk]
        i = bisect_left(keys, rec.key)
        assert recs[i] is rec
        del keys[i]
        del recs[i]
        if not keys:
            del self._keys[sk]
            del self._recs[sk]
            self._walkable = None
        left = self.sizes[rec.gpus] - 1
        if left:
            self.sizes[rec.gpus] = left
        else:
            del self.sizes[rec.gpus]

    def resort(self) -> None:
        """Every job's key changed within its queue (``rec.key[0]`` is the same): each list sorted again by the new
        keys, in place. The same lists' contents as removing each job under its old key and adding it under its new
        one (keys are unique), in one sort per list."""
        for sk, recs in self._recs.items():
            recs.sort(key=_key_of)
            self._keys[sk][:] = [r.key for r in recs]

    def __iter__(self) -> Iterator[Rec]:
        """Every waiting job (lists one after another: not in priority order)."""
        for recs in self._recs.values():
            yield from recs

    def lists(self) -> list[list[Rec]]:
        """The lists themselves (not copies: a round walks them live, see :class:`Walk`)."""
        return list(self._recs.values())

    def walkable(self) -> list[tuple[bool, list[Rec]]]:
        """``(True, list)`` for each of :meth:`lists` (all droppable), as :class:`Walk` takes them: kept until a
        list is made or dropped (the lists themselves change in place). Not to be changed by the caller."""
        got = self._walkable
        if got is None:
            got = self._walkable = [(True, recs) for recs in self._recs.values()]
        return got


class Walk:
    """Lists of jobs, each sorted by key, read merged in key order (keys are unique). A droppable list
    can be parked and taken up again (see the module docstring).

    The lists are read live, not copied (a copy per round cost O(queue) on a contended cluster): the round
    tells the walk what it changes in them. A job it starts leaves its list right after it was read
    (:meth:`taken`); a job it pauses joins a list of a lower queue, which the walk has not read yet, and is
    not visited in this round (:meth:`hide`), as in a copy taken when the round began."""

    __slots__ = ("_lists", "_droppable", "_pos", "_heap", "_last", "_parked", "_hidden", "_gen")

    def __init__(self, lists: list[tuple[bool, list[Rec]]]) -> None:
        self._lists = [recs for _, recs in lists]
        self._droppable = [d for d, _ in lists]
        self._pos = [0] * len(lists)
        # (key of a list's next job, list, the list's generation when pushed): parking a list bumps its
        # generation, so its entry still in the heap is dropped when it comes up (no search of the heap)
        self._heap = [(recs[0].key, i, 0) for i, recs in enumerate(self._lists) if recs]
        heapq.heapify(self._heap)
        self._gen = [0] * len(lists)
        self._last = -1
        self._parked: set[int] = set()
        self._hidden: set[int] = set()  # id() of jobs that joined a list during the walk

    def __iter__(self) -> Walk:
        return self

    def __next__(self) -> Rec:
        heap, gen = self._heap, self._gen
        while heap and heap[0][2] != gen[heap[0][1]]:  # (the entry of a list parked since it was pushed)
            heapq.heappop(heap)
        if not heap:
            raise StopIteration
        i = heap[0][1]
        recs, k = self._lists[i], self._pos[i]
        hidden = self._hidden
        if hidden:
            while id(recs[k]) in hidden:  # (the heap's key is that of the first job not hidden)
                k += 1
        rec = recs[k]
        k += 1
        self._pos[i] = k
        n = len(recs)
        if hidden:
            while k < n and id(recs[k]) in hidden:
                k += 1
        if k < n:
            heapq.heapreplace(heap, (recs[k].key, i, gen[i]))
        else:
            heapq.heappop(heap)
        self._last = i
        return rec

    def taken(self) -> None:
        """The job just read has left its list (it starts)."""
        self._pos[self._last] -= 1

    def hide(self, rec: Rec) -> None:
        """``rec`` joined a list during the walk: do not visit it."""
        self._hidden.add(id(rec))

    def park(self) -> None:
        """Read nothing more from the list of the last job until :meth:`unpark` (if it is droppable)."""
        i = self._last
        if i < 0 or not self._droppable[i] or i in self._parked:
            return
        self._parked.add(i)
        self._gen[i] += 1  # its next job, already in the merge, is dropped when it comes up

    def unpark(self, after: Key) -> None:
        """Read the parked lists again from their first job with a key above ``after`` (not hidden)."""
        hidden = self._hidden
        for i in self._parked:
            recs, k = self._lists[i], self._pos[i]
            while k < len(recs) and (recs[k].key < after or id(recs[k]) in hidden):
                k += 1
            self._pos[i] = k
            if k < len(recs):
                heapq.heappush(self._heap, (recs[k].key, i, self._gen[i]))
        self._parked.clear()
