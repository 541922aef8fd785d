"""Validated, plain data that users write: resources, clusters, jobs, completion criteria."""

from .cluster import PRESETS, ClusterSpec, NodeSpec, preset
from .criteria import Criterion, parse_criterion
from .job import JobSpec, TaskGroup, simple_job
from .resources import STANDARD, Resources

__all__ = [
    "PRESETS", "STANDARD", "ClusterSpec", "Criterion", "JobSpec", "NodeSpec", "Resources",
    "TaskGroup", "parse_criterion", "preset", "simple_job",
]
