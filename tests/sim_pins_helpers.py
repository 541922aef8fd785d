"""Shared by tests/test_sim_pins.py and bench/sim_pins.py: which runs are pinned and how one is run."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

PIN_FILE = Path(__file__).parent / "data" / "sim_pins_tiresias_480.json"

#: Every deterministic baseline (two runs of each give the same fingerprint).
PINNED_POLICIES = (
    "fifo", "fifo-backfill", "srtf", "tiresias", "tiresias-gittins", "gandiva", "optimus", "slaq",
    "themis", "drf", "tetris", "lb", "binpack", "static", "naive",
)


@cache
def _trace() -> tuple[Any, Any]:
    from cohabit.sim.traces import load_trace
    from cohabit.spec import preset

    return load_trace("tiresias_480", "tiresias").jobs, preset("tiresias")


def run_pinned(policy: str) -> dict[str, Any]:
    """Fingerprint of ``policy`` on the embedded 480-job Tiresias trace on the ``tiresias`` preset."""
    from cohabit.policies import make_policy
    from cohabit.report.fingerprint import fingerprint
    from cohabit.sim.runner import simulate

    jobs, cluster = _trace()
    out = simulate(jobs, cluster, make_policy(policy))
    return fingerprint(out.result.record, out.metrics)
