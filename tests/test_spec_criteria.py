"""Rotary's completion criteria: parsing, canonical printing, evaluation, pydantic integration."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from cohabit.spec import JobSpec, simple_job
from cohabit.spec.criteria import (
    ACCEPTED_FORMS,
    CRITERION_TYPES,
    Budget,
    Convergence,
    Criterion,
    MetricTarget,
    RunFor,
    lower_is_better,
    parse_criterion,
    parse_duration,
)

H = 3600.0

# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------
metric_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-/@]{0,12}", fullmatch=True)
finite = st.floats(allow_nan=False, allow_infinity=False)
time_budgets = st.one_of(
    st.floats(min_value=1e-6, max_value=1e300),
    st.integers(min_value=1, max_value=10**7).map(float),  # whole seconds: printed as d/h/m when exact
    st.integers(min_value=1, max_value=1000).map(lambda k: k * 60.0),
).map(lambda s: Budget(s, "seconds"))
count_budgets = st.builds(
    Budget, st.integers(min_value=1, max_value=10**18), st.sampled_from(["epochs", "iterations"])
)
budgets = st.one_of(time_budgets, count_budgets)
metric_targets = st.builds(
    MetricTarget, metric_names, st.sampled_from([">=", ">", "<=", "<"]), finite, st.none() | budgets
)
convergences = st.builds(
    Convergence,
    st.floats(min_value=0.0, exclude_min=True, allow_infinity=False),
    budgets,
    st.just("accuracy") | metric_names,
)
criteria = st.one_of(metric_targets, convergences, st.builds(RunFor, budgets))


# ---------------------------------------------------------------------------
# The examples of the issue and of Rotary §3.1.2
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("accuracy >= 0.95 within 3600s", MetricTarget("accuracy", ">=", 0.95, Budget(3600))),
        ("converge delta 0.001 within 30 epochs", Convergence(0.001, Budget(30, "epochs"))),
        ("run 2h", RunFor(Budget(2 * H))),
        ("run 100 epochs", RunFor(Budget(100, "epochs"))),
        ("loss <= 0.3 within 2h", MetricTarget("loss", "<=", 0.3, Budget(2 * H))),
        ("f1 > 0.8", MetricTarget("f1", ">", 0.8)),
        ("perplexity < 20 within 500 iterations", MetricTarget("perplexity", "<", 20, Budget(500, "iterations"))),
        ("run 1.5h", RunFor(Budget(5400))),
        ("run 45m", RunFor(Budget(2700))),
        ("run 2d", RunFor(Budget(2 * 86400))),
        ("run 90 s", RunFor(Budget(90))),
        ("run for 6 hours", RunFor(Budget(6 * H))),
        ("run 5000 steps", RunFor(Budget(5000, "iterations"))),
        ("run 1 epoch", RunFor(Budget(1, "epochs"))),
        ("ACC >= 95% WITHIN 3600 Seconds", MetricTarget("ACC", ">=", 0.95, Budget(3600))),
        ("accuracy>=0.95 within 3600s", MetricTarget("accuracy", ">=", 0.95, Budget(3600))),
        ("  run   2h  ", RunFor(Budget(2 * H))),
        ("converge loss delta 0.01 within 1.5h", Convergence(0.01, Budget(5400), "loss")),
        ("convergence delta 0.1% within 20 epochs", Convergence(0.001, Budget(20, "epochs"))),
        ("reward >= -1e3 within 10m", MetricTarget("reward", ">=", -1000.0, Budget(600))),
        ("val/top-1 >= .7", MetricTarget("val/top-1", ">=", 0.7)),
        ("run >= 3", MetricTarget("run", ">=", 3)),  # a metric may be called like a keyword
        ("converge delta delta 0.5 within 2 epochs", Convergence(0.5, Budget(2, "epochs"), "delta")),
    ],
)
def test_parse_criterion_accepts_documented_forms(text: str, expected: object) -> None:
    assert parse_criterion(text) == expected


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("accuracy >= 0.95 within 3600s", "accuracy >= 0.95 within 1h"),
        ("converge delta 0.001 within 30 epochs", "converge delta 0.001 within 30 epochs"),
        ("run 2h", "run 2h"),
        ("run 100 epochs", "run 100 epochs"),
        ("run 1.5h", "run 90m"),
        ("run 0.25s", "run 0.25s"),
        ("run 1.1h", "run 66m"),
        ("run 86400s", "run 1d"),
        ("run 1 iterations", "run 1 iteration"),
        ("ACC >= 95% WITHIN 3600 Seconds", "ACC >= 0.95 within 1h"),
        ("converge accuracy delta 0.001 within 30 epochs", "converge delta 0.001 within 30 epochs"),
        ("converge val_loss delta 1e-4 within 2 d", "converge val_loss delta 0.0001 within 2d"),
        ("loss <= 3.0", "loss <= 3"),
    ],
)
def test_str_gives_canonical_text(text: str, canonical: str) -> None:
    assert str(parse_criterion(text)) == canonical


def test_criterion_kinds_follow_rotary() -> None:
    kinds = [parse_criterion(t).kind for t in ("acc >= 0.9", "converge delta 0.1 within 2 epochs", "run 2h")]
    assert kinds == ["accuracy", "convergence", "runtime"]


# ---------------------------------------------------------------------------
# Round trips and robustness (hypothesis)
# ---------------------------------------------------------------------------
@given(criteria)
def test_print_then_parse_round_trips(c: object) -> None:
    text = str(c)
    again = parse_criterion(text)
    assert again == c
    assert str(again) == text


@given(criteria)
def test_reparsed_criteria_are_instances_with_equal_hashes(c: object) -> None:
    assert isinstance(c, CRITERION_TYPES)
    assert hash(c) == hash(parse_criterion(str(c)))


_FRAGMENTS = [
    "accuracy", "loss", ">=", ">", "<=", "<", "=", "==", "0.95", "-1", "1e999", "1e-3", "%", "within", "WITHIN",
    "3600s", "2h", "1.5", "h", "epochs", "epoch", "iterations", "run", "for", "converge", "delta", "0", "30",
    "bananas", ".", "-", "é", "\t", "\n", "", "@", "s",
]


@settings(max_examples=300)
@given(st.one_of(st.text(max_size=40), st.lists(st.sampled_from(_FRAGMENTS), max_size=8).map(" ".join)))
def test_garbage_only_ever_raises_value_error(text: str) -> None:
    try:
        c = parse_criterion(text)
    except ValueError as exc:
        message = str(exc)
        assert repr(text) in message
        assert "(column " in message
        assert ACCEPTED_FORMS in message
    else:
        assert parse_criterion(str(c)) == c


# ---------------------------------------------------------------------------
# Error messages
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("", 1, "empty"),
        ("accuracy >= x within 3600s", 13, "expected a number"),
        ("accuracy = 0.9", 10, "use >=, >, <= or <"),
        ("accuracy => 0.9", 10, "use >="),
        ("accuracy 0.9", 10, "comparison"),
        ("converge delta 0.001", 21, "needs a deadline"),
        ("converge delta 0 within 3 epochs", 16, "delta must be > 0"),
        ("run 2 parsecs", 7, "unknown budget unit 'parsecs'"),
        ("run 2.5 epochs", 5, "whole number"),
        ("run 0s", 5, "at least 1 microsecond"),
        ("run 50%", 7, "percentage"),
        ("run 2h please", 8, "unexpected 'please'"),
        ("accuracy >= 0.9 until 2h", 17, "'within'"),
        ("accuracy >= 1e999", 13, "too large"),
        ("run 1e308d", 5, "too large"),
        ("run #", 5, "unexpected character '#'"),
        ("3 >= 2", 1, "metric name"),
        ("walk 2h", 6, "comparison"),
    ],
)
def test_parse_errors_point_at_the_offending_column(text: str, column: int, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_criterion(text)
    message = str(info.value)
    first = message.splitlines()[0]
    assert first.startswith(f"invalid completion criterion {text!r}: ")
    assert f"(column {column})" in first
    assert fragment in first
    caret = message.splitlines()[2]
    assert caret == " " * (4 + column - 1) + "^"
    assert message.endswith(ACCEPTED_FORMS)


def test_parse_rejects_non_text_with_type_error() -> None:
    with pytest.raises(TypeError, match="must be text"):
        parse_criterion(3600)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: Budget(0), "at least 1 microsecond"),
        (lambda: Budget(-5, "epochs"), "whole number >= 1, got -5"),
        (lambda: Budget(2.5, "iterations"), "whole number >= 1, got 2.5"),
        (lambda: Budget(1, "hours"), "'seconds', 'epochs' or 'iterations', got 'hours'"),  # type: ignore[arg-type]
        (lambda: Budget(float("inf")), "finite"),
        (lambda: Budget("soon"), "must be a number, got 'soon'"),  # type: ignore[arg-type]
        (lambda: MetricTarget("top 1", ">=", 0.5), "metric name"),
        (lambda: MetricTarget("acc", "=", 0.5), "one of >=, >, <=, <, got '='"),  # type: ignore[arg-type]
        (lambda: MetricTarget("acc", ">=", float("nan")), "finite"),
        (lambda: MetricTarget("acc", ">=", 0.5, within=3600), "Budget"),  # type: ignore[arg-type]
        (lambda: Convergence(-0.1, Budget(3, "epochs")), "delta must be > 0, got -0.1"),
        (lambda: Convergence(0.1, None), "needs a WITHIN budget"),  # type: ignore[arg-type]
        (lambda: RunFor(7200), "Budget"),  # type: ignore[arg-type]
    ],
)
def test_constructors_reject_bad_values_naming_them(make, fragment: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError) as info:
        make()
    assert fragment in str(info.value)


def test_time_budgets_round_to_microseconds_and_counts_are_ints() -> None:
    assert Budget(1.0000000001).amount == 1.0
    assert Budget(30.0, "epochs").amount == 30 and isinstance(Budget(30.0, "epochs").amount, int)
    assert Budget(30, "epochs") == Budget(30.0, "epochs")


# ---------------------------------------------------------------------------
# Evaluation against observations
# ---------------------------------------------------------------------------
def test_metric_target_is_met_by_any_reported_value() -> None:
    c = parse_criterion("accuracy >= 0.9 within 10 epochs")
    assert not c.is_met(epochs=3, metrics={"accuracy": [0.5, 0.8]})
    assert c.is_met(epochs=4, metrics={"accuracy": [0.5, 0.91, 0.89]})
    assert not c.is_met(metrics={"loss": [0.1]})
    assert not c.is_met()
    assert not c.budget_exhausted(epochs=9) and c.budget_exhausted(epochs=10)
    assert c.is_done(epochs=10, metrics={"accuracy": [0.1]})


@pytest.mark.parametrize(
    ("op", "value", "met"),
    [(">=", 0.5, True), (">", 0.5, False), ("<=", 0.5, True), ("<", 0.5, False), ("<", 0.6, True)],
)
def test_metric_target_comparisons(op: str, value: float, met: bool) -> None:
    assert MetricTarget("m", op, value).is_met(metrics={"m": [0.5]}) is met  # type: ignore[arg-type]


def test_metric_target_without_within_never_exhausts() -> None:
    c = parse_criterion("loss <= 0.3")
    assert c.budget is None
    assert not c.budget_exhausted(elapsed_s=1e12, epochs=1e9, iterations=1e12)


def test_convergence_uses_last_improvement_of_accuracy() -> None:
    c = parse_criterion("converge delta 0.01 within 30 epochs")
    assert not c.is_met(metrics={"accuracy": [0.5]})  # one evaluation says nothing
    assert not c.is_met(metrics={"accuracy": [0.5, 0.6]})
    assert c.is_met(metrics={"accuracy": [0.5, 0.6, 0.605]})
    assert c.is_met(metrics={"accuracy": [0.5, 0.6, 0.4]})  # a drop is no improvement
    assert c.last_improvement({"accuracy": [0.5, 0.6]}) == pytest.approx(0.1)
    assert not c.budget_exhausted(epochs=29) and c.budget_exhausted(epochs=30)


def test_convergence_of_a_loss_improves_downwards() -> None:
    c = parse_criterion("converge loss delta 0.01 within 2h")
    assert not c.is_met(metrics={"loss": [1.0, 0.5]})
    assert c.is_met(metrics={"loss": [1.0, 0.5, 0.495]})
    assert c.is_met(metrics={"loss": [1.0, 0.5, 0.9]})
    assert c.budget_exhausted(elapsed_s=7200) and not c.budget_exhausted(elapsed_s=7199.9)


@pytest.mark.parametrize(
    ("name", "lower"),
    [("loss", True), ("val_loss", True), ("error", True), ("top-1-err", True), ("perplexity", True),
     ("accuracy", False), ("f1", False), ("acc", False), ("reward", False)],
)
def test_lower_is_better(name: str, lower: bool) -> None:
    assert lower_is_better(name) is lower


def test_run_for_is_met_when_its_budget_is_used() -> None:
    c = parse_criterion("run 100 iterations")
    assert not c.is_met(iterations=99) and c.is_met(iterations=100)
    assert c.budget_exhausted(iterations=100) and c.is_done(iterations=150)
    assert parse_criterion("run 2h").is_met(elapsed_s=7200.0)


@given(st.integers(min_value=1, max_value=1000), st.floats(min_value=0, max_value=1e4))
def test_budget_fraction_used_is_rotary_runtime_progress(amount: int, used: float) -> None:
    b = Budget(amount, "epochs")
    frac = b.fraction_used(epochs=used)
    assert 0.0 <= frac <= 1.0
    assert frac == pytest.approx(min(1.0, used / amount))
    assert b.is_exhausted(epochs=used) == (used >= amount)


# ---------------------------------------------------------------------------
# pydantic: the Criterion type inside models
# ---------------------------------------------------------------------------
def test_jobspec_parses_criteria_text_and_dumps_canonical_text() -> None:
    job = simple_job("j", 2, criteria="accuracy >= 0.95 within 3600s")
    assert job.criteria == MetricTarget("accuracy", ">=", 0.95, Budget(3600))
    assert job.model_dump(mode="json")["criteria"] == "accuracy >= 0.95 within 1h"
    assert job.model_dump()["criteria"] == "accuracy >= 0.95 within 1h"


@given(criteria)
def test_jobspec_round_trips_through_json_dump(c: object) -> None:
    job = simple_job("j", 1, criteria=c)
    assert JobSpec.model_validate(job.model_dump(mode="json")) == job
    assert JobSpec.model_validate_json(job.model_dump_json()) == job


def test_jobspec_reports_a_bad_criterion_under_its_field() -> None:
    with pytest.raises(ValidationError) as info:
        simple_job("j", 1, criteria="run 3 bananas")
    (err,) = info.value.errors()
    assert err["loc"] == ("criteria",)
    assert "unknown budget unit 'bananas'" in err["msg"]
    with pytest.raises(ValidationError, match="expected a completion criterion"):
        simple_job("j", 1, criteria=42)


class _Holder(BaseModel):
    c: Criterion


def test_criterion_type_works_in_any_model() -> None:
    h = _Holder(c="run 2h")
    assert h.c == RunFor(Budget(7200))
    assert h.model_dump() == {"c": "run 2h"}
    assert _Holder.model_json_schema()["properties"]["c"]["type"] == "string"


# ---------------------------------------------------------------------------
# Durations on their own
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "seconds"), [("3600s", 3600.0), ("30m", 1800.0), ("1.5h", 5400.0),
                                               ("2 days", 172800.0), (" 0.5 s ", 0.5)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "fragment"), [("30 epochs", "expected a duration, got 30 epochs"),
                                                ("2h later", "unexpected 'later'"), ("h", "a number"),
                                                ("5 fortnights", "unknown budget unit")])
def test_parse_duration_rejects_non_durations(text: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert f"invalid duration {text!r}" in str(info.value) and fragment in str(info.value)
