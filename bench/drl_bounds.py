"""Headroom of placement on Harmony-DRL's workloads (Bao et al., ToN'22, §VII): how low the
average JCT could go if placement removed every slowdown (``bench/drl.py`` prints these beside
its table).

* ``solo_no_queue``: every job starts at its submission and runs at its best solo speed (alone,
  as locally as the servers allow: ``sim.drl_bounds.solo_bound``, the one definition of that
  bound). No policy on this cluster does better.
* ``no_interference_fifo`` / ``no_interference_backfill``: the same cluster with co-location
  interference switched off (``sim.drl_bounds.no_interference_world``: the CPU, bus and NIC
  coefficients 0; a job spread over servers still pays for its cross-server traffic), jobs
  started in arrival order by ``fifo`` (the head of the queue blocks) or ``fifo-backfill`` (a job
  that does not fit is skipped, as the task-by-task loop of ``drl`` and LIF does),
  consolidated-first placement. This is what placement that never co-locates harmfully would
  give with the queueing these arrivals cause: the gap between a policy and it is what
  placement can still win; the gap between it and ``solo_no_queue`` is mostly queueing that no
  placement removes (only ordering could).

    python bench/drl_bounds.py     # the three embedded 6-server workloads
"""

from __future__ import annotations

import os
from collections.abc import Sequence


from cohabit.policies import make_policy
from cohabit.sim.drl_bounds import no_interference_world, solo_bound
from cohabit.sim.drl_workload import INTERVAL_S
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import TraceJob
from cohabit.spec.cluster import ClusterSpec



def bounds(jobs: Sequence[TraceJob], cluster: ClusterSpec) -> dict[str, float]:
    """The three reference values of the module docstring, average JCT in 20-minute intervals."""
    out = {"solo_no_queue": solo_bound(jobs)}
    cfg = SimConfig(interference=no_interference_world(len(cluster.nodes)))
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
