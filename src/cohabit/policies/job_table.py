"""Per-job arrays for the learning-curve policies' rounds (Optimus, SLAQ, Themis; issue 18):
:class:`Snapshot`, the jobs' state and estimates as arrays for one allocation round, and
:class:`StaticTable`, each job's constants (and a paused job's kept row) as growing numpy columns, so
a round reads the rows of many queued jobs in one numpy pass (:meth:`.optimus.JobModels.snapshot_of`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..engine.job import JobView
from .targets import EPS


class StaticTable:
    """:meth:`JobModels._static_of`'s per-job constants as growing numpy columns, one slot per job (by
    id, in the order first seen), so a round reads the rows of many pending jobs in one pass."""

    def __init__(self) -> None:
        self.slots: dict[str, int] = {}
        self.used = 0  # slots handed out (the columns' length in use)
        self._free: list[int] = []  # dropped jobs' slots, reused: the table holds the jobs alive, not all seen
        self.models: list[str] = []
        self._model_index: dict[str, int] = {}
        self.seq = self.lo = self.hi = self.w_row = self.p_row = self.model = self.code = np.zeros(0, dtype=np.int64)
        self.submit = self.declared = np.zeros(0, dtype=np.float64)
        # the rest of a job's row: done, a, b, c, total, beta0, beta1, max rate, last rate; a pending job's
        # (nothing done, no fit, no rates) until freeze() keeps a paused job's; prior: a, b, c are the
        # model's prior, read at each round
        self.kept = np.zeros((0, 9), dtype=np.float64)
        self.prior = np.zeros(0, dtype=bool)

    def add(self, job: str, seq: int, lo: int, hi: int, submit: float, declared: float, model: str,
            w_row: int, p_row: int) -> int:
        """Store one job's constants (the tuple :meth:`JobModels._static_of` returns); returns its slot."""
        if self._free:
            i = self._free.pop()
        else:
            i = self.used
            self.used += 1
        if i >= len(self.seq):  # grow by doubling
            cap = max(2 * len(self.seq), 1024)
            for name in ("seq", "lo", "hi", "w_row", "p_row", "model", "code", "submit", "declared", "kept", "prior"):
                old = getattr(self, name)
                new = np.zeros((cap,) + old.shape[1:], dtype=old.dtype)
                new[:len(old)] = old
                setattr(self, name, new)
        m = self._model_index.get(model)
        if m is None:
            m = self._model_index[model] = len(self.models)
            self.models.append(model)
        self.seq[i], self.lo[i], self.hi[i], self.w_row[i], self.p_row[i], self.model[i] = seq, lo, hi, w_row, p_row, m
        self.submit[i], self.declared[i] = submit, declared
        self.code[i] = 0
        self.kept[i] = (0.0, 0.0, 0.0, 0.0, math.nan, math.nan, math.nan, 0.0, 0.0)
        self.prior[i] = True
        self.slots[job] = i
        return i

    def freeze(self, slot: int, done: float, abc: tuple[float, float, float],
               fit: tuple[float, float, float, float, float], *, prior: bool) -> None:
        """Keep a paused job's row: iterations done, speed coefficients (``prior``: they are its model's
        prior, read again each round) and loss-fit numbers (:meth:`JobModels._fit_of`)."""
        self.code[slot] = 2
        self.kept[slot] = (done, *abc, *fit)
        self.prior[slot] = prior

    def drop(self, job: str) -> None:
        """Forget ``job``'s slot (handed to the next job added)."""
        slot = self.slots.pop(job, None)
        if slot is not None:
            self._free.append(slot)


@dataclass
class Snapshot:
    """Per-job arrays (one entry per job, in ``jobs`` order) for one allocation round."""

    jobs: list[JobView]
    ids: list[str]
    seq: np.ndarray
    cur: np.ndarray  # workers held now (0 unless running)
    n_min: np.ndarray
    n_max: np.ndarray
    state: np.ndarray  # 0 pending, 1 running, 2 paused
    done: np.ndarray
    remaining: np.ndarray  # estimated iterations left
    a: np.ndarray  # 1/f(w) = a/w + b + c w
    b: np.ndarray
    c: np.ndarray
    submit: np.ndarray
    declared: np.ndarray  # declared iterations (nan: none)
    beta0: np.ndarray  # loss curve (nan: no fit yet)
    beta1: np.ndarray
    max_rate: np.ndarray  # largest observed loss drop per iteration (0: none yet, or not followed: JobModels.rates)
    last_rate: np.ndarray  # loss drop per iteration between the last two reports
    worker: np.ndarray  # (jobs, resources): one worker's demand
    ps: np.ndarray  # (jobs, resources): all parameter servers' demand
    total: np.ndarray  # (resources,): cluster capacity

    def __len__(self) -> int:
        return len(self.jobs)

    def extend(self, more: Snapshot) -> Snapshot:
        """This snapshot's jobs followed by ``more``'s (taken at the same time and view)."""
        fields = [f for f in self.__dataclass_fields__ if f != "total"]
        parts = {f: (getattr(self, f) + getattr(more, f) if f in ("jobs", "ids")
                     else np.concatenate([getattr(self, f), getattr(more, f)])) for f in fields}
        return Snapshot(**parts, total=self.total)

    def share(self, v: np.ndarray) -> np.ndarray:
        """Dominant share of each row of ``v`` in the cluster (DRF's dominant resource, as Optimus uses)."""
        inv = np.where(self.total > EPS, 1.0 / np.where(self.total > EPS, self.total, 1.0), 0.0)
        return (v * inv).max(axis=1)

    def bundle(self, n: np.ndarray) -> np.ndarray:
        """Demand rows of ``n`` workers plus the parameter servers, per job."""
        return self.worker * n[:, None] + self.ps

    def inv_speed(self, w: np.ndarray) -> np.ndarray:
        """Seconds per iteration at ``w`` workers (same shape as ``w``, one row per job); inf where ``w <= 0``."""
        wf = np.asarray(w, dtype=np.float64)
        shape = (-1,) + (1,) * (wf.ndim - 1)
        safe = np.where(wf > 0, wf, 1.0)
        t = self.a.reshape(shape) / safe + self.b.reshape(shape) + self.c.reshape(shape) * safe
        return np.where((wf > 0) & (t > 0), t, np.inf)

    def fits_units(self, free: np.ndarray) -> np.ndarray:
        """How many more workers of each job the aggregate ``free`` holds."""
        need = self.worker > EPS
        q = np.where(need, np.floor((free[None, :] + EPS) / np.where(need, self.worker, 1.0)), np.inf)
        units = q.min(axis=1) if q.shape[1] else np.full(len(self), np.inf)
        return np.where(np.isfinite(units), units, 1 << 20).astype(np.int64)
