"""The Policy protocol: one method, ``decide(view) -> Plan``, plus optional hooks.

Hooks the scheduler calls when a policy defines them:

* ``on_arrival(job, view)`` — a job was admitted (it is pending);
* ``on_progress(job, view)`` — a job reported telemetry;
* ``on_finish(job, view)`` — a job ended (finished, stopped, failed, cancelled);
* ``tick_interval`` (seconds or None) — also call ``decide`` this often while
  jobs are active (time slicing, periodic re-evaluation);
* ``next_decision_time()`` (seconds or None) — call ``decide`` again at that time
  (asked again after every decision; e.g. when a job spared from preemption
  reaches its minimum run time);
* ``wants_turn(events) -> bool`` — asked after a turn that the backend alone
  woke (no arrival, wake-up, tick, round, budget timer or poll due), once its
  events are folded in (``on_progress``/``on_finish`` already called): False
  means ``decide`` would return an empty plan and change nothing a later round
  reads, so the scheduler makes no decision (and records no ``decision`` row)
  this turn. Without the hook every such turn decides;
* ``cluster_problem(cluster) -> str | None`` — why the policy cannot run on this
  cluster (e.g. learned weights trained for another size), checked by the
  commands before any work starts; None: it can;
* ``uses_oracle`` (bool) — the policy was built to read the oracle; the
  scheduler refuses to run it unless the user allowed the oracle, and then
  calls ``bind_oracle(oracle)`` before the first decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

from ..engine.actions import Placement, Plan, Resume, Start
from ..engine.job import JobView
from ..engine.view import ClusterView


@runtime_checkable
class Policy(Protocol):
    name: str

    def decide(self, view: ClusterView) -> Plan: ...


class BasePolicy:
    """Convenience base: a name, no hooks, no ticks, no oracle."""

    name: str = "base"
    tick_interval: float | None = None
    uses_oracle: bool = False

    def decide(self, view: ClusterView) -> Plan:  # pragma: no cover - abstract
        raise NotImplementedError


def waiting_jobs(view: ClusterView) -> list[JobView]:
    """The jobs waiting for a place: the paused ones, then the pending ones (each in arrival order)."""
    return [*view.paused.values(), *view.pending.values()]


def launch(view: ClusterView, job: JobView, placement: Placement) -> Start | Resume:
    """The action that runs a waiting job on ``placement``: Resume if it was paused, else Start."""
    return Resume(job.id, placement) if job.id in view.paused else Start(job.id, placement)


def place_in_order(view: ClusterView, jobs: Iterable[JobView], place: Callable[[JobView], Placement | None]) -> Plan:
    """Start or resume, in the given order, every job that ``place`` finds a placement for
    (``place`` reserves what it returns; a job it returns None for is skipped)."""
    plan: Plan = []
    for job in jobs:
        p = place(job)
        if p is not None:
            plan.append(launch(view, job, p))
    return plan
