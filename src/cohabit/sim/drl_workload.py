"""Bao et al.'s evaluation workload (ToN'22, §VII-B), generated as a cohabit trace.

Cluster (:func:`drl_cluster`): 6 servers of 8 CPU cores, 2 GPUs, 48 GB and a 50 Gbps NIC
(the testbed), or 30 of them (the rack-scale simulation of Fig. 14), every node labelled
``interference: drl`` so that the simulator applies :mod:`cohabit.sim.drl_physics`.

Jobs (:func:`generate`): time runs in 20-minute scheduling intervals. Each arrival picks a
model of the paper's Table I (ResNet-50, VGG-16, ResNeXt-110, Seq2Seq, CTC, WLM; the DL2
profile's names), the parameter-server or all-reduce architecture with probability 1/2 each,
and 1-3 workers and (PS jobs) 1-3 parameter servers (1-10 on the 30-server cluster). Arrivals:

* ``uniform``: 1-5 jobs per interval (uniform, mean 3), at uniform times within it;
* ``poisson``: a Poisson process of 2 jobs per interval;
* ``bursty``: our stand-in for the downscaled Google-trace arrivals (no Google trace is
  packaged): a two-state Markov-modulated Poisson process, calm (1.5 jobs/interval) and
  burst (7 jobs/interval), switching calm -> burst with probability 0.2 and back with 0.5 per
  interval (mean about 3 jobs per interval, in bursts).

``rate_scale`` multiplies every pattern's arrival rate (uniform: 1-5 becomes
``round(rate_scale)``-``round(5 rate_scale)``; Poisson and both bursty states: their rates).
:func:`offered_load` gives a workload's expected offered load per GPU and per core, and
:data:`LOAD_MATCHED_30` the scale at which the 30-server rack (1-10 tasks per job) is offered the
same load per GPU as the 6-server testbed (1-3 tasks) at the paper's rates (session drl12; the
paper does not state its rack's arrival rate).

Lengths are skewed, many short and a few long jobs, as the production-cluster distribution the
paper borrows from DL2: a job's length alone (consolidated, at its requested size) is
log-normal with median ``median_intervals`` and sigma 0.9, clipped to [0.25, 30] intervals. Its
work is that length times its solo speed (samples; ``sim.drl_physics.base_speed``), declared in
the spec's ``iterations`` (the total the owner asks to train, as the paper's epochs).

Task demands are per model (what an owner would request for it): a worker takes 1 GPU, CPU
cores and memory; a parameter server takes CPU cores and memory, no GPU. An all-reduce job has
no parameter servers (``ps: null``) and its workers take a little more CPU (they also
aggregate).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..spec.cluster import ClusterSpec
from ..spec.job import JobSpec, TaskGroup
from ..spec.resources import Resources
from .drl_physics import LABEL, VALUE, base_speed
from .traces import native
from .truth import JobTruth, TraceJob

INTERVAL_S = 1200.0
SERVER = Resources(cpu=8, gpu=2, mem_gb=48, net_gbps=50)
#: Table I of the paper, in DL2's names
MODELS: tuple[str, ...] = ("resnet-50", "vgg-16", "resnext-110", "seq2seq", "cnn-text-classification", "wlm")
#: the other two DL2 models: jobs of a workload the shipped model never trained on
UNSEEN_MODELS: tuple[str, ...] = ("dssm", "inception-bn")
#: model -> (worker cpu, worker mem GB, ps cpu, ps mem GB) requested
DEMANDS: dict[str, tuple[float, float, float, float]] = {
    "resnet-50": (2, 12, 1, 6),
    "vgg-16": (2, 12, 2, 10),
    "resnext-110": (2, 8, 1, 4),
    "seq2seq": (1, 10, 1, 6),
    "cnn-text-classification": (3, 6, 1, 4),
    "wlm": (1, 8, 1, 4),
    "dssm": (1, 6, 1, 4),
    "inception-bn": (2, 10, 1, 6),
}
ARRIVALS: tuple[str, ...] = ("uniform", "poisson", "bursty")
PRESET_6, PRESET_30 = "drl", "drl-30"


def drl_cluster(n_servers: int = 6) -> ClusterSpec:
    """``n_servers`` testbed servers (8 cores, 2 GPUs, 48 GB, 50 Gbps), labelled for interference."""
    name = PRESET_6 if n_servers == 6 else PRESET_30 if n_servers == 30 else f"drl-{n_servers}"
    return ClusterSpec.homogeneous(name, n_servers, SERVER, **{LABEL: VALUE})


#: two-state bursty process: (calm rate, burst rate, P(calm -> burst), P(burst -> calm)) per interval
BURSTY = (1.5, 7.0, 0.2, 0.5)


def uniform_range(rate_scale: float = 1.0) -> tuple[int, int]:
    """Least and most jobs per interval of the ``uniform`` pattern (1-5 at scale 1)."""
    lo = max(1, round(rate_scale))
    return lo, max(lo, round(5 * rate_scale))


def mean_arrivals(pattern: str, rate_scale: float = 1.0) -> float:
    """Expected jobs per interval of ``pattern`` (the bursty chain at its stationary mix)."""
    if pattern == "uniform":
        lo, hi = uniform_range(rate_scale)
        return (lo + hi) / 2.0
    if pattern == "poisson":
        return 2.0 * rate_scale
    if pattern == "bursty":
        calm, burst, up, down = BURSTY
        share = up / (up + down)
        return rate_scale * ((1.0 - share) * calm + share * burst)
    raise ValueError(f"arrival pattern must be one of {', '.join(ARRIVALS)}, got {pattern!r}")


def arrival_counts(pattern: str, n_intervals: int, rng: np.random.Generator,
                   rate_scale: float = 1.0) -> list[int]:
    """Jobs arriving in each of ``n_intervals`` intervals under ``pattern`` (see the module doc)."""
    if not rate_scale > 0:
        raise ValueError(f"rate_scale must be > 0, got {rate_scale!r}")
    if pattern == "uniform":
        lo, hi = uniform_range(rate_scale)
        return [int(c) for c in rng.integers(lo, hi + 1, n_intervals)]
    if pattern == "poisson":
        return [int(c) for c in rng.poisson(2.0 * rate_scale, n_intervals)]
    if pattern == "bursty":
        calm, hot, up, down = BURSTY
        out, burst = [], False
        for _ in range(n_intervals):
            burst = rng.random() >= down if burst else rng.random() < up
            out.append(int(rng.poisson(rate_scale * (hot if burst else calm))))
        return out
    raise ValueError(f"arrival pattern must be one of {', '.join(ARRIVALS)}, got {pattern!r}")


#: job length alone (intervals): log-normal sigma and clipping bounds (:func:`generate`)
LENGTH_SIGMA, LENGTH_CLIP = 0.9, (0.25, 30.0)


def mean_length(median_intervals: float = 0.8) -> float:
    """Expected job length alone in intervals: the clipped log-normal of :func:`generate`,
    ``E[clip(X, a, b)] = a P(X < a) + b P(X > b) + e^(mu + s^2/2) [Phi(z_b - s) - Phi(z_a - s)]``."""
    mu, sig = math.log(median_intervals), LENGTH_SIGMA
    a, b = LENGTH_CLIP

    def phi(x: float) -> float:
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    za, zb = (math.log(a) - mu) / sig, (math.log(b) - mu) / sig
    return a * phi(za) + b * (1.0 - phi(zb)) + math.exp(mu + sig * sig / 2) * (phi(zb - sig) - phi(za - sig))


def offered_load(arrival: str, n_servers: int = 6, *, rate_scale: float = 1.0, models: tuple[str, ...] = MODELS,
                 median_intervals: float = 0.8, max_tasks: int | None = None) -> dict[str, float]:
    """Expected offered load of :func:`generate`'s workload, per GPU and per CPU core: jobs per
    interval x the GPUs (cores) a job holds x its mean length alone in intervals, over the
    cluster's GPUs (cores). 1 would keep every GPU busy if jobs ran at solo speed; interference,
    spreading and fragmentation make the real load higher."""
    top = max_tasks if max_tasks is not None else (10 if n_servers >= 30 else 3)
    tasks = (1 + top) / 2.0  # mean workers, and mean PS of a PS job
    w_cpu = float(np.mean([DEMANDS[m][0] for m in models])) + 0.5  # all-reduce workers take one more core
    p_cpu = float(np.mean([DEMANDS[m][2] for m in models]))
    rate, length = mean_arrivals(arrival, rate_scale), mean_length(median_intervals)
    gpus, cores = tasks, tasks * w_cpu + 0.5 * tasks * p_cpu
    return {"jobs_per_interval": rate, "gpus_per_job": gpus, "cores_per_job": cores, "length_intervals": length,
            "gpu_load": rate * gpus * length / (n_servers * SERVER["gpu"]),
            "cpu_load": rate * cores * length / (n_servers * SERVER["cpu"])}


def matched_rate_scale(n_servers: int = 30, reference: int = 6) -> float:
    """The ``rate_scale`` at which ``n_servers`` servers get the offered GPU load per GPU of
    ``reference`` servers at the paper's rates (the same for every pattern: it scales each rate)."""
    return offered_load("poisson", reference)["gpu_load"] / offered_load("poisson", n_servers)["gpu_load"]


#: 30 servers offered the 6-server testbed's load per GPU: (2 GPUs per job / 12) / (5.5 / 60) = 20/11
LOAD_MATCHED_30 = matched_rate_scale(30)




def drl_job(id: str, model: str, allreduce: bool, n_workers: int, n_ps: int, length_s: float,
            submit: float) -> TraceJob:
    """One job: its public spec and its truth (work in samples at its solo speed)."""
    w_cpu, w_mem, p_cpu, p_mem = DEMANDS[model]
    speed = base_speed(model, allreduce, n_workers, n_ps)
    work = max(1, int(round(length_s * speed)))
    workers = TaskGroup(count=n_workers, demand=Resources(gpu=1, cpu=w_cpu + (1 if allreduce else 0), mem_gb=w_mem))
    ps = None if allreduce else TaskGroup(count=n_ps, demand=Resources(cpu=p_cpu, mem_gb=p_mem))
    spec = JobSpec(id=id, submit_time=submit, architecture="allreduce" if allreduce else "ps", workers=workers,
                   ps=ps, iterations=work, model=model)
    return TraceJob(spec, JobTruth(iterations=work, ref_workers=n_workers, app=model))


def generate(n_intervals: int = 30, *, arrival: str = "uniform", seed: int = 0, n_servers: int = 6,
             models: tuple[str, ...] = MODELS, median_intervals: float = 0.8,
             max_tasks: int | None = None, rate_scale: float = 1.0) -> list[TraceJob]:
    """The jobs of ``n_intervals`` scheduling intervals (see the module docstring)."""
    if n_intervals < 1:
        raise ValueError(f"n_intervals must be >= 1, got {n_intervals!r}")
    unknown = [m for m in models if m not in DEMANDS]
    if unknown or not models:
        raise ValueError(f"models must be among {', '.join(DEMANDS)}, got {unknown or models!r}")
    if not median_intervals > 0:
        raise ValueError(f"median_intervals must be > 0, got {median_intervals!r}")
    top = max_tasks if max_tasks is not None else (10 if n_servers >= 30 else 3)
    rng = np.random.default_rng(seed)
    jobs: list[TraceJob] = []
    for k, count in enumerate(arrival_counts(arrival, n_intervals, rng, rate_scale)):
        for t in sorted(rng.uniform(0.0, INTERVAL_S, count)):
            model = models[int(rng.integers(len(models)))]
            allreduce = bool(rng.random() < 0.5)
            n_workers = int(rng.integers(1, top + 1))
            n_ps = 0 if allreduce else int(rng.integers(1, top + 1))
            length = float(np.clip(rng.lognormal(math.log(median_intervals), LENGTH_SIGMA), *LENGTH_CLIP)) * INTERVAL_S
            jobs.append(drl_job(f"j{len(jobs)}", model, allreduce, n_workers, n_ps, length,
                                round(k * INTERVAL_S + float(t), 3)))
    return jobs


def write(jobs: list[TraceJob], path: str | Path, *, n_servers: int = 6) -> str:
    """Write ``jobs`` as a cohabit trace naming the matching cluster preset; returns the text."""
    return native.dump(jobs, path, cluster=PRESET_6 if n_servers == 6 else PRESET_30)


def main(argv: list[str] | None = None) -> None:
    """``python -m cohabit.sim.drl_workload OUT.yaml [--arrival A] [--seed S] [--intervals N] [--servers M]``."""
    import argparse

    ap = argparse.ArgumentParser(description="Write Bao et al.'s evaluation workload as a cohabit trace.")
    ap.add_argument("out")
    ap.add_argument("--arrival", choices=ARRIVALS, default="uniform")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--intervals", type=int, default=30)
    ap.add_argument("--servers", type=int, choices=(6, 30), default=6)
    ap.add_argument("--rate-scale", type=float, default=1.0, help="multiply every arrival rate")
    ap.add_argument("--load-matched", action="store_true",
                    help="with --servers 30: the rate scale that offers the 6-server load per GPU")
    a = ap.parse_args(argv)
    scale = matched_rate_scale(a.servers) if a.load_matched else a.rate_scale
    if not scale > 0:
        ap.error(f"--rate-scale must be > 0, got {scale}")
    jobs = generate(a.intervals, arrival=a.arrival, seed=a.seed, n_servers=a.servers, rate_scale=scale)
    write(jobs, a.out, n_servers=a.servers)
    print(f"{a.out}: {len(jobs)} jobs over {a.intervals} intervals ({a.arrival}), cluster "
          f"{PRESET_6 if a.servers == 6 else PRESET_30}")


if __name__ == "__main__":
    main()
