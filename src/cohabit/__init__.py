"""cohabit: one scheduler core for ML training jobs sharing a cluster, in simulation and for real."""

__version__ = "0.1.0"
