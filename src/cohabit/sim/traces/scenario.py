"""Default runs of the embedded traces: the cluster (and arrival speed) on which scheduling matters.

An embedded trace keeps the cluster it was recorded on as ``TraceLoad.default_cluster``
(a full-size preset, always available by name). Some of those runs show nothing: on the
full Philly cluster the 82k-job trace offers a GPU load of 0.15 and no job waits, and the
Alibaba pods, spread over 149 days, never request more than 65 GPUs at once (all of them
together request fewer GPUs than the 1,213-node cluster has). The papers evaluate where queues form, so each embedded trace also has a
:class:`Scenario`: the cluster ``cohabit simulate`` uses when no ``--cluster`` is given,
and a factor applied to submit times (``arrival_scale`` < 1 compresses arrivals; job
lengths are unchanged). :func:`cohabit.sim.load.offered_load` says what load a run is at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..truth import TraceJob


def check_arrival_scale(factor: float) -> float:
    """``factor`` if it is a finite number > 0, else a ValueError naming what is expected."""
    if isinstance(factor, bool) or not (isinstance(factor, (int, float)) and 0 < factor < float("inf")):
        raise ValueError(f"arrival scale must be a number > 0 (1 = arrivals as recorded), got {factor!r}")
    return float(factor)


@dataclass(frozen=True)
class Scenario:
    """The default run of an embedded trace: a cluster preset and an arrival-time factor."""

    cluster: str
    arrival_scale: float = 1.0
    why: str = ""
    #: Simulated seconds after which the default run stops (None: until every job ended). For traces
    #: whose longest jobs are services that run for months: the run covers the busy period, and the
    #: services still running then are reported as such (not finished).
    horizon_s: float | None = None

    def __post_init__(self) -> None:
        check_arrival_scale(self.arrival_scale)
        if self.horizon_s is not None and not 0 < self.horizon_s < float("inf"):
            raise ValueError(f"horizon_s must be a finite number > 0 or None, got {self.horizon_s!r}")


#: Embedded trace name -> its default run (every name of ``EMBEDDED`` has one; tested).
SCENARIOS: dict[str, Scenario] = {
    "tiresias_480": Scenario("tiresias", why="the Tiresias testbed (64 GPUs) at its recorded arrivals"),
    "philly_82k": Scenario(
        "philly-800",
        why="Philly's trace on 800 of its ~2,500 GPUs: on the full cluster (preset 'philly') no job waits",
    ),
    "pollux_workload-1": Scenario("pollux", why="the Pollux testbed (64 GPUs) at its recorded arrivals"),
    "alibaba_openb": Scenario(
        "alibaba-openb-1in8", arrival_scale=1 / 200, horizon_s=48 * 3600.0,
        why="one node in eight of the Alibaba cluster (775 GPUs), pod arrivals 200x faster (149 days -> "
            "18 h), stopped at 48 h: at most 65 GPUs are requested at once as recorded, and on the full "
            "cluster ('alibaba-openb', arrival scale 1) no pod ever waits; 79 pods are services that run "
            "for days to 145 days and would otherwise set the makespan and dilute the allocated share",
    ),
    "harmony_80": Scenario("harmony", why="Harmony's 100 CPU machines at the trace's arrivals"),
    "drl_uniform": Scenario("drl", why="Bao et al.'s testbed (6 servers, 12 GPUs) with server-level interference"),
    "drl_poisson": Scenario("drl", why="Bao et al.'s testbed (6 servers, 12 GPUs) with server-level interference"),
    "drl_bursty": Scenario("drl", why="Bao et al.'s testbed (6 servers, 12 GPUs) with server-level interference"),
}


def scale_arrivals(jobs: Sequence[TraceJob], factor: float) -> list[TraceJob]:
    """``jobs`` with every submit time multiplied by ``factor`` (lengths and truths unchanged)."""
    factor = check_arrival_scale(factor)
    if factor == 1.0:
        return list(jobs)
    return [TraceJob(tj.spec.model_copy(update={"submit_time": tj.spec.submit_time * factor}), tj.truth)
            for tj in jobs]


def default_run(trace: str, cluster: str | None, arrival_scale: float | None,
                fallback_cluster: str) -> tuple[str, float, Scenario | None]:
    """(cluster, arrival scale, the scenario used or None) for a run of ``trace``.

    Without ``cluster`` an embedded trace runs its :data:`SCENARIOS` entry (``arrival_scale``,
    when given, replaces the scenario's); naming a cluster means arrivals as recorded unless
    ``arrival_scale`` says otherwise. Files run on ``fallback_cluster`` (their format's preset)."""
    scenario = SCENARIOS.get(trace) if cluster is None else None
    if scenario is not None:
        scale = scenario.arrival_scale if arrival_scale is None else arrival_scale
        return scenario.cluster, check_arrival_scale(scale), scenario
    scale = 1.0 if arrival_scale is None else arrival_scale
    return cluster or fallback_cluster, check_arrival_scale(scale), None
