"""SLAQ's and Themis' rounds after an arrival or finish that admit nobody (issue 18, fifteenth session): when
no waiting job's minimum fits the free room alone (``JobModels.admits_none``; Themis: and no lease expired), the
round is skipped. These tests run each
skipped round anyway on the same view (its plan must be empty) and compare whole runs with and without the
shortcut (``skip_quiet``)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cohabit.policies.slaq import SLAQ
from cohabit.policies.targets import apply_targets, consolidated_placer
from cohabit.policies.themis import Themis
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster


def _workload(seed: int) -> list[TraceJob]:
    """40 jobs of 1 to 8 GPUs (some elastic, a few with a fractional GPU) arriving over eight hours on 8 GPUs:
    the queue fills, and the room a finish leaves is often too small for every waiting job."""
    rng = random.Random(seed)
    out = []
    for i in range(40):
        gpus: float = rng.choice([1, 2, 4, 4, 8, 8])
        kw: dict[str, object] = {}
        if gpus > 1 and rng.random() < 0.3:
            kw = {"n_min": 1, "n_max": int(gpus)}
        if rng.random() < 0.1:
            gpus = 0.5
        iters = rng.randint(300, 3000)
        spec = simple_job(f"j{i}", gpus, submit_time=rng.uniform(0, 8 * 3600), model=rng.choice(["a", "b"]),
                          iterations=iters if rng.random() < 0.6 else None, **kw)
        curve = (rng.uniform(2, 40), 1.0, rng.uniform(0.05, 0.5))
        out.append(TraceJob(spec, JobTruth(iterations=iters, duration=iters * rng.uniform(0.5, 2.0),
                                           ref_workers=max(int(gpus), 1), loss_curve=curve)))
    return out


POLICIES = {"slaq": lambda: SLAQ(epoch=120.0, report_interval=30.0),
            "themis": lambda: Themis(lease=120.0, report_interval=30.0, tick=30.0)}


def _round_of(pol, view) -> list:  # type: ignore[no-untyped-def]
    """The plan of the round over the free room and the waiting jobs that the shortcut skipped."""
    waiting = list(view.paused.values()) + list(view.pending.values())
    if isinstance(pol, SLAQ):
        return pol._round(view, waiting, full=False, waiting_tail=len(waiting))
    targets, served, shrink = pol.targets(view, waiting, waiting_tail=len(waiting))
    assert not any(targets.values()), view.now  # (nobody served: no lease set either)
    return apply_targets(view, targets, [view.jobs[j] for j in served], consolidated_placer, reason="check",
                         shrink=[view.jobs[j] for j in shrink])


def _run(policy: str, seed: int, *, skip: bool, check: bool = False) -> tuple[dict, int]:
    """One run; with ``check`` every round the shortcut skips is also run in full on the same view and must plan
    nothing (that run's own later rounds then find what the round made). Returns the fingerprint and how many
    rounds were skipped."""
    pol = POLICIES[policy]()
    pol.skip_quiet = skip
    skipped = [0]
    real = pol.models.admits_none

    def checked(view, free):  # type: ignore[no-untyped-def]
        none = real(view, free)
        if none and check:
            assert _round_of(pol, view) == [], view.now
        skipped[0] += none
        return none

    pol.models.admits_none = checked  # type: ignore[method-assign]
    res = simulate(_workload(seed), small_cluster(2, 4), pol)
    return fingerprint(res.result.record, res.metrics), skipped[0]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_event_rounds_that_admit_nobody_are_skipped_with_the_same_results(policy: str) -> None:
    """Fails if the shortcut skips a round that would start a job (checked: with the test asked of every minimum
    at once, ``.all()``; reading the pending jobs alone, not the paused ones; always skipping), or if skipping
    one changes anything later (the paused jobs' rows and fits made at a later round)."""
    total = 0
    for seed in range(4):
        fast, n = _run(policy, seed, skip=True)
        slow, _ = _run(policy, seed, skip=False)
        assert fast == slow, seed
        _, checked = _run(policy, seed, skip=True, check=True)
        total += min(n, checked)
    assert total > 20


def test_admits_none_reads_every_waiting_jobs_minimum() -> None:
    """``admits_none`` is False as soon as one waiting job's minimum fits the room (within ``EPS``)."""
    pol = SLAQ()
    seen: list[bool] = []
    real = pol.models.admits_none

    def probe(view, free):  # type: ignore[no-untyped-def]
        answer = real(view, free)
        ids = list(view.paused) + list(view.pending)
        first = pol.models._first_cost(view, ids)
        assert answer == (not (first <= free + 1e-9).all(axis=1).any())
        # the room of the smallest minimum: admits one
        smallest = first[np.argmin(first.sum(axis=1))]
        assert not real(view, smallest.copy())
        seen.append(answer)
        return answer

    pol.models.admits_none = probe  # type: ignore[method-assign]
    simulate(_workload(7), small_cluster(2, 4), pol)
    assert True in seen and False in seen
