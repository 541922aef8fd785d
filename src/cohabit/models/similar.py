"""Similarity between a job and the repository's finished jobs (Rotary-DLT §3.3.1).

* :func:`size_similarity` — TME's ``similarity(x, y) = 1 - |x - y| / max(x, y)`` over the
  numbers of model parameters x and y (in [0, 1], 1 for equal sizes).
* :func:`tee_similarity` — TEE "selects the similar historical data that have the same
  training dataset and hyperparameters (e.g., batch size, learning rate, and optimizer)":
  jobs on another dataset are not similar at all (None); otherwise one point for each of
  model, batch size, learning rate and optimizer that match, plus the size similarity (a
  fraction, so it only breaks ties between jobs matching as many hyper-parameters).
* :func:`top_k` — the ``k`` most similar records (stable: ties keep repository order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from collections.abc import Callable, Sequence
from dataclasses import dataclass

if TYPE_CHECKING:
    from ..repository.store import JobRecord


__all__ = ["JobTraits", "size_similarity", "tee_similarity", "top_k"]


@dataclass(frozen=True, slots=True)
class JobTraits:
    """What a job declares about itself (its spec's model, batch size and ``workload`` options)."""

    model: str
    dataset: str
    batch_size: int | None = None
    optimizer: str | None = None
    learning_rate: float | None = None
    num_parameters: int | None = None


def size_similarity(x: float | None, y: float | None) -> float:
    """``1 - |x - y| / max(x, y)`` (TME's similarity of model sizes); 0 when a size is unknown."""
    if x is None or y is None or max(x, y) <= 0:
        return 0.0
    return 1.0 - abs(x - y) / max(x, y)


def tee_similarity(job: JobTraits, rec: JobRecord) -> float | None:
    """TEE's similarity of ``rec`` to ``job`` (see the module doc); None for another dataset."""
    if rec.dataset != job.dataset:
        return None
    score = float(rec.model == job.model) + float(rec.batch_size == job.batch_size)
    score += float(rec.learning_rate is not None and job.learning_rate is not None
                   and abs(rec.learning_rate - job.learning_rate) <= 1e-12 * max(rec.learning_rate, 1e-300))
    score += float(rec.optimizer is not None and job.optimizer is not None
                   and rec.optimizer.lower() == job.optimizer.lower())
    return score + size_similarity(job.num_parameters, rec.num_parameters)


def top_k(job: JobTraits, records: Sequence[JobRecord], k: int,
          score: Callable[[JobTraits, JobRecord], float | None] = tee_similarity) -> list[tuple[JobRecord, float]]:
    """The ``k`` records most similar to ``job`` with their scores, best first (None scores left out)."""
    scored = [(r, s) for r in records if (s := score(job, r)) is not None]
    scored.sort(key=lambda rs: -rs[1])
    return scored[:k]
