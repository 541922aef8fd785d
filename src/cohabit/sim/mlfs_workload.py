"""MLFS's evaluation workload (Wang et al., CoNEXT'20, §4.1), written as a cohabit trace.

From the Philly trace (the embedded ``philly_82k``) a random week is chosen and ``jobs`` of its
jobs are drawn (their arrival times relative to the week's start, their durations as the
estimated execution time ``t_e``). Each job then gets, as the paper describes:

* GPUs: drawn from {1, 2, 4, 8, 16, 32} (``gpus="paper"``, §4.1 "randomly selected"), or the
  trace's own count rounded up to that set (``gpus="trace"``; Philly's jobs are 93 % 1-GPU);
* an algorithm from AlexNet, ResNet, MLP, LSTM and SVM, partitioned as §4.1 says: SVM data
  parallel only (one partition); MLP and AlexNet cut sequentially into a chain of partitions;
  LSTM and ResNet cut *within* layers too (a layered DAG two partitions wide, every partition
  feeding both of the next layer). The number of partitions follows the GPU count ("we also
  set the number of model partitions to this number"), capped by the model's depth
  (:data:`MAX_PARTITIONS`); the remaining GPUs are data-parallel replicas;
* partition sizes: the model's parameter count (from the packaged learning curves' runs) split
  by random shares; each task demands 1 GPU, 6 CPUs and memory growing with its partition;
* a parameter server (half of the jobs) or all-reduce; the two communication volumes drawn from
  [50, 100] MB (worker <-> PS or ring neighbour, and between dependent partitions);
* deadline ``max{1.1 t_e, t_r}`` with ``t_r`` uniform in [0.5, 24] h; urgency uniform in 1..10;
* a real accuracy curve of the algorithm's family from ``data/learning_curves`` (MLP and SVM
  have none there: they follow LeNet's, the smallest model's, curves); the required accuracy is
  the curve's best times U[0.9, 1.0] (the trace's "completion status" is not in the released
  file);
* MLF-C option ii (OptStop), which the system may switch under overload (§4.1: "we assume that
  all jobs use OptStop and it stops a job when its required accuracy is reached when the
  system is overloaded").

Ground truth: iterations ``I`` (``t_e`` / the algorithm's nominal iteration time) and the
computation seconds per iteration chosen so that the job, consolidated on as few 4-GPU nodes as
possible, runs ``t_e``.

Run it as ``cohabit mlfs-workload OUT.yaml --jobs 620 --seed 0``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from ..models.mlfs_curve import packaged_curves
from ..spec.graph import TaskGraph, cross_node_mb
from ..spec.job import JobSpec, TaskGroup
from ..spec.limits import MAX_ITERATIONS
from ..spec.resources import Resources
from .traces import embedded_trace, load_trace
from .traces.native import dump
from .truth import JobTruth, TraceJob

ALGORITHMS = ("alexnet", "resnet", "mlp", "lstm", "svm")
CURVE_FAMILY = {"alexnet": "alexnet", "resnet": "resnet", "lstm": "lstm", "mlp": "lenet", "svm": "lenet"}
MAX_PARTITIONS = {"alexnet": 8, "resnet": 8, "mlp": 4, "lstm": 4, "svm": 1}
NOMINAL_ITER_S = {"alexnet": 0.5, "resnet": 1.0, "mlp": 0.2, "lstm": 0.6, "svm": 0.1}
GPU_CHOICES = (1, 2, 4, 8, 16, 32)
GPUS_PER_NODE = 4
LINK_GBPS = 10.0
WEEK = 7 * 86400.0
MAX_TE_S = 12 * 3600.0  # Philly durations capped at 12 h (deadlines are drawn up to 24 h)


def _graph(alg: str, gpus: int, params: float, rng: np.random.Generator) -> TaskGraph:
    p = min(gpus, MAX_PARTITIONS[alg])
    while gpus % p:
        p -= 1
    shares = rng.dirichlet(np.full(p, 4.0))
    parts = [{"params": max(float(params * s), 1.0),
              "demand": {"gpu": 1, "cpu": 6, "mem_gb": round(16 + 24 * float(s), 2)}} for s in shares]
    edges: list[tuple[int, int]] | None = None
    if alg in ("lstm", "resnet") and p >= 4:  # layers two partitions wide, fully connected between layers
        layers = [list(range(i, min(i + 2, p))) for i in range(0, p, 2)]
        edges = [(a, b) for la, lb in zip(layers, layers[1:]) for a in la for b in lb]
    return TaskGraph(partitions=parts, edges=edges, replicas=gpus // p,
                     activation_mb=round(float(rng.uniform(50, 100)), 1),
                     exchange_mb=round(float(rng.uniform(50, 100)), 1))


def consolidated_comm_s(spec: JobSpec, link_gbps: float = LINK_GBPS) -> float:
    """Communication seconds per iteration with tasks filling 4-GPU nodes in order (PS on node 0)."""
    assert spec.graph is not None
    nodes = tuple(t // GPUS_PER_NODE for t in range(spec.graph.num_tasks)) + (0,) * spec.num_ps
    out = cross_node_mb(spec.graph, spec.architecture, spec.num_ps, nodes)
    return max(out.values(), default=0.0) * 8e6 / (link_gbps * 1e9)


@lru_cache(maxsize=1)
def _philly_columns() -> tuple[np.ndarray, tuple[float | None, ...], tuple[float, ...], tuple[str, ...]]:
    """Submit times, durations, GPUs and tenants of the embedded Philly trace's jobs, parsed once per
    process (parsing its 82k rows costs about a CPU second; the arrays are read-only)."""
    trace = load_trace(embedded_trace("philly_82k"), "philly").jobs
    submit = np.array([j.spec.submit_time for j in trace])
    submit.flags.writeable = False
    return (submit, tuple(j.truth.duration for j in trace), tuple(j.spec.num_gpus for j in trace),
            tuple(j.spec.tenant for j in trace))


def generate(jobs: int = 620, seed: int = 0, gpus: str = "paper", week: int | None = None,
             compress: float = 1.0) -> list[TraceJob]:
    """The workload (see the module docstring); ``week`` picks the trace week (default: random);
    ``compress`` divides the arrival times (``compress=50`` puts the week into ~3.4 h: queues
    form with few jobs, as MLF-RL's training wants)."""
    if not (compress >= 1.0 and compress < 1e6):
        raise ValueError(f"compress must be in [1, 1e6), got {compress!r}")
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    if gpus not in ("paper", "trace"):
        raise ValueError(f"gpus must be 'paper' or 'trace', got {gpus!r}")
    rng = np.random.default_rng(seed)
    submit, durations, trace_gpus, tenants = _philly_columns()
    n_weeks = int(submit.max() // WEEK) + 1
    counts = np.bincount((submit // WEEK).astype(int), minlength=n_weeks)
    busy = np.flatnonzero(counts >= jobs)
    if busy.size == 0:
        raise ValueError(f"no week of the Philly trace has {jobs} jobs (the busiest has {counts.max()})")
    w = int(rng.choice(busy)) if week is None else week
    if w not in set(busy.tolist()):
        raise ValueError(f"week {w} has {counts[w] if 0 <= w < n_weeks else 0} jobs, fewer than {jobs}")
    idx = np.flatnonzero((submit // WEEK).astype(int) == w)
    pick = np.sort(rng.choice(idx, size=jobs, replace=False))
    curves = packaged_curves()
    out: list[TraceJob] = []
    for n, i in enumerate(pick):
        t_e = min(float(durations[i] or 60.0), MAX_TE_S)
        alg = ALGORITHMS[int(rng.integers(len(ALGORITHMS)))]
        g = int(rng.choice(GPU_CHOICES)) if gpus == "paper" else \
            next((c for c in GPU_CHOICES if c >= trace_gpus[i]), GPU_CHOICES[-1])
        family = CURVE_FAMILY[alg]
        ci = int(rng.integers(len(curves[family])))
        run = curves[family][ci]
        graph = _graph(alg, g, float(run.params), rng)
        ps = rng.random() < 0.5
        arch = "ps" if ps else "allreduce"
        t_r = float(rng.uniform(0.5, 24.0)) * 3600.0
        spec = JobSpec(
            id=f"mlfs-{n:05d}", submit_time=round(float(submit[i] - w * WEEK) / compress, 3), tenant=f"vc-{tenants[i]}",
            architecture=arch, model=alg,
            workers=TaskGroup(count=graph.num_tasks, demand=Resources(gpu=1, cpu=6, mem_gb=40)),
            ps=TaskGroup(count=1, demand=Resources(cpu=4, mem_gb=16)) if ps else None,
            graph=graph, iterations=1,  # replaced below
            deadline=round(max(1.1 * t_e, t_r), 1), urgency=float(rng.integers(1, 11)),
            accuracy=round(max(run.accuracy) * float(rng.uniform(0.9, 1.0)), 4),
            stop_option="optstop", stop_option_may_change=True,
        )
        iters = int(min(max(round(t_e / NOMINAL_ITER_S[alg]), 20), MAX_ITERATIONS))
        comm = consolidated_comm_s(spec)
        compute = max(t_e / iters - comm, 0.05 * t_e / iters)
        spec = spec.model_copy(update={"iterations": iters})
        out.append(TraceJob(spec, JobTruth(iterations=iters, compute_s=round(compute, 6),
                                           accuracy=tuple(float(a) for a in run.accuracy))))
    return out


def write(path: str | Path, jobs: int = 620, seed: int = 0, gpus: str = "paper", week: int | None = None,
          compress: float = 1.0) -> int:
    """Write the workload to ``path`` (cohabit trace format, cluster preset ``mlfs``)."""
    items = generate(jobs, seed, gpus, week, compress)
    dump(items, path, cluster="mlfs")
    return len(items)


def mlfs_workload(
    out: Path,
    jobs: int = 620,
    seed: int = 0,
    gpus: str = "paper",
    week: int | None = None,
    compress: float = 1.0,
) -> None:
    """Write MLFS's Philly-derived workload (CoNEXT'20 §4.1) as a cohabit trace file.

    Replay it with ``cohabit simulate --trace OUT --policy mlfs,mlfs-h,...`` (cluster ``mlfs``:
    20 nodes x 4 GPUs, the paper's 80-GPU testbed)."""
    import typer

    try:
        n = write(out, jobs, seed, gpus, week, compress)
    except (ValueError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"wrote {n} jobs to {out} (seed {seed}, gpus {gpus}, cluster mlfs)")

