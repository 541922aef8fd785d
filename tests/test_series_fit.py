"""A job's loss history (engine/series.MetricSeries) read as one array by the loss fit (issue 18): the
fit of a followed MetricSeries is the fit of the same points as a list of tuples, thinned alike, and
fit_loss_curve's cheaper checks (three distinct iteration counts, its own grid) give numpy's answers.
(The grid step's sums and NNLS are checked in tests/test_models_loss_curve.py.)"""

from __future__ import annotations

import random

import numpy as np
import pytest

from cohabit.engine.series import MetricSeries
from cohabit.models import loss_curve as lc
from cohabit.models.loss_fits import LossFits


def test_head_is_the_first_points_as_an_array() -> None:
    s = MetricSeries([(1.0, 5.0), (2.0, 4.0), (4.0, 3.5)])
    assert s.head(2).tolist() == [[1.0, 5.0], [2.0, 4.0]]
    assert s.head(0).shape == (0, 2)
    s.add(8.0, 3.0)  # still appendable after a read (no buffer left exported)
    assert s.head(4)[:, 0].tolist() == [1.0, 2.0, 4.0, 8.0]


@pytest.mark.parametrize("n", [3, 5, 17, 64, 65, 200])
@pytest.mark.parametrize("recency", [None, 0.95])
def test_a_followed_series_fits_as_its_list_of_points(n: int, recency: float | None) -> None:
    rng = random.Random(n)
    pts = []
    k = 0.0
    for _ in range(n):
        k += rng.uniform(1, 50)
        pts.append((k, 1.0 / (0.01 * k + 1.0) + 0.2 + rng.gauss(0, 0.002)))
    series = MetricSeries()
    plain: list[tuple[float, float]] = []
    fits = [LossFits(recency=recency), LossFits(recency=recency)]
    fits[0].follow("j", series)
    fits[1].follow("j", plain)
    for p in pts:
        series.add(*p)
        plain.append(p)
        a, b = fits[0].get("j"), fits[1].get("j")
        assert a == b
    assert fits[0].fits == fits[1].fits > 0 or n < 4


def _linspace_ok(lo: float, hi: float, num: int) -> bool:
    return np.array_equal(lc._linspace(lo, hi, num), np.linspace(lo, hi, num))


def test_the_grid_is_numpys_linspace() -> None:
    rng = random.Random(0)
    cases = [(0.0, 0.0, 24), (0.3, 0.3, 24), (0.0, 1.0, 2), (0.0, 0.999999999, 24)]
    cases += [(rng.uniform(0, 1), rng.uniform(0, 1), rng.choice([4, 24, 25])) for _ in range(300)]
    assert all(_linspace_ok(lo, hi, num) for lo, hi, num in cases)


def test_fewer_than_three_distinct_iteration_counts_give_no_fit() -> None:
    assert lc.fit_loss_curve([(1.0, 3.0), (1.0, 2.0), (5.0, 1.0), (5.0, 0.5)]) is None
    assert lc.fit_loss_curve([(2.0, 3.0)] * 5) is None
    assert lc.fit_loss_curve([(1.0, 3.0), (1.0, 2.0), (3.0, 1.5), (5.0, 1.0)], polish=False) is not None
