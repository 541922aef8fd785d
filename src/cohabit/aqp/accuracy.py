"""Accuracy of a progressive answer (Liu dissertation §3.2.1) and the envelope estimator of it.

*True* accuracy compares the current answer with the final one. The dissertation defines it per
aggregate column as ``alpha_c / alpha_f`` and for ``k`` columns as their (weighted) mean. Here a
column of a result with several rows contributes one *cell* per row, and a cell scores

    s(c, f) = min(|c|, |f|) / max(|c|, |f|)   (c and f of the same sign; 1 if both are 0; else 0),

the dissertation's ratio made symmetric so that an over-estimate (``c > f``: a scaled-up sum early
on, or Q22's answer that shrinks as orders arrive) is penalised like an under-estimate. Rows are
matched on the query's key columns; a row present in only one of the two answers scores 0 in
every cell, so missing and spurious groups both cost accuracy. With no measure column (a listing,
Q20) each row scores its presence. Two empty answers agree (accuracy 1).

The *estimated* accuracy is what a running system can know without the final answer: the
envelope estimator keeps the last ``window`` running answers and scores every cell by
``s(p, q)`` with ``p`` and ``q`` its least and largest value over the window (the dissertation's
``p / q``); a cell missing from any answer of the window scores 0. One answer alone is no
evidence (estimate 0); once every batch is read the answer is final (estimate 1).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .queries import QuerySpec

Cells = dict[tuple[Any, ...], dict[str, float]]


@dataclass(frozen=True)
class Answer:
    """A query result: column names and rows (as DuckDB returns them)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: numbers as floats, dates and decimals as text where they are keys."""
        return {"columns": list(self.columns),
                "rows": [[_plain(v) for v in row] for row in self.rows]}


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, (int, float, str)) or v is None:
        return v
    return str(v)


def cells(answer: Answer, spec: QuerySpec) -> Cells:
    """The answer's measure cells keyed by the row's key columns (presence 1.0 when no measures)."""
    idx = {c: i for i, c in enumerate(answer.columns)}
    missing = [c for c in (*spec.keys, *spec.measures) if c not in idx]
    if missing:
        raise ValueError(f"query {spec.name}: the answer has no column(s) {missing}; it has {list(answer.columns)}")
    out: Cells = {}
    for row in answer.rows:
        key = tuple(_plain(row[idx[k]]) for k in spec.keys)  # JSON-safe: checkpoints hold them
        if spec.measures:
            out[key] = {m: (0.0 if row[idx[m]] is None else float(row[idx[m]])) for m in spec.measures}
        else:
            out[key] = {"_present": 1.0}
    return out


def cell_score(c: float, f: float) -> float:
    """``min(|c|,|f|) / max(|c|,|f|)`` for values of one sign, 1 for two zeros, else 0."""
    if c == f:
        return 1.0
    if c * f <= 0:
        return 0.0
    a, b = abs(c), abs(f)
    return min(a, b) / max(a, b)


def _weights(spec: QuerySpec) -> dict[str, float]:
    return dict(spec.measures) if spec.measures else {"_present": 1.0}


def accuracy(current: Answer, final: Answer, spec: QuerySpec) -> float:
    """True accuracy of ``current`` against ``final`` (module docstring), in [0, 1]."""
    return _score([cells(current, spec), cells(final, spec)], _weights(spec))


def _score(window: Sequence[Cells], weights: Mapping[str, float]) -> float:
    """Weighted mean over the union of rows of ``s(min, max)`` of each cell across ``window``."""
    keys: set[tuple[Any, ...]] = set()
    for w in window:
        keys.update(w)
    if not keys:
        return 1.0
    total_w = sum(weights.values()) * len(keys)
    got = 0.0
    for key in keys:
        rows = [w.get(key) for w in window]
        if any(r is None for r in rows):
            continue
        for m, wt in weights.items():
            vals = [r[m] for r in rows if r is not None]
            lo, hi = min(vals), max(vals)
            got += wt * cell_score(lo, hi)
    return got / total_w if total_w > 0 else 1.0


class EnvelopeEstimator:
    """Running accuracy estimate from the envelope of the last ``window`` answers (module docstring)."""

    def __init__(self, spec: QuerySpec, window: int = 3) -> None:
        if window < 2:
            raise ValueError(f"window must be >= 2 answers (an envelope needs two), got {window!r}")
        self.spec = spec
        self.window = window
        self._answers: deque[Cells] = deque(maxlen=window)
        self._weights = _weights(spec)

    def observe(self, answer: Answer) -> None:
        self._answers.append(cells(answer, self.spec))

    def estimate(self, *, final: bool = False) -> float:
        if final:
            return 1.0
        if len(self._answers) < 2:
            return 0.0
        return _score(list(self._answers), self._weights)

    def state(self) -> list[Cells]:
        return list(self._answers)

    def load(self, answers: Iterable[Cells]) -> None:
        self._answers.clear()
        self._answers.extend(answers)
