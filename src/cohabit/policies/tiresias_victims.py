"""Tiresias's possible victims indexed by node (``policies.tiresias``; issue 18, speed17a).

A consolidated job that preempts looks only at the victims on the ``m`` nodes that hold most GPUs once every
candidate is given back (:func:`.tiresias_preempt.victims_near`): a walk over every candidate (~110 per call at 10k
contended Philly jobs, more at 82k) that sums each one's GPUs per node. :class:`VictimIndex` keeps those sums as the
running jobs change instead: per queue, each node's whole GPUs held by the running jobs that may be preempted
(running at least the minimum run time: they join when it has passed), as Python ints (exact in any order), and per
node the jobs with a task there. A round then reads the room of the candidates' queues in a few list additions and
the candidates on the best nodes from those nodes alone, in the victims' order (queues descending, then the last to
enter its queue first: :attr:`Rec.run_seq`).

The index follows the policy's own bookkeeping (``LasQueues._set_running``, ``_move``, ``on_finish``), the same
records the round's victims list is built from: a victim paused earlier in the round has left it. It answers only
where :func:`victims_near`'s whole-number path would (every free count and every candidate's per-node GPUs whole
and bounded, fewer than :data:`WHOLE_TERMS` candidates: the same sums exactly) and ``FALLBACK`` otherwise, and only
when the minimum run time exceeds :data:`TIME_EPS` (a job started in the round itself is then never a candidate).
``tests/test_tiresias_victim_index.py`` compares it with :func:`victims_near` at every call of whole runs.
"""

from __future__ import annotations

import heapq

import numpy as np

from .tiresias_preempt import FALLBACK, WHOLE_MAX, WHOLE_TERMS, Rec

#: (queue it is summed in, its (node, GPUs) pairs, every node of its placement, whether its per-node GPUs are
#: whole, its GPUs)
_Entry = tuple[int, tuple[tuple[int, float], ...], frozenset[int], bool, float]


def _victim_order(rec: Rec) -> tuple[int, int]:
    return -rec.q, -rec.run_seq


class VictimIndex:
    """The running jobs that may be preempted, by queue and node (see the module docstring)."""

    __slots__ = ("min_run", "_pending", "_tick", "_held", "_sums", "_odd", "_on", "_nodes", "_k", "_gpus",
                 "_odd_gpus", "_count")

    def __init__(self, queues: int, min_run: float) -> None:
        #: a running job may be preempted once ``now - last_start >= min_run`` (the round's own test)
        self.min_run = min_run
        self._k = queues
        self._pending: list[tuple[float, int, Rec]] = []  # heap: (last start, tie, running job not yet indexed)
        self._tick = 0
        self._held: dict[str, _Entry] = {}  # job id -> what it added
        self._nodes = 0
        self._sums: list[list[int]] = [[] for _ in range(queues)]  # per queue, per node: whole GPUs (exact ints)
        self._odd = [0] * queues  # per queue: indexed jobs whose GPUs are not whole (no exact sums: FALLBACK)
        self._on: list[dict[str, Rec]] = []  # per node: the indexed jobs with a task there
        self._gpus = [0] * queues  # per queue: the indexed jobs' GPUs (whole, below WHOLE_MAX: exact ints)
        self._odd_gpus = [0] * queues  # per queue: indexed jobs whose GPUs are not such (no exact sum)
        self._count = [0] * queues  # per queue: indexed jobs

    def started(self, rec: Rec) -> None:
        """``rec`` runs from ``rec.last_start`` on: it joins once its minimum run time has passed."""
        self._tick += 1
        heapq.heappush(self._pending, (rec.last_start, self._tick, rec))

    def stopped(self, rec: Rec) -> None:
        """``rec`` no longer runs (paused, refused or ended)."""
        entry = self._held.pop(rec.job.id, None)
        if entry is not None:
            self._add(entry, -1)
            for i in entry[2]:
                del self._on[i][rec.job.id]

    def moved(self, rec: Rec) -> None:
        """Running ``rec`` changed queue (to ``rec.q``)."""
        entry = self._held.get(rec.job.id)
        if entry is not None:
            self._add(entry, -1)
            entry = self._held[rec.job.id] = (rec.q, entry[1], entry[2], entry[3], entry[4])
            self._add(entry, 1)

    def _add(self, entry: _Entry, sign: int) -> None:
        """Add (``sign`` 1) or take out (-1) what ``entry`` holds in its queue's sums."""
        q, per_node, _, whole, gpus = entry
        self._count[q] += sign
        if gpus.is_integer() and 0.0 <= gpus < WHOLE_MAX:
            self._gpus[q] += sign * int(gpus)
        else:
            self._odd_gpus[q] += sign
        if whole:
            sums = self._sums[q]
            for i, x in per_node:
                sums[i] += sign * int(x)
        else:
            self._odd[q] += sign

    def advance(self, now: float, recs: dict[str, Rec], nodes: int) -> None:
        """Index the running jobs whose minimum run time has passed at ``now`` (``recs``: the policy's active
        jobs; ``nodes``: the cluster's node count)."""
        if nodes != self._nodes:  # (first use, or another cluster: the sums made afresh)
            self._nodes = nodes
            self._sums = [[0] * nodes for _ in range(self._k)]
            self._odd, self._gpus, self._odd_gpus, self._count = ([0] * self._k for _ in range(4))
            self._on = [{} for _ in range(nodes)]
            held, self._held = self._held, {}
            for job_id in held:
                self._index(recs[job_id])
        pending, min_run = self._pending, self.min_run
        while pending and now - pending[0][0] >= min_run:
            last, _, rec = heapq.heappop(pending)
            job_id = rec.job.id
            if rec.running and rec.last_start == last and recs.get(job_id) is rec and job_id not in self._held:
                self._index(rec)

    def _index(self, rec: Rec) -> None:
        if rec.job.placement is not rec._pl:
            rec._read_placement()
        entry = self._held[rec.job.id] = (rec.q, rec._pl_gpus, rec._pl_nodes, rec._pl_whole, float(rec.gpus))
        self._add(entry, 1)
        for i in entry[2]:
            self._on[i][rec.job.id] = rec

    def victim_gpus(self) -> list[float] | None:
        """Per queue, the GPUs of its indexed jobs outside ``Q_1`` (``Q_1``'s are never victims: 0): what
        :func:`.tiresias_preempt.lower_gpus` sums from the victims list, the same floats (whole numbers, fewer than
        :data:`WHOLE_TERMS` of them, add exactly in any order); None where that does not hold."""
        if len(self._held) >= WHOLE_TERMS or any(self._odd_gpus[1:]):
            return None
        return [0.0] + [float(x) for x in self._gpus[1:]]

    def summary(self, q: int) -> tuple[int, float] | None:
        """(how many indexed jobs run in queues below ``q``, their GPUs summed): the victims list's count and the sum
        of its jobs' GPUs in its order, the same floats (see :meth:`victim_gpus`); None where that does not hold."""
        if len(self._held) >= WHOLE_TERMS or any(self._odd_gpus[q + 1:]):
            return None
        return sum(self._count[q + 1:]), float(sum(self._gpus[q + 1:]))

    def near(self, free_gpus: np.ndarray, below: int, m: int, need: float, n_cands: int) -> list[Rec] | None | object:
        """:func:`.tiresias_preempt.victims_near` of the ``n_cands`` candidates (the indexed jobs of queues below
        ``below``) for ``m`` nodes and ``need`` GPUs on the free GPUs ``free_gpus`` per node, or :data:`FALLBACK`
        where its whole-number path would not answer."""
        room = free_gpus.tolist()
        if n_cands >= WHOLE_TERMS or not room or len(room) != self._nodes or \
                not all(map(float.is_integer, room)) or not (-WHOLE_MAX < min(room) and max(room) < WHOLE_MAX):
            return FALLBACK
        odd, sums = self._odd, self._sums
        for q in range(below + 1, self._k):
            if odd[q]:
                return FALLBACK
        for q in range(below + 1, self._k):
            room = [a + b for a, b in zip(room, sums[q])]  # (whole numbers below 2**53: exact, as the walk's)
        # as victims_near ranks them: most first, ties by node index (a reversed sort is stable too; the first index
        # holding the largest value is the first of the most)
        top = sorted(range(len(room)), key=room.__getitem__, reverse=True)[:m] if m > 1 else [room.index(max(room))]
        got = 0.0
        for i in top:
            got += room[i]
        if got + 1e-9 < need:
            return None
        found: dict[str, Rec] = {}
        on = self._on
        for i in top:
            for job_id, rec in on[i].items():
                if rec.q > below:
                    found[job_id] = rec
        return sorted(found.values(), key=_victim_order)
