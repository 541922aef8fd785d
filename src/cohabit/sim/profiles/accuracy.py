"""Ground-truth accuracy curves of simulated jobs: the packaged real learning curves.

A job's truth names ``family/index`` (e.g. ``resnet/17``): run ``index`` of
``data/learning_curves/<family>.json`` (validation accuracy per epoch). After a fraction
``f`` of its iterations a job has trained ``f * E`` of the curve's ``E`` epochs; accuracy in
between epochs is interpolated linearly, and before the first epoch it rises linearly
from chance (``1 / classes``).
"""

from __future__ import annotations

from ...models.mlfs_curve import packaged_curves


def curve_values(key: str) -> tuple[list[float], int]:
    """The per-epoch accuracies and class count of curve ``key`` (``family/index``)."""
    family, sep, idx = key.partition("/")
    curves = packaged_curves()
    if not sep or family not in curves or not idx.isdigit() or int(idx) >= len(curves[family]):
        known = ", ".join(sorted(curves))
        raise ValueError(f"unknown learning curve {key!r}: expected FAMILY/INDEX, families: {known}")
    run = curves[family][int(idx)]
    return run.accuracy, run.classes


def accuracy_at(key: str, fraction: float) -> float:
    """Accuracy after ``fraction`` (clamped to [0, 1]) of the job's work."""
    acc, classes = curve_values(key)
    x = min(max(fraction, 0.0), 1.0) * len(acc)
    if x <= 1.0:
        chance = 1.0 / max(classes, 1)
        return chance + (acc[0] - chance) * x
    i = min(int(x), len(acc) - 1)
    lo = acc[i - 1]
    hi = acc[i] if i < len(acc) else acc[-1]
    return lo + (hi - lo) * (x - i)
