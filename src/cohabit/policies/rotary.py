"""Rotary-DLT: adaptive resource arbitration between fairness and efficiency (Liu dissertation §3.3.1).

Algorithm 5 ranks the active jobs by their training progress ϕ: while some job's ϕ is below
the threshold ``T`` the lowest ϕ goes first (fairness: no job falls far behind); once every
job has reached ``T`` the highest ϕ goes first (efficiency: more jobs attain sooner).
``T = 1`` is pure fairness, ``T = 0`` pure efficiency. Each GPU then goes to the first job in
that order whose estimated memory fits it (TME, :mod:`cohabit.models.tme`), one job per GPU,
and jobs hold a GPU for at least an epoch (:class:`~cohabit.policies.arbiter.EpochArbiter`:
preemption with checkpoint at epoch ends).

The threshold test reads the progress ϕ each job has reached. Efficiency orders by ϕ̂, the
progress a job will have after its next epoch if granted a GPU (the sketch of Alg. 3
"estimate the processing progress ϕ̂ for next epoch"), so that a job that has not run yet
is not stuck at ϕ = 0 behind every running one; fairness orders by the progress reached
("the jobs that have the lowest ϕ" first, so none falls behind), ties by ϕ̂.

Algorithm 6, progress per criterion type, with ``e*`` the epochs done (``e* + 1`` for ϕ̂):

* runtime ``run <budget>``: ``ϕ = e* / e`` (seconds run / seconds, iterations / iterations);
* accuracy ``<metric> >= a within <budget>``: ``ê`` = epochs TEE estimates to reach ``a``,
  ``e_max`` = the budget in epochs; ``ϕ = e* / min(ê, e_max)``;
* convergence ``converge delta d within <budget>``: ``ê`` = first epoch whose estimated gain
  is below ``d``; ``ϕ = e* / min(ê, e_max)``.

The printed Alg. 6 compares ``ê`` with ``e*`` and divides by ``e_max`` when ``ê > e*``, which
would make the estimate irrelevant to every job still training; the dissertation's own
discussion of Fig. 3.10 (an erroneous estimate of 125 epochs instead of 2 "so its progress ϕ
is much lower") needs ϕ to fall as ``ê`` grows, so ϕ divides by the estimate, capped by the
budget (a job that cannot attain within its budget progresses toward the budget's end).
A time budget is turned into epochs with TTR's epoch time (:mod:`cohabit.models.ttr`).
ϕ is clipped to [0, 1].

``estimator="random"`` replaces TEE's ``ê`` by a number drawn uniformly from 1..100 per job
(seeded): the dissertation's sensitivity experiment on the impact of epoch estimation.

Estimators learn from a job repository (:mod:`cohabit.repository`): the packaged learning
curves by default, or the SQLite file ``repo=PATH``; every job that ends is added to the
in-memory history (and written to the file when ``record=true``).
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Sequence

from ..engine.job import JobView
from ..engine.view import ClusterView
from ..models.similar import JobTraits
from ..models.tee import TEE, AccuracyCurve
from ..models.tme import TME
from ..models.ttr import TTR
from ..spec.criteria import Convergence, MetricTarget, RunFor, lower_is_better
from ..spec.job import JobSpec
from .arbiter import EpochArbiter, epochs_done
from .params import build

__all__ = ["RotaryDLT", "job_traits", "make"]

ESTIMATORS = ("tee", "random")


def job_traits(spec: JobSpec) -> JobTraits:
    """A job's model, dataset and hyper-parameters as its spec declares them (``workload`` keys
    ``dataset``, ``optimizer``, ``lr`` / ``learning_rate``, ``num_parameters``, ``batch_size``); a
    built-in torch workload's parameter count comes from its options when not declared."""
    wl = spec.workload or {}
    lr = wl.get("lr", wl.get("learning_rate"))
    n_par = wl.get("num_parameters")
    if n_par is None:
        n_par = _builtin_parameters(wl)
    bs = spec.batch_size if spec.batch_size is not None else wl.get("batch_size")
    return JobTraits(
        model=spec.model, dataset=str(wl.get("dataset") or wl.get("name") or "unknown"),
        batch_size=int(bs) if isinstance(bs, int | float) else None,
        optimizer=str(wl["optimizer"]) if wl.get("optimizer") is not None else None,
        learning_rate=float(lr) if isinstance(lr, int | float) else None,
        num_parameters=int(n_par) if isinstance(n_par, int | float) else None,
    )


def _builtin_parameters(workload: dict) -> int | None:
    """The parameter count of a built-in workload's model that can say it (the torch workloads'
    ``parameter_count``), for TME's similarity; None otherwise or on a bad parameter."""
    from ..runtime.workloads import BUILTINS, resolve

    target = BUILTINS.get(str(workload.get("name")), "")
    if not target.startswith("cohabit.runtime.workloads.torch_models:"):  # (importing it loads no torch)
        return None
    count = getattr(resolve(target), "parameter_count", None)
    if count is None:
        return None
    try:
        return int(count({k: v for k, v in workload.items() if k not in ("name", "entry", "seed")}))
    except (TypeError, ValueError, KeyError):
        return None


class RotaryDLT(EpochArbiter):
    """Rotary-DLT (Alg. 5 and 6); see the module doc for the parameters."""

    def __init__(self, threshold: float = 0.5, k: int = 5, estimator: str = "tee", repo: str = "",
                 record: bool = False, seed: int = 0) -> None:
        super().__init__()
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1] (T of Alg. 5), got {threshold!r}")
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
        if record and not repo:
            raise ValueError("record=true needs repo=PATH (the repository file finished jobs are written to)")
        self.threshold, self.estimator, self.seed = float(threshold), estimator, int(seed)
        self.name = "rotary"
        self._repo_path, self._record = repo, record
        history = self._load(repo, create=record)
        self.tee = TEE(history, k=k)
        self.tme = TME(history)
        self.ttr = TTR()
        #: CPU seconds spent in each estimator (Table 3.3's overheads)
        self.overhead = {"ttr": 0.0, "tee": 0.0, "tme": 0.0}
        self._curves: dict[str, tuple[int, AccuracyCurve | None]] = {}
        self._e_hat: dict[str, tuple[int, float]] = {}  # job -> (evaluations seen, ê)
        self._where: dict[str, tuple[int, ...]] = {}
        self._mem: dict[str, float | None] = {}
        self.fair_decisions = 0
        self.efficient_decisions = 0

    @staticmethod
    def _load(repo: str, *, create: bool = False) -> list:
        """The history the estimators learn from: the packaged curves and memory measurements, or the
        repository ``repo`` (a file that must exist unless ``create``, or a database URL)."""
        if not repo:
            from ..repository.seed import packaged_memory_records, packaged_records

            return [*packaged_records(), *packaged_memory_records()]
        from pathlib import Path

        from sqlalchemy.exc import SQLAlchemyError

        from ..repository.store import JobRepository

        if "://" not in repo and not create and not Path(repo).expanduser().is_file():
            raise ValueError(f"repo: no repository file at {repo!r} (write one with `python -m "
                             f"cohabit.sim.rotary_workload TRACE --repo {repo}`, or add record=true to start one)")
        try:
            with JobRepository(repo) as r:
                return r.records()
        except (SQLAlchemyError, OSError) as exc:
            raise ValueError(f"repo: cannot read the repository {repo!r}: {str(exc).splitlines()[0]}") from None

    # ------------------------------------------------------------------ TTR
    def _device(self, view: ClusterView, node: int) -> str:
        n = view.cluster.nodes[node]
        return n.labels.get("gpu_model", n.name)

    def on_progress(self, job: JobView, view: ClusterView) -> None:
        t0 = time.process_time()
        if job.placement:
            dev = self._device(view, job.placement[0])
            if self._where.get(job.id) != job.placement:
                self._where[job.id] = job.placement
                self.ttr.launched(job.id, dev)
            if job.iter_time:
                self.ttr.record(job.id, dev, job.iter_time)
        self.overhead["ttr"] += time.process_time() - t0

    def _epoch_time(self, view: ClusterView, job: JobView) -> float | None:
        spec = job.spec
        if not (spec.iterations and spec.epochs):
            return None
        ipe = spec.iterations / spec.epochs
        for dev in self.ttr.devices(job.id):
            return self.ttr.epoch_time(job.id, dev, ipe)
        return None

    # ------------------------------------------------------------------ Alg. 6
    def _curve(self, job: JobView) -> AccuracyCurve | None:
        tr = job.criterion
        n = tr.evaluations if tr is not None else 0
        hit = self._curves.get(job.id)
        if hit is not None and hit[0] == n:
            return hit[1]
        t0 = time.process_time()
        own = tr.epoch_points() if tr is not None else []
        metric = tr.metric if tr is not None else "accuracy"
        tee = self.tee if metric is None or not lower_is_better(metric) else TEE([], k=1)
        curve = tee.fit(job_traits(job.spec), own)
        self.overhead["tee"] += time.process_time() - t0
        self._curves[job.id] = (n, curve)
        return curve

    def _estimated_epochs(self, job: JobView, crit: MetricTarget | Convergence) -> float:
        """ê of Alg. 6: epochs needed to attain ``crit`` (inf when the estimate never gets there)."""
        if self.estimator == "random":
            return float(1 + zlib.crc32(f"{self.seed}:{job.id}".encode()) % 100)
        n = job.criterion.evaluations if job.criterion is not None else 0
        hit = self._e_hat.get(job.id)
        if hit is not None and hit[0] == n:
            return hit[1]
        curve = self._curve(job)
        t0 = time.process_time()
        if curve is None:
            e_hat = math.inf
        elif isinstance(crit, Convergence):
            e_hat = curve.epochs_to_converge(crit.delta)
        else:
            e_hat = curve.epochs_to_reach(crit.value, higher_is_better=not lower_is_better(crit.metric))
        self.overhead["tee"] += time.process_time() - t0
        self._e_hat[job.id] = (n, e_hat)
        return e_hat

    def _max_epochs(self, view: ClusterView, job: JobView, e_star: float) -> float:
        """e_max of Alg. 6: the WITHIN budget in epochs (inf without one or without a way to convert)."""
        crit = job.spec.criteria
        b = getattr(crit, "within", None)
        if b is None:
            return math.inf
        if b.unit == "epochs":
            return float(b.amount)
        spec = job.spec
        if b.unit == "iterations":
            return b.amount / (spec.iterations / spec.epochs) if spec.iterations and spec.epochs else math.inf
        et = self._epoch_time(view, job)
        if not et:
            return math.inf
        return e_star + max(spec.submit_time + b.amount - view.now, 0.0) / et

    def progress(self, view: ClusterView, job: JobView, ahead: int = 0) -> float:
        """Training progress ϕ of ``job`` (Alg. 6, as read in the module doc), in [0, 1]; with
        ``ahead=1`` the progress it will have after its next epoch (Alg. 3's ϕ̂ "for next epoch")."""
        now = view.now
        e_star = epochs_done(job, now) + ahead
        crit = job.spec.criteria
        if crit is None:
            spec = job.spec
            if spec.epochs:
                return min(e_star / spec.epochs, 1.0)
            return min(job.iterations_done(now) / spec.iterations, 1.0) if spec.iterations else 0.0
        if isinstance(crit, RunFor):
            b = crit.budget
            if b.unit == "seconds":
                used = job.executed_time(now) + ahead * (self._epoch_time(view, job) or 0.0)
            elif b.unit == "epochs":
                used = e_star
            else:
                spec = job.spec
                ipe = spec.iterations / spec.epochs if spec.iterations and spec.epochs else 0.0
                used = job.iterations_done(now) + ahead * ipe
            return min(max(used / b.amount, 0.0), 1.0)
        if e_star <= 0:
            return 0.0
        e_hat = self._estimated_epochs(job, crit)
        denom = min(e_hat, self._max_epochs(view, job, e_star))
        if not math.isfinite(denom) or denom <= 0:
            return 0.0
        return min(e_star / denom, 1.0)

    # ------------------------------------------------------------------ Alg. 5
    def rank(self, view: ClusterView, jobs: Sequence[JobView]) -> list[JobView]:
        """Alg. 5: MEETPROGRESSTHRESHOLD on the progress reached (every job at ``T`` or more?); then
        efficiency: highest progress after the next epoch first (Alg. 3's ϕ̂), or fairness: lowest
        progress reached first (ties: lowest ϕ̂)."""
        reached = {j.id: self.progress(view, j) for j in jobs}
        nxt = {j.id: self.progress(view, j, ahead=1) for j in jobs}
        if all(p >= self.threshold for p in reached.values()):  # MEETPROGRESSTHRESHOLD: efficiency
            self.efficient_decisions += 1
            return sorted(jobs, key=lambda j: (-nxt[j.id], j.seq))
        self.fair_decisions += 1
        return sorted(jobs, key=lambda j: (reached[j.id], nxt[j.id], j.seq))

    def admissible(self, view: ClusterView, job: JobView, node: int) -> bool:
        """TME's memory check: the padded estimate fits one GPU's memory of ``node`` (when known)."""
        cap = view.cluster.nodes[node].capacity
        gpus, mem_gb = cap["gpu"], cap["gpu_mem_gb"]
        if not (gpus > 0 and mem_gb > 0):
            return True
        if job.id not in self._mem:
            t0 = time.process_time()
            self._mem[job.id] = self.tme.estimate(job_traits(job.spec))
            self.overhead["tme"] += time.process_time() - t0
        m = self._mem[job.id]
        return m is None or m <= mem_gb / gpus * 1024.0

    # ------------------------------------------------------------------ repository
    def on_finish(self, job: JobView, view: ClusterView) -> None:
        super().on_finish(job, view)
        self._curves.pop(job.id, None)
        self._e_hat.pop(job.id, None)
        self._where.pop(job.id, None)
        tr = job.criterion
        if tr is None or not tr.evaluations:
            return
        acc = tuple(v for _, v in tr.epoch_points("accuracy"))
        if not acc:
            return
        from ..repository.store import JobRecord, Timing

        t = job_traits(job.spec)
        ipe = job.spec.iterations / job.spec.epochs if job.spec.iterations and job.spec.epochs else None
        timings = tuple(Timing(d, s, s * ipe if ipe else None) for d in self.ttr.devices(job.id)
                        if (s := self.ttr.step_time(job.id, d)) is not None)
        rec = JobRecord(model=t.model, dataset=t.dataset, accuracy=acc, num_parameters=t.num_parameters,
                        batch_size=t.batch_size, optimizer=t.optimizer, learning_rate=t.learning_rate,
                        timings=timings, name=job.id, source="run")
        self.tee.add(rec)
        if self._record:
            from ..repository.store import JobRepository

            with JobRepository(self._repo_path) as r:
                r.add(rec)


def make(oracle: bool = False, **params: object) -> RotaryDLT:
    return build(RotaryDLT, params, policy="rotary")
