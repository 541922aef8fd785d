"""Measured per-batch profiles of the progressive queries: what the simulator's query jobs cost.

:func:`profile_query` runs one query over its batches (one DuckDB thread) and records, per
batch, the CPU seconds it took (``time.process_time``: the machine is shared, wall time would
measure the neighbours), the envelope estimate the query reports and its true accuracy against
the exact final answer, plus the start-up cost (loading the unsampled tables) and the merged
state's size. :func:`profile_all` does so for every query and returns JSON-ready data that
``bench/rotary_aqp.py`` writes to ``src/cohabit/data/profiles/aqp_tpch.json``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .accuracy import accuracy
from .online import ProgressiveQuery
from .queries import QUERIES, WEIGHT_CLASSES


def profile_query(name: str, data_dir: str | Path, *, batches: int, scale_factor: float, seed: int = 0,
                  window: int = 3) -> dict[str, Any]:
    """One query's per-batch profile (module docstring)."""
    spec = QUERIES[name]
    final = ProgressiveQuery(spec, data_dir, batches=1, scale_factor=scale_factor).run()
    c0 = time.process_time()
    pq = ProgressiveQuery(spec, data_dir, batches=batches, seed=seed, window=window, scale_factor=scale_factor)
    startup = time.process_time() - c0
    cpu, est, true, state = [], [], [], []
    while not pq.finished:
        c0 = time.process_time()
        rep = pq.step()
        cpu.append(time.process_time() - c0)
        est.append(rep.estimate)
        true.append(accuracy(pq.answer(), final, spec))
        state.append(pq.state_rows())
    mem = pq.memory_mb()
    pq.close()
    return {"query": name, "class": WEIGHT_CLASSES[name], "batches": batches, "seed": seed,
            "startup_cpu_s": startup, "batch_cpu_s": cpu, "estimate": est, "true_accuracy": true,
            "state_rows": state, "memory_mb": mem}


def profile_all(data_dir: str | Path, *, batches: int, scale_factor: float, seed: int = 0,
                names: list[str] | None = None) -> dict[str, Any]:
    """Profiles of ``names`` (default: all 22 queries) keyed by query name."""
    names = names if names is not None else sorted(QUERIES, key=lambda q: int(q[1:]))
    return {"scale_factor": scale_factor, "batches": batches, "seed": seed,
            "queries": {q: profile_query(q, data_dir, batches=batches, scale_factor=scale_factor, seed=seed)
                        for q in names}}
