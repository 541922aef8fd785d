"""The learning-curve rounds' reductions over a short axis done a column at a time (issue 18, twelfth
session; :func:`col_min`, eighteenth): :func:`row_max`, :func:`row_min`, :func:`rows_within`, :func:`running_min`
and :func:`col_min` give exactly what numpy's reductions give (NaN and infinities included), above and below the row count where they switch."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cohabit.policies.targets import EPS, SHORT, col_min, row_max, row_min, rows_within, running_min

VALUES = st.sampled_from([0.0, -0.0, 1.0, 2.0, 0.5, 3.0 + EPS / 2, 1e-12, np.inf, -np.inf, np.nan])


@settings(max_examples=150, deadline=None)
@given(n=st.sampled_from([0, 1, SHORT - 1, SHORT, 3 * SHORT]), width=st.integers(1, 4), seed=st.integers(0, 2 ** 31),
       cells=st.lists(VALUES, min_size=1, max_size=8))
def test_column_reductions_are_numpys(n: int, width: int, seed: int, cells: list[float]) -> None:
    rng = np.random.default_rng(seed)
    a = np.where(rng.random((n, width)) < 0.3, rng.choice(cells, size=(n, width)), rng.integers(0, 4, (n, width)) * 1.0)
    room = rng.choice(cells + [3.0], size=width)
    for got, want in ((row_max(a), a.max(axis=1) if n else np.empty(0)),
                      (row_min(a), a.min(axis=1) if n else np.empty(0)),
                      (rows_within(a, room), (a <= room + EPS).all(axis=1)),
                      (running_min(a), np.minimum.accumulate(a, axis=1))):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want)) or got.dtype == bool


@settings(max_examples=150, deadline=None)
@given(n=st.sampled_from([1, SHORT - 1, SHORT, 3 * SHORT]), width=st.integers(1, 4), seed=st.integers(0, 2 ** 31),
       cells=st.lists(VALUES, min_size=1, max_size=8))
def test_the_column_minimum_is_numpys(n: int, width: int, seed: int, cells: list[float]) -> None:
    """:func:`col_min` (the back-filling scan's smallest unit) is ``a.min(axis=0)``: NaN propagated, infinities kept."""
    rng = np.random.default_rng(seed)
    a = np.where(rng.random((n, width)) < 0.3, rng.choice(cells, size=(n, width)), rng.integers(0, 4, (n, width)) * 1.0)
    got, want = np.array(col_min(a)), a.min(axis=0)
    assert np.array_equal(got, want, equal_nan=True)
