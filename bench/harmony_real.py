"""Harmony in real execution on this machine: co-location modes, the policies on real PS jobs, spill/reload.

    python bench/harmony_real.py            # everything (a few minutes)
    python bench/harmony_real.py --quick    # one round, fewer iterations
    python bench/harmony_real.py --only ps-spill   # one part (others kept from the JSON already there)

1. **Co-location** (real processes, :mod:`cohabit.runtime.harmony.synthetic`): 4 PS-like jobs with
   different comp/comm ratios (NMF-like, Lasso-like: computation-heavy; LDA-like: communication-heavy;
   MLR-like: balanced) on 2 logical nodes (one core each) with a 20 MB/s link per node.
   *Pipelined*: one Harmony group of the 4 jobs on both nodes (node queues + synchronizer);
   *Naive*: the same group without coordination; *Isolated*: each job alone on one dedicated node,
   two at a time (longest first). The jobs run at nice -5 where allowed (the machine is shared). Makespan, useful CPU / network utilisation (CPU = the jobs' COMP
   work measured alone / (nodes x makespan); network = bytes / (link rate x nodes x makespan)), and
   the Eq. 1-4 model's prediction of the group iteration time from the jobs' profiles measured alone
   (the isolated run) against the measured one.
2. **Policies on real PS jobs** (``examples/harmony_ps_jobs_large.yaml``: ps-mlr, ps-lasso, ps-nmf, ps-lda)
   under ``harmony``, ``harmony-naive`` and ``harmony-isolated`` on 2 logical nodes with a
   per-node bandwidth budget: makespan and average JCT.
3. **Spill/reload** (mlr, 40,000 x 200 input, 64 MB; node memory limit 50% of it): fixed alpha
   sweep vs adaptive alpha (size-based start, hill climbing on the measured iteration time):
   seconds per iteration, peak resident input, bytes reloaded, and whether the limit held.
4. **Spill/reload in a real PS job** (ps-mlr, the same 40,000 x 200 synthetic input, batch 2000; one
   worker and one server as LocalBackend processes on 2 logical nodes; the ``spill`` workload option,
   20 blocks): alpha 0 / 0.5 / 1 / auto / auto with a 32 MB memory budget (start at the size
   estimate, never below the share that fits). Mean iteration time over the worker's progress reports, the
   worker's resident input and RSS, MB reloaded, the alpha it ended at, the CPU seconds of the task
   processes, and the largest difference of the final model from the alpha-0 run (must be 0).

The machine is shared (other work runs on its 2 cores): wall times are noisy; CPU seconds of the
benchmark process are reported next to wall time.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cohabit.engine.backend import BackendEventKind
from cohabit.engine.ledger import Ledger
from cohabit.models.harmony_perf import group_time
from cohabit.policies import make_policy
from cohabit.runtime.harmony.spill import AlphaTuner, NodeMemory, attach, initial_alpha
from cohabit.runtime.harmony.synthetic import SyntheticJob, run_jobs
from cohabit.runtime.local import LocalBackend
from cohabit.runtime.ps import load_model
from cohabit.runtime.runner import local_cluster, run_local
from cohabit.runtime.workloads import WorkloadContext, build, parse_config
from cohabit.spec import Resources
from cohabit.spec.job import JobSpec, TaskGroup
from cohabit.spec.yamlio import load_jobs

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "harmony_real.json"
LINK_MBPS = 20.0
NICE = -5  # the jobs' priority where allowed (see cohabit.runtime.harmony.synthetic.run_jobs)
#: name -> (one-machine COMP units (1 unit = 10^5 loop steps), COMM bytes per iteration)
JOBS = {"nmf-like": (60.0, 1_000_000), "lasso-like": (50.0, 600_000), "lda-like": (16.0, 3_000_000),
        "mlr-like": (30.0, 2_000_000)}


def colocation(iterations: int, rounds: int) -> dict:
    group = [SyntheticJob(n, (0, 1), iterations, c1 / 2, b) for n, (c1, b) in JOBS.items()]
    alone = [SyntheticJob(n, (0,), iterations, c1, b) for n, (c1, b) in JOBS.items()]
    runs: dict[str, list[dict]] = {"pipelined": [], "naive": [], "isolated": []}
    for _ in range(rounds):
        for mode in ("pipelined", "naive"):
            runs[mode].append(run_jobs(group, mode, 2, link_mbps=LINK_MBPS, timeout=600, nice=NICE))
        # isolated: one dedicated node per job, longest jobs first, two at a time
        order = sorted(alone, key=lambda j: -(j.comp_units * 0.003 + j.comm_bytes / (LINK_MBPS * 1e6)))
        waves = [order[:2], order[2:]]
        t_total, workers = 0.0, []
        for wave in waves:
            jobs = [SyntheticJob(j.id, (k,), j.iterations, j.comp_units, j.comm_bytes) for k, j in enumerate(wave)]
            r = run_jobs(jobs, "naive", 2, link_mbps=LINK_MBPS, timeout=600, nice=NICE)
            t_total += r["makespan_s"]
            workers += r["workers"]
        runs["isolated"].append({"makespan_s": t_total, "workers": workers, "loadavg": r["loadavg"]})
    net_work = sum(b for _, b in JOBS.values()) * 2 * iterations / (LINK_MBPS * 1e6)  # link-seconds, 2 workers/job
    out: dict = {"iterations": iterations, "link_mbps": LINK_MBPS, "modes": {}}
    for mode, rs in runs.items():
        span = statistics.median(r["makespan_s"] for r in rs)
        net = net_work / 2 if mode == "isolated" else net_work  # an isolated job has one worker
        out["modes"][mode] = {"makespan_s": span, "makespan_runs": [r["makespan_s"] for r in rs],
                              "loadavg": [r.get("loadavg") for r in rs if "loadavg" in r],
                              "cpu_util": statistics.median(sum(w["comp_cpu_s"] for w in r["workers"]) / (2 * r["makespan_s"])
                                                            for r in rs),
                              "net_util": net / (2 * span)}
    # Eq. 1-4 prediction: profiles measured alone (isolated run, one machine: c1 = COMP per iteration)
    iso = runs["isolated"][-1]["workers"]
    c1 = [statistics.fmean([w["compute_s"] / iterations for w in iso if w["job"] == n]) for n in JOBS]
    net = [statistics.fmean([w["comm_s"] / iterations for w in iso if w["job"] == n]) for n in JOBS]
    pred = group_time(c1, net, 2)
    # a group iteration: every member does one iteration (their iteration times are the group's period)
    measured = statistics.median(statistics.fmean(statistics.fmean(w["iter_s"][1:]) for w in r["workers"])
                                 for r in runs["pipelined"])
    out["model"] = {"profile_c1_s": c1, "profile_net_s": net, "predicted_group_iter_s": pred,
                    "measured_group_iter_s": measured, "error": (pred - measured) / measured}
    return out


def policies(scale: float, bandwidth_mbps: float) -> dict:
    specs = [s.model_copy(update={"iterations": max(10, int(s.iterations * scale))})
             for s in load_jobs(ROOT / "examples" / "harmony_ps_jobs_large.yaml")]
    cl = local_cluster(2, cores=2)
    out = {}
    for name in ("harmony", "harmony-naive", "harmony-isolated"):
        t0, c0 = time.perf_counter(), time.process_time()
        res = run_local(specs, cl, make_policy(name), report_interval=0.2, bandwidth_mbps=bandwidth_mbps)
        out[name] = {"makespan_s": float(res.metrics.makespan), "avg_jct_s": float(res.metrics.avg_jct),
                     "finished": res.metrics.jobs_finished, "wall_s": time.perf_counter() - t0,
                     "cpu_s_scheduler": time.process_time() - c0}
    return out


def _mlr(iterations: int):  # type: ignore[no-untyped-def]
    cfg = parse_config("spill", {"name": "mlr", "data": "synthetic", "n_samples": 40_000, "n_features": 200,
                                 "n_classes": 10, "batch_size": 2000})
    return build(cfg, WorkloadContext(job="spill", seed=0, iterations=iterations, rank=0, world_size=1))


def _steps(w, spill, start: int, n: int) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    for i in range(start, start + n):
        w.iteration = i
        w.step()
        w.iteration = i + 1
    return (time.perf_counter() - t0) / n


def spill(iterations: int, window: int) -> dict:
    probe = _mlr(iterations)
    input_bytes = probe.X.nbytes + probe.y.nbytes
    model_bytes = probe.W.nbytes + probe.b.nbytes
    limit = NodeMemory(0.5 * input_bytes + model_bytes)
    reserve = 2000 * (probe.X.shape[1] * 8 + 8) * 2  # reload buffer: one batch of disk rows, two in flight
    floor = limit.floor_alpha(input_bytes, model_bytes, reserve)
    n_blocks = 20
    rows: dict = {"input_mb": input_bytes / 1e6, "limit_mb": limit.capacity / 1e6, "alpha_floor": floor, "fixed": {}}
    with tempfile.TemporaryDirectory() as d:
        for alpha in (0.25, 0.5, 0.75, 1.0):
            w = _mlr(iterations)
            sp = attach(w, n_blocks=n_blocks, alpha=alpha, spill_dir=Path(d) / f"f{alpha}")
            per_it = _steps(w, sp, 0, iterations)
            limit.account("w", sp.peak_resident + model_bytes)
            rows["fixed"][str(alpha)] = {"s_per_iter": per_it, "peak_resident_mb": sp.peak_resident / 1e6,
                                         "reloaded_mb": sp.reload_bytes / 1e6, "within_limit": limit.fits()}
            sp.close()
        w = _mlr(iterations)
        a0 = initial_alpha(input_bytes, model_bytes, limit.capacity)
        tuner = AlphaTuner(a0, step=1 / n_blocks, floor=floor)
        sp = attach(w, n_blocks=n_blocks, alpha=tuner.alpha, spill_dir=Path(d) / "adaptive")
        done, times = 0, []
        while done < iterations:
            n = min(window, iterations - done)
            t = _steps(w, sp, done, n)
            times.append((sp.alpha, t))
            done += n
            nxt = tuner.observe(t)
            if nxt != sp.alpha:
                sp.set_alpha(nxt)
        limit.account("w", sp.peak_resident + model_bytes)
        rows["adaptive"] = {"size_estimate": a0, "initial_alpha": times[0][0], "final_alpha": sp.alpha,
                            "windows": times,
                            "s_per_iter": statistics.fmean(t for _, t in times),
                            "s_per_iter_last": times[-1][1], "peak_resident_mb": sp.peak_resident / 1e6,
                            "reloaded_mb": sp.reload_bytes / 1e6, "within_limit": limit.fits()}
        sp.close()
    return rows


PS_SPILL_INPUT = {"name": "ps-mlr", "data": "synthetic", "n_samples": 40_000, "n_features": 200, "n_classes": 10,
                  "batch_size": 2000}


def _run_ps(spec: JobSpec, timeout: float = 300.0) -> tuple[list[dict], dict, float]:
    """One PS job alone (worker on node 0, server on node 1): its progress reports, final model, wall time."""
    cl = local_cluster(2, cores=2)
    led = Ledger(cl)
    reports: list[dict] = []
    with tempfile.TemporaryDirectory() as d, LocalBackend(cl, root=d, report_interval=0.25,
                                                           checkpoint_interval=0) as be:
        alloc = led.allocate(spec.id, (0, 1), [led.vector(spec.workers.demand), led.vector(spec.ps.demand)])
        t0 = time.perf_counter()
        be.launch(spec, alloc, be.now(), from_checkpoint=False)
        while True:
            _, events = be.advance(be.now() + 0.5)
            reports += [e.data for e in events if e.kind is BackendEventKind.PROGRESS]
            end = [e for e in events if e.kind in (BackendEventKind.FINISHED, BackendEventKind.FAILED)]
            if end:
                break
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"{spec.id}: not finished after {timeout:g} s")
        wall = time.perf_counter() - t0
        if end[0].kind is not BackendEventKind.FINISHED:
            raise RuntimeError(f"{spec.id} failed: {end[0].data}")
        found = load_model(be.store.root, spec.id)
        assert found is not None
    return reports, found[1], wall


def ps_spill(iterations: int) -> dict:
    d = Resources(cpu=1, mem_gb=0.5)
    rows: dict = {"iterations": iterations, "blocks": 20, "runs": {}}
    ref = None
    options: dict[str, dict] = {a: {"alpha": v} for a, v in (("0", 0.0), ("0.5", 0.5), ("1", 1.0), ("auto", "auto"))}
    options["auto 32MB"] = {"alpha": "auto", "memory_mb": 32.0}  # about half the input + model
    for i, (label, opt) in enumerate(options.items()):
        spec = JobSpec(id=f"spill-{i}", architecture="ps", iterations=iterations,
                       workers=TaskGroup(count=1, demand=d), ps=TaskGroup(count=1, demand=d),
                       workload={**PS_SPILL_INPUT, "spill": {**opt, "blocks": 20}})
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        reports, model, wall = _run_ps(spec)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        timed = [r for r in reports if "alpha" in r]
        if ref is None:
            ref = model
        rows["runs"][label] = {
            "s_per_iter": statistics.fmean(r["iter_time"] for r in timed),
            "final_alpha": timed[-1]["alpha"], "alphas": [r["alpha"] for r in timed],
            "input_resident_mb": max(r["input_resident_mb"] for r in timed),
            "rss_mb": max(r.get("mem_mb", 0.0) for r in timed),
            "reloaded_mb": timed[-1]["reload_mb"], "reload_stall_s": timed[-1]["reload_stall_s"],
            "wall_s": wall, "cpu_s_tasks": (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime),
            "max_abs_diff_vs_alpha0": max(float(abs(model[k] - ref[k]).max()) for k in ref),
        }
    return rows


def _print_ps_spill(ps: dict) -> None:
    print(f"\n4. Spill/reload in a real PS job: ps-mlr, {PS_SPILL_INPUT['n_samples']:,} x "
          f"{PS_SPILL_INPUT['n_features']} input, {ps['blocks']} blocks, {ps['iterations']} iterations")
    print(f"{'alpha':<10} {'ms/iter':>8} {'input MB':>9} {'RSS MB':>7} {'reloaded MB':>12} {'end alpha':>10} "
          f"{'wall s':>7} {'task CPU s':>11} {'|model - alpha 0|':>18}")
    for a, r in ps["runs"].items():
        print(f"{a:<10} {r['s_per_iter'] * 1e3:>8.1f} {r['input_resident_mb']:>9.1f} {r['rss_mb']:>7.0f} "
              f"{r['reloaded_mb']:>12.0f} {r['final_alpha']:>10.2f} {r['wall_s']:>7.1f} {r['cpu_s_tasks']:>11.1f} "
              f"{r['max_abs_diff_vs_alpha0']:>18.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=["ps-spill"], help="run one part; the JSON keeps the other parts' results")
    args = ap.parse_args()
    t0, c0 = time.perf_counter(), time.process_time()
    if args.only == "ps-spill":
        res = json.loads(OUT.read_text()) if OUT.exists() else {}
        res["ps_spill"] = ps_spill(iterations=150 if args.quick else 400)
        res["ps_spill"]["quick"] = args.quick
        _print_ps_spill(res["ps_spill"])
        print(f"\npart wall {time.perf_counter() - t0:.0f} s, CPU of this process {time.process_time() - c0:.0f} s")
        OUT.write_text(json.dumps(res, indent=2))
        print(f"wrote {OUT.relative_to(ROOT)}")
        return
    res = {"quick": args.quick}
    res["colocation"] = colocation(iterations=6 if args.quick else 10, rounds=1 if args.quick else 3)
    co = res["colocation"]
    print(f"\n1. Co-location: 4 PS-like jobs on 2 logical nodes, link {LINK_MBPS:g} MB/s per node "
          f"({co['iterations']} iterations; median of the rounds)")
    print(f"{'mode':<10} {'makespan s':>10} {'CPU util':>9} {'net util':>9}   runs")
    for mode, r in co["modes"].items():
        print(f"{mode:<10} {r['makespan_s']:>10.2f} {r['cpu_util']:>9.1%} {r['net_util']:>9.1%}   "
              + " ".join(f"{x:.2f}" for x in r["makespan_runs"]))
    m = co["model"]
    print(f"Eq. 1-4: predicted group iteration {m['predicted_group_iter_s']:.3f} s, measured "
          f"{m['measured_group_iter_s']:.3f} s, error {m['error']:+.1%}")
    res["policies"] = policies(scale=0.5 if args.quick else 1.0, bandwidth_mbps=50.0)
    print("\n2. Policies on real PS jobs (examples/harmony_ps_jobs_large.yaml), 2 nodes, 50 Mbit/s per node")
    print(f"{'policy':<18} {'makespan s':>10} {'avg JCT s':>10} {'finished':>9}")
    for name, r in res["policies"].items():
        print(f"{name:<18} {r['makespan_s']:>10.2f} {r['avg_jct_s']:>10.2f} {r['finished']:>9}")
    res["spill"] = spill(iterations=100 if args.quick else 200, window=20 if args.quick else 25)
    sp = res["spill"]
    print(f"\n3. Spill/reload: mlr input {sp['input_mb']:.0f} MB, node memory limit {sp['limit_mb']:.0f} MB "
          f"(alpha floor {sp['alpha_floor']:.2f})")
    print(f"{'alpha':<22} {'ms/iter':>8} {'peak MB':>8} {'reloaded MB':>12} {'within limit':>13}")
    for a, r in sp["fixed"].items():
        print(f"{'fixed ' + a:<22} {r['s_per_iter'] * 1e3:>8.1f} {r['peak_resident_mb']:>8.1f} "
              f"{r['reloaded_mb']:>12.0f} {str(r['within_limit']):>13}")
    ad = sp["adaptive"]
    print(f"{'adaptive ' + format(ad['initial_alpha'], '.2f') + '->' + format(ad['final_alpha'], '.2f'):<22} "
          f"{ad['s_per_iter'] * 1e3:>8.1f} {ad['peak_resident_mb']:>8.1f} {ad['reloaded_mb']:>12.0f} "
          f"{str(ad['within_limit']):>13}")
    res["ps_spill"] = ps_spill(iterations=150 if args.quick else 400)
    _print_ps_spill(res["ps_spill"])
    res["wall_s"] = time.perf_counter() - t0
    res["cpu_s"] = time.process_time() - c0
    print(f"\nbench wall {res['wall_s']:.0f} s, CPU of this process {res['cpu_s']:.0f} s")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(res, indent=2))
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
