"""TME, Rotary-DLT's training memory estimator (Liu dissertation §3.3.1).

"TME first retrieves all the data of historical jobs that use the same training dataset and
then computes the similarity between the job for estimation and other historical jobs
according to the number of model parameters": ``similarity(x, y) = 1 - |x - y| / max(x, y)``
(:func:`cohabit.models.similar.size_similarity`). It "picks top-k similar historical jobs
from the job repository to fit the batch size-memory curve" by weighted linear regression,
"the more similar a historical job is, the higher weights", and pads the estimate "by an
additional offset, such as 5%, to minimize the likelihood of out-of-memory issues".

Here the weight of a historical job is its similarity; the regression is
``memory = a + b * batch_size`` by weighted least squares. With a single batch size among
the similar jobs there is no slope to fit, and their weighted mean memory is the estimate
(padded as well).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from collections.abc import Sequence

import numpy as np

from .similar import JobTraits, size_similarity

if TYPE_CHECKING:
    from ..repository.store import JobRecord

__all__ = ["TME"]


class TME:
    """Peak device memory (MB) of a job from similar finished jobs (see the module doc)."""

    def __init__(self, history: Sequence[JobRecord], *, k: int = 8, pad: float = 0.05) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k!r}")
        if not 0.0 <= pad < 1.0:
            raise ValueError(f"pad must be in [0, 1), got {pad!r}")
        self.history = [r for r in history if r.peak_mem_mb is not None and r.batch_size is not None]
        self.k, self.pad = k, pad

    def similar(self, job: JobTraits) -> list[tuple[JobRecord, float]]:
        """Same-dataset records with memory, top-k by model-size similarity, best first."""
        scored = [(r, size_similarity(job.num_parameters, r.num_parameters)) for r in self.history
                  if r.dataset == job.dataset]
        scored.sort(key=lambda rs: -rs[1])
        return scored[: self.k]

    def unpadded(self, job: JobTraits, batch_size: int | None = None) -> float | None:
        """The regression's estimate at ``batch_size`` (default: the job's), without the pad."""
        b = batch_size if batch_size is not None else job.batch_size
        top = [(r, s) for r, s in self.similar(job) if s > 0]
        if not top or b is None:
            return None
        x = np.asarray([float(r.batch_size) for r, _ in top])  # type: ignore[arg-type]
        y = np.asarray([float(r.peak_mem_mb) for r, _ in top])  # type: ignore[arg-type]
        w = np.asarray([s for _, s in top])
        if np.unique(x).size < 2:
            return float(np.average(y, weights=w))
        slope, intercept = np.polyfit(x, y, 1, w=np.sqrt(w))
        return float(intercept + slope * b)

    def estimate(self, job: JobTraits, batch_size: int | None = None) -> float | None:
        """Padded peak memory (MB) of ``job`` at ``batch_size``; None without similar history."""
        m = self.unpadded(job, batch_size)
        return None if m is None else m * (1.0 + self.pad)
