"""Rotary's job repository: finished jobs (model, dataset, hyper-parameters, per-epoch accuracy,
step/epoch times per device, peak memory) that the estimators in :mod:`cohabit.models` learn from."""

from .seed import packaged_memory_records, packaged_records
from .store import DEFAULT_PATH, JobRecord, JobRepository, Timing

__all__ = ["DEFAULT_PATH", "JobRecord", "JobRepository", "Timing", "packaged_memory_records", "packaged_records"]
