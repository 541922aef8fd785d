"""Headroom of placement on Harmony-DRL's workloads (Bao et al., ToN'22, §VII): how low the
average JCT could go if placement removed every slowdown (``bench/drl.py`` prints these beside
its table).

* ``solo_no_queue``: every job starts at its submission and runs at its best solo speed (alone,
  as locally as the servers allow: ``sim.drl_bounds.solo_bound``, the one definition of that
  bound). No policy on this cluster does better.
* ``no_interference_fifo`` / ``no_interference_backfill``: the same cluster where placement costs
  no speed at all (every ``InterferenceWorld`` coefficient 0, spreading included, and unbounded
  cores, so every placed job runs at its consolidated solo speed wherever its tasks are), jobs
  started in arrival order by ``fifo`` (the head of the queue blocks) or ``fifo-backfill`` (a job
  that does not fit is skipped, as the task-by-task loop of ``drl`` and LIF does). This is what
  these arrivals' queueing costs when placement is free: the gap between a policy and it is
  what placement can still win. It is an optimistic reference, not a bound: it also waives the
  cross-server cost that ``solo_no_queue`` charges a job the servers force to spread, so it
  can fall below that bound on lightly queued workloads.

    python bench/drl_bounds.py     # the three embedded 6-server workloads
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from cohabit.policies import make_policy
from cohabit.sim.drl_bounds import solo_bound
from cohabit.sim.drl_physics import InterferenceWorld
from cohabit.sim.drl_workload import INTERVAL_S
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import TraceJob
from cohabit.spec.cluster import ClusterSpec

#: placement costs nothing: every coefficient 0 (spreading too), cores never short (``min(1, C_s / U_s)`` = 1)
FREE_PLACEMENT = InterferenceWorld(a_cpu=0.0, a_bus=0.0, a_net=0.0, a_spread=0.0, node_cores=(1e12,) * 64)


def bounds(jobs: Sequence[TraceJob], cluster: ClusterSpec) -> dict[str, float]:
    """The three reference values of the module docstring, average JCT in 20-minute intervals."""
    out = {"solo_no_queue": solo_bound(jobs)}
    cfg = SimConfig(interference=FREE_PLACEMENT)
    for key, pol in (("no_interference_fifo", "fifo"), ("no_interference_backfill", "fifo-backfill")):
        out[key] = simulate(jobs, cluster, make_policy(pol), config=cfg).metrics.avg_jct / INTERVAL_S
    return out


def print_bounds(rows: dict[str, dict[str, float]]) -> None:
    la = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nHeadroom (avg JCT, intervals): solo speed, no queueing / no interference + FIFO / + backfill; "
          f"load average {la}")
    for w, r in rows.items():
        print(f"{w:24s}{r['solo_no_queue']:11.2f}{r['no_interference_fifo']:11.2f}{r['no_interference_backfill']:11.2f}")


if __name__ == "__main__":
    from cohabit.sim.traces import load_trace
    from cohabit.spec.cluster import preset

    print_bounds({n: bounds(load_trace(n).jobs, preset("drl")) for n in ("drl_uniform", "drl_poisson", "drl_bursty")})
