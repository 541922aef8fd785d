"""Completion criteria: when a progressive, iterative job counts as done.

Rotary (Liu dissertation, ch. 3, §3.1.2, Fig. 3.2-3.3) lets users attach one
of three kinds of *user-defined completion criteria* to a job:

1. **accuracy-oriented** — reach a metric target, optionally WITHIN a budget:
   ``accuracy >= 0.95 within 3600s``, ``loss <= 0.3 within 2h``
   (:class:`MetricTarget`; any metric name, any of ``>= > <= <``);
2. **convergence-oriented** — stop once the metric no longer improves by at
   least ``delta`` per evaluation, WITHIN a budget:
   ``converge delta 0.001 within 30 epochs``, ``converge loss delta 0.01 within 2h``
   (:class:`Convergence`; accuracy by default);
3. **runtime-oriented** — run for a while and return whatever is there:
   ``run 2h``, ``run 100 epochs`` (:class:`RunFor`).

A budget (:class:`Budget`) is either a duration — ``3600s``, ``30m``,
``1.5h``, ``2d`` — or a count of ``epochs`` / ``iterations``. Durations are
kept in seconds with microsecond resolution.

``parse_criterion`` reads the text form; ``str(criterion)`` prints the
canonical text, which parses back to an equal object. Each criterion is
evaluated against *observed* progress (elapsed time, epochs, iterations and
the per-evaluation metric series a job reports) with :meth:`is_met`,
:meth:`budget_exhausted` and :meth:`is_done`: as in Rotary, a job is dequeued
once its criterion is met or its WITHIN deadline has passed.

This module holds the text form (its parser and the pydantic :data:`Criterion` type); the values
themselves are defined in :mod:`cohabit.spec.criterion_kinds` and re-exported here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, TypeAlias

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from .criterion_kinds import (
    _NAME, _OPS, CRITERION_TYPES, Budget, BudgetUnit, Comparison, Convergence, MetricTarget, RunFor, lower_is_better,
)

__all__ = [
    "ACCEPTED_FORMS", "CRITERION_TYPES", "Budget", "BudgetUnit", "Comparison", "Convergence",
    "Criterion", "MetricTarget", "RunFor", "lower_is_better", "parse_criterion", "parse_duration",
]

#: How to write a criterion; quoted in every parse error.
ACCEPTED_FORMS = """accepted forms:
  <metric> >=|>|<=|< <value>[%] [within <budget>]    e.g. accuracy >= 0.95 within 3600s, loss <= 0.3
  converge [<metric>] delta <value>[%] within <budget>    e.g. converge delta 0.001 within 30 epochs
  run <budget>    e.g. run 2h, run 100 epochs
where <budget> is a duration (3600s, 30m, 1.5h, 2d) or a count (30 epochs, 5000 iterations)"""

_TIME_UNITS: dict[str, float] = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
}
_COUNT_UNITS: dict[str, BudgetUnit] = {
    **dict.fromkeys(("epoch", "epochs"), "epochs"),
    **dict.fromkeys(("iteration", "iterations", "iter", "iters", "step", "steps"), "iterations"),
}
_CONVERGE_WORDS = frozenset({"converge", "converges", "converged", "convergence"})


# ---------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------
_TOKEN_RE = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<op>>=|<=|==|!=|=>|=<|>|<|=)"
    r"|(?P<pct>%)"
    rf"|(?P<word>{_NAME})"
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # num | op | pct | word | end
    text: str
    col: int  # 0-based offset in the text


class _ParseError(Exception):
    def __init__(self, col: int, message: str) -> None:
        super().__init__(message)
        self.col = col
        self.message = message


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise _ParseError(pos, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        if kind != "ws":
            tokens.append(_Token(kind, m.group(), pos))
        pos = m.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _describe(tok: _Token) -> str:
    return "the end of the text" if tok.kind == "end" else repr(tok.text)


class _Parser:
    """Recursive-descent parser over the token list; one method per grammar rule."""

    def __init__(self, text: str) -> None:
        self.toks = _tokenize(text)
        self.i = 0

    # token access ------------------------------------------------------
    def peek(self, k: int = 0) -> _Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def take(self) -> _Token:
        tok = self.peek()
        self.i += 1
        return tok

    def fail(self, tok: _Token, expected: str) -> _ParseError:
        return _ParseError(tok.col, f"expected {expected}, got {_describe(tok)}")

    def keyword(self, tok: _Token, *words: str) -> bool:
        return tok.kind == "word" and tok.text.lower() in words

    def expect_keyword(self, word: str, hint: str = "") -> None:
        tok = self.take()
        if not self.keyword(tok, word):
            raise self.fail(tok, f"'{word}'{hint}")

    def number(self, what: str, allow_percent: bool) -> float:
        tok = self.take()
        if tok.kind != "num":
            raise self.fail(tok, f"a number for the {what}")
        x = float(tok.text)
        if self.peek().kind == "pct":
            pct = self.take()
            if not allow_percent:
                raise _ParseError(pct.col, f"a percentage is not allowed for the {what}")
            x = x / 100.0
        if not math.isfinite(x):
            raise _ParseError(tok.col, f"{tok.text} is too large for the {what}")
        return x

    def end(self) -> None:
        tok = self.peek()
        if tok.kind != "end":
            raise _ParseError(tok.col, f"unexpected {_describe(tok)} after a complete criterion")

    # grammar -----------------------------------------------------------
    def criterion(self) -> MetricTarget | Convergence | RunFor:
        first, second = self.peek(), self.peek(1)
        if first.kind == "end":
            raise _ParseError(0, "the criterion is empty")
        if second.kind == "op":
            out: MetricTarget | Convergence | RunFor = self.metric_target()
        elif self.keyword(first, "run"):
            out = self.run_for()
        elif self.keyword(first, *_CONVERGE_WORDS):
            out = self.convergence()
        elif first.kind == "word":
            raise self.fail(second, f"a comparison (>=, >, <=, <) after the metric {first.text!r}")
        else:
            raise self.fail(first, "a metric name, 'converge' or 'run'")
        self.end()
        return out

    def metric_target(self) -> MetricTarget:
        name = self.take()
        if name.kind != "word":
            raise self.fail(name, "a metric name such as 'accuracy'")
        op = self.take()
        if op.text not in _OPS:
            fix = {"=>": ">=", "=<": "<="}.get(op.text, ">=, >, <= or <")
            raise _ParseError(op.col, f"unsupported comparison {op.text!r}; use {fix}")
        value = self.number(f"target of {name.text!r}", allow_percent=True)
        within = self.optional_within()
        return self.build(name, lambda: MetricTarget(name.text, op.text, value, within))  # type: ignore[arg-type]

    def convergence(self) -> Convergence:
        self.take()
        metric = "accuracy"
        if not (self.keyword(self.peek(), "delta") and self.peek(1).kind == "num"):
            tok = self.take()
            if tok.kind != "word":
                raise self.fail(tok, "'delta' or a metric name after 'converge'")
            metric = tok.text
        self.expect_keyword("delta")
        delta_tok = self.peek()
        delta = self.number("convergence delta", allow_percent=True)
        if self.peek().kind == "end":
            raise _ParseError(
                self.peek().col,
                "a convergence criterion needs a deadline: add 'within <budget>', e.g. 'within 30 epochs'",
            )
        self.expect_keyword("within")
        within = self.budget()
        return self.build(delta_tok, lambda: Convergence(delta, within, metric))

    def run_for(self) -> RunFor:
        self.take()
        if self.keyword(self.peek(), "for"):
            self.take()
        return RunFor(self.budget())

    def optional_within(self) -> Budget | None:
        if self.peek().kind == "end":
            return None
        self.expect_keyword("within", " or the end of the criterion")
        return self.budget()

    def budget(self) -> Budget:
        num_tok = self.peek()
        amount = self.number("budget", allow_percent=False)
        unit_tok = self.take()
        if unit_tok.kind != "word":
            raise self.fail(unit_tok, "a unit after the budget (s, m, h, d, epochs or iterations)")
        unit = unit_tok.text.lower()
        if unit in _TIME_UNITS:
            seconds = amount * _TIME_UNITS[unit]
            if not math.isfinite(seconds):
                raise _ParseError(num_tok.col, f"the budget {num_tok.text}{unit_tok.text} is too large")
            return self.build(num_tok, lambda: Budget(seconds, "seconds"))
        if unit in _COUNT_UNITS:
            return self.build(num_tok, lambda: Budget(amount, _COUNT_UNITS[unit]))
        raise _ParseError(
            unit_tok.col, f"unknown budget unit {unit_tok.text!r}; use s, m, h, d, epochs or iterations"
        )

    @staticmethod
    def build(tok: _Token, make: Any) -> Any:
        """Run a constructor, turning its ValueError into a parse error at ``tok``."""
        try:
            return make()
        except ValueError as exc:
            raise _ParseError(tok.col, str(exc)) from None


def _error_message(text: str, err: _ParseError) -> str:
    """A ValueError message quoting ``text``, pointing at the column and listing the forms."""
    line = text.replace("\n", " ").replace("\t", " ").replace("\r", " ")
    return (
        f"invalid completion criterion {text!r}: {err.message} (column {err.col + 1})\n"
        f"    {line}\n"
        f"    {' ' * err.col}^\n"
        f"{ACCEPTED_FORMS}"
    )


def parse_criterion(text: str) -> MetricTarget | Convergence | RunFor:
    """Parse Rotary's completion-criterion text into a :data:`Criterion`.

    Keywords and units are case-insensitive; metric names are kept as written.

    >>> parse_criterion("accuracy >= 0.95 within 3600s")
    MetricTarget(metric='accuracy', op='>=', value=0.95, within=Budget(amount=3600.0, unit='seconds'))
    >>> str(parse_criterion("converge delta 0.001 within 30 epochs"))
    'converge delta 0.001 within 30 epochs'

    Raises ``ValueError`` quoting the text, pointing at the offending column
    and listing :data:`ACCEPTED_FORMS`. Non-string input raises ``TypeError``.
    """
    if not isinstance(text, str):
        raise TypeError(f"a completion criterion must be text such as 'run 2h', got {type(text).__name__} {text!r}")
    try:
        return _Parser(text).criterion()
    except _ParseError as err:
        raise ValueError(_error_message(text, err)) from None


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``3600s``, ``30m``, ``1.5h`` or ``2d`` (the units of a WITHIN budget).

    >>> parse_duration("1.5h")
    5400.0

    Raises ``ValueError`` quoting the text and pointing at the offending column.
    """
    if not isinstance(text, str):
        raise TypeError(f"a duration must be text such as '1.5h', got {type(text).__name__} {text!r}")
    try:
        parser = _Parser(text)
        first = parser.peek()
        budget = parser.budget()
        parser.end()
    except _ParseError as err:
        raise ValueError(_duration_message(text, err)) from None
    if budget.unit != "seconds":
        raise ValueError(_duration_message(text, _ParseError(first.col, f"expected a duration, got {budget}")))
    return float(budget.amount)


def _duration_message(text: str, err: _ParseError) -> str:
    return (
        f"invalid duration {text!r}: {err.message} (column {err.col + 1}); "
        "write a number and a unit: s, m, h or d, e.g. 3600s, 30m, 1.5h, 2d"
    )


# ---------------------------------------------------------------------------
# pydantic integration: the Criterion type
# ---------------------------------------------------------------------------
def _validate_criterion(value: Any) -> MetricTarget | Convergence | RunFor:
    if isinstance(value, CRITERION_TYPES):
        return value  # type: ignore[return-value]
    if isinstance(value, str):
        return parse_criterion(value)
    raise ValueError(
        f"expected a completion criterion such as 'accuracy >= 0.95 within 3600s', got {type(value).__name__} "
        f"{value!r}"
    )


Criterion: TypeAlias = Annotated[
    MetricTarget | Convergence | RunFor,
    PlainValidator(_validate_criterion),
    PlainSerializer(str, return_type=str),
    WithJsonSchema(
        {
            "type": "string",
            "title": "Completion criterion",
            "description": ACCEPTED_FORMS,
            "examples": ["accuracy >= 0.95 within 3600s", "converge delta 0.001 within 30 epochs", "run 2h"],
        }
    ),
]
"""A completion criterion: :class:`MetricTarget`, :class:`Convergence` or :class:`RunFor`.

As a pydantic field type it accepts an instance or its text, and serialises
(in both python and json mode) to the canonical text.
"""
