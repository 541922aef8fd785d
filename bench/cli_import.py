"""What starting ``cohabit`` costs: CPU time of ``import cohabit.cli`` and of ``cohabit --help``
in fresh processes, and which heavy libraries they load (issue 18; ``cohabit/cli_lazy.py``).

    python bench/cli_import.py [--runs 5] [--json bench/results/cli_import.json]

CPU time is the child's user + system time (``resource.RUSAGE_CHILDREN``), interpreter start-up
included; the load average is printed beside it (the machine is shared)."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

HEAVY = ("scipy", "sqlalchemy", "fastapi", "torch", "alembic", "uvicorn")
CASES = {
    "python -c pass": "pass",
    "import cohabit.cli": "import cohabit.cli",
    "cohabit --help": ("from typer.testing import CliRunner\nfrom cohabit.cli import app\n"
                       "assert CliRunner().invoke(app, ['--help']).exit_code == 0"),
}


def child_cpu(code: str) -> tuple[float, list[str]]:
    """(CPU seconds of one fresh interpreter running ``code``, heavy modules it loaded)."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, out.stdout.split()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", default="bench/results/cli_import.json")
    args = ap.parse_args()
    rows = []
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'case':22s} {'CPU s (median)':>15s} {'min':>6s}  heavy modules loaded")
    for name, code in CASES.items():
        runs = [child_cpu(code) for _ in range(args.runs)]
        cpu = [c for c, _ in runs]
        rows.append({"case": name, "cpu_s_median": statistics.median(cpu), "cpu_s_min": min(cpu),
                     "heavy": runs[-1][1], "runs": args.runs})
        print(f"{name:22s} {statistics.median(cpu):15.3f} {min(cpu):6.3f}  {', '.join(runs[-1][1]) or '-'}")
    print(f"load average {os.getloadavg()[0]:.1f}")
    doc = {"benchmark": "cli_import", "load_average": list(os.getloadavg()), "rows": rows}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
