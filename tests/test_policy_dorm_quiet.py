"""Dorm's MILP solves print nothing: no HiGHS banner on stdout (it would land in the middle of tables)."""

from __future__ import annotations

import subprocess
import sys


def test_dorm_simulation_prints_no_highs_banner() -> None:
    """A fresh process (HiGHS prints its banner once per process) runs Dorm, which solves P2 with HiGHS."""
    code = (
        "from cohabit.policies import make_policy\n"
        "from cohabit.sim.runner import simulate\n"
        "from cohabit.sim.traces import load_trace\n"
        "from cohabit.spec.cluster import preset\n"
        "import cohabit.policies.dorm.milp as milp\n"
        "calls = []\n"
        "real = milp.quiet_highs\n"
        "milp.quiet_highs = lambda: calls.append(1) or real()\n"
        "jobs = load_trace('tiresias_480', 'tiresias', limit=15).jobs\n"
        "out = simulate(jobs, preset('tiresias'), make_policy('dorm'))\n"
        "print('solves', len(calls), 'finished', out.metrics.jobs_finished)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "HiGHS" not in res.stdout and "HiGHS" not in res.stderr, res.stdout[:500]
    solves = int(res.stdout.split()[res.stdout.split().index("solves") + 1])
    assert solves > 0 and "finished 15" in res.stdout
