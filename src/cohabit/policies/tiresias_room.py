"""Tiresias' victims near the best nodes, from room kept per node (``policies.tiresias``; issue 18, speed22a).

A consolidated job's preemption asks which candidates (running jobs of queues below its own, past their minimum run
time) have a task on the ``m`` nodes that hold the most GPUs once every candidate is given back
(:func:`.tiresias_preempt.victims_near`). Summed from the candidates at each call, that reads ~120 running jobs'
records, their jobs and their per-node tuples (~100 us a call on the contended Philly run, ~20 us of it when the
same call is repeated warm: cache misses on objects no other step of the round reads).

:class:`VictimRoom` keeps what that sum needs instead: per queue below ``Q_1``, each node's GPUs held by the workers
of that queue's running jobs, and per node those jobs; it changes only when a job of those queues starts, stops,
ends or is demoted into them (a job is read when it changes, while the policy is handling it). A call then adds the
queues' rows to the free GPUs, takes off the jobs still within their minimum run time (a short list, in start
order: the jobs started in the last ``min_run_time`` seconds) and ranks the nodes as ``victims_near`` does.

It answers only where ``victims_near``'s whole-number path would and gives its answer exactly: every free count and
every indexed job's GPUs per worker whole numbers below ``WHOLE_MAX``, fewer than ``WHOLE_TERMS`` jobs (whole
numbers add and subtract exactly in any order, so each node's room is the same number), and a minimum run time
above ``TIME_EPS`` (a job started in the round is never a candidate: it is taken off as the others started since). The jobs
near the best nodes come back in the candidates' order: queue descending, then the last to enter its queue's
running table first (``Rec.run_seq``). Otherwise it answers :data:`ASK_CANDIDATES` and the candidates are summed.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..engine.actions import Placement
from .tiresias_preempt import ASK_CANDIDATES, WHOLE_MAX, WHOLE_TERMS, Rec


#: what the room keeps of an indexed job: (its queue, (node, its workers' GPUs there) in worker order, every node
#: of its placement, whether those GPUs are whole numbers below WHOLE_MAX)
Held = tuple[int, tuple[tuple[int, float], ...], frozenset[int], bool]


def _held(rec: Rec, q: int, placement: Placement, n_workers: int) -> Held:
    """What ``rec`` holds on ``placement`` (its first ``n_workers`` tasks are workers), as ``Rec._read_placement``
    reads it: the same per-worker share, summed per node in worker order."""
    workers = placement[:n_workers]
    share = rec.gpus / max(len(workers), 1)
    per: dict[int, float] = {}
    for i in workers:
        per[i] = per.get(i, 0.0) + share
    whole = share.is_integer() and 0.0 <= share * len(workers) < WHOLE_MAX
    return q, tuple(per.items()), frozenset(placement), whole


class VictimRoom:
    """Each node's GPUs held by running jobs of each queue below ``Q_1``, kept as they start, stop and move."""

    def __init__(self, queues: int, eligible_after: float) -> None:
        self._rows: list[list[float]] = [[] for _ in range(queues)]  # per queue: GPUs per node (queue 0 unused)
        self._on: dict[int, dict[Rec, None]] = {}  # node -> indexed jobs with a task there
        self._young: deque[tuple[float, int, Rec]] = deque()  # (start, token, job), in start order
        self._token = 0
        self._run_seq = 0
        self._min_run = eligible_after  # a running job is a candidate once now - its start >= this
        self.count = 0  # indexed jobs
        self.fractional = 0  # indexed jobs whose GPUs are not whole numbers below WHOLE_MAX

    # ------------------------------------------------------------ upkeep
    def entered(self, rec: Rec, now: float, started: bool, placement: Placement | None) -> None:
        """``rec`` entered its queue's running table (started, or demoted while running). ``placement``: the one it
        starts on (the plan's); None: the job's own."""
        self._run_seq += 1
        rec.run_seq = self._run_seq
        if started:
            self._token += 1
            rec.young_token = self._token
            young = self._young
            while young and now - young[0][0] >= self._min_run:  # (old enough for good: not young again)
                young.popleft()
            young.append((now, self._token, rec))
        if rec.held is not None:
            self.left(rec)
        if rec.q >= 1:
            job = rec.job
            if placement is None:
                placement, n_workers = job.placement, job.n_workers
            else:
                n_workers = max(len(placement) - job.spec.num_ps, 0)
            held = rec.held = _held(rec, rec.q, placement, n_workers)
            if held[3]:
                row = self._rows[rec.q]
                for i, x in held[1]:
                    if i >= len(row):
                        row.extend([0.0] * (i + 1 - len(row)))
                    row[i] += x
            else:
                self.fractional += 1
            on = self._on
            for i in held[2]:
                jobs = on.get(i)
                if jobs is None:
                    on[i] = {rec: None}
                else:
                    jobs[rec] = None
            self.count += 1

    def left(self, rec: Rec) -> None:
        """``rec`` left the running tables (stopped, ended) or is about to enter another queue's."""
        held = rec.held
        if held is None:
            return
        rec.held = None
        if held[3]:
            row = self._rows[held[0]]
            for i, x in held[1]:
                row[i] -= x
        else:
            self.fractional -= 1
        on = self._on
        for i in held[2]:
            del on[i][rec]
        self.count -= 1

    # ------------------------------------------------------------ the answer
    def near(self, free_gpus: np.ndarray, q: int, now: float, m: int, need: float, cands: list[Rec]) -> object:
        """``victims_near(free_gpus, cands, m, need)`` for a job of queue ``q`` at ``now`` (``cands``: the running
        jobs of queues below ``q`` past their minimum run time, in the victims' order; only their count is read),
        or :data:`ASK_CANDIDATES` where the kept room is not exact."""
        if self.fractional or len(cands) >= WHOLE_TERMS or self.count >= WHOLE_TERMS or self._min_run <= 0.0:
            return ASK_CANDIDATES
        room = free_gpus.tolist()
        if not room or not all(map(float.is_integer, room)) or not -WHOLE_MAX < min(room) or \
                not max(room) < WHOLE_MAX:
            return ASK_CANDIDATES
        n = len(room)
        rows = self._rows
        for k in range(q + 1, len(rows)):
            row = rows[k]
            if row:
                if len(row) < n:
                    row.extend([0.0] * (n - len(row)))
                room = [a + b for a, b in zip(room, row)]
        lim = self._min_run
        young = self._young
        while young and now - young[0][0] >= lim:
            young.popleft()
        for _, token, v in young:  # (started within the minimum run time: no candidates)
            held = v.held
            if held is not None and v.young_token == token and held[0] > q:
                for i, x in held[1]:
                    room[i] -= x
        top = sorted(range(n), key=lambda i: -room[i])[:m] if m > 1 else \
            [max(range(n), key=room.__getitem__)]  # (as victims_near: the first of the most)
        got = 0.0
        for i in top:
            got += room[i]
        if got + 1e-9 < need:
            return None
        near: dict[Rec, None] = {}
        on = self._on
        for i in top:
            for v in on.get(i, ()):
                if v.q > q and now - v.last_start >= lim:
                    near[v] = None
        return sorted(near, key=_victim_order)


def _victim_order(rec: Rec) -> tuple[int, int]:
    """The victims' order: queue descending, then the last to enter its queue's running table first."""
    return -rec.q, -rec.run_seq
