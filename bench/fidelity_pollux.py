"""Cross-simulator fidelity: cohabit next to the Pollux artifact's simulator on its own workloads.

The reference numbers are in ``bench/reference/pollux.json`` (how they were produced:
``bench/reference/pollux.md``): the Pollux artifact (petuum/adaptdl, branch ``osdi21-artifact``,
``simulator/``) run by hand on its workloads with its Tiresias, Optimus(+Oracle) and Pollux
policies. This script runs cohabit on the same inputs (the embedded ``pollux_workload-1`` and
the workload files in ``bench/reference/inputs/``, same 16 x 4-GPU cluster: preset ``pollux``)
and prints, per workload, policy and metric, the reference, cohabit's value and their ratio.

cohabit runs each policy under two settings of its simulator:

* ``default``: cohabit's default physics (a Pollux job progresses at its throughput: every
  sample counts as one at the smallest profiled batch), decisions on every event;
* ``pollux-artifact``: the documented option that matches the artifact's physics
  (``cohabit.sim.physics.POLLUX_ARTIFACT``: goodput with statistical efficiency per epoch,
  30 s before a first start makes progress; and ``decision_period=60``: the policy decides
  every 60 s, as the artifact's simulator steps).

``matched``: the artifact's physics as ``pollux-artifact`` and, for each of its policies, cohabit's
reading of the artifact's own code (:data:`MATCHED`: ``tiresias-pollux``, ``optimus-oracle`` with
the oracle, ``pollux``); the other settings run cohabit's own policies (:data:`POLICIES`).

``--settings goodput`` and ``goodput+start`` are the steps in between (goodput physics only; plus
the 30 s start delay), to see what each part of the option contributes.

Policies (what each side runs; docs/pollux.md explains the differences that remain):

* ``tiresias``: the artifact's Tiresias (2 queues split at 16 GPU-hours, no starvation
  promotion, placement anywhere) = cohabit ``tiresias:thresholds=[57600]:starve_limit=null:
  consolidate_unknown=false:min_run_time=0``;
* ``optimus``: the artifact's Optimus+Oracle (true remaining iterations and true step times)
  vs cohabit's Optimus (loss-curve and speed fits, no oracle; its default 300 s full
  re-allocation interval: ``optimus:interval=60`` was 10 points further from the reference on
  workload-1, docs/pollux.md), and vs ``optimus-oracle`` (the artifact's rule, reading the truth
  through cohabit's oracle: run with ``--oracle``);
* ``pollux``: the artifact's Pollux (its genetic algorithm; published results) vs cohabit's
  ``pollux``.

Metrics: ``avg_jct`` and ``p95_jct`` (seconds, over the jobs of the workload), ``makespan``
(completion time of the last job, seconds since t = 0, the artifact's clock) and
``restarts_per_job`` (re-allocations after a job's first start; the artifact's
``num_restarts``; cohabit: preemptions + resizes + migrations), where the reference has it.

``rows()`` is what ``bench/fidelity.py`` imports: one dict per (workload, policy, metric) with
``simulator="pollux-artifact"``, ``workload``, ``policy``, ``metric``, ``reference``,
``cohabit``, ``ratio`` (cohabit / reference) and ``setting`` (the cohabit setting).

Usage: python bench/fidelity_pollux.py [--workloads workload-1,workload-6] [--policies tiresias]
       [--settings default,pollux-artifact] [--json bench/results/fidelity_pollux.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from cohabit.policies import make_policy
from cohabit.sim.physics import POLLUX_ARTIFACT, SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.sim.truth import TraceJob
from cohabit.spec.cluster import preset

HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "reference" / "pollux.json"
SIMULATOR = "pollux-artifact"

#: cohabit's policy for each of the artifact's (module docstring).
POLICIES: dict[str, str] = {
    "tiresias": "tiresias:thresholds=[57600]:starve_limit=null:consolidate_unknown=false:min_run_time=0",
    "optimus": "optimus",
    "pollux": "pollux",
}
#: The artifact's own reading of each of its policies in cohabit (setting ``matched``).
MATCHED: dict[str, str] = {"tiresias": "tiresias-pollux", "optimus": "optimus-oracle", "pollux": "pollux"}
#: cohabit's simulator settings: (SimConfig, decision period in seconds).
SETTINGS: dict[str, tuple[SimConfig | None, float | None]] = {
    "default": (None, None),
    "goodput": (SimConfig(pollux_goodput=True), None),  # the steps in between, to see what each one adds
    "goodput+start": (SimConfig(pollux_goodput=True, start_s=30.0), None),
    "pollux-artifact": (POLLUX_ARTIFACT, 60.0),
    "matched": (POLLUX_ARTIFACT, 60.0),  # and the MATCHED policies
}
METRICS = ("avg_jct", "p95_jct", "makespan", "restarts_per_job")


def reference() -> dict[str, Any]:
    """The recorded reference runs (``bench/reference/pollux.json``)."""
    return json.loads(REFERENCE.read_text())


def workload_jobs(name: str, ref: dict[str, Any] | None = None) -> list[TraceJob]:
    """The jobs of one of the artifact's workloads (embedded, or a file under ``reference/``)."""
    ref = ref or reference()
    entry = ref["inputs"][name]
    src = entry.get("embedded") or str(REFERENCE.parent / entry["file"])
    return load_trace(src, "pollux").jobs


def run_cohabit(jobs: list[TraceJob], policy: str, setting: str) -> dict[str, float]:
    """cohabit's metrics for the artifact's ``policy`` (or a cohabit policy spec) under ``setting``
    (same definitions as the reference). A policy that reads the oracle gets it."""
    cfg, period = SETTINGS[setting]
    t0 = time.process_time()
    pol = make_policy(POLICIES.get(policy, policy))  # the oracle goes only to a policy that declares it
    out = simulate(jobs, preset("pollux"), pol, config=cfg, decision_period=period, oracle=pol.uses_oracle)
    cpu = time.process_time() - t0
    done = [j for j in out.result.jobs.values() if j.end_time is not None and j.state.value == "finished"]
    jct = np.array([j.end_time - j.spec.submit_time for j in done])  # type: ignore[operator]
    restarts = sum(j.preemptions + j.resizes + j.migrations for j in out.result.jobs.values())
    return {
        "jobs": float(len(done)), "avg_jct": float(jct.mean()), "p95_jct": float(np.percentile(jct, 95)),
        "makespan": float(max(j.end_time for j in done)),  # type: ignore[type-var]
        "restarts_per_job": restarts / max(len(out.result.jobs), 1), "cpu_s": cpu,
        "unfinished": float(len(out.result.unfinished)), "oracle": pol.uses_oracle,
    }


def rows(workloads: list[str] | None = None, policies: list[str] | None = None,
         settings: list[str] | None = None) -> list[dict[str, Any]]:
    """Reference vs cohabit, one row per (workload, policy, setting, metric) the reference has.

    Defaults: every reference run, cohabit setting ``pollux-artifact`` (the documented option)."""
    ref = reference()
    settings = settings or ["pollux-artifact"]
    out: list[dict[str, Any]] = []
    jobs_of: dict[str, list[TraceJob]] = {}
    for run in ref["runs"]:
        wl, ref_pol = run["workload"], run["policy"]
        for setting in settings:
            pol = MATCHED[ref_pol] if setting == "matched" else ref_pol
            if (workloads and wl not in workloads) or (policies and pol not in policies and ref_pol not in policies):
                continue
            jobs = jobs_of.setdefault(wl, workload_jobs(wl, ref))
            mine = run_cohabit(jobs, pol, setting)
            for metric in METRICS:
                theirs = run["metrics"].get(metric)
                if theirs is None:
                    continue
                out.append({"simulator": SIMULATOR, "workload": wl, "policy": pol, "reference_policy": ref_pol,
                        "cohabit_policy": POLICIES.get(pol, pol) + ("[oracle]" if mine["oracle"] else ""),
                        "cpu_s": round(mine["cpu_s"], 2),
                            "metric": metric, "reference": theirs, "cohabit": mine[metric],
                            "ratio": mine[metric] / theirs if theirs else float("nan"), "setting": setting,
                            "reference_source": run["source"], "cohabit_cpu_s": round(mine["cpu_s"], 2),
                            "cohabit_unfinished": mine["unfinished"]})
    return out


def _print(table: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"cohabit vs the Pollux artifact (load average {os.getloadavg()[0]:.1f})")
    for col in ("workload", "policy", "setting", "metric", "reference", "cohabit", "ratio", "cpu s"):
        t.add_column(col, justify="right" if col in ("reference", "cohabit", "ratio", "cpu s") else "left")
    for r in table:
        t.add_row(r["workload"], r["policy"], r["setting"], r["metric"], f"{r['reference']:,.2f}",
                  f"{r['cohabit']:,.2f}", f"{r['ratio']:.3f}", f"{r['cohabit_cpu_s']:.1f}")
    Console(width=140).print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="", help="comma-separated reference workloads (default: all)")
    ap.add_argument("--policies", default="", help="comma-separated reference or cohabit policies: tiresias,optimus,"
                    "pollux (default: all)")
    ap.add_argument("--settings", default="default,pollux-artifact,matched", help="cohabit settings to run")
    ap.add_argument("--json", default="bench/results/fidelity_pollux.json")
    a = ap.parse_args()
    split = lambda s: [x for x in s.split(",") if x] or None  # noqa: E731
    table = rows(split(a.workloads), split(a.policies), split(a.settings))
    _print(table)
    summary: dict[str, dict[str, float]] = {}
    for r in table:
        if r["metric"] == "avg_jct":
            s = summary.setdefault(f"{r['policy']} / {r['setting']}", {"n": 0, "within_5pct": 0, "max_abs_dev": 0.0})
            s["n"] += 1
            s["within_5pct"] += abs(r["ratio"] - 1) <= 0.05
            s["max_abs_dev"] = max(s["max_abs_dev"], abs(r["ratio"] - 1))
    for k, s in summary.items():
        print(f"avg JCT {k}: {s['within_5pct']}/{s['n']} within 5%, largest deviation {100 * s['max_abs_dev']:.1f}%")
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps({"load_average": os.getloadavg(), "rows": table, "summary": summary},
                                       indent=1))
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
