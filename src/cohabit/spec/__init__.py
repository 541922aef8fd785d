"""Validated, plain data that users write: resources, clusters, jobs, completion criteria."""

from .cluster import PRESETS, ClusterSpec, NodeSpec, preset
from .criteria import Budget, Convergence, Criterion, MetricTarget, RunFor, parse_criterion, parse_duration
from .job import JobSpec, TaskGroup, simple_job
from .resources import STANDARD, Resources
from .yamlio import SpecError, cluster_from_arg, load_cluster, load_jobs

__all__ = [
    "PRESETS", "STANDARD", "Budget", "ClusterSpec", "Convergence", "Criterion", "JobSpec", "MetricTarget",
    "NodeSpec", "Resources", "RunFor", "SpecError", "TaskGroup", "cluster_from_arg", "load_cluster", "load_jobs",
    "parse_criterion", "parse_duration", "preset", "simple_job",
]
