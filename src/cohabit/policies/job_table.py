"""Per-job arrays for the learning-curve policies' rounds (Optimus, SLAQ, Themis; issue 18):
:class:`Snapshot`, the jobs' state and estimates as arrays for one allocation round, and
:class:`StaticTable`, each job's constants (and a paused job's kept row) as growing numpy columns, so
a round reads the rows of many queued jobs in one numpy pass (:meth:`.optimus.JobModels.snapshot_of`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..engine.job import JobView
from .targets import EPS, row_max, row_min


class StaticTable:
    """:meth:`JobModels._static_of`'s per-job constants as growing numpy columns, one slot per job (by
    id, in the order first seen), so a round reads the rows of many pending jobs in one pass.

    Stored as two blocks laid out as a snapshot's columns (:meth:`JobModels._with_fresh`), so a round
    gathers a queue's rows with one fancy index per block (issue 18, twelfth session): ``ints`` (8, slots):
    seq, workers held (0), ``n_min``, ``n_max``, state code (0 pending, 2 a kept paused row), worker and
    parameter-server demand rows, model index; ``flts`` (12, slots): iterations done, submit time, declared
    iterations (nan: none), speed coefficients a, b, c, loss-curve length estimate, beta0, beta1, max and
    last drop rate, and a last row left 0 (the finished jobs' mean length, read at each round). A pending
    job's row holds nothing done, no fit, no rates until :meth:`freeze` keeps a paused job's; ``prior``:
    a, b, c are its model's prior, read at each round. The names ``seq``, ``lo``, ``hi``, ``w_row``,
    ``p_row``, ``model``, ``code``, ``submit``, ``declared`` are views of the blocks' rows. ``stamp``: per slot, a
    number that changes whenever its row is written (:meth:`add`, :meth:`freeze`), so a value derived from a row
    can be kept until it changes (SLAQ's queue values, :mod:`.slaq_values`)."""

    INT_ROWS = 8
    FLT_ROWS = 12

    def __init__(self) -> None:
        self.slots: dict[str, int] = {}
        self.used = 0  # slots handed out (the columns' length in use)
        self._free: list[int] = []  # dropped jobs' slots, reused: the table holds the jobs alive, not all seen
        self.models: list[str] = []
        self._model_index: dict[str, int] = {}
        self._writes = 0  # rows written so far (the next stamp)
        self.stamp = np.zeros(0, dtype=np.int64)
        self._blocks(np.zeros((self.INT_ROWS, 0), dtype=np.int64), np.zeros((self.FLT_ROWS, 0), dtype=np.float64),
                     np.zeros(0, dtype=bool))

    def _blocks(self, ints: np.ndarray, flts: np.ndarray, prior: np.ndarray) -> None:
        """Install the blocks and the named views of their rows."""
        self.ints, self.flts, self.prior = ints, flts, prior
        self.seq, _, self.lo, self.hi, self.code, self.w_row, self.p_row, self.model = ints
        self.submit, self.declared = flts[1], flts[2]

    def add(self, job: str, seq: int, lo: int, hi: int, submit: float, declared: float, model: str,
            w_row: int, p_row: int) -> int:
        """Store one job's constants (the tuple :meth:`JobModels._static_of` returns); returns its slot."""
        if self._free:
            i = self._free.pop()
        else:
            i = self.used
            self.used += 1
        cap = self.ints.shape[1]
        if i >= cap:  # grow by doubling
            cap = max(2 * cap, 1024)
            ints = np.zeros((self.INT_ROWS, cap), dtype=np.int64)
            flts = np.zeros((self.FLT_ROWS, cap), dtype=np.float64)
            prior = np.zeros(cap, dtype=bool)
            n = self.ints.shape[1]
            ints[:, :n], flts[:, :n], prior[:n] = self.ints, self.flts, self.prior
            stamp = np.zeros(cap, dtype=np.int64)
            stamp[:n] = self.stamp
            self.stamp = stamp
            self._blocks(ints, flts, prior)
        m = self._model_index.get(model)
        if m is None:
            m = self._model_index[model] = len(self.models)
            self.models.append(model)
        self.ints[:, i] = (seq, 0, lo, hi, 0, w_row, p_row, m)
        self.flts[:, i] = (0.0, submit, declared, 0.0, 0.0, 0.0, math.nan, math.nan, math.nan, 0.0, 0.0, 0.0)
        self.prior[i] = True
        self._stamp(i)
        self.slots[job] = i
        return i

    def _stamp(self, slot: int) -> None:
        """Mark ``slot``'s row as written now."""
        self._writes += 1
        self.stamp[slot] = self._writes

    def freeze(self, slot: int, done: float, abc: tuple[float, float, float],
               fit: tuple[float, float, float, float, float], *, prior: bool) -> None:
        """Keep a paused job's row: iterations done, speed coefficients (``prior``: they are its model's
        prior, read again each round) and loss-fit numbers (:meth:`JobModels._fit_of`)."""
        self.code[slot] = 2
        self._stamp(slot)
        f = self.flts
        f[0, slot] = done
        f[3:6, slot] = abc
        f[6:11, slot] = fit
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
        return row_max(v * inv)

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
        units = row_min(q) if q.shape[1] else np.full(len(self), np.inf)
        return np.where(np.isfinite(units), units, 1 << 20).astype(np.int64)
