"""Sim-to-real calibration (issue 4, item 7) and the cost of pause + resume on real jobs.

1. Real run under FIFO on LocalBackend (one logical node of one core, so jobs
   queue). From it, each job's *profile*: its measured running time alone
   (first start -> finish: process start-up, imports, every iteration).
2. Pause + resume overhead: a job run alone uninterrupted, then the same job
   paused and resumed twice (checkpoint at an iteration boundary, process
   exit, new process, restore); overhead = extra wall time. Done for a numpy
   and a torch job (torch pays its import again at every resume).
3. Real run under a preemptive policy (SRTF with a 1 s margin).
4. The same jobs in the simulator under both policies, each job's truth
   ``duration`` = its measured solo running time from (1), and the
   simulator's checkpoint + restore cost = the per-resume overhead from (2).
   Nothing from the real SRTF run feeds the simulation: its SRTF JCTs are a
   prediction.

Prints per-job and average JCTs side by side, the relative error of the
simulated average JCT (goal: within 15%), and the pause + resume overhead as a
fraction of job time (goal: under 5% for jobs of a few minutes with two
preemptions; measured here on shorter jobs, then extrapolated, and the
extrapolation is labelled as such). Writes JSON.

    python bench/sim_vs_real.py [--json bench/results/sim_vs_real.json] [--overhead-seconds 12] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cohabit.engine.backend import BackendEventKind as K
from cohabit.engine.ledger import Ledger
from cohabit.engine.record import EventKind
from cohabit.policies import FIFO, SRTF
from cohabit.runtime.local import LocalBackend
from cohabit.runtime.runner import local_cluster, run_local
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import Resources
from cohabit.spec.job import JobSpec, TaskGroup

console = Console(width=120)


def spec(id: str, workload: dict[str, Any], iterations: int, submit: float, model: str) -> JobSpec:
    return JobSpec(id=id, submit_time=submit, model=model, iterations=iterations, workload=workload,
                   workers=TaskGroup(count=1, demand=Resources(cpu=1, mem_gb=0.5)))


def workload() -> list[JobSpec]:
    """Six small real jobs, about 20 s of work on one core; arrivals staggered so SRTF has choices."""
    return [
        spec("mlr-a", {"name": "mlr"}, 12000, 0.0, "mlr"),
        spec("cnn-long", {"name": "torch-cnn"}, 3500, 0.5, "torch-cnn"),
        spec("mlr-b", {"name": "mlr"}, 8000, 3.0, "mlr"),
        spec("lasso", {"name": "lasso"}, 40000, 5.0, "lasso"),
        spec("mlp", {"name": "torch-mlp"}, 6000, 6.0, "torch-mlp"),
        spec("mlr-c", {"name": "mlr"}, 6000, 8.0, "mlr"),
    ]


def jcts(record: Any) -> dict[str, float]:
    sub = {e.job: e.time for e in record if e.kind == EventKind.SUBMITTED}
    return {e.job: e.time - sub[e.job] for e in record if e.kind == EventKind.FINISHED}


def solo_running_time(record: Any) -> dict[str, float]:
    """Seconds each job held its allocation (sum over running intervals)."""
    out: dict[str, float] = {}
    since: dict[str, float] = {}
    for e in record:
        if e.kind in (EventKind.STARTED, EventKind.RESUMED):
            since[e.job] = e.time
        elif e.kind in (EventKind.PAUSED, EventKind.FINISHED, EventKind.FAILED) and e.job in since:
            out[e.job] = out.get(e.job, 0.0) + e.time - since.pop(e.job)
    return out


# ------------------------------------------------------------------ overhead
def children_cpu_s() -> float:
    """CPU seconds (user + system) of all reaped child processes so far (LocalBackend reaps its tasks)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_alone(job: JobSpec, pauses: int, every: float, backend_cls: Any = LocalBackend) -> dict[str, Any]:
    """Run ``job`` alone; pause + resume it ``pauses`` times, ``every`` seconds of wall time apart."""
    cl = local_cluster(1, cores=1)
    led = Ledger(cl)
    vec = [led.vector(job.workers.demand)]
    cpu0 = children_cpu_s()
    with backend_cls(cl, report_interval=0.25) as be:
        t0 = time.perf_counter()
        be.launch(job, led.allocate(job.id, (0,), vec), be.now(), from_checkpoint=False)
        next_pause = time.perf_counter() + every
        done = 0
        halted_at: list[int] = []
        while True:
            _, events = be.advance(be.now() + 0.05)
            if any(e.kind is K.FINISHED for e in events):
                break
            if any(e.kind is K.FAILED for e in events):
                raise RuntimeError(f"{job.id} failed: {events}")
            if done < pauses and time.perf_counter() >= next_pause:
                be.halt(job.id, be.now(), checkpoint=True)
                halted_at.append(be.store.latest(job.id).iteration)
                led.release(job.id)
                be.launch(job, led.allocate(job.id, (0,), vec), be.now(), from_checkpoint=True)
                done += 1
                next_pause = time.perf_counter() + every
        wall = time.perf_counter() - t0
        timings = list(be.timings)
    halts = [t["seconds"] for t in timings if t["kind"] == "halt"]
    firsts = [t["since_launch"] for t in timings if t["kind"] == "first_progress"]
    restored = [t["restored_iteration"] for t in timings if t["kind"] == "start"][1:]
    return {"wall_s": wall, "cpu_s": children_cpu_s() - cpu0, "pauses": done, "halt_s": halts,
            "launch_to_first_progress_s": firsts, "halted_at": halted_at, "restored_at": restored}


def overhead(job: JobSpec, seconds: float, backend_cls: Any = LocalBackend) -> dict[str, Any]:
    """Pause + resume cost of ``job``, three ways (see the module docstring), on ``backend_cls``."""
    base = run_alone(job, 0, 1e9, backend_cls)
    paused = run_alone(job, 2, seconds / 3, backend_cls)
    # direct: time to checkpoint and stop + time from relaunch to the first report of the resumed run,
    # minus the same launch-to-first-report time of the fresh start (which an uninterrupted run pays once)
    fresh = base["launch_to_first_progress_s"][0]
    resumes = paused["launch_to_first_progress_s"][1:]
    direct = [h + r for h, r in zip(paused["halt_s"], resumes)]
    per = statistics.mean(direct) if direct else 0.0
    return {
        "job": job.id, "workload": job.workload, "iterations": job.iterations,
        "uninterrupted_wall_s": base["wall_s"], "with_2_pauses_wall_s": paused["wall_s"],
        "wall_overhead_s": paused["wall_s"] - base["wall_s"],
        "uninterrupted_cpu_s": base["cpu_s"], "with_2_pauses_cpu_s": paused["cpu_s"],
        "cpu_overhead_s": paused["cpu_s"] - base["cpu_s"],
        "halt_s": paused["halt_s"], "resume_launch_to_first_progress_s": resumes, "fresh_launch_to_first_progress_s": fresh,
        "per_pause_resume_s": per, "direct_overhead_fraction": 2 * per / base["wall_s"],
        # None when the tasks are not this process's children (RayBackend's actors)
        "cpu_overhead_fraction": (paused["cpu_s"] - base["cpu_s"]) / base["cpu_s"] if base["cpu_s"] > 0 else None,
        "work_lost_iterations": sum(a - b for a, b in zip(paused["halted_at"], paused["restored_at"])),
        "extrapolated_fraction_3min_job": 2 * per / 180.0,
    }


def sized(job_id: str, wl: dict[str, Any], model: str, seconds: float, per_iter: float) -> JobSpec:
    return spec(job_id, wl, max(int(seconds / per_iter), 100), 0.0, model)


def profile(outs: list[Any]) -> dict[str, float]:
    """Each job's solo duration from real runs' telemetry (median over the runs).

    start-up (launch to the first progress report of its first start, which
    covers the interpreter, imports, data, and the first iterations) plus
    iterations x the median measured seconds per iteration.
    """
    per: dict[str, list[float]] = {}
    for out in outs:
        rec = out.result.record
        for jid, jv in out.result.jobs.items():
            its = [e.data["iter_time"] for e in rec if e.kind == EventKind.PROGRESS and e.job == jid]
            first = next(t for t in out.timings if t["kind"] == "first_progress" and t["job"] == jid)
            per.setdefault(jid, []).append(first["since_launch"] + (jv.spec.iterations or 0) * statistics.median(its))
    return {jid: statistics.median(v) for jid, v in per.items()}


def timeline(out: Any) -> list[tuple[float, str, str]]:
    return [(round(e.time, 3), str(e.kind), e.job) for e in out.result.record
            if e.job and e.kind not in (EventKind.PROGRESS, EventKind.DECISION, EventKind.USED)]


def cpu_share(out: Any, cpu_s: float) -> float:
    """CPU seconds our tasks got / (makespan x cores): below 1 when other processes took the core."""
    return cpu_s / out.metrics.makespan


# ---------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=Path("bench/results/sim_vs_real.json"))
    ap.add_argument("--overhead-seconds", type=float, default=12.0,
                    help="approximate length of the jobs used to measure pause+resume overhead")
    ap.add_argument("--margin", type=float, default=1.0, help="SRTF preemption margin (seconds)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="real runs per policy, FIFO and SRTF alternating; JCTs are averaged over them (machine noise)")
    args = ap.parse_args()
    cl = local_cluster(1, cores=1)
    specs = workload()
    t_all = time.perf_counter()
    results: dict[str, Any] = {"policies": {}}

    fifo_outs: list[Any] = []
    srtf_outs: list[Any] = []
    fifo_cpu: list[float] = []
    srtf_cpu: list[float] = []
    for r in range(args.repeats):  # alternate, so that a change in the machine's load hits both policies
        for label, make, outs, cpus in (("FIFO", FIFO, fifo_outs, fifo_cpu),
                                        (f"SRTF (preemption margin {args.margin:g} s)",
                                         lambda: SRTF(preempt_margin=args.margin, min_run_time=0.0), srtf_outs, srtf_cpu)):
            console.rule(f"real run {r + 1}/{args.repeats}: {label}")
            c0 = children_cpu_s()
            out = run_local(specs, cl, make())
            cpus.append(children_cpu_s() - c0)
            assert not out.result.unfinished, out.result.unfinished
            outs.append(out)

    console.rule("pause + resume overhead (jobs alone)")
    iter_t = {j: statistics.median(e.data["iter_time"] for e in fifo_outs[0].result.record
                                   if e.kind == EventKind.PROGRESS and e.job == j) for j in ("mlr-a", "mlp")}
    ov = [
        overhead(sized("ov-mlr", {"name": "mlr"}, "mlr", args.overhead_seconds, iter_t["mlr-a"]),
                 args.overhead_seconds),
        overhead(sized("ov-torch", {"name": "torch-mlp"}, "torch-mlp", args.overhead_seconds, iter_t["mlp"]),
                 args.overhead_seconds),
    ]

    # the simulator's one resume-cost knob: the mean directly measured pause + resume cost
    restore = statistics.mean(o["per_pause_resume_s"] for o in ov)
    # progress reports as often as LocalBackend's (0.5 s), so the policy decides as often in both worlds
    cfg = SimConfig(checkpoint_s=0.0, restore_s=restore, report_interval_s=0.5)
    prof_fifo, prof_srtf = profile(fifo_outs), profile(srtf_outs)
    runs = {
        # prediction: everything the simulator knows comes from the FIFO runs and the overhead runs
        "fifo": (fifo_outs, prof_fifo, FIFO()),
        "srtf (predicted from FIFO profiles)": (srtf_outs, prof_fifo, SRTF(preempt_margin=args.margin, min_run_time=0.0)),
        # replay: job speeds from the SRTF runs themselves (isolates the scheduling model from machine noise)
        "srtf (profiles from its own runs)": (srtf_outs, prof_srtf, SRTF(preempt_margin=args.margin, min_run_time=0.0)),
    }
    table = Table(title=f"JCT (s): real (mean of {args.repeats} run(s)) vs simulated (1 logical node, 1 core)",
                  title_justify="left")
    for col in ("run", "job", "real", "sim", "error"):
        table.add_column(col, justify="right" if col in ("real", "sim", "error") else "left")
    for name, (reals, prof, pol) in runs.items():
        trace = [TraceJob(s, JobTruth(iterations=s.iterations or 1, duration=prof[s.id])) for s in specs]
        sim = simulate(trace, cl, pol, config=cfg)
        per_run = [jcts(r.result.record) for r in reals]
        rj = {jid: statistics.mean(run[jid] for run in per_run) for jid in per_run[0]}
        sj = jcts(sim.result.record)
        for jid in rj:
            table.add_row(name, jid, f"{rj[jid]:.2f}", f"{sj.get(jid, float('nan')):.2f}",
                          f"{(sj.get(jid, float('nan')) - rj[jid]) / rj[jid]:+.0%}")
        ra, sa = statistics.mean(rj.values()), statistics.mean(sj.values())
        run_avgs = [statistics.mean(run.values()) for run in per_run]
        table.add_row(f"[bold]{name}", "[bold]average", f"[bold]{ra:.2f}", f"[bold]{sa:.2f}",
                      f"[bold]{(sa - ra) / ra:+.1%}", end_section=True)
        results["policies"][name] = {
            "real_jct": rj, "sim_jct": sj, "real_avg_jct": ra, "sim_avg_jct": sa, "avg_jct_error": (sa - ra) / ra,
            "real_avg_jct_per_run": run_avgs,
            "real_makespan": statistics.mean(r.metrics.makespan for r in reals), "sim_makespan": sim.metrics.makespan,
            "real_preemptions": statistics.mean(r.metrics.preemptions for r in reals),
            "sim_preemptions": sim.metrics.preemptions,
            "profiles_s": prof, "real_timeline": timeline(reals[0]), "sim_timeline": timeline(sim),
        }
    console.print(table)
    for name, r in results["policies"].items():
        spread = ", ".join(f"{x:.2f}" for x in r["real_avg_jct_per_run"])
        console.print(f"{name}: real avg JCT per run [{spread}] s; preemptions real {r['real_preemptions']:g} / "
                      f"sim {r['sim_preemptions']}; makespan real {r['real_makespan']:.2f} s / "
                      f"sim {r['sim_makespan']:.2f} s")
    shares = {"fifo": statistics.mean(cpu_share(o, c) for o, c in zip(fifo_outs, fifo_cpu)),
              "srtf": statistics.mean(cpu_share(o, c) for o, c in zip(srtf_outs, srtf_cpu))}
    console.print(f"CPU our tasks got / makespan (1.0 = the core was ours): FIFO {shares['fifo']:.2f}, "
                  f"SRTF {shares['srtf']:.2f}   (the machine is shared; lower means other processes ran)")

    t2 = Table(title="pause + resume overhead: job alone on one core, paused and resumed twice",
               title_justify="left")
    for col in ("job", "iterations", "job time", "checkpoint+stop", "restart to 1st report", "per pause+resume",
                "2 pauses / job time", "extra CPU", "work lost", "3-min job, 2 pauses (extrapolated)"):
        t2.add_column(col, justify="right")
    for o in ov:
        t2.add_row(o["job"], str(o["iterations"]), f"{o['uninterrupted_wall_s']:.1f} s",
                   " / ".join(f"{h:.2f}" for h in o["halt_s"]) + " s",
                   " / ".join(f"{h:.2f}" for h in o["resume_launch_to_first_progress_s"]) + " s",
                   f"{o['per_pause_resume_s']:.2f} s", f"{o['direct_overhead_fraction']:.1%}",
                   f"{o['cpu_overhead_fraction']:+.1%}", f"{o['work_lost_iterations']} it",
                   f"{o['extrapolated_fraction_3min_job']:.1%}")
    console.print(t2)
    for o in ov:
        console.print(f"{o['job']}: wall uninterrupted {o['uninterrupted_wall_s']:.2f} s, with 2 pauses "
                      f"{o['with_2_pauses_wall_s']:.2f} s (difference {o['wall_overhead_s']:+.2f} s; on a shared "
                      f"machine this difference is mostly noise, the direct and CPU columns are not)")
    console.print(f"simulator resume cost used: restore_s = {restore:.2f} s")
    results.update(overhead=ov, sim_restore_s=restore, cpu_share=shares, wall_s=time.perf_counter() - t_all)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    console.print(f"wrote {args.json} ({results['wall_s']:.0f} s in all)")


if __name__ == "__main__":
    main()
