"""Harmony's ``order`` option: which waiting jobs Algorithm 1 considers first and repairs take."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cohabit.engine.loop import Scheduler
from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.harmony.policy import Harmony
from cohabit.policies.params import PolicyParamError
from cohabit.sim.backend import SimBackend
from cohabit.sim.harmony_workload import generate, harmony_cluster
from cohabit.sim.physics import SimConfig


def _view(jobs: dict[str, tuple[int, int | None, float]], machines: int = 8) -> SimpleNamespace:
    """A minimal view: job id -> (seq, declared iterations, iterations done); no group runs."""
    js = {j: SimpleNamespace(seq=seq, spec=SimpleNamespace(iterations=it), iterations_done=lambda now, d=done: d)
          for j, (seq, it, done) in jobs.items()}
    return SimpleNamespace(jobs=js, running={}, capacity=np.zeros((machines, 3)), now=0.0)


def _policy(order: str) -> Harmony:
    p = Harmony(order=order)
    for j, (c1, net) in {"x": (80.0, 2.0), "y": (80.0, 2.0), "z": (8.0, 1.0), "w": (160.0, 4.0)}.items():
        p.book.observe(j, 8, c1 / 8, net)
    return p


def test_queue_order_is_submission_order() -> None:
    view = _view({"x": (0, 1000, 0.0), "y": (1, 50, 0.0), "z": (2, None, 0.0), "w": (3, 100, 90.0)})
    assert _policy("queue")._ranked(view, ["w", "z", "y", "x"]) == ["x", "y", "z", "w"]  # type: ignore[arg-type]


def test_srpt_ranks_by_declared_iterations_left_times_profiled_iteration_time() -> None:
    """Eq. 2 at DoP 8 (8 machines, no group): x 1000 x 12 s, y 50 x 12 s, w 10 left x 24 s;
    z declared nothing and comes last."""
    view = _view({"x": (0, 1000, 0.0), "y": (1, 50, 0.0), "z": (2, None, 0.0), "w": (3, 100, 90.0)})
    assert _policy("srpt")._ranked(view, ["x", "y", "z", "w"]) == ["w", "y", "x", "z"]  # type: ignore[arg-type]
    assert _policy("lrpt")._ranked(view, ["z", "w", "y", "x"]) == ["x", "y", "w", "z"]  # type: ignore[arg-type]


def test_order_is_a_policy_parameter_and_checked() -> None:
    assert make_policy("harmony").order == "queue"  # type: ignore[attr-defined]
    assert make_policy("harmony:order=srpt").order == "srpt"  # type: ignore[attr-defined]
    with pytest.raises(PolicyParamError, match="order must be one of queue, srpt, lrpt"):
        make_policy("harmony:order=longest")
    with pytest.raises(ValueError, match="order"):
        Harmony(order="fifo")


def _run(policy: Harmony, declare: bool) -> dict[str, float]:
    jobs = generate(n_machines=24, seed=3, hyper=2, declare_iterations=declare)
    sched = Scheduler(harmony_cluster(24), policy, SimBackend(jobs, SimConfig()), strict=True)
    result = sched.run([j.spec for j in jobs])
    assert not result.unfinished and not [e for e in sched.record if e.kind is EventKind.ACTION_REJECTED]
    return {j: r.end_time for j, r in result.jobs.items()}


def test_srpt_runs_end_to_end_and_declaring_iterations_does_not_change_queue_order() -> None:
    assert _run(Harmony(), declare=False) == _run(Harmony(), declare=True)
    ends = _run(Harmony(order="srpt"), declare=True)
    assert len(ends) == 16 and all(e is not None for e in ends.values())
