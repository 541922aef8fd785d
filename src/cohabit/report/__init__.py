"""Metrics, comparison tables and plots computed from engine records.

``plot_comparison`` is loaded on first use so that importing this package does
not import matplotlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .metrics import DecisionStats, JobResults, Metrics, ShareSeries, compute_metrics, jain_index, report_json
from .table import comparison_table, comparison_tables, format_duration, print_comparison, select_columns

if TYPE_CHECKING:
    from .plot import plot_comparison

__all__ = [
    "DecisionStats", "JobResults", "Metrics", "ShareSeries", "comparison_table", "comparison_tables",
    "compute_metrics", "format_duration", "jain_index", "plot_comparison", "print_comparison", "report_json",
    "select_columns",
]


def __getattr__(name: str) -> Any:
    if name == "plot_comparison":
        from .plot import plot_comparison

        return plot_comparison
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
