"""RayBackend end to end: the ``tests/ray_suite`` tests on a 2-node Ray cluster in a loopback-only netns.

Ray binds to the machine's external address, so everything that starts Ray
runs inside a fresh network namespace that has only ``lo``
(:func:`netns_helpers.run_suite_in_netns`: a child pytest there; whatever still
runs in the namespace afterwards is killed by pid). Skipped with the reason when
not root, without ``ip``, or without Ray installed.
"""

from __future__ import annotations

import pytest

from netns_helpers import run_suite_in_netns, why_not

SUITE_TIMEOUT = 540.0  # under the 600 s per-test limit; the suite took 370 s on a loaded 2-core machine


@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_ray_backend_suite_in_a_loopback_only_namespace(tmp_path) -> None:
    counts, report = run_suite_in_netns("ray_suite", tmp_path, prefix="cohabit-ray", timeout=SUITE_TIMEOUT,
                                        inner_timeout=240)
    assert counts["tests"] >= 8 and counts["failures"] == counts["errors"] == counts["skipped"] == 0, (counts,
                                                                                                   report)


def test_node_order_puts_labelled_ray_nodes_at_their_index_and_fills_with_the_rest() -> None:
    from cohabit.runtime.ray_backend import node_order

    alive = {"c": {"CPU": 1.0}, "a": {"CPU": 1.0, "cohabit_node_2": 1.0}, "b": {"CPU": 2.0},
             "d": {"cohabit_node_0": 1.0}}
    assert node_order(alive) == ["d", "b", "a", "c"]
    assert node_order({"x": {}, "w": {}}) == ["w", "x"]
    # a label beyond the number of nodes cannot take its index: the node still gets a place
    assert sorted(node_order({"x": {"cohabit_node_7": 1.0}, "w": {}})) == ["w", "x"]
    with pytest.raises(RuntimeError, match="no alive node"):
        node_order({})
