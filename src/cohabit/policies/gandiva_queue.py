"""Gandiva's waiting jobs indexed by what a round does with them (see :mod:`.gandiva_round`).

A decision round visits the waiting jobs in round-robin order (``JobRec.key``: longest waiting first) and
what it does with one depends only on the job's *group*: its shape (demand, workers and so size class),
its packing key (workers, class, model) and whether its workers are whole GPUs. Once a step fails for a
group in a round (no free room for the shape, no host to pack onto, no turn to take) it fails for the
group's later jobs too, so a round merges the groups' queues in key order (a heap of group heads) and
drops a group as soon as its later jobs can change nothing: a round costs the groups and the jobs that
act, not the length of the queue (issue 18).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import TYPE_CHECKING, Container

if TYPE_CHECKING:
    from .gandiva_records import JobRec


class Group:
    """The waiting jobs of one group, in key order (``keys`` beside ``recs``)."""

    __slots__ = ("order", "shape", "cls", "whole", "pack_key", "ikey", "keys", "recs")

    def __init__(self, order: int, rec: JobRec) -> None:
        self.order = order  # (a tie-break for the heap; keys are unique anyway)
        self.shape = rec.shape
        self.cls = rec.cls
        self.whole = rec.whole
        self.pack_key = rec.pack_key
        self.ikey = rec.ikey
        self.keys: list[tuple[float, int]] = []
        self.recs: list[JobRec] = []

    def after(self, key: tuple[float, int] | None, skip: Container[str]) -> JobRec | None:
        """The first job after ``key`` (from the first if None) whose id is not in ``skip``."""
        i = 0 if key is None else bisect_right(self.keys, key)
        recs = self.recs
        while i < len(recs):
            r = recs[i]
            if r.id not in skip:
                return r
            i += 1
        return None


class WaitGroups:
    """Every waiting job, in its group; groups in the order they were first seen."""

    def __init__(self) -> None:
        self.groups: dict[tuple[object, ...], Group] = {}
        self._made = 0
        self._whole: dict[tuple[int, float], int] = {}  # per (workers, class): groups of whole-GPU workers
        # every waiting job's key, sorted: (its wait start, its number), for earliest_under
        self._keys: list[tuple[float, int]] = []

    def add(self, rec: JobRec) -> None:
        grp = self.groups.get(rec.gkey)
        if grp is None:
            grp = self.groups[rec.gkey] = Group(self._made, rec)
            self._made += 1
            if grp.whole:
                self._whole[grp.ikey] = self._whole.get(grp.ikey, 0) + 1
        key = rec.key
        keys = self._keys
        if not keys or keys[-1] < key:
            keys.append(key)
        else:
            insort(keys, key)
        if not grp.keys or grp.keys[-1] < key:
            grp.keys.append(key)
            grp.recs.append(rec)
        else:  # (a job suspended at the same instant as a later-numbered one)
            i = bisect_left(grp.keys, key)
            grp.keys.insert(i, key)
            grp.recs.insert(i, rec)

    def remove(self, rec: JobRec) -> None:
        grp = self.groups[rec.gkey]
        i = bisect_left(grp.keys, rec.key)
        if i == len(grp.keys) or grp.recs[i] is not rec:
            raise KeyError(f"gandiva: {rec.id} is not in its waiting group")
        del grp.keys[i]
        del grp.recs[i]
        keys = self._keys
        del keys[bisect_left(keys, rec.key)]
        if not grp.recs:
            del self.groups[rec.gkey]
            if grp.whole:
                left = self._whole[grp.ikey] - 1
                if left:
                    self._whole[grp.ikey] = left
                else:
                    del self._whole[grp.ikey]

    def packs_onto(self, ikey: tuple[int, float]) -> bool:
        """Whether a waiting job with whole-GPU workers would look for packing hosts under ``ikey``."""
        return ikey in self._whole

    def __len__(self) -> int:
        return sum(len(g.recs) for g in self.groups.values())

    def earliest_under(self, now: float, bar: float) -> float | None:
        """The earliest wait start among the jobs that have waited less than ``bar`` at ``now``: the first of the
        waiting jobs' keys (wait start first: ``JobRec.key``) past the bar, as ``now - start < bar`` only turns
        true along them (one bisection over every waiting job, not one per group)."""
        keys = self._keys
        if not keys or not now - keys[-1][0] < bar:
            return None  # (the latest wait start is past the bar: all are)
        return keys[bisect_left(keys, True, key=lambda k: now - k[0] < bar)][0]



class TurnOrder:
    """Running jobs in the order their turns started (``JobRec.turn_no``), as a list read by bisection: those
    that may give up their turn (not packed), the victims of time-slicing, without walking past packed pairs
    every round (``Gandiva._victims``), and every running job (``Gandiva._run_order``)."""

    __slots__ = ("nos", "recs")

    def __init__(self) -> None:
        self.nos: list[int] = []
        self.recs: list[JobRec] = []

    def add(self, rec: JobRec) -> None:
        no = rec.turn_no
        if not self.nos or self.nos[-1] < no:
            self.nos.append(no)
            self.recs.append(rec)
        else:  # (a pair dissolved: its jobs go back to where their turns started)
            i = bisect_left(self.nos, no)
            self.nos.insert(i, no)
            self.recs.insert(i, rec)

    def remove(self, rec: JobRec) -> None:
        i = bisect_left(self.nos, rec.turn_no)
        if i == len(self.nos) or self.recs[i] is not rec:
            raise KeyError(f"gandiva: {rec.id} is not in the turn order")
        del self.nos[i]
        del self.recs[i]
