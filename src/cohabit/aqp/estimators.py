"""Rotary-AQP's two estimators (Liu dissertation §3.2.1): accuracy progress and memory consumption.

**Accuracy progress.** A progress curve ``phi(x)`` maps the fraction ``x`` of batches read to the
(estimated) accuracy. Online aggregation has diminishing returns (Fig. 3.1a), modelled as
``1 - phi(x) = a * x**b``, i.e. a straight line in ``(log x, log(1 - phi))``, fitted by weighted
linear regression over

* *historical* points: the curves of the top-``k`` most similar archived jobs in the job
  repository (same query, else same Table 3.1 class), and
* *real-time* points: what the running job has reported so far.

The dissertation weighs the two so that "each [real-time result] should share equal weights with
all the historical data": here the historical points together weigh 1, and each real-time point
weighs 1 as well (one real-time point: 0.5 / 0.5, as in its example). With neither, the prior is
``phi(x) = x``.

**Memory consumption.** Before a query runs, its partial query's plan (DuckDB ``EXPLAIN``, no
execution) gives estimated cardinalities: the hash tables it builds (the build side of every hash
join, every hash aggregate) are sized by rows x projected columns x 8 bytes; per batch the
sampled tables contribute ``1 / batches`` of that, the whole-table (unsampled) inputs are loaded
once; the state is bounded by the aggregate's output. Once the query runs, the observed memory
(``query_mem_mb``) and rows scanned replace the plan's guess where they are larger.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .queries import WEIGHT_CLASSES, QuerySpec

Curve = list[tuple[float, float]]  # (fraction of batches read, accuracy)


def fit_curve(points: Sequence[tuple[float, float]], weights: Sequence[float]) -> tuple[float, float] | None:
    """Weighted least squares of ``log(1 - phi) = log a + b log x``; ``(a, b)`` or None (too few points)."""
    xs, ys, ws = [], [], []
    for (x, phi), w in zip(points, weights, strict=True):
        if not 0 < x <= 1 or w <= 0:
            continue
        xs.append(math.log(x))
        ys.append(math.log(max(1.0 - min(phi, 1.0), 1e-3)))
        ws.append(w)
    if len(xs) < 2 or max(xs) - min(xs) < 1e-9:
        return None
    X = np.column_stack([np.ones(len(xs)), np.array(xs)])
    W = np.sqrt(np.array(ws))
    coef, *_ = np.linalg.lstsq(X * W[:, None], np.array(ys) * W, rcond=None)
    return math.exp(coef[0]), float(coef[1])


def predict(ab: tuple[float, float] | None, x: float) -> float:
    """``phi(x)`` of the fitted curve, clipped to [0, 1]; the prior ``x`` without a fit."""
    x = min(max(x, 1e-9), 1.0)
    if ab is None:
        return x
    a, b = ab
    return float(min(1.0, max(0.0, 1.0 - a * x ** b)))


class JobRepository:
    """Archived progress curves of finished query jobs, by query name (newest last)."""

    def __init__(self, keep: int = 20) -> None:
        self._curves: dict[str, deque[Curve]] = defaultdict(lambda: deque(maxlen=keep))

    def archive(self, query: str, curve: Curve) -> None:
        if curve:
            self._curves[query].append(list(curve))

    def similar(self, query: str, k: int) -> list[Curve]:
        """The top-``k`` most similar archived curves: the same query (newest first), then its class."""
        out = list(reversed(self._curves.get(query, ())))[:k]
        if len(out) < k:
            cls = WEIGHT_CLASSES.get(query)
            for other, curves in self._curves.items():
                if other != query and WEIGHT_CLASSES.get(other) == cls:
                    out.extend(reversed(curves))
        return out[:k]

    def __len__(self) -> int:
        return sum(len(c) for c in self._curves.values())


class AccuracyProgressEstimator:
    """phi-hat for the next epoch from the repository and real-time points (module docstring)."""

    def __init__(self, repository: JobRepository | None = None, k: int = 3) -> None:
        self.repository = repository if repository is not None else JobRepository()
        self.k = k

    def fit(self, query: str, realtime: Curve) -> tuple[float, float] | None:
        hist = [p for c in self.repository.similar(query, self.k) for p in c]
        points = hist + list(realtime)
        weights = [1.0 / max(1, len(hist))] * len(hist) + [1.0] * len(realtime)
        return fit_curve(points, weights)

    def estimate(self, query: str, realtime: Curve, x_next: float) -> float:
        """Estimated accuracy once ``x_next`` of the batches are read."""
        return predict(self.fit(query, realtime), x_next)


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
