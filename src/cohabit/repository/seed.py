"""The packaged learning curves as repository records (``cohabit/data/learning_curves``).

Each JSON file lists runs of one model family on one dataset (CIFAR-10, or UD Treebank for
the LSTMs): ``model_name``, ``num_parameters``, ``batch_size``, ``opt``, ``learn_rate``,
``training_data`` and the 20 per-epoch evaluation ``accuracy`` values. Source and licence:
``cohabit/data/README.md``. No timings or memory are in these files. The files are read by
:func:`cohabit.data.curve_files.packaged_curve_rows`, the one reader MLFS's curves use too.
"""

from __future__ import annotations

from functools import lru_cache

from ..data.curve_files import packaged_curve_rows
from .store import JobRecord

__all__ = ["packaged_records"]


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
