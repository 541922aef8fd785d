"""Rotary-DLT's synthetic workload (Liu dissertation §3.3.2, Table 3.2), generated as a cohabit trace.

Table 3.2 draws, uniformly: a model (CV models on CIFAR-10, NLP models on UD Treebank),
batch size, optimizer and learning rate; and a completion criterion: 60% convergence-oriented
(delta accuracy in {5, 3, 1, 0.5, 0.3, 0.1, 0.05, 0.03, 0.01, 0.005, 0.003, 0.001}%), 20%
accuracy-oriented (final accuracy in {70, 72, ..., 92}%), 20% runtime-oriented (from
scratch: {5, 10, 30, 50, 100} epochs), the first two WITHIN a maximum epoch in {1, 5, 10, 15,
20, 25, 30}. Our reading, with what the packaged data allows:

* **model and hyper-parameters**: one of the packaged learning curves
  (``cohabit/data/learning_curves``, the dissertation's own knowledge base), picked by
  model family uniformly, then a run uniformly: its model, dataset, batch size (32, 64, 128 or
  256: the sizes those curves were measured at, not Table 3.2's 2-32 for CV models),
  optimizer and learning rate. Pre-trained (fine-tuning) jobs are left out: no curves.
* **accuracy truth**: the curve's 20 per-epoch accuracies are the *held-out* accuracy (they
  were measured on the full test set); the job *reports* a validation accuracy measured on
  1,000 samples, i.e. the held-out value plus binomial sampling noise (sd
  ``sqrt(p (1 - p) / 1000)``), so a job may believe it attained when its held-out accuracy
  says not (false attainment). Past epoch 20 the curve stays at its epoch-20 value.
* **step times**: ``1 / throughput`` of Gavel's measured V100 profile
  (``profiles/gavel_throughputs.json``): ResNet-18 at the job's batch size for CV models,
  scaled by a rough relative per-sample cost of the model family (:data:`COST`, our
  assumption, not measured), the LSTM language model (interpolated in batch size) for NLP
  models. An epoch is 50,000 CIFAR-10 or 12,543 UD Treebank training samples.
* **memory**: peak device memory ``500 MB + 16 bytes x parameters + batch x`` a per-sample
  activation size of the family (:data:`ACT_MB`, our assumption), used for the repository's
  history (TME) only: the simulator does not model running out of memory.
* **arrivals**: all at time 0 by default (the dissertation plots attainment from a common
  start), or Poisson with a mean gap.

The cluster is the dissertation's server: 4 GPUs of 8 GB (``rotary_cluster``). Alongside
the trace, :func:`history` gives the repository Rotary learns from: every packaged curve
*except* those the workload's jobs were drawn from (they are the jobs to be estimated),
with step times and memory as "measured" by the same models (5% log-normal noise).
``python -m cohabit.sim.rotary_workload OUT.yaml --jobs 30 --seed 0 [--repo OUT.sqlite]``.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources

import numpy as np

from ..repository.seed import packaged_records
from ..repository.store import JobRecord, Timing
from ..spec.cluster import ClusterSpec, NodeSpec
from ..spec.job import JobSpec, TaskGroup
from ..spec.resources import Resources
from .truth import JobTruth, TraceJob

__all__ = ["ACT_MB", "COST", "history", "rotary_cluster", "generate", "step_time", "peak_mem_mb"]

CONVERGENCE_DELTAS = (0.05, 0.03, 0.01, 0.005, 0.003, 0.001, 0.0005, 0.0003, 0.0001, 0.00005, 0.00003, 0.00001)
ACCURACY_TARGETS = (0.70, 0.72, 0.74, 0.76, 0.78, 0.80, 0.82, 0.84, 0.86, 0.88, 0.90, 0.92)
RUNTIME_EPOCHS = (5, 10, 30, 50, 100)
MAX_EPOCHS = (1, 5, 10, 15, 20, 25, 30)
KIND_SHARES = (("convergence", 0.6), ("accuracy", 0.2), ("runtime", 0.2))

TRAIN_SAMPLES = {"cifar10": 50_000, "udtreebank": 12_543}
VALIDATION_SAMPLES = 1_000
DEVICE = "v100"

#: Relative per-sample training cost of each CV family against ResNet-18 (our rough reading of
#: their multiply-adds on 32x32 inputs, floored at 0.15 for input-bound small models). Assumed.
COST = {"alexnet": 0.3, "densenet": 1.6, "inception": 2.5, "lenet": 0.15, "mobilenet": 0.3,
        "mobilenetv2": 0.45, "resnet": 1.0, "resnext": 1.5, "shufflenet": 0.3, "squeezenet": 0.2, "vgg": 0.7,
        "lstm": 1.0, "bilstm": 1.8}
#: Activation memory per training sample (MB) of each family. Assumed.
ACT_MB = {"alexnet": 0.6, "densenet": 12.0, "inception": 10.0, "lenet": 0.05, "mobilenet": 3.0,
          "mobilenetv2": 5.0, "resnet": 4.0, "resnext": 8.0, "shufflenet": 3.0, "squeezenet": 1.5, "vgg": 2.5,
          "lstm": 0.5, "bilstm": 1.0}


def rotary_cluster() -> ClusterSpec:
    """The dissertation's server: one machine, 4 GPUs of 8 GB (RTX 2080), 192 GB memory."""
    return ClusterSpec(name="rotary", nodes=(NodeSpec(
        name="rotary-0", capacity=Resources(gpu=4, cpu=16, mem_gb=192, gpu_mem_gb=32),
        labels={"gpu_model": DEVICE}),))


@lru_cache(maxsize=1)
def _gavel() -> dict[str, dict[int, float]]:
    raw = json.loads(resources.files("cohabit.data").joinpath("profiles/gavel_throughputs.json")
                     .read_text(encoding="utf-8"))[DEVICE]
    out: dict[str, dict[int, float]] = {"ResNet-18": {}, "LM": {}}
    for key, val in raw.items():
        name, n = key.strip("()").rsplit(",", 1)
        name = name.strip().strip("'")
        if n.strip() != "1" or "(batch size" not in name:
            continue
        model, bs = name.split(" (batch size ")
        if model in out:
            thr = val["null"] if isinstance(val, dict) else val
            out[model][int(bs.rstrip(")"))] = float(thr)
    return out


def _throughput(table: dict[int, float], batch: int) -> float:
    """Steps/s at ``batch``, interpolated log-log between the profiled batch sizes."""
    bs = sorted(table)
    x = np.log([float(b) for b in bs])
    y = np.log([table[b] for b in bs])
    return float(np.exp(np.interp(math.log(batch), x, y, left=None, right=None)))


def step_time(model: str, dataset: str, batch: int) -> float:
    """Seconds per training step of ``model`` at ``batch`` on the V100 profile (see the module doc)."""
    if dataset == "udtreebank":
        return COST.get(model, 1.0) / _throughput(_gavel()["LM"], batch)
    return COST.get(model, 1.0) / _throughput(_gavel()["ResNet-18"], batch)


def peak_mem_mb(model: str, params: int, batch: int) -> float:
    """Peak device memory (MB) of a training job (see the module doc; an assumed model)."""
    return 500.0 + 16.0 * params / 1e6 + batch * ACT_MB.get(model, 4.0)


def _families(records: Sequence[JobRecord]) -> dict[str, list[int]]:
    fam: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        fam.setdefault(r.model, []).append(i)
    return fam


def _criterion(rng: np.random.Generator) -> tuple[str, int]:
    """A Table 3.2 criterion and the epochs it may need at most."""
    u = rng.random()
    if u < KIND_SHARES[0][1]:
        d = float(rng.choice(CONVERGENCE_DELTAS))
        e = int(rng.choice(MAX_EPOCHS))
        return f"converge delta {d:g} within {e} epochs", e
    if u < KIND_SHARES[0][1] + KIND_SHARES[1][1]:
        a = float(rng.choice(ACCURACY_TARGETS))
        e = int(rng.choice(MAX_EPOCHS))
        return f"accuracy >= {a:g} within {e} epochs", e
    e = int(rng.choice(RUNTIME_EPOCHS))
    return f"run {e} epochs", e


def _pick(rng: np.random.Generator, n: int, records: Sequence[JobRecord]) -> list[int]:
    fam = _families(records)
    names = sorted(fam)
    out = []
    for _ in range(n):
        members = fam[names[int(rng.integers(len(names)))]]
        out.append(members[int(rng.integers(len(members)))])
    return out


def generate(n_jobs: int = 30, *, seed: int = 0, mean_gap_s: float = 0.0) -> list[TraceJob]:
    """``n_jobs`` jobs of Table 3.2's mix (see the module doc), reproducible from ``seed``."""
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be >= 1, got {n_jobs!r}")
    if not mean_gap_s >= 0:
        raise ValueError(f"mean_gap_s must be >= 0, got {mean_gap_s!r}")
    records = packaged_records()
    rng = np.random.default_rng(seed)
    picks = _pick(rng, n_jobs, records)
    out: list[TraceJob] = []
    t = 0.0
    width = len(str(n_jobs - 1))
    for i, idx in enumerate(picks):
        r = records[idx]
        crit, epochs = _criterion(rng)
        held = np.asarray(r.accuracy + (r.accuracy[-1],) * max(0, epochs - len(r.accuracy)))[:epochs]
        sd = np.sqrt(np.clip(held * (1.0 - held), 0.0, None) / VALIDATION_SAMPLES)
        val = np.clip(held + rng.normal(0.0, 1.0, size=held.size) * sd, 0.0, 1.0)
        batch = int(r.batch_size or 32)
        ipe = math.ceil(TRAIN_SAMPLES.get(r.dataset, 50_000) / batch)
        iters = ipe * epochs
        spec = JobSpec(
            id=f"dlt-{i:0{width}d}", submit_time=round(t, 3), model=r.model, batch_size=batch,
            epochs=epochs, iterations=iters, criteria=crit,
            workers=TaskGroup(count=1, demand=Resources(gpu=1, cpu=4, mem_gb=16)),
            workload={"dataset": r.dataset, "optimizer": r.optimizer, "lr": r.learning_rate,
                      "num_parameters": r.num_parameters, "curve": r.name},
        )
        truth = JobTruth(iterations=iters, duration=iters * step_time(r.model, r.dataset, batch),
                         accuracy=tuple(float(x) for x in val), heldout_accuracy=tuple(float(x) for x in held))
        out.append(TraceJob(spec, truth))
        if mean_gap_s > 0:
            t += float(rng.exponential(mean_gap_s))
    return out


def history(jobs: Sequence[TraceJob], *, seed: int = 0, noise: float = 0.05) -> list[JobRecord]:
    """The repository for a generated workload: the packaged curves not used by ``jobs``, with
    step/epoch times on the V100 profile and peak memory "measured" with ``noise`` (log-normal sd)."""
    used = {j.spec.workload.get("curve") for j in jobs if j.spec.workload}
    rng = np.random.default_rng(seed + 1)
    out = []
    for r in packaged_records():
        if r.name in used:
            continue
        b = int(r.batch_size or 32)
        step = step_time(r.model, r.dataset, b) * float(np.exp(rng.normal(0.0, noise)))
        ipe = math.ceil(TRAIN_SAMPLES.get(r.dataset, 50_000) / b)
        mem = peak_mem_mb(r.model, int(r.num_parameters or 0), b) * float(np.exp(rng.normal(0.0, noise)))
        out.append(JobRecord(model=r.model, dataset=r.dataset, accuracy=r.accuracy, num_parameters=r.num_parameters,
                             batch_size=b, optimizer=r.optimizer, learning_rate=r.learning_rate, peak_mem_mb=mem,
                             timings=(Timing(DEVICE, step, step * ipe),), name=r.name, source="seed"))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    from ..repository.store import JobRepository
    from .traces import native

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="trace file to write (cohabit format)")
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gap", type=float, default=0.0, help="mean Poisson inter-arrival gap in seconds (0: all at 0)")
    ap.add_argument("--repo", help="also write the repository (history) SQLite file for rotary:repo=...")
    a = ap.parse_args(argv)
    try:
        jobs = generate(a.jobs, seed=a.seed, mean_gap_s=a.gap)
    except ValueError as exc:
        ap.error(str(exc))  # exits 2 with the usage line
    native.dump(jobs, a.out, cluster="rotary")
    if a.repo:
        with JobRepository(a.repo) as repo:
            repo.add_many(history(jobs, seed=a.seed))


if __name__ == "__main__":
    main()
