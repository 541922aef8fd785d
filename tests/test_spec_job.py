"""JobSpec validation (each bad value rejected, naming its field), derived views, simple_job, round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from cohabit.spec import JobSpec, Resources, TaskGroup, simple_job
from cohabit.spec.criteria import Budget, RunFor

GPU = {"gpu": 1, "cpu": 4, "mem_gb": 16}


def job(**over: Any) -> dict[str, Any]:
    """A valid allreduce job as a plain mapping, with ``over`` applied."""
    base: dict[str, Any] = {"id": "j", "architecture": "allreduce", "workers": {"count": 2, "demand": GPU}}
    base.update(over)
    return base


def rejection(data: dict[str, Any]) -> tuple[tuple[Any, ...], str]:
    """(loc, msg) of the single error JobSpec raises for ``data``."""
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate(data)
    errors = info.value.errors()
    assert len(errors) == 1, errors
    return tuple(errors[0]["loc"]), errors[0]["msg"]


# ---------------------------------------------------------------------------
# Field-level rejections: pydantic names the field in ``loc``
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("over", "loc", "fragment"),
    [
        ({"workers": {"count": -1, "demand": GPU}}, ("workers", "count"), "greater than or equal to 0"),
        ({"workers": {"count": 2.5, "demand": GPU}}, ("workers", "count"), "integer"),
        ({"workers": {"count": 2, "demand": {"gpu": -1}}}, ("workers", "demand"), "must be >= 0"),
        ({"workers": {"count": 2}}, ("workers", "demand"), "required"),
        ({"n_min": 0}, ("n_min",), "greater than or equal to 1"),
        ({"n_max": 0}, ("n_max",), "greater than or equal to 1"),
        ({"iterations": 0}, ("iterations",), "greater than or equal to 1"),
        ({"epochs": -3}, ("epochs",), "greater than or equal to 1"),
        ({"batch_size": 0}, ("batch_size",), "greater than or equal to 1"),
        ({"deadline": 0}, ("deadline",), "greater than 0"),
        ({"submit_time": -1}, ("submit_time",), "greater than or equal to 0"),
        ({"weight": 0}, ("weight",), "greater than 0"),
        ({"urgency": -0.5}, ("urgency",), "greater than or equal to 0"),
        ({"architecture": "mesh"}, ("architecture",), "'single', 'ps' or 'allreduce'"),
        ({"id": ""}, ("id",), "at least 1 character"),
        ({"criteria": "run forever"}, ("criteria",), "invalid completion criterion 'run forever'"),
        ({"colour": "red"}, ("colour",), "Extra inputs are not permitted"),
    ],
)
def test_jobspec_rejects_bad_field_values_naming_the_field(over: dict[str, Any], loc: tuple[Any, ...],
                                                           fragment: str) -> None:
    got_loc, msg = rejection(job(**over))
    assert got_loc == loc
    assert fragment in msg


# ---------------------------------------------------------------------------
# Cross-field rejections: the message names the fields involved
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("over", "fragments"),
    [
        ({"architecture": "ps"}, ["architecture 'ps'", "ps.count >= 1"]),
        ({"architecture": "ps", "ps": {"count": 0, "demand": {"cpu": 1}}}, ["ps.count >= 1"]),
        ({"ps": {"count": 1, "demand": {"cpu": 1}}}, ["architecture 'allreduce'", "parameter servers", "'ps'"]),
        ({"architecture": "single"}, ["architecture 'single'", "workers.count == 1", "got 2"]),
        ({"workers": {"count": 0, "demand": GPU}}, ["workers.count must be >= 1"]),
        ({"n_min": 3, "n_max": 2}, ["n_min=3", "n_max=2"]),
        ({"n_min": 3}, ["workers.count=2", "n_min=3"]),
        ({"n_max": 1}, ["workers.count=2", "n_max=1"]),
    ],
)
def test_jobspec_rejects_inconsistent_fields_naming_them(over: dict[str, Any], fragments: list[str]) -> None:
    loc, msg = rejection(job(**over))
    assert loc == ()
    for fragment in fragments:
        assert fragment in msg


@given(
    count=st.integers(min_value=1, max_value=64),
    n_min=st.none() | st.integers(min_value=1, max_value=64),
    n_max=st.none() | st.integers(min_value=1, max_value=64),
)
def test_elastic_bounds_accept_exactly_when_count_lies_between(count: int, n_min: int | None,
                                                               n_max: int | None) -> None:
    lo = count if n_min is None else n_min
    hi = count if n_max is None else n_max
    data = job(workers={"count": count, "demand": GPU}, n_min=n_min, n_max=n_max)
    if lo <= count <= hi:
        spec = JobSpec.model_validate(data)
        assert (spec.min_workers, spec.max_workers) == (lo, hi)
    else:
        loc, msg = rejection(data)
        assert loc == () and f"workers.count={count}" in msg


@given(st.integers(max_value=0))
def test_non_positive_worker_counts_never_validate(count: int) -> None:
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate(job(workers={"count": count, "demand": GPU}))
    assert "count" in str(info.value)


def test_jobspec_is_frozen() -> None:
    spec = JobSpec.model_validate(job())
    with pytest.raises(ValidationError):
        spec.deadline = 5.0  # type: ignore[misc]


# ---------------------------------------------------------------------------
# Derived views
# ---------------------------------------------------------------------------
def test_ps_job_demands_put_workers_first() -> None:
    spec = JobSpec(
        id="lda", architecture="ps",
        workers=TaskGroup(count=3, demand=Resources(cpu=4, mem_gb=8)),
        ps=TaskGroup(count=2, demand=Resources(cpu=2, mem_gb=16)),
        n_min=1, n_max=6, submit_time=10.0, deadline=100.0,
    )
    assert spec.task_demands() == [Resources(cpu=4, mem_gb=8)] * 3 + [Resources(cpu=2, mem_gb=16)] * 2
    assert spec.task_demands(5)[:5] == [Resources(cpu=4, mem_gb=8)] * 5
    assert spec.total_demand() == Resources(cpu=16, mem_gb=56)
    assert spec.total_demand(1) == Resources(cpu=8, mem_gb=40)
    assert spec.num_ps == 2 and spec.num_gpus == 0
    assert spec.absolute_deadline == 110.0
    assert (spec.min_workers, spec.max_workers) == (1, 6)


# ---------------------------------------------------------------------------
# simple_job: the GPU-trace shape
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("gpus", "arch", "count", "per_gpu"),
    [(1, "single", 1, 1.0), (4, "allreduce", 4, 1.0), (8.0, "allreduce", 8, 1.0), (0.25, "single", 1, 0.25)],
)
def test_simple_job_shapes(gpus: float, arch: str, count: int, per_gpu: float) -> None:
    spec = simple_job("j", gpus)
    assert spec.architecture == arch
    assert spec.workers.count == count
    assert spec.workers.demand["gpu"] == per_gpu
    assert spec.num_gpus == pytest.approx(gpus)


@pytest.mark.parametrize(("gpus", "fragment"), [(0, "must be > 0, got 0"), (-2, "got -2"), (1.5, "< 1, got 1.5")])
def test_simple_job_rejects_bad_gpu_counts(gpus: float, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        simple_job("j", gpus)


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------
resources = st.dictionaries(
    st.sampled_from(["cpu", "gpu", "mem_gb", "net_gbps", "gpu_mem_gb", "fpga"]),
    st.floats(min_value=0, max_value=1e6, allow_nan=False),
    max_size=4,
).map(Resources)


@st.composite
def job_specs(draw: st.DrawFn) -> JobSpec:
    arch = draw(st.sampled_from(["single", "ps", "allreduce"]))
    count = 1 if arch == "single" else draw(st.integers(min_value=1, max_value=32))
    ps = TaskGroup(count=draw(st.integers(1, 8)), demand=draw(resources)) if arch == "ps" else None
    elastic = arch != "single" and draw(st.booleans())
    return JobSpec(
        id=draw(st.text(min_size=1, max_size=12)),
        submit_time=draw(st.floats(min_value=0, max_value=1e7)),
        tenant=draw(st.sampled_from(["default", "alice", "bob"])),
        architecture=arch,
        workers=TaskGroup(count=count, demand=draw(resources)),
        ps=ps,
        n_min=draw(st.integers(1, count)) if elastic else None,
        n_max=draw(st.integers(count, 64)) if elastic else None,
        iterations=draw(st.none() | st.integers(1, 10**9)),
        epochs=draw(st.none() | st.integers(1, 1000)),
        model=draw(st.sampled_from(["resnet50", "bert", "unknown"])),
        batch_size=draw(st.none() | st.integers(1, 4096)),
        criteria=draw(st.none() | st.sampled_from(
            ["accuracy >= 0.95 within 3600s", "converge delta 0.001 within 30 epochs", "run 2h", "run 100 epochs"]
        )),
        deadline=draw(st.none() | st.floats(min_value=1, max_value=1e7)),
        urgency=draw(st.floats(min_value=0, max_value=10)),
        weight=draw(st.floats(min_value=0.01, max_value=100)),
        workload=draw(st.none() | st.just({"script": "train.py", "lr": 0.1})),
    )


@given(job_specs())
def test_jobspec_round_trips_through_json(spec: JobSpec) -> None:
    assert JobSpec.model_validate(spec.model_dump(mode="json")) == spec
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec
    assert JobSpec.model_validate(spec.model_dump()) == spec


def test_criteria_accepts_objects_and_text_equally() -> None:
    a = simple_job("a", 1, criteria="run 100 epochs")
    b = simple_job("a", 1, criteria=RunFor(Budget(100, "epochs")))
    assert a == b
