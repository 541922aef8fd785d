"""Bounds on what input may ask for, checked where it is parsed, before anything is allocated per task.

Every loader (YAML jobs and clusters, the trace formats, the command line)
checks its numbers against these limits, so that a typo such as
``gpus: 100000000`` or ``submit_time: .inf`` is a clean ``file:line: field``
error instead of a ``MemoryError``, an ``OverflowError``, a hang or a job that
silently never arrives. The bounds are far above any real cluster or trace
(the largest preset, Philly, has 2,504 GPUs; the longest embedded trace spans
weeks) and far below what would exhaust memory or lose float precision.
"""

from __future__ import annotations

import math

from .resources import Resources

#: Tasks of one role (workers or parameter servers) in one job.
MAX_TASKS = 100_000
#: Iterations a job may declare (well inside float's exact-integer range, 2**53).
MAX_ITERATIONS = 10**15
#: Seconds: submit times, deadlines and durations (about 317 years).
MAX_TIME_S = 1e10
#: Characters of an id, a tenant, a model or a node name.
MAX_NAME_LEN = 256
#: Any one resource quantity of a node or a task (cores, GB, GPUs, Gbit/s).
MAX_QUANTITY = 1e9
#: GPU devices on one node (the ledger keeps per-device arrays).
MAX_NODE_GPUS = 1024
#: Nodes in one cluster.
MAX_NODES = 100_000
#: GPU devices in one cluster, summed over its nodes.
MAX_CLUSTER_GPUS = 1_000_000
#: Nesting depth of a YAML document (mappings and lists inside each other).
MAX_YAML_DEPTH = 64
#: YAML nodes that aliases may stand for in one document (an alias "bomb" of a few hundred bytes
#: expands to billions); nodes written out in full are bounded by the file's size.
MAX_YAML_ALIAS_NODES = 100_000
#: Magnitude of any number read from a CSV trace field.
MAX_CSV_NUMBER = 1e15


def decode_utf8(data: bytes) -> tuple[str | None, int, str]:
    """(text, 0, "") for UTF-8 ``data`` (a leading byte-order mark dropped), else (None, line, reason).

    ``line`` is the 1-based line of the first bad byte in the whole input
    (a streaming decoder only knows the offset within its current chunk).
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), 0, ""
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return None, line, f"{exc.reason} at byte {exc.start}"


def finite_in(value: float, lo: float, hi: float) -> bool:
    """True if ``value`` is a finite number in ``[lo, hi]``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and lo <= value <= hi


def check_quantities(res: Resources, what: str, *, max_gpu: float = MAX_QUANTITY) -> Resources:
    """``res`` if every quantity is in ``[0, MAX_QUANTITY]`` and ``gpu <= max_gpu``; else ValueError naming it."""
    for name, q in res.items():
        if q < 0:
            raise ValueError(f"{what}: resource {name!r} must be >= 0, got {q:g}")
        if q > MAX_QUANTITY:
            raise ValueError(f"{what}: resource {name!r} must be <= {MAX_QUANTITY:g}, got {q:g}")
    if res["gpu"] > max_gpu:
        raise ValueError(f"{what}: at most {max_gpu:g} GPUs, got {res['gpu']:g}")
    return res
