"""Cross-simulator validation (issue 19): cohabit next to public simulators on the same inputs.

The reference numbers were produced by hand with the public simulators themselves (their code is
never part of this repository) and are recorded, with repository, commit, exact command lines and
input checksums, in ``bench/reference/<simulator>.json`` (and ``.md``). This script replays every
recorded run in cohabit on the same input file and cluster, with the cohabit policy that implements
the reference's policy and the named physics that reproduces the reference's world
(``--physics muri`` / ``gavel``, see docs/fidelity.md), and prints reference vs cohabit and the ratio
per simulator, workload, policy and metric (avg JCT, makespan, p95 JCT, preemptions). Rows:
``{simulator, workload, policy, metric, reference, cohabit, ratio}`` (+ ``setting``, ``note``).

``--setting default`` runs cohabit's own physics and default policy parameters instead (the
"before": what a user gets without the matching options); ``--setting both`` runs the two.
If ``bench/fidelity_pollux.py`` exists, its ``rows()`` are added (the Pollux artifact's runs): with
``--setting matched`` its settings ``pollux-artifact`` (cohabit's own policies in the artifact's physics)
and ``matched`` (the artifact's policies read from its code: ``tiresias-pollux``, ``optimus-oracle``
with the oracle, ``pollux``); with ``default``, its ``default``. With ``--only``, the JSON keeps the
other simulators' rows from the file it replaces.

    .venv/bin/python bench/fidelity.py                    # matched settings, all references
    .venv/bin/python bench/fidelity.py --setting both --only gavel
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "bench" / "reference"
OUT = ROOT / "bench" / "results" / "fidelity.json"
METRICS = ("avg_jct", "makespan", "p95_jct", "preemptions")


@dataclass(frozen=True)
class Side:
    """How cohabit runs one reference policy: policy spec, oracle, physics, and why."""

    policy: str
    oracle: bool
    physics: str
    note: str
    native: str | None = None  # cohabit's own nearest policy, for ``--setting default`` (None: ``policy``)


#: (simulator, reference policy) -> cohabit's matched setting. The notes say what each option matches.
MATCHED: dict[tuple[str, str], Side] = {
    ("muri", "shortest"): Side(
        "srtf:min_run_time=0", True, "muri",
        "Muri's SRTF reads each job's true remaining time (remaining_iteration x iteration_time): "
        "cohabit's srtf with --oracle; it preempts at every event (no minimum run); physics muri"),
    ("muri", "dlas-gpu"): Side(
        "tiresias:starve_limit=null:consolidate_unknown=false:skew_threshold=1:min_run_time=0", False, "muri",
        "Muri runs dlas_sim_jobs(gputime=True, solve_starvation=0): 2D-LAS, thresholds (3250, 7200) GPU-s, "
        "no starvation promotion, placed by GPU count (no consolidation), rescheduled at every event "
        "(no minimum run time); physics muri"),
    ("muri", "themis"): Side("themis", False, "muri", "physics muri"),
    ("gavel", "fifo"): Side(
        "gavel-fifo:pick=gavel-code", False, "gavel",
        "Gavel's FIFO allocation (whole GPU types to the oldest jobs; the type its code picks: the last "
        "listed with room) on its round mechanism (policies/gavel); physics gavel: 360 s rounds from t=0, "
        "no restart cost", native="fifo"),
    ("gavel", "max_min_fairness"): Side(
        "gavel-las", False, "gavel",
        "Gavel's LAS: max-min fair time fractions (LP optimum, water-filling point) on its round mechanism; "
        "physics gavel", native="tiresias"),
    ("gavel", "gandiva"): Side(
        "gavel-gandiva", False, "gavel",
        "Gavel's Gandiva (random same-size pairs sharing GPUs, equal time per combination) on its round "
        "mechanism; physics gavel: pairs at Gavel's measured pair throughputs, 360 s rounds", native="gandiva"),
    ("gavel", "finish_time_fairness"): Side(
        "gavel-ftf", True, "gavel",
        "Gavel's finish-time fairness (min max rho) on its round mechanism; Gavel's simulator reads its "
        "measured throughputs, hence --oracle; physics gavel", native="themis"),
}


def _default(side: Side) -> Side:
    """The same policy with cohabit's own defaults: no oracle, default parameters and physics."""
    return Side(side.native or side.policy.split(":")[0], False, "cohabit", "cohabit defaults")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cluster(sim: str, run: dict[str, Any]) -> Any:
    from cohabit.spec.cluster import gavel_cluster, preset

    if sim == "muri":
        return preset("muri-n8g8")
    v, p, k = (int(x) for x in run["cluster"]["cluster_spec"].split(":"))
    per = {int(x) for x in run["cluster"]["num_gpus_per_server"].split(":")}
    if len(per) != 1:
        raise SystemExit(f"{sim}: mixed GPUs per server {run['cluster']} not supported")
    return gavel_cluster(v, p, k, gpus_per_server=per.pop())


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_one(sim: str, ref: dict[str, Any], run: dict[str, Any], side: Side) -> dict[str, Any]:
    """Simulate one reference run in cohabit; its metrics and CPU seconds."""
    from cohabit.policies import make_policy
    from cohabit.sim.physics import PHYSICS_DECISION_PERIOD, PHYSICS_FIRST_ROUND, physics_config
    from cohabit.sim.runner import simulate
    from cohabit.sim.traces import load_trace

    workload = run["workload"].split("@")[0]
    inp = ref["inputs"][workload]
    path = REF / inp["file"]
    if _sha256(path) != inp["sha256"]:
        raise SystemExit(f"{path}: sha256 differs from the one recorded in {sim}.json")
    jobs = load_trace(path, inp["format"]).jobs
    policy = make_policy(side.policy, oracle=side.oracle)
    t0 = _cpu()
    out = simulate(jobs, _cluster(sim, run), policy, config=physics_config(side.physics), oracle=side.oracle,
                   decision_period=PHYSICS_DECISION_PERIOD.get(side.physics),
                   first_round=PHYSICS_FIRST_ROUND.get(side.physics))
    m = out.metrics
    return {"avg_jct": m.avg_jct, "makespan": m.makespan, "p95_jct": m.p95_jct, "preemptions": m.preemptions,
            "finished": m.jobs_finished, "cpu_s": _cpu() - t0}


def rows_for(sim: str, setting: str, policies: set[str] | None) -> list[dict[str, Any]]:
    ref = json.loads((REF / f"{sim}.json").read_text())
    rows: list[dict[str, Any]] = []
    for run in ref["runs"]:
        matched = MATCHED.get((sim, run["reference_policy"]))
        if matched is None or (policies and run["policy"] not in policies):
            continue
        if run.get("status") != "finished":
            rows.append({"simulator": sim, "workload": run["workload"], "policy": run["policy"], "metric": "avg_jct",
                         "reference": None, "cohabit": None, "ratio": None, "setting": setting,
                         "note": f"reference: {run.get('status')}"})
            continue
        side = matched if setting == "matched" else _default(matched)
        got = run_one(sim, ref, run, side)
        for metric in METRICS:
            r, c = run["metrics"].get(metric), got[metric]
            rows.append({
                "simulator": sim, "workload": run["workload"], "policy": run["policy"], "metric": metric,
                "reference": r, "cohabit": c, "ratio": (c / r) if (r and c is not None) else None,
                "setting": setting, "cohabit_policy": side.policy + ("[oracle]" if side.oracle else ""),
                "physics": side.physics, "cpu_s": round(got["cpu_s"], 2),
                "note": side.note if metric == "avg_jct" else
                (run["metrics"].get("preemptions_note", "") if metric == "preemptions" else ""),
            })
    return rows


#: ``--setting`` -> the settings of ``bench/fidelity_pollux.py`` it runs.
POLLUX_SETTINGS: dict[str, tuple[str, ...]] = {"matched": ("pollux-artifact", "matched"), "default": ("default",)}


def pollux_rows(settings: tuple[str, ...] = ("matched",), policies: set[str] | None = None) -> list[dict[str, Any]]:
    """Rows of ``bench/fidelity_pollux.py`` (the Pollux artifact), when that module exists."""
    path = ROOT / "bench" / "fidelity_pollux.py"
    if not path.exists():
        return []
    spec = importlib.util.spec_from_file_location("fidelity_pollux", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fidelity_pollux"] = mod
    spec.loader.exec_module(mod)
    theirs = [x for s in settings for x in POLLUX_SETTINGS[s]]
    return list(mod.rows(policies=sorted(policies) if policies else None, settings=theirs))


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and abs(x) < 100:
        return f"{x:.3f}"
    return f"{x:,.0f}"


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    head = ("simulator", "workload", "policy", "cohabit_policy", "setting", "metric", "reference", "cohabit", "ratio",
            "cpu_s")
    print(" | ".join(head))
    for r in rows:
        print(" | ".join(_fmt(r.get(k)) if k in ("reference", "cohabit", "ratio", "cpu_s") else str(r.get(k, ""))
                         for k in head))
    jct = [r for r in rows if r["metric"] == "avg_jct" and r.get("ratio") is not None]
    within = [r for r in jct if abs(r["ratio"] - 1) <= 0.05]
    print(f"avg JCT within 5%: {len(within)} of {len(jct)} compared runs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("muri", "gavel", "pollux"), help="one reference simulator")
    ap.add_argument("--policy", help="comma-separated cohabit-side policy names (e.g. srtf,fifo)")
    ap.add_argument("--setting", choices=("matched", "default", "both"), default="matched")
    ap.add_argument("--json", type=Path, default=OUT)
    ap.add_argument("--update", action="store_true",
                    help="replace only the rows run now in the --json file (same simulator, workload, policy, "
                         "setting, metric), keeping the others (implied by --only)")
    args = ap.parse_args(argv)
    policies = set(args.policy.split(",")) if args.policy else None
    settings = ("default", "matched") if args.setting == "both" else (args.setting,)
    rows: list[dict[str, Any]] = []
    wall = time.perf_counter()
    for sim in ("muri", "gavel"):
        if args.only in (None, sim):
            for setting in settings:
                rows += rows_for(sim, setting, policies)
    if args.only in (None, "pollux"):
        rows += pollux_rows(settings, policies)
    print_table(rows)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/fidelity.py", *(argv or sys.argv[1:])])
    out: dict[str, Any] = {"rows": rows, "loadavg": os.getloadavg(), "cpu_s": _cpu(),
                           "wall_s": time.perf_counter() - wall, "command": command}
    if (args.update or args.only) and args.json.exists():  # rows not run stay as they were
        old = json.loads(args.json.read_text())
        key = ("simulator", "workload", "policy", "setting", "metric")
        new = {tuple(r.get(k) for k in key): r for r in rows}
        merged = [new.pop(tuple(r.get(k) for k in key), r) for r in old["rows"]] + list(new.values())
        out = {**old, "rows": merged, "updates": [*old.get("updates", []),
                                                    {"command": command, "rows": len(rows), "loadavg": os.getloadavg(),
                                                     "cpu_s": _cpu(), "wall_s": time.perf_counter() - wall}]}
    args.json.write_text(json.dumps(out, indent=2, allow_nan=False))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
