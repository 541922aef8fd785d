"""The oracle: explicit, opt-in access to a trace's ground truth.

Some published policies (SRTF/SJF as baselines, Optimus with known epochs)
assume job lengths are known in advance. cohabit lets them have it only
through this object, which the scheduler hands to a policy only when the
policy declares ``uses_oracle`` and the user passes ``--oracle``; results then
carry an ``[oracle]`` tag (or the policy's name says so: ``optimus-oracle``).

Two kinds of truth:

* every job's total iterations and the trace's run time (:meth:`Oracle.total_iterations`,
  :meth:`Oracle.duration`);
* for jobs whose trace carries a profile of their work and speed (the Pollux applications),
  a :class:`WorkModel` (:meth:`Oracle.work_model`): iterations per epoch at the job's batch
  size and the measured step times. This is what the Pollux artifact's *Optimus+Oracle*
  reads (petuum/adaptdl ``osdi21-artifact``, ``simulator/optimus.py``: ``get_iteration``,
  ``get_throughput``); ``optimus-oracle`` reads it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class WorkModel(Protocol):
    """A job's true work and speed (provided by the simulator for profiled jobs).

    ``done`` is work in the job's own units (the iterations a job reports)."""

    @property
    def epochs(self) -> int:
        """Epochs the job trains for."""
        ...

    @property
    def batch_size(self) -> int:
        """The job's total batch size (the trace's)."""
        ...

    @property
    def batch_limits(self) -> tuple[int, int, int, int]:
        """``(init_batch, max_batch, min_local, max_local)``: smallest and largest profiled total
        batch, smallest and largest per-GPU batch the job can run."""
        ...

    def epoch(self, done: float) -> int:
        """Epochs completed after ``done`` work (0-based index of the epoch the job is in)."""
        ...

    def iterations_after_epoch(self, epoch: int) -> float:
        """Iterations at the job's batch size from its start to the end of epoch ``epoch`` (0-based)."""
        ...

    def step_time(self, per_node: tuple[int, ...], local_bsz: int) -> tuple[float, float]:
        """``(step, sync)`` seconds of one synchronising step at ``local_bsz`` per GPU on a placement
        with ``per_node`` GPUs on each node it uses."""
        ...


class Oracle:
    __slots__ = ("_iterations", "_duration", "_models")

    def __init__(self, iterations: Mapping[str, int], duration: Mapping[str, float | None],
                 models: Mapping[str, WorkModel] | None = None) -> None:
        self._iterations = dict(iterations)
        self._duration = dict(duration)
        self._models = dict(models or {})

    def total_iterations(self, job: str) -> int:
        """True total iterations (work units) of ``job``."""
        return self._iterations[job]

    def duration(self, job: str) -> float | None:
        """The trace's run time of ``job`` at its reference size, if the trace has one."""
        return self._duration.get(job)

    def work_model(self, job: str) -> WorkModel | None:
        """The true work-and-speed model of ``job``, if its trace profiles one (else None)."""
        return self._models.get(job)
