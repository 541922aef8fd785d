"""Tiresias's per-job record and its preemption planning (``policies.tiresias``).

Which running jobs to pause for a waiting one is where the paper is silent (§3.2.3 says only that
a job preempts jobs of lower queues): victims are taken from the lowest queue first and, within a
queue, the job that most recently (re)started or entered it first; once the job fits, victims it
turns out not to need are spared.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable

import numpy as np

from ..engine.actions import Placement
from ..engine.job import JobView
from ..engine.view import ClusterView
from .placement import Draft

MAX_PRUNE = 6  # preemption: try to spare victims only when a job needed at most this many
PlaceFn = Callable[[Draft, JobView], "Placement | None"]
MinNodesFn = Callable[[ClusterView, np.ndarray, int], int]


class Rec:
    """What the policy keeps per active job."""

    __slots__ = ("job", "q", "entered", "running", "epoch", "base", "last_start", "gpus", "per_gpu", "rate", "shape",
                 "g_index", "g_version", "key", "_pl", "_pl_nodes", "_pl_workers", "_pl_share", "_pl_gpus", "_pl_whole")

    def __init__(self, job: JobView, now: float) -> None:
        self.job = job
        self.q = 0
        self.entered = now
        self.running = False
        self.epoch = 0
        self.base: tuple[float, float, float] | None = None  # (service, executed, waited) at promotion
        self.last_start = -math.inf
        self.gpus = 0.0
        self.per_gpu = 0.0  # GPUs per worker
        self.rate = 1.0
        self.shape: tuple[bytes, int, bool] = (b"", 0, False)  # what placement depends on
        self.g_index = 0.0
        self.g_version = -1
        self.key: tuple[int, float, float, int] = (0, 0.0, now, job.seq)  # waiting order
        self._pl: Placement | None = None  # the placement the three below were read from (see spread)
        self._pl_nodes: frozenset[int] = frozenset()
        self._pl_workers: list[int] = []
        self._pl_share: list[float] = []
        self._pl_gpus: tuple[tuple[int, float], ...] = ()  # (node, its workers' GPUs), see _read_placement
        self._pl_whole = False

    def _read_placement(self) -> None:
        """Read the job's placement into the ``_pl*`` fields: its nodes, its workers' nodes and GPUs per worker
        (as :meth:`spread` gives them), each worker node's GPUs summed (in worker order), and whether those are
        whole GPUs that add exactly in any order (:func:`victims_near`)."""
        pl = self.job.placement
        workers = list(pl[: self.job.n_workers])
        share = self.gpus / max(len(workers), 1)
        self._pl, self._pl_nodes, self._pl_workers = pl, frozenset(pl), workers
        self._pl_share = [share] * len(workers)
        per: dict[int, float] = {}
        for i in workers:
            per[i] = per.get(i, 0.0) + share
        self._pl_gpus = tuple(per.items())
        self._pl_whole = share.is_integer() and 0.0 <= share * len(workers) < WHOLE_MAX

    def spread(self) -> tuple[frozenset[int], list[int], list[float]]:
        """(every node of the job's placement, its workers' nodes, GPUs per worker for each of them): read once
        per placement."""
        if self.job.placement is not self._pl:
            self._read_placement()
        return self._pl_nodes, self._pl_workers, self._pl_share


def _neg_queue(rec: Rec) -> int:
    return -rec.q


def lower_gpus(k: int, run_gpus: list[float], victims: list[Rec] | None = None) -> list[float]:
    """Per queue q of ``k``: GPUs of running jobs in queues below it (``run_gpus[q]``: GPUs running in queue q;
    only ``victims`` if given)."""
    held = list(run_gpus) if victims is None else [0.0] * k
    if victims is not None:
        for v in victims:
            held[v.q] += v.gpus
    out = [0.0] * k
    for q in range(k - 2, -1, -1):
        out[q] = out[q + 1] + max(held[q + 1], 0.0)
    return out


def most_first(free_gpus: np.ndarray) -> list[float]:
    """Each node's free GPUs, most first: the values of ``np.sort(free_gpus)[::-1]`` (on up to 64 nodes a Python
    sort, which costs less than numpy's call there: 0.7 vs 2.4 us on 8 nodes)."""
    if len(free_gpus) <= 64:
        return sorted(free_gpus.tolist(), reverse=True)
    return np.sort(free_gpus)[::-1].tolist()


#: clusters of at most this many nodes rank the candidates' nodes in Python floats (:func:`_best_nodes`)
SMALL_NODES = 16
#: whole numbers below this (as floats), fewer than :data:`WHOLE_TERMS` of them added to one of them, add exactly
#: in any order (every partial sum is a whole number below 2**53): the ranking of :func:`victims_near` by node
WHOLE_MAX = float(2 ** 40)
WHOLE_TERMS = 2 ** 12


def _best_nodes(free_gpus: np.ndarray, spreads: list[tuple[frozenset[int], list[int], list[float]]], m: int,
                need: float) -> set[int] | None:
    """The ``m`` nodes with most GPUs once every candidate's workers are given back (``free_gpus`` per node plus
    each worker's share, added in order; ties by node index), or None if even they hold fewer than ``need``.

    On a small cluster (at most :data:`SMALL_NODES` nodes, ``m`` < 8) in Python floats with the same
    operations as numpy's: ``np.add.at`` adds one by one in order, a stable argsort is a stable sort, and
    numpy sums fewer than 8 values one after the other from 0 (``test_small_rankings_equal_numpys``)."""
    if len(free_gpus) <= SMALL_NODES and m < 8:
        room = free_gpus.tolist()
        for _, workers, shares in spreads:
            for i, x in zip(workers, shares):
                room[i] += x
        top = sorted(range(len(room)), key=lambda i: -room[i])[:m]
        got = 0.0
        for i in top:
            got += room[i]
        return None if got + 1e-9 < need else set(top)
    arr = free_gpus.copy()
    idx: list[int] = []
    add: list[float] = []
    for _, workers, shares in spreads:
        idx += workers
        add += shares
    np.add.at(arr, idx, add)  # (unbuffered, in order: the same sums as adding one by one)
    best = np.argsort(-arr, kind="stable")[:m]
    if float(arr[best].sum()) + 1e-9 < need:
        return None
    return set(best.tolist())


def victims_near(free_gpus: np.ndarray, cands: list[Rec], m: int, need: float) -> list[Rec] | None:
    """The candidates with a node among the ``m`` that hold most GPUs once every candidate's workers are given
    back (:func:`_best_nodes`), in their order; None if even those nodes hold fewer than ``need``.

    When every free count and every candidate's per-worker GPUs are whole numbers below :data:`WHOLE_MAX`
    (whole-GPU jobs: the contended Philly run and the Muri trace throughout), each node's room is summed from
    the candidates' per-node GPUs (:attr:`Rec._pl_gpus`, kept per placement) instead of worker by worker: whole
    numbers add exactly in any order, so the room, the ranking (most first, ties by node index: a stable sort)
    and the sum of the best ``m`` are :func:`_best_nodes`'. Otherwise :func:`_best_nodes` itself ranks them
    (``test_victims_near_ranks_as_best_nodes``)."""
    room = free_gpus.tolist()
    if len(cands) < WHOLE_TERMS and room and all(map(float.is_integer, room)) and \
            -WHOLE_MAX < min(room) and max(room) < WHOLE_MAX:
        for v in cands:
            if v.job.placement is not v._pl:
                v._read_placement()
            if not v._pl_whole:
                break
            for i, x in v._pl_gpus:
                room[i] += x
        else:
            top = sorted(range(len(room)), key=lambda i: -room[i])[:m] if m > 1 else \
                [max(range(len(room)), key=room.__getitem__)]  # (max: the first of the most, as a stable sort)
            got = 0.0
            for i in top:
                got += room[i]
            if got + 1e-9 < need:
                return None
            keep = set(top)
            return [v for v in cands if not keep.isdisjoint(v._pl_nodes)]
    spreads = [v.spread() for v in cands]
    near = _best_nodes(free_gpus, spreads, m, need)
    if near is None:
        return None
    return [v for v, (nodes, _, _) in zip(cands, spreads) if not near.isdisjoint(nodes)]


def preempt_for(rec: Rec, draft: Draft, victims: list[Rec], place: PlaceFn,
                min_nodes: MinNodesFn) -> tuple[Placement, list[Rec]] | None:
    """Pause lower-queue running jobs, lowest priority first, until ``rec``'s job fits; then keep
    only the victims it needs. None (draft untouched) if it never fits. ``victims``: the running jobs that may
    be paused, in the order they are taken (their queues descending).

    Placement is retried each time the freed GPUs double (bounding the cost on a long queue)
    and once more with every candidate given back. ``place(draft, job)`` reserves a placement by the
    policy's rule; ``min_nodes(view, demand row, n)`` is the fewest nodes that can hold ``n`` tasks."""
    # (victims come in descending queue order: those of queues below rec's are a prefix)
    cands = victims[:bisect_left(victims, -rec.q, key=_neg_queue)]
    if not cands:
        return None
    g = draft.view.gpu_col
    free = float(draft.free_now[:, g].sum()) if g is not None else 0.0
    need = rec.gpus
    held = 0.0  # the candidates' GPUs, summed in order until they cover the need (a sum of the rest only grows)
    for v in cands:
        held += v.gpus
        if free + held + 1e-9 >= need:
            break
    else:
        return None
    job = rec.job
    view = draft.view
    n = rec.shape[1]
    if g is not None and n > 1 and rec.shape[2]:
        # a consolidated job needs its few nodes: only victims there can help (and none elsewhere
        # should be paused); give up at once if even those nodes cannot hold it
        m = min_nodes(view, view.demand_vector(job), n)
        near = victims_near(draft.free_now[:, g], cands, m, need)
        if not near:
            return None
        cands = near
    saved = draft.checkpoint()  # (no copy while the draft is pristine: most plans keep their victims)
    chosen: list[Rec] = []
    freed, target = free, need
    p = None
    for i, v in enumerate(cands):
        draft.give_back(v.job)
        chosen.append(v)
        freed += v.gpus
        if freed + 1e-9 < target and i < len(cands) - 1:
            continue
        p = place(draft, job)
        if p is not None:
            break
        target = max(2.0 * target, freed + 1e-9)
    if p is None:
        draft.restore(saved)
        return None
    if 1 < len(chosen) <= MAX_PRUNE:  # keep the higher-priority victims the job does not need
        best = chosen
        # the draft holds `best`'s plan (saved room, `best` given back in order, the job placed as `p`) while
        # no trial since changed it: then that plan is not made again below (the same steps on the same
        # room give the same draft and placement; on the Muri artifact's trace1 most prunings try nothing
        # or end with a trial that succeeded)
        holds_best = True
        for i in range(len(chosen) - 1, -1, -1):
            trial = [v for v in best if v is not chosen[i]]
            if free + sum(v.gpus for v in trial) + 1e-9 < need:
                continue
            draft.restore(saved)
            for v in trial:
                draft.give_back(v.job)
            got = place(draft, job)
            holds_best = got is not None
            if got is not None:
                best, p = trial, got
        if not holds_best:
            draft.restore(saved)
            for v in best:
                draft.give_back(v.job)
            p = place(draft, job)
        assert p is not None
        chosen = best
    return p, chosen
