"""The packaged learning curves as repository records (``cohabit/data/learning_curves``).

Each JSON file lists runs of one model family on one dataset (CIFAR-10, or UD Treebank for
the LSTMs): ``model_name``, ``num_parameters``, ``batch_size``, ``opt``, ``learn_rate``,
``training_data`` and the 20 per-epoch evaluation ``accuracy`` values. Source and licence:
``cohabit/data/README.md``. No timings or memory are in these files.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from .store import JobRecord

__all__ = ["packaged_records"]


@lru_cache(maxsize=1)
def packaged_records() -> tuple[JobRecord, ...]:
    """Every packaged curve as a :class:`JobRecord` (``source="seed"``), files in name order."""
    root = resources.files("cohabit.data").joinpath("learning_curves")
    out: list[JobRecord] = []
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".json"):
            continue
        for i, row in enumerate(json.loads(entry.read_text(encoding="utf-8"))):
            out.append(JobRecord(
                model=str(row["model_name"]), dataset=str(row["training_data"]),
                accuracy=tuple(float(a) for a in row["accuracy"]), num_parameters=int(row["num_parameters"]),
                batch_size=int(row["batch_size"]), optimizer=str(row["opt"]),
                learning_rate=float(row["learn_rate"]), name=f"{entry.name[:-5]}#{i}", source="seed",
            ))
    return tuple(out)
