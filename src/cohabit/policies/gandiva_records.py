"""The records Gandiva keeps per job between rounds (Xiao et al., OSDI'18; see :mod:`.gandiva`): an active job's
:class:`JobRec` (its size class, shape, packing key and time-slicing turn) and a packed pair's :class:`PackTrial`."""

from __future__ import annotations

import math
from bisect import bisect_left

from ..engine.job import JobView

EPS = 1e-9


def full_slices(runs: list[JobRec], now: float, slice_: float) -> int:
    """How many of ``runs`` (running jobs in the order their turns started) have had a full slice at
    ``now``: a prefix, as turn starts only grow along that order."""
    cut = slice_ - EPS
    return bisect_left(runs, True, key=lambda r: now - r.turn_start < cut)


class JobRec:
    """What the policy keeps per active job."""

    __slots__ = ("job", "id", "cls", "ci", "n", "whole", "shape", "model", "running", "turn_start", "wait_since",
                 "solo_iter", "nodes", "key", "pack_key", "ikey", "gkey", "turn_no", "victim")

    def __init__(self, job: JobView, now: float) -> None:
        self.job = job
        self.id = job.id  # a plain attribute: read in every round's loops over the queue and hosts
        self.cls = 0.0  # GPU count: Gandiva's size class and node affinity
        self.ci = 0  # column of the class in the affinity table
        self.n = 1  # workers
        self.whole = False  # whole-GPU workers, no parameter servers: packable
        self.shape: tuple[bytes, int] = (b"", 0)
        self.model = ""
        self.running = False
        self.turn_start = -math.inf  # when it last got GPUs
        self.wait_since = now  # when it last started waiting
        self.solo_iter: float | None = None  # iteration time last measured while not sharing
        self.nodes: tuple[int, ...] = ()  # worker nodes it holds
        self.key = (now, job.seq)  # round-robin order: longest waiting first
        self.pack_key: tuple[int, float, str] = (1, 0.0, "")  # (n, cls, model): set with them on arrival
        self.ikey: tuple[int, float] = (1, 0.0)  # (n, cls): its packing hosts' key in Gandiva._idle
        self.gkey: tuple[object, ...] = ()  # (shape, pack_key, whole): its group among the waiting (gandiva_queue)
        self.turn_no = -1  # its place in the turn order (Gandiva._run), numbered when its turn starts
        self.victim = False  # in Gandiva's victim orders (running, not packed)


class PackTrial:
    """A guest packed onto a host at ``time``; the host's solo iteration time before packing."""

    __slots__ = ("host", "time", "host_solo")

    def __init__(self, host: str, time: float, host_solo: float) -> None:
        self.host = host
        self.time = time
        self.host_solo = host_solo
