"""The one reader of the packaged learning curves (``cohabit/data/learning_curves/*.json``).

Each JSON file lists training runs of one model family (the file's name): ``model_name``,
``num_parameters``, ``batch_size``, ``opt``, ``learn_rate``, ``training_data``, ``classes``
and the per-epoch evaluation ``accuracy`` values (source and licence: ``data/README.md``).
Both views of them read through here: the job repository's seed records
(:func:`cohabit.repository.seed.packaged_records`) and MLFS's curve library
(:func:`cohabit.models.mlfs_curve.packaged_curves`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["CurveRow", "packaged_curve_rows"]

#: (family = file name without ``.json``, index of the run in its file, the run's JSON object)
CurveRow = tuple[str, int, dict[str, Any]]


@lru_cache(maxsize=1)
def packaged_curve_rows() -> tuple[CurveRow, ...]:
    """Every packaged run, files in name order, runs in file order (parsed once per process)."""
    root = resources.files("cohabit.data").joinpath("learning_curves")
    out: list[CurveRow] = []
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".json"):
            continue
        family = entry.name[: -len(".json")]
        out.extend((family, i, row) for i, row in enumerate(json.loads(entry.read_text(encoding="utf-8"))))
    return tuple(out)
