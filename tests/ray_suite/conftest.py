"""A 2-node local Ray cluster for the RayBackend suite (only inside the loopback-only namespace).

``tests/test_runtime_ray.py`` runs this directory with ``COHABIT_RAY_NETNS=1``
inside ``ip netns exec``; collected anywhere else, every test here is skipped.
Node ``i`` advertises the custom resource ``cohabit_node_<i>``, so logical node
``i`` of the test clusters runs on Ray node ``i``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

INSIDE = os.environ.get("COHABIT_RAY_NETNS") == "1"
STORE = 100 * 2**20


def node_args(i: int) -> dict[str, Any]:
    return {"num_cpus": 1, "object_store_memory": STORE, "resources": {f"cohabit_node_{i}": 1},
            "node_ip_address": "127.0.0.1"}


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    if not INSIDE:
        pytest.skip("runs only inside a loopback-only network namespace (see tests/test_runtime_ray.py)")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={**node_args(0), "include_dashboard": False})
    try:
        cluster.add_node(**node_args(1))
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
