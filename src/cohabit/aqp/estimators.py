"""Rotary-AQP's memory consumption estimator (Liu dissertation §3.2.1).

(Its accuracy-progress estimator is Rotary's joint fit over the job repository and the job's
real-time points, shared with Rotary-DLT: :class:`cohabit.models.tee.TEE`, with a query's
batches as its epochs; see ``policies/rotary_aqp.py``.)

Before a query runs, its partial query's plan (DuckDB ``EXPLAIN``, no execution) gives estimated
cardinalities: the hash tables it builds (the build side of every hash join, every hash
aggregate) are sized by rows x projected columns x 8 bytes; per batch the sampled tables
contribute ``1 / batches`` of that, the whole-table (unsampled) inputs are loaded once; the state
is bounded by the aggregate's output. Once the query runs, the observed memory
(``query_mem_mb``) replaces the plan's guess where it is larger.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .queries import QuerySpec

# --------------------------------------------------------------------------- memory
_ROW_BYTES = 8  # per projected column
_HASH_OVERHEAD = 2.0  # hash table slots, pointers


def _card(node: dict[str, Any]) -> float:
    try:
        return float(str(node.get("extra_info", {}).get("Estimated Cardinality", "0")).replace(",", ""))
    except ValueError:
        return 0.0


def _width(node: dict[str, Any]) -> int:
    proj = node.get("extra_info", {}).get("Projections")
    if isinstance(proj, list):
        return max(1, len(proj))
    return 1 if proj else 4


def _hash_bytes(node: dict[str, Any]) -> float:
    """Bytes of the hash tables in the plan below ``node``: join build sides and aggregates."""
    total = 0.0
    name = node.get("name", "")
    kids = node.get("children", [])
    if "HASH_JOIN" in name and len(kids) >= 2:
        build = kids[1]
        total += _card(build) * _width(build) * _ROW_BYTES * _HASH_OVERHEAD
    elif "GROUP_BY" in name or "AGGREGATE" in name:
        total += _card(node) * 4 * _ROW_BYTES * _HASH_OVERHEAD
    return total + sum(_hash_bytes(k) for k in kids)


def plan_memory_mb(spec: QuerySpec, data_dir: str | Path, batches: int) -> float:
    """Estimated peak memory (MB) of ``spec`` read in ``batches`` batches, from DuckDB's EXPLAIN alone."""
    import duckdb

    from .online import FAMILY_KEYS

    con = duckdb.connect(":memory:", config={"threads": 1})
    try:
        loaded = 0.0
        sampled = FAMILY_KEYS[spec.family]
        for t in spec.tables:
            path = str(Path(data_dir) / f"{t}.parquet").replace("'", "''")
            con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{path}')")
            if t not in sampled:  # loaded whole, once: rows x columns
                rows, cols = con.execute(
                    f"SELECT (SELECT count(*) FROM {t}), (SELECT count(*) FROM (DESCRIBE {t}))").fetchone()  # type: ignore[misc]
                loaded += float(rows) * float(cols) * _ROW_BYTES
        plan = json.loads(con.execute(f"EXPLAIN (FORMAT json) {spec.partial}").fetchall()[0][1])
        root = plan[0] if isinstance(plan, list) else plan
        work = _hash_bytes(root) / max(1, batches)
        state = _card(root) * _width(root) * _ROW_BYTES * _HASH_OVERHEAD
    finally:
        con.close()
    return (loaded + work + state) / 2**20


class MemoryEstimator:
    """m-hat per query job: the plan's estimate, raised by what the running query was seen to use."""

    def __init__(self) -> None:
        self._plan: dict[tuple[str, str, int], float] = {}

    def plan(self, spec: QuerySpec, data_dir: str | Path | None, batches: int, fallback_mb: float) -> float:
        if data_dir is None:
            return fallback_mb
        key = (spec.name, str(data_dir), batches)
        if key not in self._plan:
            self._plan[key] = plan_memory_mb(spec, data_dir, batches)
        return self._plan[key]

    @staticmethod
    def estimate(plan_mb: float, observed_mb: Sequence[float]) -> float:
        """``max(plan, 1.1 x the largest observed)``: a running query's state only grows."""
        return max([plan_mb] + [1.1 * m for m in observed_mb])
