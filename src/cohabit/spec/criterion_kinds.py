"""The completion criteria's values: :class:`Budget` and the three kinds of criteria.

Rotary's (Liu dissertation, ch. 3, §3.1.2) accuracy-oriented
:class:`MetricTarget`, convergence-oriented :class:`Convergence` and
runtime-oriented :class:`RunFor`, each judged against *observed* progress
(elapsed time, epochs, iterations and the per-evaluation metric series a job
reports) with ``is_met``, ``budget_exhausted`` and ``is_done``. Their text form,
its parser and the pydantic field type are in :mod:`cohabit.spec.criteria`,
which re-exports every name here; ``str()`` of each value is that text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

__all__ = [
    "CRITERION_TYPES", "Budget", "BudgetUnit", "Comparison", "Convergence", "MetricTarget", "RunFor",
    "lower_is_better",
]

BudgetUnit = Literal["seconds", "epochs", "iterations"]
Comparison = Literal[">=", ">", "<=", "<"]

Metrics = Mapping[str, Sequence[float]]

_NAME = r"[A-Za-z_][A-Za-z0-9_.\-/@]*"
_NAME_RE = re.compile(_NAME + r"\Z")
_OPS: tuple[str, ...] = (">=", ">", "<=", "<")
#: Larger time units first; printing uses the largest that divides exactly.
_PRINT_TIME_UNITS: tuple[tuple[float, str], ...] = ((86400.0, "d"), (3600.0, "h"), (60.0, "m"))
_LOWER_IS_BETTER = frozenset(
    {"loss", "error", "err", "perplexity", "ppl", "mse", "mae", "rmse", "nll", "wer", "cer"}
)


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------
def _fmt_number(x: float) -> str:
    """Shortest text that reads back as exactly ``x`` (integers without ``.0``)."""
    if float(x).is_integer() and abs(x) < 2.0**53:
        return str(int(x))
    return repr(float(x))


def _finite(name: str, value: Any) -> float:
    """``value`` as a finite float, or a ValueError naming ``name``."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return x


def _check_metric_name(metric: Any) -> str:
    if not isinstance(metric, str) or not _NAME_RE.match(metric):
        raise ValueError(
            f"metric name must start with a letter or '_' and contain only letters, digits and _.-/@, "
            f"got {metric!r} (e.g. 'accuracy', 'val_loss', 'top-1')"
        )
    return metric


def lower_is_better(metric: str) -> bool:
    """True for loss-like metrics (loss, error, perplexity, mse, ...), False otherwise.

    Decides the direction of "improvement" for :class:`Convergence`: accuracy
    improves upwards, loss downwards (Rotary §3.1.2 names ACC and LOSS).
    """
    low = metric.lower()
    return "loss" in low or any(tok in _LOWER_IS_BETTER for tok in re.split(r"[^a-z0-9]+", low))


def _series(metrics: Metrics | None, metric: str) -> Sequence[float]:
    if not metrics:
        return ()
    return metrics.get(metric, ())


# ---------------------------------------------------------------------------
# Budget
# ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Budget:
    """How much a job may consume: seconds, epochs or iterations (Rotary's WITHIN).

    ``amount`` is > 0. Durations (``unit="seconds"``) are rounded to the
    microsecond; epoch and iteration counts must be whole numbers and are
    stored as ``int``.

    >>> str(Budget(5400, "seconds")), str(Budget(30, "epochs"))
    ('90m', '30 epochs')
    """

    amount: float
    unit: BudgetUnit = "seconds"

    def __post_init__(self) -> None:
        if self.unit not in ("seconds", "epochs", "iterations"):
            raise ValueError(f"budget unit must be 'seconds', 'epochs' or 'iterations', got {self.unit!r}")
        x = _finite(f"budget amount ({self.unit})", self.amount)
        if self.unit == "seconds":
            x = round(x, 6)
            if not x > 0:
                raise ValueError(f"a time budget must be at least 1 microsecond, got {self.amount!r} seconds")
            object.__setattr__(self, "amount", x)
            return
        if not x.is_integer() or x < 1:
            raise ValueError(f"a budget of {self.unit} must be a whole number >= 1, got {self.amount!r}")
        object.__setattr__(self, "amount", int(x))

    def __str__(self) -> str:
        if self.unit == "seconds":
            return _fmt_duration(self.amount)
        noun = self.unit if self.amount != 1 else self.unit[:-1]
        return f"{_fmt_number(self.amount)} {noun}"

    def used(self, elapsed_s: float = 0.0, epochs: float = 0.0, iterations: float = 0.0) -> float:
        """The observed quantity this budget counts (seconds, epochs or iterations)."""
        return {"seconds": elapsed_s, "epochs": epochs, "iterations": iterations}[self.unit]

    def fraction_used(self, elapsed_s: float = 0.0, epochs: float = 0.0, iterations: float = 0.0) -> float:
        """Share of the budget consumed, clipped to [0, 1] (Rotary's runtime progress e*/e, Alg. 6)."""
        return min(1.0, max(0.0, self.used(elapsed_s, epochs, iterations) / self.amount))

    def is_exhausted(self, elapsed_s: float = 0.0, epochs: float = 0.0, iterations: float = 0.0) -> bool:
        """True once the observed quantity has reached ``amount``."""
        return self.used(elapsed_s, epochs, iterations) >= self.amount


def _fmt_duration(seconds: float) -> str:
    """``seconds`` in the largest of d/h/m that divides it exactly, else in s."""
    if seconds.is_integer() and seconds < 2.0**53:
        for factor, suffix in _PRINT_TIME_UNITS:
            if seconds % factor == 0:
                return f"{int(seconds // factor)}{suffix}"
    return f"{_fmt_number(seconds)}s"


# ---------------------------------------------------------------------------
# The three kinds of criteria
# ---------------------------------------------------------------------------
class _WithinDeadline:
    """Rotary's dequeue rule for the criteria judged on metrics, with an optional WITHIN budget.

    Shared by :class:`MetricTarget` and :class:`Convergence` (each defines ``is_met`` and its
    ``within`` field): done once met, or once the WITHIN deadline has passed.
    """

    __slots__ = ()
    within: Budget | None

    def is_met(
        self, elapsed_s: float = 0.0, epochs: float = 0.0, iterations: float = 0.0, metrics: Metrics | None = None
    ) -> bool:
        raise NotImplementedError

    def budget_exhausted(
        self, elapsed_s: float = 0.0, epochs: float = 0.0, iterations: float = 0.0, metrics: Metrics | None = None
    ) -> bool:
        """True once the WITHIN deadline has passed; never without one."""
        return self.within is not None and self.within.is_exhausted(elapsed_s, epochs, iterations)

    def is_done(
        self, elapsed_s: float = 0.0, epochs: float = 0.0, iterations: float = 0.0, metrics: Metrics | None = None
    ) -> bool:
        """Rotary's dequeue rule: met, or the deadline has passed."""
        return self.is_met(elapsed_s, epochs, iterations, metrics) or self.budget_exhausted(
            elapsed_s, epochs, iterations
        )


@dataclass(frozen=True, slots=True)
class MetricTarget(_WithinDeadline):
    """Accuracy-oriented criterion (Rotary ❶): ``<metric> <op> <value> [within <budget>]``.

    Met once any reported value of ``metric`` satisfies ``op value`` (a job is
    stopped when it first meets its target, so "any" equals "latest" in
    practice). Without ``within`` the target has no deadline of its own; the
    job's ``deadline`` field, if any, still applies.
    """

    metric: str
    op: Comparison
    value: float
    within: Budget | None = None
    kind: ClassVar[str] = "accuracy"
    """Rotary's name for this kind of criterion."""

    def __post_init__(self) -> None:
        _check_metric_name(self.metric)
        if self.op not in _OPS:
            raise ValueError(f"comparison must be one of {', '.join(_OPS)}, got {self.op!r}")
        object.__setattr__(self, "value", _finite(f"target value of {self.metric!r}", self.value))
        if self.within is not None and not isinstance(self.within, Budget):
            raise ValueError(f"within must be a Budget or None, got {self.within!r}")

    def __str__(self) -> str:
        text = f"{self.metric} {self.op} {_fmt_number(self.value)}"
        return text if self.within is None else f"{text} within {self.within}"

    @property
    def budget(self) -> Budget | None:
        """The WITHIN budget, or None when the target has no deadline."""
        return self.within

    def satisfied_by(self, x: float) -> bool:
        """True if one observed value ``x`` reaches the target."""
        if self.op == ">=":
            return x >= self.value
        if self.op == ">":
            return x > self.value
        if self.op == "<=":
            return x <= self.value
        return x < self.value

    def is_met(
        self, elapsed_s: float = 0.0, epochs: float = 0.0, iterations: float = 0.0, metrics: Metrics | None = None
    ) -> bool:
        """True if any observed value of ``metrics[self.metric]`` reaches the target."""
        return any(self.satisfied_by(x) for x in _series(metrics, self.metric))


@dataclass(frozen=True, slots=True)
class Convergence(_WithinDeadline):
    """Convergence-oriented criterion (Rotary ❷): ``converge [<metric>] delta <d> within <budget>``.

    Met when the last improvement of ``metric`` between its two latest
    evaluations is below ``delta`` — "performance no longer increases".
    Improvement is upward for accuracy-like metrics and downward for
    loss-like ones (see :func:`lower_is_better`); a drop counts as no
    improvement. Needs at least two evaluations. The WITHIN budget is
    required: a job that does not converge is terminated at the deadline.
    """

    delta: float
    within: Budget
    metric: str = "accuracy"
    kind: ClassVar[str] = "convergence"
    """Rotary's name for this kind of criterion."""

    def __post_init__(self) -> None:
        d = _finite("convergence delta", self.delta)
        if not d > 0:
            raise ValueError(f"convergence delta must be > 0, got {self.delta!r} (e.g. 0.001)")
        object.__setattr__(self, "delta", d)
        if not isinstance(self.within, Budget):
            raise ValueError(
                f"a convergence criterion needs a WITHIN budget such as Budget(30, 'epochs'), got {self.within!r}"
            )
        _check_metric_name(self.metric)

    def __str__(self) -> str:
        metric = "" if self.metric == "accuracy" else f" {self.metric}"
        return f"converge{metric} delta {_fmt_number(self.delta)} within {self.within}"

    @property
    def budget(self) -> Budget:
        return self.within

    def last_improvement(self, metrics: Metrics | None) -> float | None:
        """Improvement of ``metric`` over its previous evaluation, or None with < 2 evaluations."""
        s = _series(metrics, self.metric)
        if len(s) < 2:
            return None
        step = float(s[-1]) - float(s[-2])
        return -step if lower_is_better(self.metric) else step

    def is_met(
        self, elapsed_s: float = 0.0, epochs: float = 0.0, iterations: float = 0.0, metrics: Metrics | None = None
    ) -> bool:
        """True if the last improvement of the metric is below ``delta``."""
        gain = self.last_improvement(metrics)
        return gain is not None and gain < self.delta


@dataclass(frozen=True, slots=True)
class RunFor:
    """Runtime-oriented criterion (Rotary ❸): ``run <budget>`` — run this long, then return.

    Met, and its budget exhausted, at the same moment.
    """

    budget: Budget
    kind: ClassVar[str] = "runtime"
    """Rotary's name for this kind of criterion."""

    def __post_init__(self) -> None:
        if not isinstance(self.budget, Budget):
            raise ValueError(f"run needs a Budget such as Budget(7200) or Budget(100, 'epochs'), got {self.budget!r}")

    def __str__(self) -> str:
        return f"run {self.budget}"

    def is_met(
        self, elapsed_s: float = 0.0, epochs: float = 0.0, iterations: float = 0.0, metrics: Metrics | None = None
    ) -> bool:
        """True once the job has run for its budget."""
        return self.budget.is_exhausted(elapsed_s, epochs, iterations)

    budget_exhausted = is_met
    is_done = is_met


#: The concrete criterion classes, for ``isinstance`` checks.
CRITERION_TYPES: tuple[type, ...] = (MetricTarget, Convergence, RunFor)
