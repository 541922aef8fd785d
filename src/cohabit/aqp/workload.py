"""The synthetic AQP workload of the dissertation's Table 3.1, as job specs.

30 jobs (``n``), each a TPC-H query drawn uniformly from its class; 40% light, 30% medium, 30%
heavy queries (``mix``); an accuracy threshold drawn uniformly from 55%..95% (step 5%) and a
deadline drawn uniformly from the class's list; arrivals a Poisson process with mean
inter-arrival time 160 s. ``time_scale`` multiplies arrival times and deadlines alike (the
dissertation ran SF 1 on 20 cores of a server; a small scale factor on a 2-core machine needs a
proportionally shorter clock to keep the same contention).

Each job is ``kind: query``, one task of ``cpu`` cores (DuckDB threads) and a memory demand by
class, ``iterations`` = its batches, ``epochs`` = its running epochs (an arbiter may preempt it
every ``batches / epochs`` batches), criterion ``accuracy >= <threshold> within <deadline>s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..spec.job import JobSpec
from .queries import CLASSES

ACCURACIES = (0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95)
DEADLINES_S: dict[str, tuple[float, ...]] = {
    "light": tuple(float(x) for x in range(360, 901, 60)),
    "medium": tuple(float(x) for x in range(1080, 2161, 120)),
    "heavy": tuple(float(x) for x in range(1440, 3061, 180)),
}
MIX = {"light": 0.4, "medium": 0.3, "heavy": 0.3}
MEAN_ARRIVAL_S = 160.0
#: Memory demand (GB) of a query task by class: DuckDB's memory_limit.
MEM_GB = {"light": 0.5, "medium": 0.75, "heavy": 1.0}


def table31_jobs(*, n: int = 30, seed: int = 0, scale: float = 0.01, batches: int = 20, epochs: int = 4,
                 cpu: float = 1.0,
                 time_scale: float = 1.0, mix: Mapping[str, float] | None = None,
                 data: str | None = None, heldout: bool = False) -> list[JobSpec]:
    """``n`` query jobs drawn as Table 3.1 describes (module docstring), seeded."""
    if n < 1:
        raise ValueError(f"n must be >= 1 job, got {n!r}")
    if not 1 <= epochs <= batches:
        raise ValueError(f"epochs must be in [1, batches={batches}], got {epochs!r}")
    if not time_scale > 0:
        raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
    mix = dict(MIX if mix is None else mix)
    unknown = set(mix) - set(CLASSES)
    if unknown or not mix or any(v < 0 for v in mix.values()) or sum(mix.values()) <= 0:
        raise ValueError(f"mix must weigh the classes {sorted(CLASSES)} with non-negative shares, got {mix!r}")
    rng = np.random.default_rng(seed)
    classes = sorted(mix)
    p = np.array([mix[c] for c in classes], dtype=float)
    p /= p.sum()
    t = 0.0
    jobs = []
    for i in range(n):
        if i > 0:
            t += float(rng.exponential(MEAN_ARRIVAL_S))
        cls = classes[int(rng.choice(len(classes), p=p))]
        query = CLASSES[cls][int(rng.integers(len(CLASSES[cls])))]
        acc = ACCURACIES[int(rng.integers(len(ACCURACIES)))]
        deadline = DEADLINES_S[cls][int(rng.integers(len(DEADLINES_S[cls])))]
        workload: dict[str, Any] = {"name": "tpch-query", "query": query, "scale": scale, "seed": i}
        if data is not None:
            workload["data"] = data
        if heldout:
            workload["heldout"] = True
        jobs.append(JobSpec.model_validate({
            "id": f"{i:02d}-{query}", "kind": "query", "model": f"tpch-{query}", "submit_time": round(t * time_scale, 3),
            "workers": {"count": 1, "demand": {"cpu": cpu, "mem_gb": MEM_GB[cls]}}, "iterations": batches,
            "epochs": epochs,
            "criteria": f"accuracy >= {acc:g} within {round(deadline * time_scale, 3):g}s", "workload": workload,
        }))
    return jobs


def to_yaml(jobs: list[JobSpec], header: str = "") -> str:
    """A jobs file ``cohabit run`` reads back (one flow-style mapping per job)."""
    from ..spec.yamlio import dump_yaml

    lines = [f"# {h}" if h else "#" for h in header.splitlines()] if header else []
    lines.append("jobs:")
    for j in jobs:
        item = j.model_dump(mode="json", include={"id", "kind", "model", "submit_time", "iterations", "epochs", "workload"})
        item["workers"] = {"count": 1, "demand": dict(j.workers.demand.items())}
        item["criteria"] = str(j.criteria)
        lines.append("  - " + dump_yaml(item, default_flow_style=True, width=400).strip())
    return "\n".join(lines) + "\n"


#: Parallel fraction of a query's work (Amdahl) in the simulator: DuckDB parallelises scans, joins
#: and aggregates over morsels; an assumption (the profiles are measured on one thread), not a measurement.
PARALLEL_FRACTION = 0.9


def simulated(jobs: list[JobSpec], profiles: Mapping[str, Any], *, startup_s: float = 0.0,
              parallel_fraction: float | None = PARALLEL_FRACTION) -> list[Any]:
    """The same jobs for the simulator, their costs from measured per-batch profiles
    (:func:`cohabit.aqp.profile.profile_all`'s output).

    Each job's truth: ``duration`` = its query's measured CPU seconds over all batches (plus
    ``startup_s`` and the profile's start-up), the accuracy it reports after each batch = the
    measured envelope estimate, the held-out accuracy = the measured true accuracy. The profile
    must have been measured with the jobs' batch count. A job given more cores than its demand
    (``SetShare``, Rotary-AQP's extra cores) runs faster by Amdahl's law with ``parallel_fraction``.
    """
    from ..sim.truth import JobTruth, TraceJob

    out = []
    for spec in jobs:
        q = str((spec.workload or {}).get("query"))
        prof = profiles["queries"].get(q)
        if prof is None:
            raise ValueError(f"job {spec.id!r}: no profile of query {q!r}")
        if prof["batches"] != spec.iterations:
            raise ValueError(f"job {spec.id!r}: {spec.iterations} batches, but the profile of {q} has "
                             f"{prof['batches']}; profile with the same batch count")
        duration = startup_s + float(prof["startup_cpu_s"]) + float(sum(prof["batch_cpu_s"]))
        truth = JobTruth(iterations=int(spec.iterations), duration=duration, accuracy=tuple(prof["estimate"]),
                         heldout_accuracy=tuple(prof["true_accuracy"]), parallel_fraction=parallel_fraction)
        out.append(TraceJob(spec, truth))
    return out
