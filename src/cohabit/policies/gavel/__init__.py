"""Gavel (Narayanan et al., OSDI'20): its round-based mechanism and the heterogeneity-agnostic policies on it.

``rounds.GavelRounds`` is the mechanism (time fractions enforced in 360 s rounds); ``las`` (max-min
fairness), ``fifo`` and ``ftf`` (finish-time fairness) compute the allocations. docs/fidelity.md
compares them with Gavel's own simulator.
"""
