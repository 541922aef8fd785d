"""The submit route's JSON fast path (``service/intake.py``): on the plain case it gives exactly the
jobs the YAML loader gives; on everything else it steps aside, so the errors (file, line, field)
are the loader's own."""

from __future__ import annotations

import json

import pytest
import yaml

from cohabit.service.intake import is_json, jobs_from_json, parse_jobs
from cohabit.spec.limits import MAX_YAML_DEPTH
from cohabit.spec.yamlio import SpecError, loads_jobs

from service_helpers import mlr_jobs

FILES = [
    mlr_jobs(3, 500),
    "jobs:\n  - id: t\n    model: cnn\n    workers: {count: 1, demand: {cpu: 1.5, mem_gb: 0.5}}\n    iterations: 100\n"
    "    weight: 2.5\n    criteria: 'run 2h'\n    workload: {name: torch-mlp, hidden: 16, seed: 3, lr: 1.0e-3}\n",
    "- id: bare\n  workers: {count: 1, demand: {cpu: 1}}\n  iterations: 7\n",
]


@pytest.mark.parametrize("text", FILES, ids=["mlr3", "torch-options", "bare-list"])
def test_json_fast_path_gives_the_yaml_loaders_jobs(text) -> None:
    body = json.dumps(yaml.safe_load(text))
    fast = jobs_from_json(body)
    assert fast is not None, "the plain case must take the fast path"
    assert fast == loads_jobs(text, "<request>") == loads_jobs(body, "<request>")
    assert parse_jobs(body, "application/json; charset=utf-8", "<request>") == fast


def _job(**extra) -> dict:
    return {"id": "a", "workers": {"count": 1, "demand": {"cpu": 1}}, "iterations": 5, **extra}


def _nested(depth: int) -> dict:
    d: dict = {"x": 1}
    for _ in range(depth):
        d = {"x": d}
    return d


BAD = {
    "duplicate-key": '{"jobs": [{"id": "a", "id": "b", "workers": {"count": 1, "demand": {"cpu": 1}}, '
                     '"iterations": 5}]}',
    "nan": json.dumps({"jobs": [_job(weight=float("nan"))]}),
    "invalid-field": json.dumps({"jobs": [_job(iterations=-5)]}, indent=1),
    "duplicate-ids": json.dumps({"jobs": [_job(), _job()]}, indent=1),
    "too-deep": json.dumps({"jobs": [_job(workload={"name": "mlr", "opts": _nested(MAX_YAML_DEPTH)})]}),
    "malformed": '{"jobs": [',
    "other-top-key": json.dumps({"jobs": [_job()], "extra": 1}),
    "not-a-mapping": json.dumps({"jobs": [3]}),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_anything_but_the_plain_case_gets_the_loaders_error(name) -> None:
    body = BAD[name]
    assert jobs_from_json(body) is None
    with pytest.raises(SpecError) as want:
        loads_jobs(body, file="mine.json")
    with pytest.raises(SpecError) as got:
        parse_jobs(body, "application/json", "mine.json")
    assert str(got.value) == str(want.value) and got.value.line == want.value.line


def test_gpus_shorthand_goes_through_the_loader() -> None:
    body = json.dumps({"jobs": [{"id": "g", "gpus": 2, "iterations": 10}]})
    assert jobs_from_json(body) is None
    assert parse_jobs(body, "application/json", "<r>") == loads_jobs(body, "<r>")


def test_only_application_json_takes_the_fast_path() -> None:
    assert is_json("application/json") and is_json("Application/JSON; charset=utf-8")
    assert not is_json(None) and not is_json("application/yaml") and not is_json("text/plain")
