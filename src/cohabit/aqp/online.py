"""Online aggregation of a TPC-H query in DuckDB: batches in random order, partial aggregates merged.

:class:`ProgressiveQuery` runs one :class:`~cohabit.aqp.queries.QuerySpec` over TPC-H Parquet
data (Liu dissertation §3.1.1 "Example 1", §3.2.1):

* the sampled table family (``orders`` + ``lineitem`` by order key, or ``partsupp`` by part key)
  is cut into ``batches`` disjoint batches by a fixed hash of the key; the batches are read in an
  order shuffled by ``seed``; the other tables are loaded whole, once;
* after each batch the query's partial SQL runs over that batch, its rows are appended to the
  ``state`` table and merged (SUM / MIN / MAX per group, or a distinct union), and the final SQL
  over ``state`` gives the running answer (additive aggregates scaled by batches / batches read);
* the running answer feeds the envelope estimator (:mod:`.accuracy`), the accuracy a running
  system can report;
* :meth:`checkpoint` returns the whole partial state with its batch-level progress (Ratchet's
  staleness rule, ch. 4: the batch cursor is saved with the merged state it produced, so a resumed
  query neither re-reads nor skips a batch), and :meth:`restore` continues from it exactly.

Every merged column is a DECIMAL or an integer (TPC-H's money columns are DECIMAL(15,2)), so
sums are exact and independent of thread count and batch grouping: a query paused and resumed any
number of times returns exactly the answer of an uninterrupted run.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .accuracy import Answer, EnvelopeEstimator
from .queries import QuerySpec

#: Sampled tables of each family and the key column that assigns their rows to batches.
FAMILY_KEYS: dict[str, dict[str, str]] = {
    "orders": {"orders": "o_orderkey", "lineitem": "l_orderkey"},
    "partsupp": {"partsupp": "ps_partkey"},
}
#: The table whose rows count as "rows scanned" per batch.
FAMILY_MAIN: dict[str, str] = {"orders": "lineitem", "partsupp": "partsupp"}
_PRIME = 2147483647
_INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                            "UINTEGER", "UBIGINT"})


def bucket_expr(column: str, batches: int) -> str:
    """SQL giving a row's batch: a multiplicative hash of the key modulo a prime, then ``% batches``."""
    return f"((({column} * 1103515245 + 12345) % {_PRIME}) % {batches})"


@dataclass(frozen=True)
class BatchReport:
    """What one batch did: its position and id, rows scanned, seconds, the running estimate."""

    index: int  # batches read so far, this one included
    batch: int  # which batch (its id)
    rows: int
    seconds: float
    estimate: float


class ProgressiveQuery:
    """One query run by online aggregation (module docstring)."""

    def __init__(self, spec: QuerySpec, data_dir: str | Path, *, batches: int = 20, seed: int = 0,
                 threads: int = 1, memory_mb: int | None = None, window: int = 3,
                 scale_factor: float = 1.0) -> None:
        import duckdb

        if batches < 1:
            raise ValueError(f"batches must be >= 1, got {batches!r}")
        self.spec = spec
        self.data_dir = Path(data_dir)
        self.batches = int(batches)
        self.seed = int(seed)
        self.scale_factor = float(scale_factor)
        config: dict[str, Any] = {"threads": max(1, int(threads))}
        if memory_mb is not None:
            config["memory_limit"] = f"{max(16, int(memory_mb))}MB"
        self.con = duckdb.connect(":memory:", config=config)
        self.order = [int(b) for b in np.random.default_rng([self.seed, 0xA0]).permutation(self.batches)]
        self.done = 0
        self.rows_scanned = 0
        self.estimator = EnvelopeEstimator(spec, window)
        self._has_state = False
        self._answer: Answer | None = None
        sampled = FAMILY_KEYS[spec.family]
        for table in spec.tables:
            if table not in sampled:
                self.con.execute(f"CREATE TEMP TABLE {table} AS SELECT * FROM read_parquet('{self._file(table)}')")
        main = FAMILY_MAIN[spec.family]
        key = FAMILY_KEYS[spec.family][main]
        counts = dict(self.con.execute(
            f"SELECT {bucket_expr(key, self.batches)} AS b, count(*) FROM read_parquet('{self._file(main)}') GROUP BY b"
        ).fetchall())
        self.batch_rows = [int(counts.get(b, 0)) for b in range(self.batches)]

    def _file(self, table: str) -> str:
        return str(self.data_dir / f"{table}.parquet").replace("'", "''")

    # ------------------------------------------------------------------ progress
    @property
    def finished(self) -> bool:
        return self.done >= self.batches

    @property
    def fraction(self) -> float:
        return self.done / self.batches

    def _sample_views(self, batch: int) -> None:
        for table, key in FAMILY_KEYS[self.spec.family].items():
            if table in self.spec.tables:
                self.con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT * FROM read_parquet('{self._file(table)}') "
                                 f"WHERE {bucket_expr(key, self.batches)} = {batch}")

    def _merge_sql(self) -> str:
        if self.spec.is_set:
            return "SELECT DISTINCT * FROM state_all"
        described = self.con.execute("DESCRIBE state_all").fetchall()
        cols = [r[0] for r in described]
        types = {r[0]: str(r[1]) for r in described}
        keys = [c for c in cols if c not in self.spec.merge]
        select = []  # in the partial's column order
        for c in cols:
            if c not in self.spec.merge:
                select.append(c)
            elif types[c] in _INTEGER_TYPES:  # counts: sum(BIGINT) is HUGEINT, kept BIGINT for Parquet
                select.append(f"CAST({self.spec.merge[c]}({c}) AS BIGINT) AS {c}")
            else:
                select.append(f"{self.spec.merge[c]}({c}) AS {c}")
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        return f"SELECT {', '.join(select)} FROM state_all{group}"

    def step(self) -> BatchReport:
        """Read the next batch, merge it into the state, refresh the running answer and estimate."""
        if self.finished:
            raise RuntimeError(f"query {self.spec.name}: every batch ({self.batches}) is already read")
        t0 = time.perf_counter()
        batch = self.order[self.done]
        self._sample_views(batch)
        if self._has_state:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE state_all AS SELECT * FROM state UNION ALL BY NAME ({self.spec.partial})")
        else:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE state_all AS {self.spec.partial}")
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE state AS {self._merge_sql()}")
        self.con.execute("DROP TABLE state_all")
        self._has_state = True
        self.done += 1
        self.rows_scanned += self.batch_rows[batch]
        self._answer = self._run_final()
        self.estimator.observe(self._answer)
        est = self.estimator.estimate(final=self.finished)
        return BatchReport(self.done, batch, self.batch_rows[batch], time.perf_counter() - t0, est)

    def run(self) -> Answer:
        """Read every remaining batch; the final answer."""
        while not self.finished:
            self.step()
        return self.answer()

    def _run_final(self) -> Answer:
        scale = self.batches / self.done if self.done else 1.0
        sql = self.spec.final.format(scale=repr(float(scale)), fraction=repr(0.0001 / self.scale_factor))
        cur = self.con.execute(sql)
        cols = tuple(d[0] for d in cur.description)
        return Answer(cols, tuple(tuple(r) for r in cur.fetchall()))

    def answer(self) -> Answer:
        """The running answer (an empty one before the first batch)."""
        if self._answer is None:
            if not self._has_state:
                return Answer((), ())
            self._answer = self._run_final()
        return self._answer

    def estimate(self) -> float:
        return self.estimator.estimate(final=self.finished)

    def memory_mb(self) -> float:
        """Memory DuckDB holds now (its buffer manager's count), MB."""
        got = self.con.execute("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()").fetchone()
        return float(got[0]) / 2**20 if got else 0.0

    def set_resources(self, *, threads: int | None = None, memory_mb: int | None = None) -> None:
        """Change DuckDB's ``threads`` / ``memory_limit`` for the next batches (Rotary-AQP's extra cores,
        Alg. 4). Called between batches only, so no batch runs under two settings; the answers do
        not depend on the thread count (exact DECIMAL / integer merges)."""
        if threads is not None:
            self.con.execute(f"SET threads = {max(1, int(threads))}")
        if memory_mb is not None:
            self.con.execute(f"SET memory_limit = '{max(16, int(memory_mb))}MB'")

    def threads(self) -> int:
        """DuckDB's ``threads`` setting now."""
        return int(self.con.execute("SELECT current_setting('threads')").fetchone()[0])  # type: ignore[index]

    def state_rows(self) -> int:
        """Rows of the merged partial state (what a checkpoint holds)."""
        if not self._has_state:
            return 0
        return int(self.con.execute("SELECT count(*) FROM state").fetchone()[0])  # type: ignore[index]

    # ---------------------------------------------------------------- checkpoint
    def checkpoint(self) -> dict[str, Any]:
        """The partial state and its batch-level progress, as plain picklable values.

        ``state`` is the merged ``state`` table as Parquet bytes (its columns are DECIMAL, integer,
        text and date: Parquet keeps each type exactly); ``done`` the batches merged into it and ``order`` the batch order, so that the
        next batch after a restore is ``order[done]``: no batch re-read, none skipped.
        """
        blob: bytes | None = None
        if self._has_state:
            with tempfile.TemporaryDirectory(prefix="cohabit-aqp-") as d:
                path = os.path.join(d, "state.parquet")
                self.con.execute(f"COPY state TO '{path}' (FORMAT parquet)")
                blob = Path(path).read_bytes()
        return {"query": self.spec.name, "batches": self.batches, "seed": self.seed, "order": list(self.order),
                "done": self.done, "rows_scanned": self.rows_scanned, "state": blob,
                "envelope": self.estimator.state()}

    def restore(self, ckpt: dict[str, Any]) -> None:
        """Continue from :meth:`checkpoint`'s output; ValueError if it belongs to another query setup."""
        for key, mine in (("query", self.spec.name), ("batches", self.batches), ("order", self.order)):
            if ckpt.get(key) != mine:
                raise ValueError(f"checkpoint of query {ckpt.get('query')!r}: {key} {ckpt.get(key)!r} "
                                 f"does not match this run's {mine!r}")
        done = int(ckpt["done"])
        if not 0 <= done <= self.batches:
            raise ValueError(f"checkpoint: done={done} outside [0, {self.batches}]")
        self.con.execute("DROP TABLE IF EXISTS state")
        self._has_state = False
        if ckpt["state"] is not None:
            with tempfile.TemporaryDirectory(prefix="cohabit-aqp-") as d:
                path = os.path.join(d, "state.parquet")
                Path(path).write_bytes(ckpt["state"])
                self.con.execute(f"CREATE TEMP TABLE state AS SELECT * FROM read_parquet('{path}')")
            self._has_state = True
        self.done = done
        self.rows_scanned = int(ckpt["rows_scanned"])
        self.estimator.load(ckpt["envelope"])
        self._answer = None

    def close(self) -> None:
        self.con.close()
