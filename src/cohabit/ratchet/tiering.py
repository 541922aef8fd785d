"""Ratchet (c): a paused job's state in memory or on disk, under a memory budget.

"Checkpointing incremental query jobs can consume a substantial amount of memory ... a system
that can arbitrate which jobs should be checkpointed on low-performance devices is desired"
(ch. 4). :class:`TieredStateStore` keeps paused jobs' serialised states (the bytes
:func:`cohabit.runtime.safestate.dumps` writes) in one of two tiers:

* **memory** — the bytes stay in this process: a save costs the serialisation, a restore the
  parse; it uses memory, of which the tier has ``budget_bytes``;
* **disk** — the bytes go to the :class:`~cohabit.runtime.checkpoint.CheckpointStore` (written
  to a temporary file, fsync'ed, renamed; read back and checksummed on restore).

The rule (resource-aware): the tier's costs are measured (:class:`TierCosts`: seconds per byte of
each tier's save + restore, fitted from what the store itself timed), and the memory budget goes
to the states that save the most restore time per byte held, weighted by how soon each is
expected back (``resume_weight``: the arbiter's priority; equal weights give "smallest states
first", so many small states stay fast rather than one large one). A state evicted from memory
is written to disk then; a restore takes it from wherever it is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from ..runtime import safestate
from ..runtime.checkpoint import CheckpointStore

Tier = Literal["memory", "disk"]


@dataclass
class TierCosts:
    """Measured seconds per byte of each tier (save + restore), as running sums of what was timed."""

    seconds: dict[str, float] = field(default_factory=lambda: {"memory": 0.0, "disk": 0.0})
    nbytes: dict[str, float] = field(default_factory=lambda: {"memory": 0.0, "disk": 0.0})

    def add(self, tier: Tier, seconds: float, nbytes: int) -> None:
        self.seconds[tier] += seconds
        self.nbytes[tier] += max(nbytes, 1)

    def per_byte(self, tier: Tier) -> float | None:
        return self.seconds[tier] / self.nbytes[tier] if self.nbytes[tier] else None

    def saving_per_byte(self) -> float:
        """Restore seconds a byte kept in memory saves over disk (1.0 until both tiers were measured:
        any positive constant orders states the same way)."""
        d, m = self.per_byte("disk"), self.per_byte("memory")
        return 1.0 if d is None or m is None else max(d - m, 0.0)


@dataclass
class _Held:
    blob: bytes
    iteration: int
    weight: float


class TieredStateStore:
    """Paused jobs' states in memory (up to ``budget_bytes``) or on disk (module docstring)."""

    def __init__(self, disk: CheckpointStore, budget_bytes: int) -> None:
        if budget_bytes < 0:
            raise ValueError(f"budget_bytes must be >= 0, got {budget_bytes!r}")
        self.disk = disk
        self.budget_bytes = int(budget_bytes)
        self.costs = TierCosts()
        self._mem: dict[str, _Held] = {}
        self._on_disk: set[str] = set()
        self.log: list[dict[str, Any]] = []  # one entry per save / restore / eviction, with its time

    @property
    def memory_bytes(self) -> int:
        return sum(len(h.blob) for h in self._mem.values())

    def tier_of(self, job: str) -> Tier | None:
        return "memory" if job in self._mem else "disk" if job in self._on_disk else None

    def put(self, job: str, state: Any, *, iteration: int, resume_weight: float = 1.0) -> Tier:
        """Hold a paused job's ``state``; returns the tier it went to (others may move to disk)."""
        t0 = time.perf_counter()
        blob = safestate.dumps(state)
        return self.put_blob(job, blob, iteration=iteration, resume_weight=resume_weight,
                             seconds=time.perf_counter() - t0)

    def put_blob(self, job: str, blob: bytes, *, iteration: int, resume_weight: float = 1.0,
                 seconds: float = 0.0) -> Tier:
        """:meth:`put` for a state already serialised (:func:`cohabit.runtime.safestate.dumps`) elsewhere,
        e.g. by the paused task itself; ``seconds``: what serialising it cost."""
        self._mem[job] = _Held(bytes(blob), iteration, float(resume_weight))
        self._on_disk.discard(job)
        self.costs.add("memory", seconds, len(blob))
        self.log.append({"op": "save", "job": job, "tier": "memory", "bytes": len(blob), "s": seconds})
        self._rebalance()
        return "memory" if job in self._mem else "disk"

    def take_blob(self, job: str) -> bytes | None:
        """A paused job's serialised state if it is held in memory (removed from the store); None if it
        was spilled to disk (then the newest checkpoint of ``job`` in the disk store is it) or never held."""
        self._on_disk.discard(job)
        held = self._mem.pop(job, None)
        if held is None:
            return None
        self.log.append({"op": "restore", "job": job, "tier": "memory", "bytes": len(held.blob), "s": 0.0})
        return held.blob

    def flush(self) -> None:
        """Write every state held in memory to disk (before the process holding them ends)."""
        for job, held in list(self._mem.items()):
            self._evict(job, held)

    def _rebalance(self) -> None:
        """Keep the highest-value states in memory within the budget; write the rest to disk."""
        saving = self.costs.saving_per_byte()
        ranked = sorted(self._mem.items(), key=lambda kv: -(kv[1].weight * saving / max(len(kv[1].blob), 1)))
        used = 0
        for job, held in ranked:
            if used + len(held.blob) <= self.budget_bytes:
                used += len(held.blob)
                continue
            self._evict(job, held)

    def _evict(self, job: str, held: _Held) -> None:
        t0 = time.perf_counter()
        self.disk.save(job, safestate.loads(held.blob), iteration=held.iteration, workload="tiered")
        dt = time.perf_counter() - t0
        del self._mem[job]
        self._on_disk.add(job)
        self.costs.add("disk", dt, len(held.blob))
        self.log.append({"op": "evict", "job": job, "tier": "disk", "bytes": len(held.blob), "s": dt})

    def take(self, job: str) -> Any:
        """The state of ``job`` (removed from the store's memory tier); KeyError if it holds none."""
        t0 = time.perf_counter()
        if job in self._mem:
            held = self._mem.pop(job)
            state = safestate.loads(held.blob)
            dt = time.perf_counter() - t0
            self.costs.add("memory", dt, len(held.blob))
            self.log.append({"op": "restore", "job": job, "tier": "memory", "bytes": len(held.blob), "s": dt})
            return state
        if job in self._on_disk:
            got = self.disk.load(job)
            if got is None:
                raise KeyError(f"job {job!r}: its state was spilled to disk but no good checkpoint is there")
            state, info = got
            dt = time.perf_counter() - t0
            self._on_disk.discard(job)
            self.costs.add("disk", dt, info.size)
            self.log.append({"op": "restore", "job": job, "tier": "disk", "bytes": info.size, "s": dt})
            return state
        raise KeyError(f"job {job!r}: no paused state held")
