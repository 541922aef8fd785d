"""``cohabit serve --backend ray``, run inside a loopback-only network namespace by tests/test_service_ray.py."""
