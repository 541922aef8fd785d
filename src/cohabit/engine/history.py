"""History of finished jobs: what a real scheduler learns from jobs that have completed.

Policies that need a prior for unseen jobs (Tiresias's Gittins index, SRTF
without an oracle, Rotary's job repository) read it here. Entries hold only
observed values: run time, GPU-seconds attained, iterations, measured
seconds per iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class FinishedJob:
    id: str
    model: str
    gpus: float
    run_time: float
    attained_service: float
    iterations: float
    iter_time: float | None


class History:
    """Append-only list of finished jobs with cheap running aggregates."""

    __slots__ = ("_items", "_by_model_iter_time", "_run_time_sum")

    def __init__(self) -> None:
        self._items: list[FinishedJob] = []
        self._by_model_iter_time: dict[str, tuple[float, int]] = {}
        self._run_time_sum = 0.0

    def add(self, item: FinishedJob) -> None:
        self._items.append(item)
        self._run_time_sum += item.run_time
        if item.iter_time:
            s, n = self._by_model_iter_time.get(item.model, (0.0, 0))
            self._by_model_iter_time[item.model] = (s + item.iter_time, n + 1)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._items)

    def mean_run_time(self) -> float | None:
        return self._run_time_sum / len(self._items) if self._items else None

    def mean_iter_time(self, model: str) -> float | None:
        s, n = self._by_model_iter_time.get(model, (0.0, 0))
        return s / n if n else None

    def attained_services(self) -> np.ndarray:
        return np.fromiter((f.attained_service for f in self._items), dtype=np.float64, count=len(self._items))
