"""What-if: the live service's state replayed in the simulator under other policies.

:func:`live_state` (server side, ``GET /v1/whatif/state``) captures the jobs still in the system
with what the scheduler has observed of them: iterations done and the measured seconds per
iteration (for a job never measured: the mean of finished jobs of the same model, else of all
measured jobs). :func:`simulate_from` (client side, ``cohabit whatif``) turns each job into a trace
job that arrives now with its remaining iterations at its observed speed, runs every policy on
the same cluster in the simulator from that moment (for at most ``hours``), and returns the
metrics each would reach from now on: average JCT and queueing delay of these jobs, makespan and
utilisation. Jobs with no speed known at all are left out and counted. The simulated policies
start with the live scheduler's per-model speeds as their history (:func:`simulate_from`); what a
policy learned otherwise (e.g. Optimus's loss fits) is not carried over.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..spec.job import JobSpec
from ..spec.yamlio import dump_cluster, loads_cluster

if TYPE_CHECKING:
    from ..engine.loop import Scheduler


def observed(sched: Scheduler) -> dict[str, Any]:
    """Per job still in the system: iterations done and measured s/iteration (None: never measured)."""
    out = {}
    for group in (sched.running, sched.pending, sched.paused, sched.held):
        for jid, jv in group.items():
            out[jid] = {"iterations": jv.iterations_done(sched.now), "iter_time": jv.iter_time,
                        "model": jv.spec.model, "state": str(jv.state)}
    models = {j["model"] for j in out.values()}
    means = {m: sched.history.mean_iter_time(m) for m in models}
    return {"jobs": out, "model_iter_time": {m: v for m, v in means.items() if v}}


def live_state(cluster: Any, jobs: list[tuple[int, dict[str, Any]]], obs: dict[str, Any],
               policy: str) -> dict[str, Any]:
    """The state a what-if starts from: the cluster, the active jobs' specs in queue order, observations."""
    return {"cluster": dump_cluster(cluster), "policy": policy, "observed": obs,
            "jobs": [{"id": seq, "spec": spec} for seq, spec in jobs]}


def trace_jobs(state: dict[str, Any]) -> tuple[list[Any], list[int]]:
    """Trace jobs arriving now with their remaining work at their observed speed; ids left out."""
    from ..sim.truth import JobTruth, TraceJob

    obs = state["observed"]["jobs"]
    by_model = state["observed"].get("model_iter_time", {})
    measured = [o["iter_time"] for o in obs.values() if o.get("iter_time")]
    overall = sum(measured) / len(measured) if measured else None
    out, skipped = [], []
    for j in state["jobs"]:
        spec = JobSpec.model_validate(j["spec"])
        o = obs.get(f"j{j['id']}", {"iterations": 0.0, "iter_time": None})
        it = o.get("iter_time") or by_model.get(spec.model) or overall
        total = spec.iterations
        if not it or total is None:
            skipped.append(j["id"])
            continue
        left = max(1, math.ceil(total - float(o.get("iterations", 0.0))))
        spec = spec.model_copy(update={"id": f"j{j['id']}", "submit_time": 0.0, "iterations": left})
        out.append(TraceJob(spec, JobTruth(iterations=left, duration=left * it, ref_workers=spec.workers.count)))
    return out, skipped


def model_speeds(state: dict[str, Any]) -> dict[str, float]:
    """Seconds per iteration per model known to the live scheduler: its finished-job history,
    and the jobs it measured (mean per model)."""
    speeds: dict[str, list[float]] = {}
    for o in state["observed"]["jobs"].values():
        if o.get("iter_time"):
            speeds.setdefault(o["model"], []).append(float(o["iter_time"]))
    out = {m: sum(v) / len(v) for m, v in speeds.items()}
    for m, t in state["observed"].get("model_iter_time", {}).items():
        out.setdefault(m, float(t))
    return out


def simulate_from(state: dict[str, Any], policies: list[str], hours: float | None = None) -> list[dict[str, Any]]:
    """Each policy's metrics from now on, simulated from ``state`` (see the module docstring).

    The simulated scheduler's finished-job history is seeded with one entry per model at the speed
    the live scheduler knows (:func:`model_speeds`), so policies that estimate from history
    (SRTF, ...) start with what the live one knows instead of nothing."""
    from ..engine.history import FinishedJob
    from ..engine.loop import Scheduler
    from ..policies import make_policy
    from ..report.metrics import compute_metrics
    from ..sim.backend import SimBackend
    from ..sim.runner import config_for

    cluster = loads_cluster(state["cluster"], "<service cluster>")
    jobs, skipped = trace_jobs(state)
    horizon = hours * 3600.0 if hours else math.inf
    speeds = model_speeds(state)
    rows = []
    for name in policies:
        sched = Scheduler(cluster, make_policy(name), SimBackend(jobs, config_for(cluster, None)), horizon=horizon)
        for m, t in speeds.items():
            sched.history.add(FinishedJob(f"live-history-{m}", m, 0.0, t, 0.0, 1.0, t))
        result = sched.run([tj.spec for tj in jobs])
        m = compute_metrics(result.record, cluster.capacity)
        rows.append({"policy": name, "jobs": len(jobs), "skipped_no_speed": skipped, "avg_jct_s": m.avg_jct,
                     "avg_queueing_s": m.avg_queueing_delay, "makespan_s": m.makespan,
                     "allocated_share": dict(m.allocated),
                     "used_share": {k: v for k, v in m.used.items() if v is not None}, "unfinished": len(result.unfinished)})
    return rows
