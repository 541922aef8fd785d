"""Dorm (Sun et al., "Towards Distributed Machine Learning in Shared Clusters: A
Dynamically-Partitioned Approach", SMARTCOMP 2017).

* :mod:`.app` — the application 6-tuple (executor, d, w, n_max, n_min, cmd) as a cohabit job;
* :mod:`.shares` — theoretical shares ŝ_i by weighted DRF in whole containers (Eq. 2);
* :mod:`.milp` — problem P2 (Eq. 10-18) with HiGHS;
* :mod:`.aggregate` — P2 on classes of identical servers, split to servers (large clusters);
* :mod:`.policy` — the policy: re-solve on arrivals and completions, resize by checkpoint.
"""

from .app import DormApp, load_apps, to_jobs
from .milp import PAPER_SETTINGS, Problem, Solution, Thresholds, solve
from .policy import Decision, Dorm, make, make_1, make_2, make_3
from .shares import AppDemand, drf_containers, theoretical_shares

__all__ = [
    "PAPER_SETTINGS", "AppDemand", "Decision", "Dorm", "DormApp", "Problem", "Solution", "Thresholds",
    "drf_containers", "load_apps", "make", "make_1", "make_2", "make_3", "solve", "theoretical_shares", "to_jobs",
]
