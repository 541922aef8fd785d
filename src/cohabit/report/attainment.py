"""Attainment of completion criteria (Rotary, Liu dissertation ch. 3), from the record alone.

A job with completion criteria ends with a ``finished`` or ``stopped`` event
whose data carries the outcome :meth:`cohabit.engine.criteria.CriteriaBook.outcome`
wrote: ``attained``, ``false_attained``, the metric ``reached`` and its
``heldout`` value. Definitions:

* **attained**: jobs whose criterion was met (Rotary's objective, §3.1.4, is to
  maximise their number); **not attained**: jobs with criteria that ended
  otherwise (their WITHIN budget ran out, or their work ended first);
* **false attainment** (§3.2.2, Fig. 3.6): attained jobs whose held-out value
  of the same evaluation does not meet the criterion; the ratio is over the
  attained jobs that reported a held-out value;
* **accuracy reached**: mean of the last reported value of each job's
  criterion metric (and of its held-out value), over jobs that reported one;
* **attained over time**: the times (from the first submission) at which jobs
  attained, sorted: the curve of "attained jobs over time".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Attainment", "attainment_from_outcomes"]


@dataclass(frozen=True, eq=False)
class Attainment:
    """How the jobs with completion criteria ended (see the module doc)."""

    jobs_with_criteria: int
    attained: int
    false_attained: int
    #: attained jobs that reported a held-out value (the false-attainment ratio's denominator)
    checked: int
    mean_reached: float | None
    mean_heldout: float | None
    #: criterion kind -> (jobs, attained)
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: seconds from the first submission at which each attained job attained, ascending
    attained_times: list[float] = field(default_factory=list)

    @property
    def not_attained(self) -> int:
        return self.jobs_with_criteria - self.attained

    @property
    def false_attainment_ratio(self) -> float | None:
        return self.false_attained / self.checked if self.checked else None

    def attained_by(self, t: float) -> int:
        """Jobs attained within ``t`` seconds of the first submission."""
        return sum(1 for x in self.attained_times if x <= t)

    def to_json(self) -> dict[str, Any]:
        return {
            "jobs_with_criteria": self.jobs_with_criteria, "attained": self.attained,
            "not_attained": self.not_attained, "false_attained": self.false_attained,
            "false_attainment_ratio": self.false_attainment_ratio,
            "mean_accuracy_reached": self.mean_reached, "mean_heldout_accuracy": self.mean_heldout,
            "by_kind": {k: {"jobs": n, "attained": a} for k, (n, a) in sorted(self.by_kind.items())},
            "attained_times": [round(t, 3) for t in self.attained_times],
        }


def attainment_from_outcomes(outcomes: Iterable[tuple[float, Mapping[str, Any]]],
                             start: float | None) -> Attainment | None:
    """An :class:`Attainment` from ``(end time, outcome data)`` of each ended job with criteria;
    ``start``: the first submission time. None when no job had criteria."""
    n = attained = false_att = checked = 0
    reached: list[float] = []
    held: list[float] = []
    kinds: Counter[str] = Counter()
    kinds_att: Counter[str] = Counter()
    times: list[float] = []
    t0 = start or 0.0
    for t, d in outcomes:
        n += 1
        kind = str(d.get("criterion_kind", "?"))
        kinds[kind] += 1
        if d.get("reached") is not None:
            reached.append(float(d["reached"]))
        if d.get("heldout") is not None:
            held.append(float(d["heldout"]))
        if d.get("attained"):
            attained += 1
            kinds_att[kind] += 1
            times.append(t - t0)
            if d.get("false_attained") is not None:
                checked += 1
                false_att += bool(d["false_attained"])
    if n == 0:
        return None
    return Attainment(
        jobs_with_criteria=n, attained=attained, false_attained=false_att, checked=checked,
        mean_reached=sum(reached) / len(reached) if reached else None,
        mean_heldout=sum(held) / len(held) if held else None,
        by_kind={k: (kinds[k], kinds_att[k]) for k in kinds}, attained_times=sorted(times),
    )
