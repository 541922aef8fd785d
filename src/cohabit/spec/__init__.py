"""Validated, plain data that users write: resources, clusters, jobs, completion criteria.

``load_cluster`` and ``load_jobs`` (YAML files) import PyYAML and :mod:`.yamlio` on first use: a replay of a
CSV trace on a preset cluster reads no YAML.
"""

from typing import TYPE_CHECKING, Any

from .cluster import PRESETS, ClusterSpec, NodeSpec, cluster_from_arg, preset
from .criteria import Budget, Convergence, Criterion, MetricTarget, RunFor, parse_criterion, parse_duration
from .errors import SpecError
from .job import JobSpec, TaskGroup, simple_job
from .resources import STANDARD, Resources

if TYPE_CHECKING:
    from .yamlio import load_cluster, load_jobs

__all__ = [
    "PRESETS", "STANDARD", "Budget", "ClusterSpec", "Convergence", "Criterion", "JobSpec", "MetricTarget",
    "NodeSpec", "Resources", "RunFor", "SpecError", "TaskGroup", "cluster_from_arg", "load_cluster", "load_jobs",
    "parse_criterion", "parse_duration", "preset", "simple_job",
]


def __getattr__(name: str) -> Any:
    if name in ("load_cluster", "load_jobs"):
        from . import yamlio

        return getattr(yamlio, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
