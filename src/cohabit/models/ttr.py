"""TTR, Rotary-DLT's training time recorder (Liu dissertation §3.3.1).

TTR "records the time of a training step or a training epoch for each DLT job on different
devices"; "due to a CUDA warm-up issue, the very first training step always takes a longer
time, so we always discard the first training step". Here a *sample* is a measured step
time (a report's seconds per iteration) of one job on one device; the first sample after
each launch on a device (start, resume, move) is discarded, the rest are averaged. An epoch
time is the step time times the steps in an epoch. Devices are names (``gpu_model`` labels
or node names), so a job's times on a V100 and on a K80 are kept apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["TTR"]


@dataclass
class _Times:
    skip_next: bool = True
    total: float = 0.0
    n: int = 0


@dataclass
class TTR:
    """Step times per (job, device), first step of every launch discarded."""

    _times: dict[tuple[str, str], _Times] = field(default_factory=dict)

    def launched(self, job: str, device: str) -> None:
        """The job (re)started on ``device``: its next sample is a warm-up step and is discarded."""
        self._times.setdefault((job, device), _Times()).skip_next = True

    def record(self, job: str, device: str, step_s: float) -> bool:
        """Fold one measured step time in; False if it was discarded (first after a launch, or bad)."""
        t = self._times.setdefault((job, device), _Times())
        if t.skip_next:
            t.skip_next = False
            return False
        if not (step_s > 0 and math.isfinite(step_s)):
            return False
        t.total += step_s
        t.n += 1
        return True

    def step_time(self, job: str, device: str) -> float | None:
        """Mean recorded step time of ``job`` on ``device`` (None before a kept sample)."""
        t = self._times.get((job, device))
        return t.total / t.n if t is not None and t.n else None

    def epoch_time(self, job: str, device: str, steps_per_epoch: float) -> float | None:
        """Step time x ``steps_per_epoch`` (None before a kept sample)."""
        s = self.step_time(job, device)
        return None if s is None else s * steps_per_epoch

    def devices(self, job: str) -> list[str]:
        """Devices on which ``job`` has a kept sample."""
        return sorted(d for (j, d), t in self._times.items() if j == job and t.n)
