"""Harmony's dynamic data spill/reload (Lee et al., §VI), for real: input blocks on disk, reloaded behind compute.

:class:`BlockSpill` cuts a worker's input arrays (rows) into ``n_blocks``
contiguous blocks and keeps the last ``ceil(alpha * n_blocks)`` of them on disk
(``.npy`` files written with the page cache dropped, so the first reload really
reads the disk; later reloads may be served by the OS page cache — reclaimable
memory outside the worker, as for Harmony's spilled JVM data — unless ``cold``,
which drops it after every read). A mini-batch is gathered from the in-memory blocks and
from a reload buffer holding the batch's rows that live on disk; while the worker
computes on iteration ``i``, a background thread reloads the disk rows of
iteration ``i + 1`` (the next batch's indices are known: cohabit's batches are
seeded permutations). Our workloads draw random mini-batches, so a batch touches
most blocks: the reload reads just the batch's rows from each disk block rather
than whole blocks (Harmony's blocks are read whole because its batches are
block-aligned). Rows come back bit-for-bit equal to the original arrays, so
training is identical to all-in-memory training whatever alpha is.

Memory is measurable: :attr:`BlockSpill.resident_bytes` counts the in-memory
blocks plus the reload buffer (its peak is kept); :class:`NodeMemory` checks
the sum over a node's workers (input + model bytes) against the node's capacity.

:class:`AlphaTuner` tunes alpha by hill climbing on the measured iteration time
from an initial estimate based on the input and model sizes
(:func:`initial_alpha`), never below the memory floor.

:func:`attach` puts a workload's ``X`` / ``y`` behind a :class:`BlockSpill` (the
data-source wrapper a PS worker can be given; nothing in the worker changes:
``self.X[idx]`` reads through it).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np


def _drop_cache(path: Path) -> None:
    if hasattr(os, "posix_fadvise"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class BlockSpill:
    """Input rows in blocks, ``alpha`` of them on disk (see the module docstring)."""

    def __init__(self, arrays: Mapping[str, np.ndarray], *, n_blocks: int, alpha: float = 0.0,
                 spill_dir: str | Path | None = None, cold: bool = False) -> None:
        if not arrays:
            raise ValueError("BlockSpill needs at least one array")
        n = {len(a) for a in arrays.values()}
        if len(n) != 1:
            raise ValueError(f"arrays must have the same number of rows, got {sorted(n)}")
        self.n_rows = n.pop()
        if not 1 <= n_blocks <= self.n_rows:
            raise ValueError(f"n_blocks must be in [1, {self.n_rows}] (the rows), got {n_blocks!r}")
        self.names = tuple(arrays)
        self.starts = np.linspace(0, self.n_rows, n_blocks + 1).round().astype(np.int64)
        self.n_blocks = n_blocks
        self.cold = cold
        self._meta = {k: (a.shape[1:], a.dtype) for k, a in arrays.items()}
        self._mem: dict[int, dict[str, np.ndarray]] = {
            b: {k: np.array(a[self.starts[b]:self.starts[b + 1]]) for k, a in arrays.items()} for b in range(n_blocks)}
        self._own_dir = spill_dir is None
        self.dir = Path(tempfile.mkdtemp(prefix="cohabit-spill-") if spill_dir is None else spill_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.on_disk: set[int] = set()
        self._buffer: tuple[bytes, dict[str, np.ndarray]] | None = None  # next batch's disk rows
        self._pending: Future[tuple[bytes, dict[str, np.ndarray]]] | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="reload")
        self._lock = threading.Lock()
        self._cache: tuple[bytes, dict[str, np.ndarray]] | None = None
        self.reload_bytes = 0
        self.reload_s = 0.0
        self.stall_s = 0.0
        self.peak_resident = 0
        self.alpha = 0.0
        self.set_alpha(alpha)

    # ------------------------------------------------------------ placement
    def set_alpha(self, alpha: float) -> None:
        """Keep the last ``ceil(alpha * n_blocks)`` blocks on disk (never fewer than asked: alpha may be a
        memory floor); spill or load blocks to get there."""
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
        self._settle()
        k = math.ceil(alpha * self.n_blocks - 1e-9)
        want = set(range(self.n_blocks - k, self.n_blocks))
        for b in sorted(want - self.on_disk):
            self._write(b, self._mem.pop(b))
        for b in sorted(self.on_disk - want):
            self._mem[b] = self._read(b, slice(None))
            for k2 in self.names:
                self._path(b, k2).unlink()
        self.on_disk = want
        self._buffer = self._cache = None
        self.alpha = k / self.n_blocks
        self._track()

    def _path(self, b: int, name: str) -> Path:
        return self.dir / f"block-{b}-{name}.npy"

    def _write(self, b: int, block: dict[str, np.ndarray]) -> None:
        for k, a in block.items():
            path = self._path(b, k)
            with open(path, "wb") as f:
                np.lib.format.write_array(f, np.ascontiguousarray(a), version=(1, 0))
                f.flush()
                os.fsync(f.fileno())
            _drop_cache(path)

    def _read(self, b: int, local: Any) -> dict[str, np.ndarray]:
        """Rows ``local`` (indices, or ``slice(None)``: all) of disk block ``b``, read from its files
        (through a memory map: only the pages holding those rows are read); with ``cold``, the page
        cache is dropped after."""
        t0 = time.perf_counter()
        out = {}
        for k in self.names:
            path = self._path(b, k)
            m = np.load(path, mmap_mode="r")
            out[k] = np.array(m[local])
            del m
            if self.cold:
                _drop_cache(path)
        with self._lock:
            self.reload_bytes += sum(a.nbytes for a in out.values())
            self.reload_s += time.perf_counter() - t0
        return out

    # -------------------------------------------------------------- access
    def blocks_of(self, idx: np.ndarray) -> np.ndarray:
        """Block of each row index."""
        return np.searchsorted(self.starts, idx, side="right") - 1

    def _disk_rows(self, idx: np.ndarray) -> tuple[bytes, dict[str, np.ndarray]]:
        """The rows of ``idx`` that live in disk blocks, in ``idx`` order."""
        blk = self.blocks_of(idx)
        on = np.isin(blk, list(self.on_disk))
        parts: dict[str, list[np.ndarray]] = {k: [] for k in self.names}
        order = []
        for b in np.unique(blk[on]):
            sel = np.flatnonzero(blk == b)
            got = self._read(int(b), idx[sel] - self.starts[b])
            for k in self.names:
                parts[k].append(got[k])
            order.append(sel)
        if not order:
            return idx.tobytes(), {k: np.empty((0, *self._meta[k][0]), self._meta[k][1]) for k in self.names}
        perm = np.argsort(np.concatenate(order), kind="stable")
        return idx.tobytes(), {k: np.concatenate(v)[perm] for k, v in parts.items()}

    def rows(self, idx: np.ndarray, next_idx: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """``{name: array[idx]}``, equal to indexing the original arrays; then reload what ``next_idx`` needs."""
        idx = np.asarray(idx)
        key = idx.tobytes()
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        t0 = time.perf_counter()
        self._settle()
        disk = self._buffer if self._buffer is not None and self._buffer[0] == key else self._disk_rows(idx)
        self.stall_s += time.perf_counter() - t0
        self._buffer = disk
        self._track()
        blk = self.blocks_of(idx)
        on = np.isin(blk, list(self.on_disk))
        out = {}
        for k in self.names:
            shape, dtype = self._meta[k]
            dst = np.empty((len(idx), *shape), dtype=dtype)
            dst[on] = disk[1][k]
            for b in np.unique(blk[~on]):
                sel = blk == b
                dst[sel] = self._mem[b][k][idx[sel] - self.starts[b]]
            out[k] = dst
        self._cache = (key, out)
        self._buffer = None
        if next_idx is not None and self.on_disk:
            nxt = np.asarray(next_idx)
            self._pending = self._pool.submit(self._disk_rows, nxt)
        return out

    def _settle(self) -> None:
        if self._pending is not None:
            self._buffer = self._pending.result()
            self._pending = None

    def full(self, name: str) -> np.ndarray:
        """The whole array (every block, disk ones read now; for evaluation)."""
        self._settle()
        return np.concatenate([self._mem[b][name] if b not in self.on_disk else self._read(b, slice(None))[name]
                               for b in range(self.n_blocks)])

    # -------------------------------------------------------------- memory
    @property
    def resident_bytes(self) -> int:
        """Bytes of input held in memory now: in-memory blocks + the reload buffer (one batch's disk rows)."""
        held = sum(a.nbytes for blk in self._mem.values() for a in blk.values())
        if self._buffer is not None:
            held += sum(a.nbytes for a in self._buffer[1].values())
        return held

    def _track(self) -> None:
        self.peak_resident = max(self.peak_resident, self.resident_bytes)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


class SpilledColumn:
    """Stands in for one input array of a workload: ``col[idx]`` reads through its :class:`BlockSpill`."""

    def __init__(self, spill: BlockSpill, name: str, next_idx: Callable[[], np.ndarray | None]) -> None:
        self.spill, self.name, self._next = spill, name, next_idx
        shape, self.dtype = spill._meta[name]
        self.shape = (spill.n_rows, *shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, idx: Any) -> np.ndarray:
        idx = np.arange(self.shape[0])[idx] if isinstance(idx, slice) else np.asarray(idx)
        return self.spill.rows(idx, self._next())[self.name]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.spill.full(self.name)
        return a if dtype is None else a.astype(dtype)


def attach(workload: Any, *, n_blocks: int, alpha: float, names: tuple[str, ...] = ("X", "y"),
           spill_dir: str | Path | None = None) -> BlockSpill:
    """Put ``workload``'s input arrays (``names``) behind a :class:`BlockSpill`; returns it.

    The workload keeps indexing ``self.X[idx]``; the next batch is
    ``workload.batch(workload.iteration + 1)`` (the batches of cohabit's workloads are
    seeded permutations, so it is known in advance).
    """
    spill = BlockSpill({k: getattr(workload, k) for k in names}, n_blocks=n_blocks, alpha=alpha, spill_dir=spill_dir)

    def next_idx() -> np.ndarray | None:
        nxt = workload.iteration + 1
        return workload.batch(nxt) if nxt < workload.total_iterations else None

    for k in names:
        setattr(workload, k, SpilledColumn(spill, k, next_idx))
    return spill


def initial_alpha(input_bytes: float, model_bytes: float, budget_bytes: float, *, reserve: float = 0.1) -> float:
    """Harmony's starting point from the (sampled) data sizes: the smallest share of input blocks on
    disk that keeps input + model under the memory budget, with ``reserve`` of it left for the reload
    buffer and intermediate results."""
    if input_bytes <= 0:
        return 0.0
    room = budget_bytes * (1.0 - reserve) - model_bytes
    return float(min(1.0, max(0.0, 1.0 - room / input_bytes)))


class AlphaTuner:
    """Hill climbing on alpha (§VI) from ``alpha0``, one block's share (``step``) at a time.

    Each call of :meth:`observe` gives the iteration time measured at :attr:`alpha`. A step up
    (more blocks on disk) is kept while the time stays within ``tol`` of the best seen (it frees
    memory for co-located jobs at no cost); a step down is kept only if it is faster by more than
    ``tol``. The climb first goes up, turns around once if the first step up fails, and stops at
    the first failed step after that (or after moving: it came from the other side). Never below
    ``floor`` (the memory limit).
    """

    def __init__(self, alpha0: float, *, step: float, floor: float = 0.0, tol: float = 0.05) -> None:
        if not 0 < step <= 1:
            raise ValueError(f"step must be in (0, 1], got {step!r}")
        if not 0 <= floor <= 1:
            raise ValueError(f"floor must be in [0, 1], got {floor!r}")
        self.step, self.floor, self.tol = step, floor, tol
        self.alpha = min(1.0, max(alpha0, floor))
        self.best: tuple[float, float] | None = None  # (alpha, time)
        self.direction = 1.0
        self.turned = self.moved = self.done = False
        self.history: list[tuple[float, float]] = []

    def observe(self, iter_time: float) -> float:
        """Record the time measured at :attr:`alpha`; return the alpha to run next."""
        self.history.append((self.alpha, iter_time))
        if self.done:
            return self.alpha
        if self.best is None:
            self.best = (self.alpha, iter_time)
        else:
            b_alpha, b_time = self.best
            up = self.alpha > b_alpha
            if iter_time <= b_time * (1 + self.tol) if up else iter_time < b_time * (1 - self.tol):
                self.best, self.moved = (self.alpha, min(iter_time, b_time)), True
            else:
                self._turn()
        return self._propose()

    def _turn(self) -> None:
        if self.turned or self.moved:
            self.done = True
        self.direction, self.turned = -self.direction, True

    def _propose(self) -> float:
        assert self.best is not None
        while not self.done:
            nxt = self.best[0] + self.direction * self.step
            if self.floor - 1e-9 <= nxt <= 1.0 + 1e-9:
                self.alpha = float(min(1.0, max(self.floor, nxt)))
                return self.alpha
            self._turn()
        self.alpha = self.best[0]
        return self.alpha


class NodeMemory:
    """A logical node's memory capacity and what its workers hold (input resident + model bytes)."""

    def __init__(self, capacity_bytes: float) -> None:
        if not capacity_bytes > 0:
            raise ValueError(f"capacity_bytes must be > 0, got {capacity_bytes!r}")
        self.capacity = float(capacity_bytes)
        self.held: dict[str, int] = {}

    def account(self, worker: str, nbytes: int) -> None:
        self.held[worker] = int(nbytes)

    @property
    def used(self) -> int:
        return sum(self.held.values())

    def fits(self) -> bool:
        return self.used <= self.capacity

    def floor_alpha(self, input_bytes: float, other_bytes: float, reserve_bytes: float = 0.0) -> float:
        """The smallest alpha at which a worker with ``input_bytes`` of input fits next to ``other_bytes``."""
        if input_bytes <= 0:
            return 0.0
        room = self.capacity - other_bytes - reserve_bytes
        return float(min(1.0, max(0.0, math.ceil((1.0 - room / input_bytes) * 1e9) / 1e9)))
