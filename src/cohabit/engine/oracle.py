"""The oracle: explicit, opt-in access to a trace's true job lengths.

Some published policies (SRTF/SJF as baselines, Optimus with known epochs)
assume job lengths are known in advance. cohabit lets them have it only
through this object, which the scheduler hands to a policy only when the user
passes ``--oracle``; results then carry an ``[oracle]`` tag.
"""

from __future__ import annotations

from collections.abc import Mapping


class Oracle:
    __slots__ = ("_iterations", "_duration")

    def __init__(self, iterations: Mapping[str, int], duration: Mapping[str, float | None]) -> None:
        self._iterations = dict(iterations)
        self._duration = dict(duration)

    def total_iterations(self, job: str) -> int:
        """True total iterations (work units) of ``job``."""
        return self._iterations[job]

    def duration(self, job: str) -> float | None:
        """The trace's run time of ``job`` at its reference size, if the trace has one."""
        return self._duration.get(job)
