"""Shared fixtures: tiny clusters and trace jobs built by hand."""

from __future__ import annotations

import importlib.util
import os
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources, simple_job


# tests/ray_suite and tests/ray_service run only inside the loopback-only namespaces that
# tests/test_runtime_ray.py and tests/test_service_ray.py make (they set COHABIT_RAY_NETNS=1 there);
# the outer run does not collect them at all.
collect_ignore = [] if os.environ.get("COHABIT_RAY_NETNS") == "1" else ["ray_suite", "ray_service"]


def trace_job(id: str, gpus: float, duration: float, submit: float = 0.0, model: str = "resnet50",
              iterations: int | None = None, declare: bool = True) -> TraceJob:
    """A GPU-trace job whose true length is ``duration`` seconds at its own size."""
    iters = iterations if iterations is not None else int(duration)
    spec = simple_job(id, gpus, submit_time=submit, model=model, iterations=iters if declare else None)
    return TraceJob(spec, JobTruth(iterations=iters, duration=duration, ref_workers=max(int(gpus), 1)))


@cache
def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` imported as a module (benchmarks are scripts, not a package)."""
    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def small_cluster(nodes: int = 1, gpus: int = 4) -> ClusterSpec:
    return ClusterSpec.homogeneous("test", nodes, Resources(gpu=gpus, cpu=8 * gpus, mem_gb=64 * gpus))


@pytest.fixture
def one_node() -> ClusterSpec:
    return small_cluster(1, 4)


@pytest.fixture(scope="module")
def torch_one_thread():
    """Tiny torch ops on a shared 2-core machine: one intra-op thread avoids OpenMP stalls."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tpch_dir(tmp_path_factory):
    """TPC-H scale factor 0.01 as Parquet, generated once per test session by tpchgen-cli.

    ``COHABIT_TPCH_DIR`` points at its root for the session, so that query workers started as
    processes find the same data (``cohabit.aqp.data.ensure_tpch(0.01)``)."""
    from cohabit.aqp.data import ensure_tpch

    root = tmp_path_factory.mktemp("tpch")
    before = os.environ.get("COHABIT_TPCH_DIR")
    os.environ["COHABIT_TPCH_DIR"] = str(root)
    yield ensure_tpch(0.01, root)
    if before is None:
        os.environ.pop("COHABIT_TPCH_DIR", None)
    else:
        os.environ["COHABIT_TPCH_DIR"] = before
