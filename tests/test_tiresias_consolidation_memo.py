"""Tiresias's consolidation rule kept per model (``Tiresias.needs_consolidation``, issue 18, speed16b): the
same answer as the placement profile (``tensor_skew``) for every job, and a profile changed after
construction is read for the jobs seen after the change."""

from __future__ import annotations

from cohabit.engine.job import JobView
from cohabit.policies.tensor_skew import tensor_skew
from cohabit.policies.tiresias import Tiresias
from cohabit.spec import Resources
from cohabit.spec.job import JobSpec, TaskGroup

MODELS = ["vgg16", "VGG-16", "vgg16_bn", "resnet50", "resnet", "alexnet", "bert-large", "mystery", "vgg16"]


def _job(i: int, model: str) -> JobView:
    spec = JobSpec(id=f"j{i}", model=model, architecture="allreduce", workers=TaskGroup(count=2, demand=Resources(gpu=1, cpu=2)))
    return JobView(spec, i)


def _want(pol: Tiresias, model: str | None) -> bool:
    skew = tensor_skew(model, pol.skew_table)
    return pol.consolidate_unknown if skew is None else skew >= pol.skew_threshold


def test_the_rule_per_model_is_the_profiles_and_follows_a_changed_profile() -> None:
    pol = Tiresias()
    jobs = [_job(i, m) for i, m in enumerate(MODELS * 2)]
    got = [pol.needs_consolidation(j) for j in jobs]
    assert got == [_want(pol, j.spec.model) for j in jobs]
    assert True in got and False in got
    pol.skew_threshold = 0.05  # (resnet50's 0.09 is consolidated from now on)
    pol.consolidate_unknown = False
    later = [_job(100 + i, m) for i, m in enumerate(MODELS)]
    assert [pol.needs_consolidation(j) for j in later] == [_want(pol, j.spec.model) for j in later]
    pol.skew_table = {"resnet50": 0.01}  # (a new table: vgg16 is unknown now)
    last = [_job(200 + i, m) for i, m in enumerate(MODELS)]
    assert [pol.needs_consolidation(j) for j in last] == [_want(pol, j.spec.model) for j in last]
    assert [pol.needs_consolidation(j) for j in jobs] == got  # (a job's answer is kept as it was first given)
