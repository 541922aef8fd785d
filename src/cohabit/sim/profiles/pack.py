"""Ground-truth speed of jobs trained jointly as one packed model (Liu, Pack, ch. 2).

Source: ``data/profiles/pack_step_cpu.csv``, written by ``bench/pack_step.py
--export-profile`` from its measurements on this project's machine (2-core CPU,
one torch thread; see ``bench/results/pack_step.json``). For MLP-3 and a small
CNN, n = 2, 4, 8 models of one architecture on the same data with batch sizes
32, 64, 128, it holds the time of one step of the n models one after the other,
T_s(Seq) (Eq. 2.1), and of the packed model, T_s(Pack) (Eq. 2.2), and the
improvement IMPV = (T_s(Seq) - T_s(Pack)) / T_s(Seq) (Eq. 2.3).

**Speed of a pack.** A packed step trains every member one step, so all members
advance at the same rate. With T_i = 1 / (member i's solo iterations per second)
the pack's step takes ``(1 - IMPV) * sum_i T_i`` and every member runs at its
inverse. For n identical members that is ``solo / (n (1 - IMPV))``: a gain over
time-slicing the device (``solo / n``) exactly when IMPV > 0.

**IMPV lookup.** Members of one measured model (names resolved ignoring case and
punctuation through :data:`ALIASES`): linear in n between the measured points,
with IMPV(1) = 0, held at the n = 8 value beyond 8; linear in log2 of the pack's
largest batch size between the measured sizes, held at the ends; the mean over
the measured sizes when no member declares a batch size. A pack of different
models, or of a model that was not measured, gets IMPV = 0 (the device is
time-sliced with no gain: the Table 2.2 ablation measured no gain for two
different models, and nothing is known of other models).

This module is simulator-only: policies never import it.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ._common import canonical, profile_text

PROFILE_FILE = "pack_step_cpu.csv"

ALIASES: dict[str, str] = {
    "mlp": "mlp3", "mlp3": "mlp3", "torchmlp": "mlp3",
    "cnn": "cnn", "smallcnn": "cnn", "torchcnn": "cnn",
}
"""Model names (canonical form) that resolve to a measured packed model."""


class PackProfile:
    """IMPV(n, batch) per measured model, read from one ``pack_step`` CSV."""

    def __init__(self, text: str, source: str = PROFILE_FILE) -> None:
        rows = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
        table: dict[str, dict[int, dict[int, float]]] = {}
        for lineno, row in enumerate(csv.DictReader(io.StringIO("\n".join(rows))), 2):
            try:
                model, n, batch, impv = canonical(row["model"]), int(row["n"]), int(row["batch"]), float(row["IMPV"])
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{source}: data row {lineno}: expected model,n,batch,...,IMPV: {exc}") from None
            if n < 2 or batch < 1 or not -1.0 < impv < 1.0:
                raise ValueError(f"{source}: data row {lineno}: need n >= 2, batch >= 1, -1 < IMPV < 1; got "
                                 f"n={n}, batch={batch}, IMPV={impv}")
            table.setdefault(model, {}).setdefault(batch, {})[n] = impv
        if not table:
            raise ValueError(f"{source}: no profile rows")
        self._table = table

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted(self._table))

    def impv(self, model: str, n: int, batch: int | None = None) -> float:
        """IMPV of ``n`` packed members of ``model`` at (largest) batch size ``batch`` (Eq. 2.3)."""
        if n < 1:
            raise ValueError(f"a pack has at least 1 member, got n={n!r}")
        key = ALIASES.get(canonical(model))
        if n == 1 or key not in self._table:
            return 0.0
        by_batch = self._table[key]
        sizes = sorted(by_batch)
        at = [self._in_n(by_batch[b], n) for b in sizes]
        if batch is None:
            return float(np.mean(at))
        return float(np.interp(math.log2(batch), np.log2(sizes), at))

    @staticmethod
    def _in_n(points: dict[int, float], n: int) -> float:
        ns = [1, *sorted(points)]
        return float(np.interp(n, ns, [0.0, *(points[k] for k in ns[1:])]))

    def step_time(self, models: Sequence[str], solo_step_s: Sequence[float], batch: int | None = None) -> float:
        """Seconds per packed step of members ``models`` whose solo steps take ``solo_step_s``."""
        if not models or len(models) != len(solo_step_s):
            raise ValueError(f"need one solo step time per member, got {len(models)} models and "
                             f"{len(solo_step_s)} times")
        kinds = {ALIASES.get(canonical(m), canonical(m)) for m in models}
        impv = self.impv(models[0], len(models), batch) if len(kinds) == 1 else 0.0
        return (1.0 - impv) * float(sum(solo_step_s))


@lru_cache(maxsize=1)
def pack_profile() -> PackProfile:
    """The embedded profile (measured by ``bench/pack_step.py``)."""
    return PackProfile(profile_text(PROFILE_FILE))
