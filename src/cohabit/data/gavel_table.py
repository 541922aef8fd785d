"""The one reader of Gavel's measured throughput table (``cohabit/data/profiles/gavel_throughputs.json``).

The file is Gavel's ``scheduler/simulation_throughputs.json`` (stanford-futuredata/gavel, commit
``c4fa400``; source in ``data/README.md`` and ``bench/reference/gavel.md``). For each GPU type
(``v100``, ``p100``, ``k80``) and job type key ``(job_type, scale_factor)`` (its JSON spelling is
Python's ``repr`` of that tuple) it holds

* ``'null'``: the job's steps per second alone on ``scale_factor`` GPUs of that type, and
* for every other job type key of the same scale factor: ``[a, b]``, the steps per second of this
  job (``a``) and of the other (``b``) when the two share the same GPUs (Gavel's co-location
  "packing" measurements; ``[0, 0]`` where the pair was not measured or does not fit, which is every
  pair of multi-GPU jobs in this file).

The simulator's Gavel physics (``sim.physics``) and the trace loader (``sim.traces.gavel``) read it
as ground truth; Gavel's policies (``policies.gavel``) read it as the profile a Gavel deployment has.
"""

from __future__ import annotations

import ast
import json
from functools import lru_cache
from importlib import resources

__all__ = ["GPU_TYPES", "JobKey", "solo_throughputs", "pair_throughputs", "pair_throughput"]

GPU_TYPES = ("v100", "p100", "k80")

JobKey = tuple[str, int]  # (Gavel job type, scale factor)


def _key(text: str) -> JobKey:
    name, scale = ast.literal_eval(text)
    return str(name), int(scale)


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, dict[JobKey, float]], dict[str, dict[tuple[JobKey, JobKey], tuple[float, float]]]]:
    raw = json.loads(resources.files("cohabit.data").joinpath("profiles", "gavel_throughputs.json").read_text())
    solo: dict[str, dict[JobKey, float]] = {}
    pairs: dict[str, dict[tuple[JobKey, JobKey], tuple[float, float]]] = {}
    for gpu in GPU_TYPES:
        s: dict[JobKey, float] = {}
        p: dict[tuple[JobKey, JobKey], tuple[float, float]] = {}
        for key, entry in raw[gpu].items():
            k = _key(key)
            s[k] = float(entry["null"])
            for other, both in entry.items():
                if other != "null":
                    p[(k, _key(other))] = (float(both[0]), float(both[1]))
        solo[gpu], pairs[gpu] = s, p
    return solo, pairs


def solo_throughputs() -> dict[str, dict[JobKey, float]]:
    """GPU type -> job type key -> steps per second alone (the ``'null'`` entries). Shared: do not mutate."""
    return _table()[0]


def pair_throughputs() -> dict[str, dict[tuple[JobKey, JobKey], tuple[float, float]]]:
    """GPU type -> (key a, key b) -> (steps/s of a, steps/s of b) sharing GPUs. Shared: do not mutate."""
    return _table()[1]


def pair_throughput(gpu: str, a: JobKey, b: JobKey) -> tuple[float, float] | None:
    """Steps per second of ``a`` and of ``b`` sharing GPUs of type ``gpu``; None if the table has no entry."""
    return _table()[1].get(gpu, {}).get((a, b))
