"""YAML jobs and clusters: loading, shorthands, errors naming file:line and field, round trips."""

from __future__ import annotations

import pickle
from pathlib import Path
from textwrap import dedent

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.spec import ClusterSpec, JobSpec, Resources, TaskGroup, preset, simple_job
from cohabit.spec.criteria import Budget, Convergence, MetricTarget
from cohabit.spec.yamlio import (
    SpecError,
    cluster_from_arg,
    dump_cluster,
    dump_jobs,
    job_from_item,
    load_cluster,
    load_jobs,
    loads_cluster,
    loads_jobs,
    parse_yaml,
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(dedent(text).lstrip("\n"))
    return path


# ---------------------------------------------------------------------------
# Jobs
# ---------------------------------------------------------------------------
JOBS = """
jobs:
  - id: resnet
    gpus: 4
    model: resnet50
    criteria: accuracy >= 0.95 within 3600s
  - id: tiny
    gpus: 0.5
    submit_time: 30
  - id: lda
    architecture: ps
    workers: {count: 4, demand: {cpu: 4, mem_gb: 8}}
    ps: {count: 1, demand: {cpu: 2, mem_gb: 16}}
    n_min: 2
    n_max: 8
    criteria: converge loss delta 0.01 within 30 epochs
    tenant: alice
"""


def test_load_jobs_reads_full_specs_and_gpu_shorthand(tmp_path: Path) -> None:
    jobs = load_jobs(write(tmp_path, "jobs.yaml", JOBS))
    assert [j.id for j in jobs] == ["resnet", "tiny", "lda"]
    assert jobs[0] == simple_job("resnet", 4, model="resnet50", criteria="accuracy >= 0.95 within 1h")
    assert jobs[0].criteria == MetricTarget("accuracy", ">=", 0.95, Budget(3600))
    assert jobs[1].workers.demand["gpu"] == 0.5 and jobs[1].submit_time == 30
    assert jobs[2].architecture == "ps" and jobs[2].num_ps == 1 and jobs[2].max_workers == 8
    assert jobs[2].criteria == Convergence(0.01, Budget(30, "epochs"), "loss")


def test_load_jobs_accepts_a_bare_list() -> None:
    jobs = loads_jobs("- {id: a, gpus: 1}\n- {id: b, gpus: 2, cpu_per_gpu: 8}\n")
    assert jobs == [simple_job("a", 1), simple_job("b", 2, cpu_per_gpu=8)]


def test_load_jobs_accepts_an_empty_jobs_list() -> None:
    assert loads_jobs("jobs: []\n") == []
    assert loads_jobs("jobs:\n") == []


@pytest.mark.parametrize(
    ("text", "line", "field", "fragment"),
    [
        # the example: a negative worker count, reported at the count's own line
        ("""
         jobs:
           - id: a
             gpus: 1
           - id: b
             architecture: allreduce
             workers:
               demand: {gpu: 1}
               count: -1
         """, 8, "jobs[1].workers.count", "Input should be greater than or equal to 0, got -1"),
        ("""
         jobs:
           - id: a
             gpus: 1
             deadline: -5
         """, 4, "jobs[0].deadline", "greater than 0, got -5"),
        ("""
         jobs:
           - id: a
             gpus: 2
           - id: b
             gpus: 1
             criteria: run 3 bananas
         """, 6, "jobs[1].criteria", "unknown budget unit 'bananas'"),
        ("""
         jobs:
           - id: a
             workers: {count: 1, demand: {gpu: 1}}
             colour: red
         """, 4, "jobs[0].colour", "unknown field 'colour'; known fields: id, submit_time"),
        ("""
         jobs:
           - id: a
             gpus: 1
             colour: red
         """, 4, "jobs[0].colour", "unknown field 'colour'; known fields: id, gpus"),
        ("""
         jobs:
           - id: a
             gpus: 1
           - id: b
             architecture: ps
             workers: {count: 2, demand: {gpu: 1}}
         """, 4, "jobs[1]", "architecture 'ps' needs ps.count >= 1"),
        ("""
         jobs:
           - id: a
             architecture: allreduce
             workers: {count: 2, demand: {gpu: 1}}
             n_min: 3
             n_max: 2
         """, 2, "jobs[0]", "n_min=3, n_max=2"),
        ("""
         jobs:
           - gpus: 1
         """, 2, "jobs[0].id", "Field required"),
        ("""
         jobs:
           - id: a
             workers: {count: 2, demand: {gpu: 1}}
         """, 2, "jobs[0]", "architecture 'single' needs workers.count == 1, got 2"),
        ("""
         jobs:
           - id: a
             gpus: 1.5
         """, 3, "jobs[0].gpus", "fractional GPU demand must be < 1, got 1.5"),
        ("""
         jobs:
           - id: a
             gpus: lots
         """, 3, "jobs[0].gpus", "valid number"),
        ("""
         jobs:
           - id: a
             gpus: 2
             workers: {count: 2, demand: {gpu: 1}}
         """, 4, "jobs[0].workers", "'gpus' builds 'workers' itself"),
        ("""
         jobs:
           - id: a
             gpus: 1
           - id: a
             gpus: 2
         """, 4, "jobs[1].id", "duplicate job id 'a' (first used by jobs[0] on line 2)"),
        ("""
         jobs:
           - id: a
             gpus: 1
             gpus: 2
         """, 4, "jobs[0].gpus", "duplicate key 'gpus' (first given on line 3)"),
        ("""
         jobs:
           - just a string
         """, 2, "jobs[0]", "a job must be a mapping"),
        ("""
         jobs: {id: a}
         """, 1, "jobs", "expected a top-level 'jobs:' list"),
        ("""
         job:
           - {id: a, gpus: 1}
         """, 1, "job", "unknown top-level key 'job'"),
        ("42\n", 1, "jobs", "got int"),
    ],
)
def test_job_errors_name_file_line_and_field(tmp_path: Path, text: str, line: int, field: str | None,
                                             fragment: str) -> None:
    path = write(tmp_path, "jobs.yaml", text)
    with pytest.raises(SpecError) as info:
        load_jobs(path)
    err = info.value
    assert (err.file, err.line, err.field) == (str(path), line, field)
    assert fragment in err.message
    head = f"{path}:{line}: " + (f"{field}: " if field else "")
    assert str(err).startswith(head + err.message)


def test_job_error_str_has_the_documented_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "jobs.yaml", "jobs:\n  - id: a\n    architecture: allreduce\n"
                                  "    workers: {count: -1, demand: {gpu: 1}}\n")
    with pytest.raises(SpecError) as info:
        load_jobs("jobs.yaml")
    assert str(info.value) == "jobs.yaml:4: jobs[0].workers.count: Input should be greater than or equal to 0, got -1"


def test_all_problems_of_a_file_are_reported_in_line_order() -> None:
    text = "jobs:\n  - {id: a, gpus: 1, deadline: -1, criteria: run 2 weeks}\n  - {id: b, gpus: 0}\n  - {id: c}\n"
    with pytest.raises(SpecError) as info:
        loads_jobs(text, "many.yaml")
    errors = [info.value, *info.value.others]
    assert [(e.line, e.field) for e in errors] == [
        (2, "jobs[0].criteria"), (2, "jobs[0].deadline"), (3, "jobs[1].gpus"), (4, "jobs[2].workers"),
    ]
    assert str(info.value).count("\nmany.yaml:") == 3


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("jobs:\n  - id: a\n    gpus: [1, 2\n", 4, "did not find expected ',' or ']'"),
        ("jobs:\n  - id: a\n   gpus: 1\n", 3, "YAML syntax error"),
        ("jobs:\n  - id: 'a\n", 3, "YAML syntax error"),
        ("jobs: []\n---\njobs: []\n", 2, "expected a single document"),
        ("jobs:\n  - !!python/object/apply:os.system ['echo pwned']\n", 2, "no Python tags"),
        ("", 1, "the file is empty"),
    ],
)
def test_yaml_problems_become_spec_errors_with_the_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        loads_jobs(text, "bad.yaml")
    assert info.value.line == line
    assert fragment in info.value.message
    assert str(info.value).startswith(f"bad.yaml:{line}: ")


def test_public_building_blocks_report_like_load_jobs() -> None:
    node, data = parse_yaml("- {id: a, gpus: 2}\n- {id: b, gpus: -1}\n", "t.yaml")
    assert job_from_item(data[0], node.value[0], ("jobs", 0)) == simple_job("a", 2)
    with pytest.raises(SpecError) as info:
        job_from_item(data[1], node.value[1], ("jobs", 1), "t.yaml")
    assert (info.value.line, info.value.field) == (2, "jobs[1].gpus")


def test_unreadable_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read the file") as info:
        load_jobs(tmp_path / "missing.yaml")
    assert info.value.line is None and info.value.file == str(tmp_path / "missing.yaml")


def test_spec_error_is_a_value_error_and_pickles() -> None:
    err = SpecError("bad", file="f.yaml", line=3, field="jobs[0].id", others=[SpecError("worse", line=4)])
    assert isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert (again.file, again.line, again.field, again.message) == ("f.yaml", 3, "jobs[0].id", "bad")
    assert str(again) == str(err) == "f.yaml:3: jobs[0].id: bad\n4: worse"


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------
resources = st.dictionaries(
    st.sampled_from(["cpu", "gpu", "mem_gb", "gpu_mem_gb"]), st.floats(min_value=0, max_value=1e6), max_size=3
).map(Resources)


@st.composite
def job_specs(draw: st.DrawFn) -> JobSpec:
    arch = draw(st.sampled_from(["single", "ps", "allreduce"]))
    count = 1 if arch == "single" else draw(st.integers(1, 16))
    return JobSpec(
        id=draw(st.text(min_size=1, max_size=10)),
        submit_time=draw(st.floats(min_value=0, max_value=1e7)),
        architecture=arch,
        workers=TaskGroup(count=count, demand=draw(resources)),
        ps=TaskGroup(count=draw(st.integers(1, 4)), demand=draw(resources)) if arch == "ps" else None,
        epochs=draw(st.none() | st.integers(1, 500)),
        tenant=draw(st.sampled_from(["default", "yes", "null", "0", "a: b"])),  # YAML-significant strings
        criteria=draw(st.none() | st.sampled_from(["loss <= 0.3 within 2h", "run 1.5h", "converge delta 0.1% "
                                                                                        "within 9 epochs"])),
        deadline=draw(st.none() | st.floats(min_value=1, max_value=1e6)),
        weight=draw(st.floats(min_value=0.5, max_value=4)),
        workload=draw(st.none() | st.just({"script": "train.py", "args": ["--lr", 0.1]})),
    )


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(job_specs(), max_size=4, unique_by=lambda j: j.id))
def test_dump_then_load_jobs_round_trips(jobs: list[JobSpec]) -> None:
    assert loads_jobs(dump_jobs(jobs)) == jobs


def test_dump_jobs_writes_readable_yaml(tmp_path: Path) -> None:
    path = tmp_path / "out.yaml"
    text = dump_jobs([simple_job("a", 2, criteria="run 2h")], path)
    assert path.read_text() == text
    assert "criteria: run 2h" in text and "architecture: allreduce" in text
    assert load_jobs(path) == [simple_job("a", 2, criteria="run 2h")]


# ---------------------------------------------------------------------------
# Clusters
# ---------------------------------------------------------------------------
CLUSTER = """
name: lab
nodes:
  - name: big
    capacity: {gpu: 8, cpu: 64, mem_gb: 512}
    labels: {gpu_model: V100}
  - count: 3
    capacity: {gpu: 4, cpu: 32, mem_gb: 256}
    labels: {gpu_model: T4}
  - count: 2
    capacity: {gpu: 2}
  - count: 2
    name: cpu
    capacity: {cpu: 96}
"""


def test_load_cluster_expands_count_items(tmp_path: Path) -> None:
    cluster = load_cluster(write(tmp_path, "cluster.yaml", CLUSTER))
    assert cluster.name == "lab"
    assert [n.name for n in cluster.nodes] == ["big", "lab-0", "lab-1", "lab-2", "lab-3", "lab-4", "cpu-0", "cpu-1"]
    assert cluster.nodes[1].labels == {"gpu_model": "T4"}
    assert cluster.capacity == Resources(gpu=8 + 12 + 4, cpu=64 + 96 + 192, mem_gb=512 + 768)


@pytest.mark.parametrize(
    ("text", "line", "field", "fragment"),
    [
        ("name: c\nnodes:\n  - {name: a, capacity: {gpu: 1}}\n  - count: 0\n    capacity: {gpu: 4}\n",
         4, "nodes[1].count", "greater than or equal to 1, got 0"),
        ("name: c\nnodes:\n  - count: 2\n    capacity: {gpu: 4}\n    colour: red\n",
         5, "nodes[0].colour", "unknown field 'colour'; known fields: count, name, capacity, labels"),
        ("name: c\nnodes:\n  - name: a\n    capacity: {gpu: -1}\n", 4, "nodes[0].capacity", "must be >= 0"),
        ("name: c\nnodes:\n  - name: a\n", 3, "nodes[0].capacity", "Field required"),
        ("name: c\nnodes:\n  - {name: a, capacity: {gpu: 1}}\n  - {name: a, capacity: {gpu: 2}}\n",
         4, "nodes[1].name", "duplicate node name 'a' (first given by nodes[0] on line 3)"),
        ("name: c\nnodes:\n  - {name: c-1, capacity: {gpu: 1}}\n  - {count: 2, capacity: {gpu: 2}}\n",
         4, "nodes[1].name", "duplicate node name 'c-1'"),
        ("name: c\nnodes: []\n", 2, "nodes", "at least 1 item"),
        ("name: c\nnodes: 3\n", 2, "nodes", "'nodes' must be a list"),
        ("name: c\n", 1, "nodes", "missing 'nodes'"),
        ("name: c\nmachines: []\n", 2, "machines", "unknown top-level key 'machines'"),
        ("name: [c]\nnodes:\n  - {name: a, capacity: {gpu: 1}}\n", 1, "name", "valid string"),
        ("- a\n", 1, None, "expected a mapping with 'name' and 'nodes'"),
    ],
)
def test_cluster_errors_name_file_line_and_field(text: str, line: int, field: str | None, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        loads_cluster(text, "cluster.yaml")
    err = info.value
    assert (err.file, err.line, err.field) == ("cluster.yaml", line, field)
    assert fragment in err.message


def test_dump_then_load_cluster_round_trips() -> None:
    for cluster in (preset("tiresias"), loads_cluster(CLUSTER)):
        assert loads_cluster(dump_cluster(cluster)) == cluster


def test_cluster_from_arg_takes_presets_and_paths(tmp_path: Path) -> None:
    assert cluster_from_arg("tiresias") == preset("tiresias")
    assert cluster_from_arg("Pollux") == preset("pollux")
    path = write(tmp_path, "c.yaml", CLUSTER)
    assert cluster_from_arg(str(path)) == load_cluster(path)
    no_suffix = write(tmp_path, "cluster_spec", CLUSTER)
    assert isinstance(cluster_from_arg(str(no_suffix)), ClusterSpec)


def test_cluster_from_arg_lists_presets_when_unknown(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        cluster_from_arg("moon-base")
    assert "unknown cluster 'moon-base'" in str(info.value)
    for name in ("alibaba-openb", "philly", "pollux", "tiresias"):
        assert name in str(info.value)
    with pytest.raises(SpecError, match="cannot read the file"):
        cluster_from_arg(str(tmp_path / "nope.yaml"))


def test_exponent_numbers_are_numbers_as_in_yaml_1_2() -> None:
    """PyYAML's YAML 1.1 rules read ``1e-3`` and ``1.5e3`` as text, so ``lr: 1e-3`` in a jobs file was
    refused by the workload's option check; cohabit's loader reads them as numbers (quoted stays text)."""
    from cohabit.spec.yamlio import loads_jobs

    (spec,) = loads_jobs(dedent("""\
        jobs:
          - id: a
            workers: {count: 1, demand: {cpu: 1}}
            iterations: 10
            workload: {name: mlr, lr: 1e-3, a: 1.5e3, b: -2E+4, c: .5e1, d: "1e-3", e: 10, f: abc1e3}
        """))
    w = spec.workload
    assert (w["lr"], w["a"], w["b"], w["c"]) == (0.001, 1500.0, -20000.0, 5.0)
    assert isinstance(w["lr"], float) and w["d"] == "1e-3" and w["e"] == 10 and w["f"] == "abc1e3"
