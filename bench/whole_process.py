"""Whole ``cohabit simulate`` processes, old code against new, alternating round by round (issue 18).

What ``time python run_sim.py`` measures for a public simulator: interpreter start-up, imports, trace parse,
simulation, metrics and the printed table, as the CPU time (user + system, from the child's rusage) of one
process. Each round runs the old tree (``--before SRC``: its ``src`` directory on ``PYTHONPATH``) and then
the new one, with the same arguments, under ``nice``; it prints both, their ratio, the load average, and
whether the two printed tables are the same (compared without the ``decide mean`` column, a timing). With
``--artifact DIR --artifact-python PY`` each round first runs the Muri artifact's simulator on trace1 with
the flags of ``bench/reference/muri.md`` (``--schedule`` from ``--artifact-schedule``; never committed).

    python bench/whole_process.py --before /tmp/before/src --policy srtf [--rounds 3] [--limit N]
        [--trace bench/reference/inputs/muri_trace1.csv --format muri --cluster muri-n8g8]
        [--artifact /tmp/ref-muri/simulator --artifact-python /tmp/muri-venv/bin/python
         --artifact-schedule shortest]

The environment is passed on as it is: with ``PYTHONDONTWRITEBYTECODE`` set (as on the shared machine of
sessions 16-17) every process compiles cohabit's sources again (~0.14 CPU s of ~17k lines); with bytecode
cached (``PYTHONPYCACHEPREFIX=DIR`` and that variable unset, after one warm-up run) it does not.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_DECIDE_MS = re.compile(r" +[0-9.]+ ms *$", re.M)


def run_child(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(CPU s = user + system, wall s, stdout) of one child, its usage from ``os.wait4``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(["nice", *cmd], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited with {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, wall, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the old tree's src directory")
    ap.add_argument("--policy", default="srtf")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trace", default="bench/reference/inputs/muri_trace1.csv")
    ap.add_argument("--format", default="muri")
    ap.add_argument("--cluster", default="muri-n8g8")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--artifact", default=None, help="the Muri artifact's simulator/ directory (optional)")
    ap.add_argument("--artifact-python", default=None)
    ap.add_argument("--artifact-schedule", default="shortest")
    args = ap.parse_args()
    if not (Path(args.before) / "cohabit").is_dir():
        raise SystemExit(f"--before {args.before}: expected a src directory with cohabit/ in it")
    cmd = [sys.executable, "-m", "cohabit.cli", "simulate", "--trace", args.trace, "--format", args.format,
           "--cluster", args.cluster, "--policy", args.policy]
    if args.limit is not None:
        cmd += ["--limit", str(args.limit)]
    env_new = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env_old = {**env_new, "PYTHONPATH": str(Path(args.before).resolve())}
    art_cmd = [args.artifact_python or sys.executable, "run_sim.py", "--cluster_spec=cluster_spec/n8g8.csv", "--print",
               "--scheme=yarn", "--trace_file=trace-data/trace1.csv", f"--schedule={args.artifact_schedule}",
               f"--log_path=results/trace1-{args.artifact_schedule}", "--multi_resource", "4"]
    print(f"{' '.join(cmd[1:])}; before = {args.before}; PYTHONDONTWRITEBYTECODE="
          f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}, PYTHONPYCACHEPREFIX="
          f"{os.environ.get('PYTHONPYCACHEPREFIX', '')!r}")
    old_s, new_s, art_s = [], [], []
    for r in range(1, args.rounds + 1):
        load = os.getloadavg()[0]
        art = ""
        if args.artifact:
            cpu, wall, _ = run_child(art_cmd, Path(args.artifact), env_new)
            art_s.append(cpu)
            art = f"artifact {cpu:.2f} ({wall:.2f} wall)  "
        old, _, out_old = run_child(cmd, ROOT, env_old)
        new, _, out_new = run_child(cmd, ROOT, env_new)
        old_s.append(old)
        new_s.append(new)
        same = "same" if _DECIDE_MS.sub("", out_old) == _DECIDE_MS.sub("", out_new) else "DIFFERS"
        print(f"round {r}  load {load:.2f}  {art}before {old:.2f}  after {new:.2f}  {old / new:.2f}x  table {same}")
    med_old, med_new = statistics.median(old_s), statistics.median(new_s)
    art = f"artifact {statistics.median(art_s):.2f} ({statistics.median(art_s) / med_new:.2f}x after), " if art_s else ""
    print(f"median CPU s: {art}before {med_old:.2f}, after {med_new:.2f} ({med_old / med_new:.2f}x)")


if __name__ == "__main__":
    main()
