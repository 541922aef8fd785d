"""A job's history of one reported metric: ``(iterations, value)`` points, append-only, compact.

A job that reports every minute for weeks has tens of thousands of points per metric (the contended
82k Philly run under slaq or themis: ~20 million loss points, kept after the jobs end since
``RunResult.jobs`` gives them). It reads like the list of tuples it replaces (``len``, indexing and
slicing give tuples and lists of tuples, iteration, ``==`` against a list), so policies read
``JobView.metrics[name]`` as before. Three things keep it small, none of them lossy:

* **Values** are one float array (8 bytes a point).
* **Iterations of periodic reports are kept as their formula** (:meth:`MetricSeries.add_grid`): the
  simulator's grid reports of a job at one speed are at times ``t_k = k * every`` with
  ``iterations = done0 + (t_k - t0) * rate`` (``done0`` while ``t_k <= t0``), all observed numbers (the
  report that started the segment and its measured speed); a *run* keeps ``(k0, count, every, done0,
  t0, rate)`` and gives back the same floats bit for bit when read (the same IEEE operations, in
  Python or numpy). Other points keep their iterations in a float array.
* **A finished job's history is frozen** (:meth:`MetricSeries.freeze`, called by the engine when the
  job ends): its iterations and values are stored as the byte-shuffled second differences of their bit
  patterns (64-bit integers, wrapping), zlib-compressed in one byte string: ~2.4 bytes a point on the
  simulator's loss curves (iterations of a run, linear, ~0.1) instead of 16, and no array or run
  objects (~300 bytes a job); a history of at most ``_RAW_MAX`` points is kept as its raw 16 bytes a point
  instead (no gain to compress, and no numpy or zlib call per ended job); every read decompresses them exactly (the last one read is kept, so
  reading one history point by point decompresses it once). Appending to a frozen history thaws it.
"""

from __future__ import annotations

import zlib
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

# a run: [first series index, count, k0, every, done0, t0, rate, run points before it]
_START, _N, _K0, _EVERY, _DONE0, _T0, _RATE, _BEFORE = range(8)

#: slices up to this many points are computed one Python step per point, longer ones in numpy
_SHORT = 64
#: a history of at most this many points is frozen as its raw bytes (iterations, then values: 16 bytes a point,
#: what zlib's header and a few points come to anyway), without numpy or zlib (~1 us instead of ~15 us a job)
_RAW_MAX = 4

# the last frozen history read: (its compressed bytes object, iterations, values)
_thawed: tuple[bytes | None, array, array] = (None, array("d"), array("d"))


def _run_start(run: list[Any]) -> int:
    return run[_START]  # type: ignore[no-any-return]


def _pack(values: np.ndarray) -> bytes:
    """``values`` (float64) as the zlib-compressed byte planes of their bit patterns' second differences."""
    v = values.view(np.int64)
    d1 = v.copy()
    d1[1:] -= v[:-1]  # first differences (wrapping, so exactly inverted by a wrapping cumulative sum)
    d = d1.copy()
    d[1:] -= d1[:-1]  # second differences
    return zlib.compress(d.view(np.uint8).reshape(-1, 8).T.tobytes(), 1)


def _unpack(z: bytes, n: int) -> np.ndarray:
    """The ``n`` float64 values :func:`_pack` packed, bit for bit."""
    d = np.frombuffer(zlib.decompress(z), dtype=np.uint8).reshape(8, n).T.copy().view(np.int64).reshape(n)
    return np.cumsum(np.cumsum(d, dtype=np.int64), dtype=np.int64).view(np.float64)


class MetricSeries(Sequence[tuple[float, float]]):
    """Append-only ``(iterations, value)`` points of one metric of one job (see the module docstring)."""

    __slots__ = ("_x", "_y", "_runs", "_n", "_z")

    def __init__(self, points: Sequence[tuple[float, float]] = ()) -> None:
        if len(points):
            self._x: array | None = array("d", (float(p[0]) for p in points))  # iterations of points in no run
            self._y: array | None = array("d", (float(p[1]) for p in points))  # every point's value
        else:  # (the engine's: a job's first report starts its history)
            self._x, self._y = array("d"), array("d")
        self._runs: list[list[Any]] | None = None
        self._n = len(self._y)
        self._z: bytes | None = None  # frozen: the packed explicit iterations then values

    # Writing ----------------------------------------------------------------
    def append(self, point: tuple[float, float]) -> None:
        x, y = point
        self.add(x, y)

    def add(self, x: float, y: float) -> None:
        """:meth:`append` of ``(x, y)`` without building the tuple."""
        if self._z is not None:
            self._thaw()
        self._x.append(x)  # type: ignore[union-attr]
        self._y.append(y)  # type: ignore[union-attr]
        self._n += 1

    def extend(self, xs: Sequence[float], ys: Sequence[float]) -> None:
        """:meth:`add` of each ``(xs[i], ys[i])`` in order (both of one length)."""
        if self._z is not None:
            self._thaw()
        self._x.extend(xs)  # type: ignore[union-attr]
        self._y.extend(ys)  # type: ignore[union-attr]
        self._n += len(ys)

    def add_grid(self, k0: int, every: float, done0: float, t0: float, rate: float, ys: Sequence[float]) -> None:
        """Append ``len(ys)`` points at grid indices ``k0, k0 + 1, ...``: point ``i`` has iterations
        ``done0 + (t - t0) * rate`` with ``t = (k0 + i) * every`` (``done0`` when ``t <= t0``) and value
        ``ys[i]``; kept as a run, merged into the last one when it continues it (same numbers, next index)."""
        n = len(ys)
        if n == 0:
            return
        if self._z is not None:
            self._thaw()
        runs = self._runs
        self._y.extend(ys)  # type: ignore[union-attr]
        if runs:
            r = runs[-1]
            if (r[_START] + r[_N] == self._n and r[_K0] + r[_N] == k0 and r[_EVERY] == every
                    and r[_DONE0] == done0 and r[_T0] == t0 and r[_RATE] == rate):
                r[_N] += n
                self._n += n
                return
            before = r[_BEFORE] + r[_N]
        else:
            before = 0
            runs = self._runs = []
        runs.append([self._n, n, k0, every, done0, t0, rate, before])
        self._n += n

    def freeze(self) -> None:
        """Compress the points (no more appends expected: the job ended): every point's iterations (the
        runs' materialised: the runs are dropped) and values in one byte string; reads stay exact. A
        no-op on an empty or already frozen history."""
        if self._z is not None or self._n == 0:
            return
        y = self._y
        assert y is not None
        if self._n <= _RAW_MAX:
            x = self._x if not self._runs else self.xs()  # (without runs every point's iterations are in _x)
            self._z = x.tobytes() + y.tobytes()  # type: ignore[union-attr]
        else:
            self._z = _pack(np.concatenate((self.xs(), np.frombuffer(y, dtype=np.float64))))
        self._x = self._y = self._runs = None

    @property
    def frozen(self) -> bool:
        """Whether the points are kept compressed (:meth:`freeze`)."""
        return self._z is not None

    @property
    def nbytes(self) -> int:
        """Bytes the points are kept in: the arrays' items (or the compressed bytes) and 8 per number of
        each run (the objects' headers not counted)."""
        runs = 64 * len(self._runs) if self._runs else 0
        if self._z is not None:
            return len(self._z) + runs
        return 8 * (len(self._x) + len(self._y)) + runs  # type: ignore[arg-type]

    def _thaw(self) -> None:
        x, y = self._arrays()
        self._x, self._y, self._z = array("d", x), array("d", y), None

    # Reading ----------------------------------------------------------------
    def _arrays(self) -> tuple[array, array]:
        """The explicit iterations and the values (decompressed when frozen; the last one is kept)."""
        z = self._z
        if z is None:
            return self._x, self._y  # type: ignore[return-value]
        global _thawed
        if _thawed[0] is not z:  # (frozen: no runs, every point's iterations are in the packed array)
            n = self._n
            if n <= _RAW_MAX:  # (kept raw: see freeze)
                x, y = array("d"), array("d")
                x.frombytes(z[:8 * n])
                y.frombytes(z[8 * n:])
                _thawed = (z, x, y)
            else:
                both = _unpack(z, 2 * n)
                _thawed = (z, array("d", both[:n].tobytes()), array("d", both[n:].tobytes()))
        return _thawed[1], _thawed[2]

    def _run_points(self) -> int:
        runs = self._runs
        if not runs:
            return 0
        r = runs[-1]
        return r[_BEFORE] + r[_N]

    def _x_at(self, i: int) -> float:
        """Iterations of point ``0 <= i < len``."""
        runs = self._runs
        if runs:
            j = bisect_right(runs, i, key=_run_start) - 1
            if j >= 0:
                r = runs[j]
                off = i - r[_START]
                if off < r[_N]:
                    t = (r[_K0] + off) * r[_EVERY]
                    return r[_DONE0] + (t - r[_T0]) * r[_RATE] if t > r[_T0] else r[_DONE0]
                return self._arrays()[0][i - r[_BEFORE] - r[_N]]
        return self._arrays()[0][i]

    def _xs_list(self, lo: int, hi: int) -> list[float]:
        """Iterations of points ``lo`` to ``hi`` as Python floats, one step per point (a short slice:
        the same numbers as :meth:`xs`)."""
        runs = self._runs
        assert runs
        xe = self._arrays()[0]
        out: list[float] = []
        j = max(bisect_right(runs, lo, key=_run_start) - 1, 0)
        i, nr = lo, len(runs)
        while i < hi:
            if j == nr:  # explicit points after the last run
                r = runs[-1]
                before = r[_BEFORE] + r[_N]
                out.extend(xe[i - before:hi - before])
                break
            r = runs[j]
            start = r[_START]
            if i < start:  # explicit points before run j
                e = min(hi, start)
                out.extend(xe[i - r[_BEFORE]:e - r[_BEFORE]])
                i = e
                continue
            e = min(hi, start + r[_N])
            if e <= i:  # (``lo`` is past run j)
                j += 1
                continue
            k_off, every, done0, t0, rate = r[_K0] - start, r[_EVERY], r[_DONE0], r[_T0], r[_RATE]
            for ii in range(i, e):
                t = (k_off + ii) * every
                out.append(done0 + (t - t0) * rate if t > t0 else done0)
            i = e
            j += 1
        return out

    def xs(self, lo: int = 0, hi: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Iterations of points ``lo`` to ``hi`` (0 <= lo <= hi <= len) as a float array (written into
        ``out``, of ``hi - lo`` floats, when given)."""
        hi = self._n if hi is None else hi
        x = self._arrays()[0]
        runs = self._runs
        if out is None:
            out = np.empty(hi - lo, dtype=np.float64)
        if not runs:
            if hi > lo:
                out[:] = np.frombuffer(x, dtype=np.float64, count=hi - lo, offset=8 * lo)
            return out
        xe = np.frombuffer(x, dtype=np.float64) if len(x) else np.empty(0)
        pos, before = lo, 0  # next index to fill; run points before ``pos``
        for r in runs:
            start, n = r[_START], r[_N]
            if start + n <= lo:
                before = r[_BEFORE] + n
                continue
            if start >= hi:
                break
            if pos < start:  # explicit points before this run
                out[pos - lo:start - lo] = xe[pos - before:start - before]
                pos = start
            a, b = pos - start, min(hi, start + n) - start
            k_a, every, done0, t0 = r[_K0] + a, r[_EVERY], r[_DONE0], r[_T0]
            seg = out[pos - lo:pos - lo + b - a]
            np.multiply(np.arange(k_a, k_a + b - a, dtype=np.float64), every, out=seg)  # t = k * every
            if k_a * every > t0:  # (then every later t is too) done0 + (t - t0) * rate, in place
                np.subtract(seg, t0, out=seg)
                np.multiply(seg, r[_RATE], out=seg)
                np.add(seg, done0, out=seg)
            else:
                seg[:] = np.where(seg > t0, done0 + (seg - t0) * r[_RATE], done0)
            pos = start + b
            before = r[_BEFORE] + n
        if pos < hi:
            out[pos - lo:] = xe[pos - before:hi - before]
        return out

    def ys(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Values of points ``lo`` to ``hi`` as a float array (a copy)."""
        hi = self._n if hi is None else hi
        if hi <= lo:
            return np.empty(0)
        return np.frombuffer(self._arrays()[1], dtype=np.float64, count=hi - lo, offset=8 * lo).copy()

    def head(self, n: int) -> np.ndarray:
        """The first ``n`` points as an ``(n, 2)`` float array (iterations, value), without tuples."""
        out = np.empty((n, 2), dtype=np.float64)
        self.xs(0, n, out[:, 0])
        if n:
            out[:, 1] = np.frombuffer(self._arrays()[1], dtype=np.float64, count=n)
        return out

    def _last_run_xs(self, lo: int, hi: int) -> list[float] | None:
        """The iterations of points ``lo`` to ``hi`` when they all lie in the last grid run of an uncompressed
        series (the common read: the newest points), computed from the run's grid; None otherwise."""
        runs = self._runs
        if not runs or self._z is not None or lo >= hi:
            return None
        r = runs[-1]
        start = r[_START]
        if not (start <= lo and hi <= start + r[_N]):
            return None
        k_off, every, done0, t0, rate = r[_K0] - start, r[_EVERY], r[_DONE0], r[_T0], r[_RATE]
        if (k_off + lo) * every > t0:  # (then every later grid time is too: every > 0)
            return [done0 + ((k_off + j) * every - t0) * rate for j in range(lo, hi)]
        return [done0 + (t - t0) * rate if t > t0 else done0 for t in [(k_off + j) * every for j in range(lo, hi)]]

    def columns(self, lo: int, hi: int) -> tuple[list[float], Sequence[float]]:
        """Iterations and values of points ``lo`` to ``hi`` (``0 <= lo <= hi <= len``) as two sequences of
        floats: ``self[lo:hi]`` without its tuples (the loss fits' catch-up over the newest points)."""
        xs = self._last_run_xs(lo, hi)
        if xs is not None:
            return xs, self._y[lo:hi]  # type: ignore[index]
        pts = self[lo:hi]
        return [p[0] for p in pts], [p[1] for p in pts]

    @staticmethod
    def grid_columns(series: Sequence[MetricSeries], lo: Sequence[int], hi: Sequence[int]
                     ) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """:meth:`columns` of many series at once (the loss fits' catch-up of a round's running jobs, issue 18,
        fifteenth session): the iterations and values of points ``lo[i]:hi[i]`` of each ``series[i]`` whose
        points all lie in its last grid run (the common read, as :meth:`_last_run_xs`), concatenated in order
        as two float arrays, the iterations computed in one numpy pass by the same IEEE operations as
        :meth:`_last_run_xs` (so the same floats); and the indices ``i`` of the series left out (not in their
        last run, frozen, or not a :class:`MetricSeries`: read them with :meth:`columns`)."""
        ys = array("d")
        counts: list[int] = []
        params: list[tuple[int, float, float, float, float]] = []  # per series read: k of its first point, every, ...
        left: list[int] = []
        for i, (s, a, b) in enumerate(zip(series, lo, hi)):
            runs = getattr(s, "_runs", None)
            if not runs or s._z is not None or a >= b:
                left.append(i)
                continue
            r = runs[-1]
            start = r[_START]
            if not (start <= a and b <= start + r[_N]):
                left.append(i)
                continue
            ys += s._y[a:b]  # type: ignore[index]
            counts.append(b - a)
            params.append((r[_K0] - start + a, r[_EVERY], r[_DONE0], r[_T0], r[_RATE]))
        if not counts:
            return np.empty(0), np.empty(0), left
        n = np.array(counts, dtype=np.int64)
        p = np.array(params, dtype=np.float64)  # (k of the first point: an integer below 2**53, exact)
        ends = np.cumsum(n)
        k = np.arange(int(ends[-1]), dtype=np.float64) + np.repeat(p[:, 0] - (ends - n), n)  # (integers: exact)
        every, done0, t0, rate = (np.repeat(p[:, j], n) for j in range(1, 5))
        t = k * every
        x = np.where(t > t0, done0 + (t - t0) * rate, done0)
        return x, np.frombuffer(ys, dtype=np.float64), left

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> tuple[float, float]: ...

    @overload
    def __getitem__(self, i: slice) -> list[tuple[float, float]]: ...

    def __getitem__(self, i: Any) -> Any:
        n = self._n
        if type(i) is slice:
            lo, hi, step = i.indices(n)
            if step == 1:
                xs = self._last_run_xs(lo, hi)
                if xs is not None:
                    return list(zip(xs, self._y[lo:hi]))  # type: ignore[index]
            if step != 1:
                return [self[j] for j in range(lo, hi, step)]
            if hi <= lo:
                return []
            if not self._runs:
                x, y = self._arrays()
                return list(zip(x[lo:hi], y[lo:hi]))
            if hi - lo <= _SHORT:
                return list(zip(self._xs_list(lo, hi), self._arrays()[1][lo:hi]))
            return list(zip(self.xs(lo, hi).tolist(), self._arrays()[1][lo:hi]))
        i = i.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("MetricSeries index out of range")
        return (self._x_at(i), self._arrays()[1][i])

    def __iter__(self) -> Iterator[tuple[float, float]]:
        if not self._runs:
            x, y = self._arrays()
            return zip(x, y)
        return zip(self.xs().tolist(), self._arrays()[1])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (MetricSeries, list, tuple)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  (mutable, like the list it replaces)

    def __repr__(self) -> str:
        return f"MetricSeries({list(self)!r})"
