"""Harmony's evaluation workload (Lee et al., §V-B, Table I, Fig. 9), generated.

80 jobs = 4 applications x 2 datasets x 10 hyper-parameter settings, on 100 machines of
8 vCPU / 32 GB / 1.1 Gbps (m4.2xlarge). The paper gives the datasets' input and model sizes
(Table I) and shows, at DoP 16, the spread of iteration times and computation/communication
ratios (Fig. 9) without listing the numbers; this generator is our reading of it:

* each (application, dataset) has a base iteration time at DoP 16 and a base comp/comm ratio
  (:data:`BASES`): NMF and Lasso lean to computation, LDA to communication, MLR in between;
  the larger dataset of each application has the longer iterations;
* the 10 hyper-parameter settings scale computation by ``2**u`` with ``u`` evenly spread over
  [-1, 1] (mini-batch size, rank, number of topics) and communication by ``2**v`` with ``v``
  over [-0.5, 0.5] (model size follows rank / topics), shuffled per dataset, with a 10%
  log-normal jitter on both: iteration times at DoP 16 span about 3-130 s and ratios about
  0.1-10, as in Fig. 9's log-scaled axes;
* iterations to convergence: log-uniform in [100, 400] (the paper runs to a loss threshold);
  ``iters_per_epoch`` in {10, 20, 40};
* PULL and PUSH split communication 50/50; deserialising reloaded blocks costs 15% of COMP.

Specs are what a user submits: an elastic PS job (``n_min=1``, ``n_max`` = the machines), one
worker per machine taking the whole machine and one logical server co-located (zero demand),
and ``workload`` carrying the application, dataset, input and model sizes (sampled, public)
and ``profile``: the subtask times measured at DoP 16 in an earlier run with a 5% measurement
error (what Fig. 9 shows; the baselines size their DoP from it, Harmony profiles online).
Truths carry the exact times (:class:`~cohabit.sim.truth.PSTruth`) and the iterations.
"""

from __future__ import annotations

import math

import numpy as np

from ..spec.cluster import ClusterSpec
from ..spec.job import JobSpec, TaskGroup
from ..spec.resources import Resources
from .truth import JobTruth, PSTruth, TraceJob

MACHINE = Resources(cpu=8, mem_gb=32, net_gbps=1.1)
REF_DOP = 16

#: (application, dataset) -> (input GB, model GB, iteration s at DoP 16, comp/comm ratio at DoP 16)
BASES: dict[tuple[str, str], tuple[float, float, float, float]] = {
    ("nmf", "netflix64x"): (45.6, 1.0, 12.0, 2.5),
    ("nmf", "netflix128x"): (91.2, 5.0, 30.0, 1.6),
    ("lda", "pubmed"): (4.3, 2.1, 20.0, 0.5),
    ("lda", "nytimes"): (0.6, 1.1, 6.0, 0.35),
    ("mlr", "synthetic-78g"): (78.4, 12.0, 25.0, 0.8),
    ("mlr", "synthetic-155g"): (155.0, 24.0, 50.0, 1.0),
    ("lasso", "synthetic-78g"): (78.4, 12.0, 15.0, 3.0),
    ("lasso", "synthetic-155g"): (155.0, 24.0, 30.0, 4.0),
}


def harmony_cluster(n_machines: int = 100) -> ClusterSpec:
    """``n_machines`` m4.2xlarge-like machines (8 vCPU, 32 GB, 1.1 Gbps)."""
    return ClusterSpec.homogeneous("harmony", n_machines, MACHINE)


def ps_job(id: str, truth: PSTruth, iterations: int, *, n_machines: int, submit: float = 0.0,
           app: str = "ps", dataset: str = "", profile_noise: tuple[float, float] = (1.0, 1.0),
           declare_iterations: bool = False) -> TraceJob:
    """One Harmony PS job: its public spec (with a DoP-16 profile) and its hidden truth.
    ``declare_iterations``: the spec also states the iterations the job will run (the paper's jobs
    run to a loss threshold and declare nothing; this is for the ``srpt`` order option)."""
    spec = JobSpec(
        id=id, submit_time=submit, architecture="ps", model=app,
        iterations=iterations if declare_iterations else None,
        workers=TaskGroup(count=min(REF_DOP, n_machines), demand=MACHINE),
        ps=TaskGroup(count=1, demand=Resources()),
        n_min=1, n_max=n_machines,
        workload={
            "app": app, "dataset": dataset, "input_gb": truth.input_gb, "model_gb": truth.model_gb,
            "profile": {"dop": REF_DOP, "compute_s": truth.t_cpu1 / REF_DOP * profile_noise[0],
                        "comm_s": truth.t_net * profile_noise[1]},
        },
    )
    return TraceJob(spec, JobTruth(iterations=iterations, app=f"harmony:{app}", ps=truth))


def generate(n_machines: int = 100, seed: int = 0, mean_gap_s: float = 0.0, hyper: int = 10,
             subset: str = "all", declare_iterations: bool = False) -> list[TraceJob]:
    """The 80-job workload (``hyper`` settings per dataset); arrivals all at 0 or Poisson with
    mean gap ``mean_gap_s`` in a random order. ``subset``: ``"all"``, ``"comp"`` (the 60 jobs
    with the highest comp/comm ratio) or ``"comm"`` (the 60 lowest), as in §V-D.
    ``declare_iterations``: see :func:`ps_job` (the jobs are otherwise identical)."""
    rng = np.random.default_rng(seed)
    jobs: list[tuple[str, PSTruth, int, str, str, tuple[float, float], float]] = []
    for (app, ds), (inp, mod, t16, r16) in BASES.items():
        us = rng.permutation(np.linspace(-1.0, 1.0, hyper)) if hyper > 1 else np.zeros(1)
        vs = rng.permutation(np.linspace(-0.5, 0.5, hyper)) if hyper > 1 else np.zeros(1)
        for h in range(hyper):
            cpu16 = t16 * r16 / (1 + r16) * 2.0 ** us[h] * math.exp(rng.normal(0, 0.1))
            net = t16 / (1 + r16) * 2.0 ** vs[h] * math.exp(rng.normal(0, 0.1))
            truth = PSTruth(t_cpu1=cpu16 * REF_DOP, t_pull=net / 2, t_push=net / 2, input_gb=inp,
                            model_gb=mod, iters_per_epoch=int(rng.choice([10, 20, 40])))
            iters = int(round(math.exp(rng.uniform(math.log(100), math.log(400)))))
            noise = (math.exp(rng.normal(0, 0.05)), math.exp(rng.normal(0, 0.05)))
            jobs.append((f"{app}-{ds}-h{h}", truth, iters, app, ds, noise, cpu16 / net))
    if subset != "all":
        if subset not in ("comp", "comm"):
            raise ValueError(f"subset must be 'all', 'comp' or 'comm', got {subset!r}")
        jobs.sort(key=lambda x: -x[6] if subset == "comp" else x[6])
        jobs = jobs[: len(jobs) * 3 // 4]
    order = rng.permutation(len(jobs))
    t = 0.0
    out = []
    for i in order:
        jid, truth, iters, app, ds, noise, _ = jobs[i]
        if mean_gap_s > 0 and out:
            t += float(rng.exponential(mean_gap_s))
        out.append(ps_job(jid, truth, iters, n_machines=n_machines, submit=t, app=app, dataset=ds,
                          profile_noise=noise, declare_iterations=declare_iterations))
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m cohabit.sim.harmony_workload OUT.csv [--seed S] [--gap SECONDS]``: write the generated
    Fig. 9-like 80-job workload (:func:`generate`) as a trace."""
    import argparse

    from .traces.harmony import DEFAULT_N_MAX, write_csv

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gap", type=float, default=240.0, help="mean Poisson inter-arrival gap (s); 0: all at once")
    args = ap.parse_args(argv)
    write_csv(generate(n_machines=DEFAULT_N_MAX, seed=args.seed, mean_gap_s=args.gap), args.out)


if __name__ == "__main__":
    main()
