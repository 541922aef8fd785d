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
* ``cluster_problem(cluster) -> str | None`` — why the policy cannot run on this
  cluster (e.g. learned weights trained for another size), checked by the
  commands before any work starts; None: it can;
* ``uses_oracle`` (bool) — the policy was built to read the oracle; the
  scheduler refuses to run it unless the user allowed the oracle, and then
  calls ``bind_oracle(oracle)`` before the first decision.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..engine.actions import Plan
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
