"""Ratchet (a): checkpoint triggering from operator progress and remaining cost.

Ratchet's problem statement (ch. 4): "there is no one-size-fits-all checkpointing triggering
point"; a checkpoint taken in the middle of a long operator makes it re-run, and a checkpoint
is not worthwhile when it only adds overhead. The rule here, for one job:

1. **only at operator boundaries** — the caller asks at the end of a batch (a query) or an
   iteration (training), never inside one, so no operator is cut and redone;
2. **overhead bound** — with a measured cost ``C`` seconds per checkpoint, checkpoints at least
   ``C / bound`` seconds of work apart keep the runtime overhead at most ``bound`` (CheckFreq,
   Mohan et al., FAST'21, holds it to 3.5%); within that bound, as often as possible (the work a
   crash can lose is at most one interval);
3. **remaining cost** — no periodic checkpoint when the job's remaining work is shorter than one
   interval: it ends first and writes its final state anyway;
4. **cost learning** — the first checkpoint comes after ``first_after_s`` (the fixed interval it
   replaces) and measures ``C``; later ones use the running mean of the measured costs;
5. **overhead budget** — given the run's elapsed time, a checkpoint waits until the checkpoints so
   far plus this one fit the bound of the whole run (:meth:`CheckpointTrigger.due`), which pays back
   a first checkpoint that cost more than the fixed interval allowed.

For preemption (:meth:`worth_preempting`): pausing a job costs a checkpoint, a restart and a
restore; a job whose remaining work is no longer than that is left to finish instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CHECKFREQ_BOUND = 0.035


@dataclass
class CheckpointTrigger:
    """When a job checkpoints (module docstring); one object per running task."""

    bound: float = CHECKFREQ_BOUND
    first_after_s: float = 2.0
    _costs: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.bound < 1:
            raise ValueError(f"bound must be a fraction of the runtime in (0, 1), got {self.bound!r}")
        if not self.first_after_s > 0:
            raise ValueError(f"first_after_s must be > 0 seconds, got {self.first_after_s!r}")

    def record_cost(self, seconds: float) -> None:
        """A checkpoint took ``seconds`` (the save's measured time)."""
        if seconds >= 0:
            self._costs.append(float(seconds))

    @property
    def cost_s(self) -> float | None:
        """Mean measured checkpoint cost (None before the first checkpoint)."""
        return sum(self._costs) / len(self._costs) if self._costs else None

    def interval_s(self) -> float:
        """Seconds of work between checkpoints: ``C / bound``, or ``first_after_s`` before C is known."""
        c = self.cost_s
        return self.first_after_s if c is None else c / self.bound

    @property
    def spent_s(self) -> float:
        """Seconds spent checkpointing so far."""
        return sum(self._costs)

    def due(self, since_last_s: float, remaining_s: float | None, elapsed_s: float | None = None) -> bool:
        """At an operator boundary: checkpoint now? ``remaining_s``: the job's remaining work (None: unknown).

        ``elapsed_s`` (seconds since the job's run began, checkpoints included) turns on rule 5, the
        **overhead budget**: once the cost C is known, a checkpoint is due only if every checkpoint so
        far plus this one stays within the bound of the run's time,
        ``(spent + C) / (elapsed + C) <= bound``. The first checkpoint, taken before C is known, may
        overshoot; the next ones wait until the run has paid it back, so over the run the overhead
        stays within the bound from the second checkpoint on."""
        interval = self.interval_s()
        if since_last_s < interval:
            return False
        c = self.cost_s
        if elapsed_s is not None and c is not None and self.spent_s + c > self.bound * (elapsed_s + c):
            return False
        return remaining_s is None or remaining_s > interval

    @staticmethod
    def worth_preempting(remaining_s: float | None, switch_cost_s: float) -> bool:
        """Pause a job (checkpoint, later restart and restore) only if it has more work left than that costs."""
        return remaining_s is None or remaining_s > switch_cost_s
