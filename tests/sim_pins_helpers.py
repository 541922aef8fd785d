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


TENANT_PIN_FILE = Path(__file__).parent / "data" / "sim_pins_philly_tenants.json"

#: Policies whose rounds walk per-tenant queues, pinned on a contended multi-tenant run (the
#: 480-job Tiresias trace has one tenant): the first 600 Philly jobs (11 tenants) on 8 x 8 GPUs.
TENANT_POLICIES = (
    "drf", "drf:backfill=true", "drf:preemptive=true", "static", "static:backfill=true", "tetris:fairness=0.5",
)


@cache
def _philly_prefix(limit: int, cluster: str) -> tuple[Any, Any]:
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    return load_trace("philly_82k", "philly", limit=limit).jobs, cluster_from_arg(cluster)


def _run_on_philly_prefix(policy: str, limit: int, cluster: str) -> dict[str, Any]:
    """Fingerprint of ``policy`` on the first ``limit`` jobs of ``philly_82k`` on the ``cluster`` preset."""
    from cohabit.policies import make_policy
    from cohabit.report.fingerprint import fingerprint
    from cohabit.sim.runner import simulate

    jobs, spec = _philly_prefix(limit, cluster)
    out = simulate(jobs, spec, make_policy(policy))
    return fingerprint(out.result.record, out.metrics)


def run_tenant_pinned(policy: str) -> dict[str, Any]:
    """Fingerprint of ``policy`` on the first 600 jobs of ``philly_82k`` on ``muri-n8g8``."""
    return _run_on_philly_prefix(policy, 600, "muri-n8g8")


CONTENDED_PIN_FILE = Path(__file__).parent / "data" / "sim_pins_philly_512.json"

#: Policies whose rounds scan a long queue, pinned on the contended Philly shape the speed work measures
#: (issue 18): the first 2,000 Philly jobs on ``philly-512`` (64 x 8 GPUs; gandiva pauses, migrates and packs).
CONTENDED_POLICIES = ("gandiva", "tetris")


def run_contended_pinned(policy: str) -> dict[str, Any]:
    """Fingerprint of ``policy`` on the first 2,000 jobs of ``philly_82k`` on ``philly-512``."""
    return _run_on_philly_prefix(policy, 2000, "philly-512")
