"""Compact job specs (``spec.job.compact``, ``spec.job.derived``) and the trace loaders that build them.

A compact spec must read, compare, dump, copy and pickle exactly like the validated one, and take
much less memory; a derived spec must equal the spec validation builds from the same fields, and
must not be made from a value validation would refuse (the loader then raises validation's error).
"""

from __future__ import annotations

import math
import pickle
import subprocess
import sys

import pytest
from pydantic import ValidationError

from cohabit.sim.traces import load_trace
from cohabit.sim.traces._common import gpu_job
from cohabit.sim.traces.errors import TraceRowError
from cohabit.spec.job import JobSpec, compact, derived, simple_job
from cohabit.spec.limits import MAX_ITERATIONS, MAX_NAME_LEN, MAX_TIME_S


def _same(a: JobSpec, b: JobSpec) -> None:
    assert a == b and b == a
    assert a.model_dump() == b.model_dump()
    assert a.model_fields_set == b.model_fields_set
    assert a.model_dump(exclude_unset=True) == b.model_dump(exclude_unset=True)
    assert hash(a.workers) == hash(b.workers) and a.num_gpus == b.num_gpus
    for name in JobSpec.model_fields:
        assert getattr(a, name) == getattr(b, name), name


def test_a_compact_spec_reads_like_the_validated_one() -> None:
    spec = simple_job("j-7", 4, submit_time=12.5, model="resnet", tenant="team-a", iterations=300, deadline=900.0)
    small = compact(spec)
    assert small is not spec
    _same(small, spec)
    moved = small.model_copy(update={"submit_time": 99.0})
    assert moved.submit_time == 99.0 and small.submit_time == 12.5
    assert moved.model_fields_set == spec.model_fields_set | {"submit_time"}
    assert spec.model_fields_set == small.model_fields_set  # the shared set was not changed by the copy
    _same(pickle.loads(pickle.dumps(small)), spec)
    with pytest.raises(ValidationError):
        small.id = "other"  # frozen, as the validated one  # type: ignore[misc]


_MEMORY = """
import tracemalloc
from cohabit.spec.job import JobSpec, compact, simple_job
# many validated specs first, as a trace loader makes them: the shared key table must already hold the names
specs = [simple_job(f"job-{i:05d}", 1 + i % 8, submit_time=float(i), tenant="t") for i in range(2000)]
data = [s.model_dump(exclude_unset=True) for s in specs]
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
plain = [JobSpec.model_validate(d) for d in data]
plain_bytes = tracemalloc.get_traced_memory()[0] - base
base = tracemalloc.get_traced_memory()[0]
small = [compact(s) for s in specs]
small_bytes = tracemalloc.get_traced_memory()[0] - base
assert small == plain == specs
print(small_bytes / plain_bytes)
"""


def test_compact_specs_take_a_fraction_of_the_memory() -> None:
    out = subprocess.run([sys.executable, "-c", _MEMORY], capture_output=True, text=True, check=True, timeout=120)
    # CPython 3.11: 0.13 (0.39 if the names are not primed); 3.13 lays instance values out in its own way
    # (an emulation there: 0.46 against 0.33 on 3.11/3.12), so it is held to a smaller gain
    limit = 0.25 if sys.version_info < (3, 13) else 0.5
    assert float(out.stdout.strip()) < limit, out.stdout


GOOD = {
    "id": ["a", "x" * MAX_NAME_LEN, "philly-00042"],
    "tenant": ["", "team", "y" * MAX_NAME_LEN],
    "model": ["resnet50", "z" * MAX_NAME_LEN],
    "submit_time": [0.0, 1.5, MAX_TIME_S],
    "iterations": [1, 1000, MAX_ITERATIONS],
}
BAD = {
    "id": ["", "x" * (MAX_NAME_LEN + 1)],
    "tenant": ["y" * (MAX_NAME_LEN + 1)],
    "model": ["z" * (MAX_NAME_LEN + 1)],
    "submit_time": [-1.0, math.nan, math.inf, MAX_TIME_S * 2],
    "iterations": [0, -3, MAX_ITERATIONS + 1],
}


@pytest.mark.parametrize("gpus", [1, 4])
def test_derived_specs_equal_validated_ones_and_refuse_what_validation_refuses(gpus: int) -> None:
    base = simple_job("template", gpus)
    for field, values in GOOD.items():
        for v in values:
            made = derived(base, **{field: v})
            assert made is not None, (field, v)
            _same(made, base.model_validate({**base.model_dump(exclude_unset=True), field: v}))
    for field, values in BAD.items():
        for v in values:
            assert derived(base, **{field: v}) is None, (field, v)
            with pytest.raises(ValidationError):
                JobSpec.model_validate({**base.model_dump(exclude_unset=True), field: v})
    assert derived(base, weight=2.0) is None  # a field it does not know: validate instead


def test_gpu_job_is_simple_job_and_raises_its_errors() -> None:
    for gpus in (1, 2, 8):
        got = gpu_job("p-1", gpus, submit_time=30.0, tenant="vc1")
        want = JobSpec(id="p-1", submit_time=30.0, tenant="vc1", workers=simple_job("p-1", gpus).workers,
                       architecture=simple_job("p-1", gpus).architecture)
        _same(got, want)
        _same(gpu_job("p-2", gpus, submit_time=1.0, architecture="ps", ps={"count": 1, "demand": {"cpu": 1.0}}),
              JobSpec(id="p-2", submit_time=1.0, workers=simple_job("p", gpus).workers, architecture="ps",
                      ps={"count": 1, "demand": {"cpu": 1.0}}))
    with pytest.raises(ValidationError, match="less than or equal"):
        gpu_job("p-3", 1, submit_time=2 * MAX_TIME_S)
    with pytest.raises(ValidationError, match="at most 256 characters"):
        gpu_job("p-4", 1, submit_time=0.0, tenant="t" * (MAX_NAME_LEN + 1))


def test_a_philly_row_out_of_range_names_its_file_line_and_column(tmp_path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                    "2017-10-01 00:00:00,100,1,100,vc1\n"
                    f"2017-10-01 00:00:10,50,2,100,{'v' * (MAX_NAME_LEN + 1)}\n")
    with pytest.raises(TraceRowError) as err:
        load_trace(path, "philly")
    assert err.value.line == 3 and err.value.column == "cluster" and str(path) in str(err.value)
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                    "2017-10-01 00:00:00,100,1,100,vc1\n2017-10-01 00:00:10,50,2,100,vc2\n")
    jobs = load_trace(path, "philly").jobs
    _same(jobs[1].spec, JobSpec(id="philly-00001", submit_time=10.0, tenant="vc2",
                                workers=simple_job("x", 2).workers, architecture="allreduce"))
