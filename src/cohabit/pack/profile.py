"""Packing profile for schedulers and simulators (Liu, ch. 2, §2.3.3, Eq. 2.3).

``bench/pack_step.py`` measures IMPV = (T_s(Seq) - T_s(Pack)) / T_s(Seq) for
n = 2, 4, 8 packed models per model family and batch size.  A simulator that
models a ``Pack(jobs, device)`` action needs the speed of each packed job:
with n jobs packed, one packed step takes ``(1 - IMPV) * T_s(Seq)``, so each
job advances at ``n * T_s(model) / T_s(Pack)`` of its solo speed when the n
models have similar step times.  :class:`PackProfile` reads the benchmark's
JSON and answers that, interpolating linearly in the number of models and the
batch size (clamped to the measured range). :meth:`PackProfile.from_csv` reads
the packaged copy (``cohabit/data/profiles/pack_step_<device>.csv``, written by
``bench/pack_step.py --export-profile``); :meth:`PackProfile.best_n` is the
measurement-aware pack size of pack-aware Hyperband.
"""

from __future__ import annotations

import csv
import io
import json
from bisect import bisect_left
from functools import lru_cache
from importlib.resources import files
from pathlib import Path


def _interp(xs: list[float], ys: list[float], x: float) -> float:
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect_left(xs, x)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


class PackProfile:
    """IMPV measured per (model, n, batch); see the module docstring."""

    def __init__(self, rows: list[dict]) -> None:
        self.table: dict[str, dict[int, dict[int, float]]] = {}
        for r in rows:
            self.table.setdefault(r["model"], {}).setdefault(int(r["n"]), {})[int(r["batch"])] = float(r["IMPV"])
        if not self.table:
            raise ValueError("a pack profile needs at least one measured row, got none")

    @classmethod
    def load(cls, path: str | Path = "bench/results/pack_step.json") -> PackProfile:
        data = json.loads(Path(path).read_text())
        return cls(data["impv"])

    @classmethod
    def from_csv(cls, text: str, source: str = "pack profile") -> PackProfile:
        """Rows ``model,n,batch,...,IMPV`` (``#`` lines are comments); errors name the data row."""
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
        rows = []
        for lineno, row in enumerate(csv.DictReader(io.StringIO("\n".join(lines))), 2):
            try:
                r = {"model": row["model"], "n": int(row["n"]), "batch": int(row["batch"]), "IMPV": float(row["IMPV"])}
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{source}: data row {lineno}: expected model,n,batch,...,IMPV: {exc}") from None
            if r["n"] < 2 or r["batch"] < 1 or not -1.0 < r["IMPV"] < 1.0:
                raise ValueError(f"{source}: data row {lineno}: need n >= 2, batch >= 1, -1 < IMPV < 1; got "
                                 f"n={r['n']}, batch={r['batch']}, IMPV={r['IMPV']}")
            rows.append(r)
        return cls(rows)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted(self.table))

    def best_n(self, model: str, batch: int | None = None, max_n: int = 8) -> int:
        """The measured pack size with the largest IMPV (1 if no size gains): how many models
        to pack when the profile, not memory, should decide (measurement-aware packing)."""
        gains = {n: self.impv(model, n, batch) for n in self.table[model] if n <= max_n}
        best = max(gains, key=lambda n: (gains[n], -n), default=1)
        return best if gains.get(best, 0.0) > 0.0 else 1

    def impv(self, model: str, n: int, batch: int | None = None) -> float:
        """Eq. 2.3 for ``n`` packed ``model`` jobs at ``batch`` (n=1 is 0 by definition; ``batch=None``:
        the mean over the measured batch sizes)."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if model not in self.table:
            raise ValueError(f"no profile for model {model!r}; measured: {sorted(self.table)}")
        if n == 1:
            return 0.0
        per_n = self.table[model]
        ns = sorted(per_n)
        vals = []
        for k in ns:
            bs = sorted(per_n[k])
            if batch is None:
                vals.append(sum(per_n[k].values()) / len(bs))
            else:
                vals.append(_interp([float(b) for b in bs], [per_n[k][b] for b in bs], float(batch)))
        return _interp([1.0, *map(float, ns)], [0.0, *vals], float(n))

    def speed(self, model: str, n: int, batch: int) -> float:
        """Each packed job's speed relative to running alone.

        With n similar jobs, a packed step costs ``(1 - IMPV) * n`` solo steps
        and advances every job by one step, so each job runs at
        ``1 / ((1 - IMPV) * n)`` of its solo speed, and the device as a whole
        at ``1 / (1 - IMPV)`` times the throughput of running them in turn.
        """
        return 1.0 / ((1.0 - self.impv(model, n, batch)) * n)


PACKAGED = "pack_step_cpu.csv"
"""The packaged profile, under ``cohabit/data/profiles`` (measured on this project's 2-core CPU)."""


@lru_cache(maxsize=4)
def packaged_profile(name: str = PACKAGED) -> PackProfile:
    """The step profile packaged with cohabit (``bench/pack_step.py --export-profile``)."""
    text = files("cohabit.data").joinpath("profiles").joinpath(name).read_text(encoding="utf-8")
    return PackProfile.from_csv(text, name)
