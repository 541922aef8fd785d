"""A job's history of one reported metric: ``(iterations, value)`` points, append-only, compact.

A job that reports every minute for weeks has tens of thousands of points per metric; as a list of
tuples each point costs ~100 bytes, here 16 (two float arrays). It reads like the list of tuples it
replaces (``len``, indexing and slicing give tuples and lists of tuples, iteration, ``==`` against a
list), so policies read ``JobView.metrics[name]`` as before.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np


class MetricSeries(Sequence[tuple[float, float]]):
    """Append-only ``(iterations, value)`` points of one metric of one job."""

    __slots__ = ("_x", "_y")

    def __init__(self, points: Sequence[tuple[float, float]] = ()) -> None:
        self._x = array("d", (float(p[0]) for p in points))
        self._y = array("d", (float(p[1]) for p in points))

    def append(self, point: tuple[float, float]) -> None:
        x, y = point
        self._x.append(x)
        self._y.append(y)

    def add(self, x: float, y: float) -> None:
        """:meth:`append` of ``(x, y)`` without building the tuple."""
        self._x.append(x)
        self._y.append(y)

    def extend(self, xs: Sequence[float], ys: Sequence[float]) -> None:
        """:meth:`add` of each ``(xs[i], ys[i])`` in order (both of one length)."""
        self._x.extend(xs)
        self._y.extend(ys)

    def head(self, n: int) -> np.ndarray:
        """The first ``n`` points as an ``(n, 2)`` float array (iterations, value), without tuples."""
        out = np.empty((n, 2), dtype=np.float64)
        out[:, 0] = np.frombuffer(self._x, dtype=np.float64, count=n)
        out[:, 1] = np.frombuffer(self._y, dtype=np.float64, count=n)
        return out

    def __len__(self) -> int:
        return len(self._x)

    @overload
    def __getitem__(self, i: int) -> tuple[float, float]: ...

    @overload
    def __getitem__(self, i: slice) -> list[tuple[float, float]]: ...

    def __getitem__(self, i: Any) -> Any:
        if type(i) is slice:
            return list(zip(self._x[i], self._y[i]))
        return (self._x[i], self._y[i])

    def __iter__(self) -> Iterator[tuple[float, float]]:
        return zip(self._x, self._y)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MetricSeries):
            return self._x == other._x and self._y == other._y
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  (mutable, like the list it replaces)

    def __repr__(self) -> str:
        return f"MetricSeries({list(self)!r})"
