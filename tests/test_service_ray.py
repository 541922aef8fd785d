"""``cohabit serve --backend ray``: the ``tests/ray_service`` test in a loopback-only network namespace.

Ray binds the machine's external address, so the daemon and its Ray run inside a fresh network
namespace with only ``lo``, started by a child pytest there (:func:`netns_helpers.run_suite_in_netns`).
Skipped with the reason when not root, without ``ip``, or without Ray (as tests/test_runtime_ray.py).
"""

from __future__ import annotations

import pytest

from netns_helpers import run_suite_in_netns, why_not

TIMEOUT = 560.0


@pytest.mark.timeout(600)
@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_serve_on_ray_in_a_loopback_only_namespace(tmp_path) -> None:
    counts, report = run_suite_in_netns("ray_service", tmp_path, prefix="cohabit-svc", timeout=TIMEOUT,
                                        inner_timeout=TIMEOUT - 20, extra=("-s",))
    assert counts == {"tests": 1, "failures": 0, "errors": 0, "skipped": 0}, (counts, report)
