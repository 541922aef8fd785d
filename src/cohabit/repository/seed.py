"""The packaged data as repository records: the learning curves (``cohabit/data/learning_curves``)
and the measured peak memory of cohabit's real torch workloads (``cohabit/data/memory``).

Each JSON file lists runs of one model family on one dataset (CIFAR-10, or UD Treebank for
the LSTMs): ``model_name``, ``num_parameters``, ``batch_size``, ``opt``, ``learn_rate``,
``training_data`` and the 20 per-epoch evaluation ``accuracy`` values. Source and licence:
``cohabit/data/README.md``. No timings or memory are in these files. The files are read by
:func:`cohabit.data.curve_files.packaged_curve_rows`, the one reader MLFS's curves use too.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from ..data.curve_files import packaged_curve_rows
from .measure import memory_records
from .store import JobRecord

__all__ = ["packaged_memory_records", "packaged_records"]

#: the packaged peak-memory measurements (``python -m cohabit.repository.measure``, see its doc)
MEMORY_FILE = "peak_mem_cpu.json"


@lru_cache(maxsize=1)
def packaged_records() -> tuple[JobRecord, ...]:
    """Every packaged curve as a :class:`JobRecord` (``source="seed"``), files in name order."""
    return tuple(
        JobRecord(
            model=str(row["model_name"]), dataset=str(row["training_data"]),
            accuracy=tuple(float(a) for a in row["accuracy"]), num_parameters=int(row["num_parameters"]),
            batch_size=int(row["batch_size"]), optimizer=str(row["opt"]),
            learning_rate=float(row["learn_rate"]), name=f"{family}#{i}", source="seed",
        )
        for family, i, row in packaged_curve_rows()
    )


@lru_cache(maxsize=1)
def packaged_memory_records() -> tuple[JobRecord, ...]:
    """The packaged peak-memory measurements of the real torch workloads (``source="measured"``):
    dataset = workload name, one record per model size x batch size (:mod:`.measure`)."""
    text = resources.files("cohabit.data").joinpath("memory", MEMORY_FILE).read_text(encoding="utf-8")
    return tuple(memory_records(json.loads(text)["measurements"]))
