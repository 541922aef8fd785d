"""Calibrate once, predict other runs: profiles from a real FIFO run predict real SRTF and Tiresias runs
(issue 19, point 5; docs/fidelity.md, "Sim vs real").

``bench/sim_vs_real_cluster.py --records DIR`` keeps each real run's record (FIFO, SRTF, Tiresias of the
same nine jobs on LocalBackend). Here the FIFO record of each ``--fifo`` directory is calibrated once
(``cohabit.sim.calibrate``: job costs, latencies, the machine's background load) and the simulator
runs SRTF and Tiresias on those profiles; the table compares with the real SRTF and Tiresias runs of
each ``--runs`` directory. Columns:

* ``own``: the target run replayed from its own record (the replay bound: what a calibration that
  saw that run gets);
* ``fifo``: nothing of the target run: the FIFO run's profiles and its machine load;
* ``fifo, run's load``: the FIFO run's job profiles, with the machine's background load measured in
  the target run (other processes' CPU use through the run: ``Calibration.in_environment``), the
  machine's state that no calibration on another run can know.

Then which profile terms differ between the runs (the target's own calibration / the FIFO one):
per-job CPU cost, link cost, start and restore latency, and the background (median); and, for each
FIFO run predicting its own invocation's SRTF and Tiresias runs with their load, what each part of
the calibration is worth: the background as one value per run instead of a series, the whole link
time shared instead of the bytes on the wire (``wire_s``), restores taken as the job's own start.

    python bench/sim_vs_real_cross.py --fifo bench/results/sim_vs_real_cluster_records/run1 \\
        --runs bench/results/sim_vs_real_cluster_records/run1,bench/results/sim_vs_real_cluster_records/run2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from dataclasses import replace

from cohabit.engine.record import Event
from cohabit.sim.calibrate import Calibration, calibrate
from cohabit.sim.truth import TraceJob
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from sim_vs_real_cluster import bench_cluster, policies, read_record, summary, workload

console = Console(width=160)
TARGETS = ("srtf", "tiresias")


def predict(cal: Calibration, policy: str, real: dict[str, Any]) -> dict[str, float]:
    """Simulate ``policy`` on ``cal``; avg JCT and makespan and their ratios to ``real``."""
    s = summary(simulate(cal.trace, bench_cluster(), policies(1.0)[policy](), config=cal.config).result.record)
    return {"avg_jct": s["avg_jct"], "makespan": s["makespan"], "preemptions": s["preemptions"],
            "avg_jct_ratio": s["avg_jct"] / real["avg_jct"], "makespan_ratio": s["makespan"] / real["makespan"]}


def terms(source: Calibration, target: Calibration) -> dict[str, Any]:
    """Per job, the target calibration's profile terms over the source's; and both backgrounds."""
    src = {tj.spec.id: tj.truth.host for tj in source.trace}
    out: dict[str, Any] = {"background": [source.background, target.background], "jobs": {}}
    for tj in target.trace:
        h, s = tj.truth.host, src.get(tj.spec.id)
        if h is None or s is None:
            continue
        out["jobs"][tj.spec.id] = {"cpu_s": h.cpu_s / s.cpu_s, "link_s": h.link_s / s.link_s if s.link_s else None,
                                   "start_s": [s.start_s, h.start_s], "restore_s": [s.restore_s, h.restore_s]}
    return out


def no_traffic(events: list[Event]) -> list[Event]:
    """The record without its traffic measurements (``net_gbps``): ``wire_s`` unknown, all link time shared."""
    out = []
    for e in events:
        used = e.data.get("used") if isinstance(e.data, dict) else None
        if used and "net_gbps" in used:
            e = Event(e.time, e.kind, e.job, {**e.data, "used": {k: v for k, v in used.items() if k != "net_gbps"}})
        out.append(e)
    return out


def ablations(d: str, specs: Any, cluster: Any, base: SimConfig) -> dict[str, dict[str, Any]]:
    """The FIFO run of ``d`` predicting that directory's SRTF and Tiresias runs with their load, whole and
    with one part of the calibration undone."""
    recs = {p: list(read_record(Path(d) / f"{p}.jsonl.gz")) for p in ("fifo", *TARGETS)}
    out: dict[str, dict[str, Any]] = {}
    for policy in TARGETS:
        real = summary(recs[policy])
        full = calibrate(specs, recs["fifo"], cluster, base)
        env = calibrate(specs, recs[policy], cluster, base)
        one = calibrate(specs, recs["fifo"], cluster, base, window=None)
        flat = calibrate(specs, no_traffic(recs["fifo"]), cluster, base)
        own_start = [TraceJob(tj.spec, replace(tj.truth, host=replace(tj.truth.host, restore_s=tj.truth.host.start_s)))
                     for tj in full.trace]
        variants = {
            "all": full.in_environment(env),
            "background one value": one.in_environment(calibrate(specs, recs[policy], cluster, base, window=None)),
            "all link time shared": flat.in_environment(env),
            "restore = own start": Calibration(own_start, full.config, full.background, full.series).in_environment(env),
        }
        out[policy] = {k: predict(c, policy, real) for k, c in variants.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fifo", required=True, help="comma-separated record directories whose fifo run is calibrated")
    ap.add_argument("--runs", required=True, help="comma-separated record directories with srtf and tiresias runs")
    ap.add_argument("--json", type=Path, default=Path("bench/results/sim_vs_real_cross.json"))
    args = ap.parse_args()
    specs, cluster, base = workload(1.0), bench_cluster(), SimConfig(report_interval_s=0.5)
    c0 = time.process_time()
    cal: dict[tuple[str, str], Calibration] = {}
    real: dict[tuple[str, str], dict[str, Any]] = {}

    def load(d: str, policy: str) -> None:
        if (d, policy) not in cal:
            rec = read_record(Path(d) / f"{policy}.jsonl.gz")
            cal[(d, policy)] = calibrate(specs, rec, cluster, base)
            meta = json.loads((Path(d) / f"{policy}.json").read_text())
            real[(d, policy)] = {**summary(rec), "load": meta.get("load")}

    sources = [d.strip() for d in args.fifo.split(",") if d.strip()]
    targets = [d.strip() for d in args.runs.split(",") if d.strip()]
    table = Table(title="real SRTF / Tiresias runs predicted from a FIFO run's profiles: sim / real "
                        "(avg JCT, makespan)", title_justify="left")
    for col in ("profiles from", "run", "policy", "load", "avg JCT real", "makespan real", "own", "fifo",
                "fifo, run's load"):
        table.add_column(col, justify="left" if col in ("profiles from", "run", "policy") else "right")
    rows, within = [], 0
    for src in sources:
        load(src, "fifo")
        fifo = cal[(src, "fifo")]
        for dst in targets:
            for policy in TARGETS:
                load(dst, policy)
                tgt, r = cal[(dst, policy)], real[(dst, policy)]
                res = {"own": predict(tgt, policy, r), "fifo": predict(fifo, policy, r),
                       "fifo, run's load": predict(fifo.in_environment(tgt), policy, r)}
                ok = all(abs(res["fifo, run's load"][k] - 1) <= 0.10 for k in ("avg_jct_ratio", "makespan_ratio"))
                within += ok
                rows.append({"profiles_from": src, "run": dst, "policy": policy, "real": r, "sim": res,
                             "terms": terms(fifo, tgt)})
                fmt = lambda v: f"{v['avg_jct_ratio']:.3f} / {v['makespan_ratio']:.3f}"  # noqa: E731
                ld = r.get("load") or {}
                table.add_row(Path(src).name, Path(dst).name, policy, f"{ld.get('mean', float('nan')):.1f}",
                              f"{r['avg_jct']:.1f}", f"{r['makespan']:.1f}", *(fmt(res[k]) for k in res))
    console.print(table)
    console.print(f"{within} of {len(rows)} predictions with the run's load within 10% on both avg JCT and makespan; "
                  f"load average now {os.getloadavg()[0]:.1f}; {time.process_time() - c0:.1f} CPU s")
    t2 = Table(title="profile terms, target run / FIFO run (median over jobs; per job in the JSON)", title_justify="left")
    for col in ("profiles from", "run", "policy", "background fifo", "run", "cpu_s ratio (min-max)", "dp-mlp cpu_s",
                "link_s ratio", "restore fifo / run (one-task jobs, median)"):
        t2.add_column(col)
    for row in rows:
        t = row["terms"]
        jobs = t["jobs"]
        cpu = [v["cpu_s"] for j, v in jobs.items() if not j.startswith("ps-")]
        link = [v["link_s"] for v in jobs.values() if v["link_s"] is not None]
        one = [v["restore_s"] for j, v in jobs.items() if j not in ("dp-mlp", "ps-a", "ps-b")]
        t2.add_row(Path(row["profiles_from"]).name, Path(row["run"]).name, row["policy"], f"{t['background'][0]:.2f}",
                   f"{t['background'][1]:.2f}", f"{statistics.median(cpu):.2f} ({min(cpu):.2f}-{max(cpu):.2f})",
                   f"{jobs['dp-mlp']['cpu_s']:.2f}" if "dp-mlp" in jobs else "-",
                   f"{statistics.median(link):.2f}" if link else "-",
                   f"{statistics.median(a for a, _ in one):.2f} / {statistics.median(b for _, b in one):.2f}")
    console.print(t2)
    t3 = Table(title="each FIFO run predicting its own invocation's runs with their load, sim / real (avg JCT, makespan): "
                     "what each part is worth", title_justify="left")
    abl: dict[str, Any] = {}
    for d in sources:
        if d not in targets:
            continue
        abl[d] = ablations(d, specs, cluster, base)
        if not t3.columns:
            for col in ("run", "policy", *next(iter(abl[d].values()))):
                t3.add_column(col)
        for policy, res in abl[d].items():
            t3.add_row(Path(d).name, policy, *(f"{v['avg_jct_ratio']:.3f} / {v['makespan_ratio']:.3f}" for v in res.values()))
    console.print(t3)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"rows": rows, "within_10pct": within, "ablations": abl,
                                     "cpu_s": time.process_time() - c0}, indent=1))
    console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
