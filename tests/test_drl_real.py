"""Harmony-DRL places real PS and all-reduce jobs through ``cohabit run``'s runner, unchanged (issue 15, point 7)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.drl.state import JobEntry, PlacementState
from cohabit.runtime.runner import run_local
from cohabit.spec.cluster import preset
from cohabit.spec.yamlio import load_jobs

from runtime_helpers import no_orphans  # noqa: F401

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "drl_jobs.yaml"


def test_drl_places_real_ps_and_allreduce_jobs_by_its_masks(tmp_path) -> None:
    """Every job of examples/drl_jobs.yaml finishes as real processes on the 6-server ``drl`` preset,
    each started on exactly the servers drl's masked choices named (workers first, then PS), and
    all-reduce jobs never offered or given a PS action."""
    specs = load_jobs(EXAMPLE)
    assert {s.architecture for s in specs} >= {"ps", "allreduce"}
    pol = make_policy("drl")
    choices: list[tuple[str, bool, np.ndarray, int]] = []
    inner = pol.choose

    def logged(state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        action = inner(state, job, mask)
        choices.append((job.key, job.allreduce, mask.copy(), action))
        return action

    pol.choose = logged  # type: ignore[method-assign]
    out = run_local(specs, preset("drl"), pol, root=tmp_path, checkpoint_interval=0)

    states = {jid: str(jv.state) for jid, jv in out.result.jobs.items()}
    assert states == {s.id: "finished" for s in specs}, states
    started = {e.job: list(e.data["nodes"]) for e in out.result.record if e.kind is EventKind.STARTED}
    assert set(started) == {s.id for s in specs}
    for spec in specs:
        mine = [(ar, mask, a) for jid, ar, mask, a in choices if jid == spec.id]
        assert mine, f"drl made no decision for {spec.id}"
        assert all(mask[a] for _, mask, a in mine), spec.id  # every action was a valid one
        n_ps = 0 if spec.architecture == "allreduce" else spec.num_ps
        if spec.architecture == "allreduce":
            assert all(ar and not mask[1::2].any() and a % 2 == 0 for ar, mask, a in mine), spec.id
        # the tasks of the job's last (successful) placement: its final workers + PS choices
        last = [a for _, _, a in mine][-(spec.workers.count + n_ps):]
        workers = sorted(a // 2 for a in last if a % 2 == 0)
        servers = sorted(a // 2 for a in last if a % 2 == 1)
        assert started[spec.id] == workers + servers, (spec.id, started[spec.id], last)
        assert len(servers) == n_ps
