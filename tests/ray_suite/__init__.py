"""RayBackend suite, run inside a loopback-only network namespace by tests/test_runtime_ray.py."""
