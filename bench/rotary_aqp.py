"""Rotary-AQP against its baselines (Liu dissertation §3.2.2) on the Table 3.1 workload.

Small scale on purpose: this is a shared 2-core machine (the dissertation used SF 1 on 20 cores),
so the queries run on TPC-H SF 0.1 in 20 batches, on 2 one-core nodes, with arrivals and
deadlines scaled by ``--time-scale`` (0.004 by default: mean inter-arrival 0.64 s, light deadlines
1.4-3.6 s, heavy 5.8-12 s) so that the queries contend as in the dissertation.

1. **simulator** — the Table 3.1 workload (30 jobs) for several seeds, costs and reported
   accuracies from the packaged per-batch profiles (``src/cohabit/data/profiles``): attained
   jobs, false attainment (attained by the envelope estimate, not by the true accuracy), decision
   time, per policy;
2. **real** (``--real``) — the same workload (one seed) run by ``cohabit run`` with DuckDB worker
   processes, each query also computing its exact answer first (``heldout: true``) so that false
   attainment is measured;
3. **estimators** — the accuracy-progress estimate (TEE, as Rotary-AQP uses it) one epoch ahead
   against the measured envelope curve, with and without another run of the same query in the
   history (cold start); the EXPLAIN memory estimate against DuckDB's measured memory.

``--profile`` re-measures the packaged profile first (about 15 s CPU). The load average is
printed beside every table.

Usage: python bench/rotary_aqp.py [--seeds 1 2 3] [--real] [--profile] [--json bench/results/rotary_aqp.json]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib.resources import files
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cohabit.aqp import QUERIES  # noqa: E402
from cohabit.aqp.data import ensure_tpch  # noqa: E402
from cohabit.aqp.estimators import plan_memory_mb  # noqa: E402
from cohabit.aqp.profile import profile_all  # noqa: E402
from cohabit.aqp.workload import simulated, table31_jobs, to_yaml  # noqa: E402
from cohabit.models.similar import JobTraits  # noqa: E402
from cohabit.models.tee import TEE  # noqa: E402
from cohabit.policies import make_policy  # noqa: E402
from cohabit.repository.store import JobRecord  # noqa: E402
from cohabit.sim.physics import SimConfig  # noqa: E402
from cohabit.sim.runner import simulate  # noqa: E402
from cohabit.spec import ClusterSpec, Resources  # noqa: E402

from benchtable import keep, load, print_table  # noqa: E402

POLICIES = ["rotary-aqp", "rotary-aqp:extra_cores=false", "rotary-aqp:switch_cost_s=1", "edf", "rr", "lcaf", "relaqs"]
#: The simulator's model of this machine's real runtime: a query process starts and loads its
#: tables in ~1 s (STARTUP_S, and RESTORE_S on a resume); a checkpoint of its state is ~KB (CKPT_S).
STARTUP_S, RESTORE_S, CKPT_S = 1.0, 1.0, 0.05
PROFILE = "profiles/aqp_tpch_sf0.1_b20.json"
SF, BATCHES, EPOCHS = 0.1, 20, 4




def cluster(shape: str = "2x1") -> ClusterSpec:
    """``NODESxCORES`` one-core-per-query nodes of 8 GB (the default: this machine's 2 cores)."""
    try:
        nodes, cores = (int(x) for x in shape.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--cluster must be NODESxCORES such as 2x1 or 1x4, got {shape!r}") from None
    return ClusterSpec.homogeneous("local", nodes, Resources(cpu=cores, mem_gb=8))


def sim_table(profile: dict, seeds: list[int], time_scale: float, shape: str = "2x1") -> dict:
    out: dict = {}
    for p in POLICIES:
        rows = []
        for seed in seeds:
            jobs = table31_jobs(seed=seed, scale=SF, batches=BATCHES, epochs=EPOCHS, time_scale=time_scale)
            c0 = time.process_time()
            res = simulate(simulated(jobs, profile, startup_s=STARTUP_S), cluster(shape), make_policy(p), strict=True,
                           config=SimConfig(checkpoint_s=CKPT_S, restore_s=RESTORE_S))
            a = res.metrics.attainment
            rows.append({"seed": seed, "attained": a.attained, "false_attained": a.false_attained,
                         "jobs": a.jobs_with_criteria, "attained_times": a.attained_times,
                         "decision_ms": res.metrics.decision_time_ms.to_json(), "cpu_s": time.process_time() - c0})
        out[p] = rows
    return out


def real_table(seed: int, time_scale: float, policies: list[str], tmp: Path, sf: float = SF,
               nodes: int | None = None) -> dict:
    jobs = table31_jobs(seed=seed, scale=sf, batches=BATCHES, epochs=EPOCHS, time_scale=time_scale, heldout=True)
    path = tmp / "aqp_jobs.yaml"
    path.write_text(to_yaml(jobs))
    out = {}
    for p in policies:
        js = tmp / f"{p}.json"
        c0 = os.times()
        w0 = time.perf_counter()
        cmd = [sys.executable, "-m", "cohabit.cli", "run", str(path), "--policy", p, "--json", str(js)]
        proc = subprocess.run(cmd + (["--nodes", str(nodes)] if nodes else []),
                              capture_output=True, text=True, timeout=3600)
        c1 = os.times()
        if not js.exists():
            raise SystemExit(f"cohabit run --policy {p} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        pol = json.loads(js.read_text())["policies"][p]
        a = pol["attainment"]
        out[p] = {"attained": a["attained"], "false_attained": a["false_attained"], "jobs": a["jobs_with_criteria"],
                  "false_attainment_ratio": a["false_attainment_ratio"], "attained_times": a["attained_times"],
                  "preemptions": pol["preemptions"], "decision_ms": pol["decision_time_ms"],
                  "wall_s": time.perf_counter() - w0,
                  "cpu_s": (c1.children_user + c1.children_system) - (c0.children_user + c0.children_system),
                  "exit": proc.returncode, "load": load()}
    return out


def estimator_errors(profile: dict, data: Path) -> dict:
    """TEE one running epoch ahead vs the measured estimate curve; EXPLAIN memory vs measured.

    The history is another run of the same query with another batch order (seed 1), measured here."""
    ahead = BATCHES // EPOCHS
    other = profile_all(data, batches=BATCHES, scale_factor=SF, seed=1)
    rows = {}
    for q, prof in profile["queries"].items():
        curve = prof["estimate"]
        errs_cold, errs_hist = [], []
        past = tuple(other["queries"][q]["estimate"])
        hist = TEE([JobRecord(model=q, dataset="tpch", batch_size=BATCHES, accuracy=past, name="seed-1")])
        cold = TEE([])
        traits = JobTraits(model=q, dataset="tpch", batch_size=BATCHES)
        for k in range(2, BATCHES - ahead + 1):
            own = [(float(i + 1), curve[i]) for i in range(k)]
            truth = curve[k + ahead - 1]
            for tee, errs in ((cold, errs_cold), (hist, errs_hist)):
                fit = tee.fit(traits, own)
                pred = (k + ahead) / BATCHES if fit is None else min(1.0, max(0.0, fit.predict(k + ahead)))
                errs.append(abs(pred - truth))
        plan = plan_memory_mb(QUERIES[q], data, BATCHES)
        rows[q] = {"mae_cold": float(np.mean(errs_cold)), "mae_with_history": float(np.mean(errs_hist)),
                   "plan_mb": plan, "measured_mb": prof["memory_mb"]}
    return rows


def window_table(data: Path, windows: list[int]) -> dict:
    """False attainment of the envelope estimate by window length (§3.2.2: "mitigated by lengthening
    the time window"): for every query and every Table 3.1 threshold, does the estimate first reach
    the threshold at a batch where the true accuracy has not (false), and how many batches later
    than the true accuracy does it get there (delay)?"""
    from cohabit.aqp import accuracy
    from cohabit.aqp.online import ProgressiveQuery
    from cohabit.aqp.workload import ACCURACIES

    out = {}
    for w in windows:
        false = hits = 0
        delays = []
        for q in QUERIES:
            spec = QUERIES[q]
            final = ProgressiveQuery(spec, data, batches=1, scale_factor=SF).run()
            pq = ProgressiveQuery(spec, data, batches=BATCHES, seed=0, window=w, scale_factor=SF)
            est, true = [], []
            while not pq.finished:
                est.append(pq.step().estimate)
                true.append(accuracy(pq.answer(), final, spec))
            pq.close()
            for th in ACCURACIES:
                e = next(i for i, x in enumerate(est) if x >= th)  # the last batch's estimate is 1
                t = next((i for i, x in enumerate(true) if x >= th), len(true) - 1)
                hits += 1
                false += true[e] < th
                delays.append(e - t)
        out[w] = {"cases": hits, "false": false, "false_ratio": false / hits, "mean_delay_batches": float(np.mean(delays))}
    return out


def est_table(profile: dict, data: Path, result: dict) -> None:
    est = estimator_errors(profile, data)
    print_table(f"3. estimators: TEE one epoch ({BATCHES // EPOCHS} batches) ahead; EXPLAIN memory", [
        ("query", "6", lambda qr: qr[0]), ("MAE cold", ">9.3f", lambda qr: qr[1]["mae_cold"]),
        ("MAE hist", ">9.3f", lambda qr: qr[1]["mae_with_history"]), ("plan MB", ">8.2f", lambda qr: qr[1]["plan_mb"]),
        ("measured MB", ">12.2f", lambda qr: qr[1]["measured_mb"])], est.items())
    print(f"  mean MAE: cold {np.mean([r['mae_cold'] for r in est.values()]):.3f}, "
          f"with history {np.mean([r['mae_with_history'] for r in est.values()]):.3f}")
    keep(result, "estimators", est)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1], help="seed of the real run's workload")
    ap.add_argument("--seeds-sim", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--time-scale", type=float, default=0.004)
    ap.add_argument("--cluster", default="2x1", help="simulated cluster NODESxCORES (1x4: Alg. 4's extra cores can act)")
    ap.add_argument("--real", action="store_true", help="also run the workload for real (minutes)")
    ap.add_argument("--real-time-scale", type=float, default=0.01,
                    help="time scale of the real run (examples/aqp_jobs.yaml's): a real query process takes ~1 s to start")
    ap.add_argument("--real-policies", default="rotary-aqp,edf,rr,lcaf,relaqs")
    ap.add_argument("--sf", type=float, default=SF, help="TPC-H scale factor of the real run (the simulator uses the SF 0.1 profile)")
    ap.add_argument("--real-nodes", type=int, default=None,
                    help="cohabit run --nodes for the real run (1: one node of all cores, where Alg. 4's extra cores act)")
    ap.add_argument("--no-estimators", action="store_true", help="skip the estimator table")
    ap.add_argument("--profile", action="store_true", help="re-measure the packaged profile first")
    ap.add_argument("--windows", type=int, nargs="*", default=[2, 3, 5, 8],
                    help="envelope windows to compare for false attainment (none: skip)")
    ap.add_argument("--json", default="bench/results/rotary_aqp.json")
    a = ap.parse_args()
    data = ensure_tpch(SF)
    if a.profile:
        c0 = time.process_time()
        prof = profile_all(data, batches=BATCHES, scale_factor=SF, seed=0)
        prof["produced_by"] = {"command": "python bench/rotary_aqp.py --profile", "seed": 0,
                               "workload": f"TPC-H SF {SF} (tpchgen-cli), {BATCHES} batches, 1 DuckDB thread",
                               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "load_average": os.getloadavg(), "cpu_s": time.process_time() - c0}
        Path("src/cohabit/data", PROFILE).write_text(json.dumps(prof, indent=0))
    profile = json.loads(files("cohabit.data").joinpath(PROFILE).read_text())
    result: dict = {"scale_factor": SF, "batches": BATCHES, "epochs": EPOCHS, "time_scale": a.time_scale,
                    "real_time_scale": a.real_time_scale,
                    "cluster": f"simulated {a.cluster} (nodes x cores), 8 GB per node; real: 2 nodes x 1 core"}

    sim = sim_table(profile, a.seeds_sim, a.time_scale, a.cluster)

    def seed_cell(k: int) -> Callable[[tuple[str, list[dict]]], str]:
        return lambda pr: f"{pr[1][k]['attained']:>3}/{pr[1][k]['jobs']} ({pr[1][k]['false_attained']:>2}f)"

    print_table(f"1. simulator: Table 3.1 workload (30 queries), SF {SF} profiles, cluster {a.cluster}, time scale "
                f"{a.time_scale}, start/restore {STARTUP_S}/{RESTORE_S} s; attained/30 (false attained)", [
                    ("policy", "27", lambda pr: pr[0]),
                    *[(f"seed {s}", ">13", seed_cell(k)) for k, s in enumerate(a.seeds_sim)],
                    ("total", ">9", lambda pr: sum(r["attained"] for r in pr[1])),
                    ("false", ">6", lambda pr: sum(r["false_attained"] for r in pr[1])),
                    ("decide ms", ">10.3f", lambda pr: np.mean([r["decision_ms"]["mean"] or 0.0 for r in pr[1]]))],
                sim.items())
    keep(result, "simulator", sim)

    if a.real:
        ensure_tpch(a.sf)  # generated before the timed runs
        with tempfile.TemporaryDirectory(prefix="cohabit-aqp-bench-") as d:
            real = real_table(a.seeds[0], a.real_time_scale, a.real_policies.split(","), Path(d), a.sf, a.real_nodes)
        print_table(f"2. real: cohabit run, DuckDB processes, SF {a.sf:g}, seed {a.seeds[0]}, time scale "
                    f"{a.real_time_scale}, nodes {a.real_nodes or 'default'}", [
                        ("policy", "11", lambda pr: pr[0]),
                        ("attained", ">9", lambda pr: f"{pr[1]['attained']}/{pr[1]['jobs']}"),
                        ("false", ">6", lambda pr: pr[1]["false_attained"]),
                        ("preempt", ">8", lambda pr: pr[1]["preemptions"]),
                        ("wall s", ">7.1f", lambda pr: pr[1]["wall_s"]),
                        ("cpu s", ">7.1f", lambda pr: pr[1]["cpu_s"]), (" load", "", lambda pr: f" {pr[1]['load']}")],
                    real.items())
        result["real"] = real
        result["real_setup"] = {"scale_factor": a.sf, "nodes": a.real_nodes, "time_scale": a.real_time_scale,
                                "seed": a.seeds[0]}

    if a.no_estimators:
        a.windows = []
    else:
        est_table(profile, data, result)
    if a.windows:
        win = window_table(data, a.windows)
        print_table("4. envelope window vs false attainment (22 queries x 9 thresholds, seed 0)", [
            ("window", ">7", lambda wr: wr[0]), ("false", ">6", lambda wr: f"{wr[1]['false']:>3}/{wr[1]['cases']}"),
            ("ratio", ">6.2f", lambda wr: wr[1]["false_ratio"]),
            ("delay (batches)", ">16.2f", lambda wr: wr[1]["mean_delay_batches"])], win.items())
        result["envelope_windows"] = win
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(result, indent=1, default=str))
    print(f"\nwrote {a.json}")


if __name__ == "__main__":
    main()
