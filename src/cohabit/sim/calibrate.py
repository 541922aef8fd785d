"""Profiles of real jobs from what the scheduler observed of a real run (sim-vs-real calibration).

Input: the jobs' specs, the :class:`~cohabit.engine.record.Record` of a real run (LocalBackend)
and its cluster. Used from the record: when each job was placed, on which nodes, and when it
was paused or ended (allocation and release events: which jobs ran beside each report), the
progress reports (iterations, seconds per iteration, the PS workers' compute / communication
split) and the CPU time and PS traffic the jobs' processes got (``used`` events). Never used as a cost: a
job's finish time, its JCT, the makespan: the simulation that replays these profiles must
predict those.

Per job, a :class:`~.truth.HostTruth`:

* ``cpu_s`` / ``link_s``: the reported seconds per iteration with the sharing taken out
  (including the machine's ``background`` load at that moment, below). For each report, the jobs
  running at that moment and their nodes are known from the record, so
  :func:`.host_physics.factors` gives the share of a core and of the links the job had; solo
  cost = reported cost x share (a PS job: ``compute_s x f_cpu``, and of ``comm_s`` only its bytes'
  time on the wire is stretched by the sharing: ``wire_s`` (:func:`wire_seconds`, from its
  measured traffic) is taken out as ``wire_s / f_link`` and put back as ``wire_s``; any other job
  computes all its iteration). The median over the job's reports is its cost. The
  shares depend on the other jobs' costs, so this is repeated (until no cost moves by more than
  :data:`TOLERANCE`, at most :data:`PASSES` times) starting
  from the raw medians.
* ``start_s``: from its first placement to the first report, minus the iterations that report
  counts times their reported time; ``restore_s``: the same after each resume (from the
  iteration it was paused at, estimated from its last report before the pause), median. A job
  with no measured resume takes its model's; a one-task job in a run without resumes of its model
  (FIFO), the warm starts of its model (:func:`warm_starts`); else the run's resumes, else its
  ``start_s``. A job whose
  first start was not measured, its model's starts, else its own or its model's resumes, else
  the run's starts or resumes.
  A placement recorded at the moment a job still starting was paused is not measured: the
  scheduler waited for that halt (the job had to come up before it could checkpoint), which
  the simulator charges itself (``SimConfig.blocking_halts``).
* A job with no report at all (placed, then done or paused before its first one) takes the
  median cost of the jobs with its model, workload and architecture that reported; without
  such a twin it is left out.
* ``background`` (:func:`background_samples`): the other processes' load on the machine, in
  runnable threads per core, from the CPU time the jobs' processes got (``used`` events), as a
  series of :data:`WINDOW_S` windows through the run (:func:`background_series`; the run's
  median: :func:`background_load`): within one run of minutes it moves by a factor of two. On a
  shared machine a job alone on its core gets only ``1 / (1 + b)`` of it, and a second job on
  that core slows it by ``(1 + b) / (2 + b)``, not by half: without it the costs taken out of
  shared reports are too small and a job alone in the simulation is too fast (the makespan
  comes out short). The costs are then per iteration on a core of its own.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain

from ..engine.record import ALLOCATING, RELEASING, Event, EventKind
from ..spec.cluster import ClusterSpec
from ..spec.job import JobSpec
from . import host_physics
from .physics import SimConfig, physics_config
from .truth import HostTruth, JobTruth, TraceJob

#: Rounds of taking the sharing out of the reports (each uses the costs of the round before).
PASSES = 20
#: Relative change of every cost below which the rounds stop.
TOLERANCE = 1e-4
#: Seconds per step of the background series (the machine's load measured through a run).
WINDOW_S = 20.0
#: A background of one value (the run's median) or a series ``((t0, b0), (t1, b1), ...)``.
Background = float | tuple[tuple[float, float], ...]


@dataclass
class _Interval:
    start: float
    end: float
    nodes: tuple[int, ...]
    resumed: bool
    first_iter: float  # iterations done when it was placed
    blocked: bool = False  # placed right after halting a job that was still starting (it waited for that)
    reported: bool = False


@dataclass
class _Report:
    time: float
    iterations: float
    iter_time: float
    compute_s: float | None
    comm_s: float | None


@dataclass
class Observed:
    """What the record says of one job: its running intervals and progress reports."""

    spec: JobSpec
    intervals: list[_Interval] = field(default_factory=list)
    reports: list[_Report] = field(default_factory=list)


def observe(specs: Sequence[JobSpec], events: Iterable[Event]) -> dict[str, Observed]:
    """Running intervals and reports per job, from allocation, release and progress events."""
    obs = {s.id: Observed(s) for s in specs}
    open_: dict[str, _Interval] = {}
    last: dict[str, _Report] = {}
    starting_halt = -1.0  # time of the last pause of a job that had not reported since its launch
    for e in events:
        o = obs.get(e.job) if e.job is not None else None
        if o is None:
            continue
        if e.kind in (EventKind.STARTED, EventKind.RESUMED):
            first = 0.0
            prev = last.get(e.job)
            if e.kind is EventKind.RESUMED and prev is not None:
                paused_at = o.intervals[-1].end if o.intervals else prev.time
                first = prev.iterations + max(paused_at - prev.time, 0.0) / prev.iter_time
            iv = _Interval(e.time, float("inf"), tuple(int(n) for n in e.data.get("nodes", ())),
                           e.kind is EventKind.RESUMED, min(first, float(o.spec.iterations or first)),
                           blocked=abs(e.time - starting_halt) < 1e-9)
            open_[e.job] = iv
            o.intervals.append(iv)
        elif e.kind in ALLOCATING and e.job in open_:  # moved: a new interval on its new nodes
            iv = open_[e.job]
            iv.end = e.time
            nxt = _Interval(e.time, float("inf"), tuple(int(n) for n in e.data.get("nodes", ())), True,
                            last[e.job].iterations if e.job in last else 0.0)
            open_[e.job] = nxt
            o.intervals.append(nxt)
        elif e.kind in RELEASING and e.job in open_:
            iv = open_.pop(e.job)
            iv.end = e.time
            if e.kind is EventKind.PAUSED and not iv.reported:
                starting_halt = e.time
        elif e.kind is EventKind.PROGRESS and e.job in open_:
            it = float(e.data["iter_time"])
            if it > 0:
                r = _Report(e.time, float(e.data["iterations"]), it, e.data.get("compute_s"), e.data.get("comm_s"))
                o.reports.append(r)
                last[e.job] = r
                open_[e.job].reported = True
    return obs


def _launch_delays(o: Observed) -> tuple[float | None, list[float]]:
    """Seconds from each placement to progress: (first start's, [each resume's])."""
    start: float | None = None
    resumes: list[float] = []
    for iv in o.intervals:
        if iv.blocked:
            continue
        first = next((r for r in o.reports if iv.start <= r.time <= iv.end), None)
        if first is None:
            continue
        delay = max(first.time - iv.start - max(first.iterations - iv.first_iter, 0.0) * first.iter_time, 0.0)
        if iv.resumed:
            resumes.append(delay)
        elif start is None:
            start = delay
    return start, resumes


def _running_at(obs: dict[str, Observed], t: float) -> dict[str, tuple[int, ...]]:
    return {j: iv.nodes for j, o in obs.items() for iv in o.intervals if iv.start <= t <= iv.end}


def _raw(o: Observed, r: _Report, f_cpu: float, f_link: float, wire: float | None = None) -> tuple[float, float]:
    """A report's (cpu_s, link_s) with the sharing it ran under taken out (of the link time, the
    ``wire`` seconds its bytes held the budgets were stretched by ``1 / f_link``; None: all of it)."""
    if o.spec.architecture == "ps" and r.compute_s is not None and r.comm_s is not None:
        if wire is None:
            return r.compute_s * f_cpu, r.comm_s * f_link
        return r.compute_s * f_cpu, max(r.comm_s - wire / f_link + wire, wire)
    return r.iter_time * f_cpu, 0.0


def wire_seconds(o: Observed, events: Sequence[Event], cluster: ClusterSpec) -> float | None:
    """Seconds per iteration a parameter-server job's bytes hold a node's bandwidth budget: from each
    ``used`` measurement of its traffic (``net_gbps``, counted out of one node and into another) and
    the seconds per iteration its reports in that interval give, ``net_gbps / 2 x iter_time`` bits
    per iteration, over the smallest budget (``net_gbps`` capacity) of the nodes it runs on; the
    median. None when the record has no traffic measurement or its nodes no budget."""
    budgets = [float(n.capacity["net_gbps"]) for n in cluster.nodes]
    nodes = {n for iv in o.intervals for n in iv.nodes}
    rate = min((budgets[n] for n in nodes if n < len(budgets) and budgets[n] > 0), default=0.0)
    if rate <= 0 or o.spec.architecture != "ps":
        return None
    samples = []
    for e in events:
        if e.kind is not EventKind.USED or e.job != o.spec.id:
            continue
        gbps = float((e.data.get("used") or {}).get("net_gbps", 0.0))
        since, until = float(e.data["since"]), float(e.data["until"])
        its = [r.iter_time for r in o.reports if since < r.time <= until + 1e-9]
        if gbps > 0 and its:
            samples.append(gbps / 2 * statistics.median(its) / rate)
    return statistics.median(samples) if samples else None


def _cost(cpu: Sequence[float], link: Sequence[float], wire: float | None) -> HostTruth:
    """Medians of a job's per-report costs (its ``wire`` at most its link time)."""
    link_s = statistics.median(link)
    return HostTruth(max(statistics.median(cpu), 1e-9), link_s, wire_s=None if wire is None else min(wire, link_s))


def background_samples(obs: dict[str, Observed], events: Sequence[Event],
                       cluster: ClusterSpec) -> list[tuple[float, float, float]]:
    """``(since, until, b)``: the other processes' runnable threads per core on the machine, from each CPU
    measurement of the run's jobs (``used`` events) of at least 0.3 s: a one-worker job that computes
    all its iterations, sharing node ``n`` (``cores``) with ``D`` threads of its own and the other
    jobs', got ``f`` of a core per thread, and :func:`.host_physics.cpu_share` says
    ``f = cores / (D + b x cores)`` (the jobs beside it: those running at the middle of the measurement)."""
    cores = {i: float(n.capacity["cpu"]) for i, n in enumerate(cluster.nodes)}
    samples = []
    for e in events:
        if e.kind is not EventKind.USED or e.job not in obs or "cpu" not in (e.data.get("used") or {}):
            continue
        o = obs[e.job]
        since, until = float(e.data["since"]), float(e.data["until"])
        if until - since < 0.3 or o.spec.architecture == "ps" or o.spec.workers.count != 1:
            continue
        mid = (since + until) / 2
        running = _running_at(obs, mid)
        if e.job not in running or not running[e.job]:
            continue
        node = running[e.job][0]
        mine = host_physics.threads_of(o.spec)
        others = sum(host_physics.threads_of(obs[x].spec) * (obs[x].spec.architecture != "ps")
                     for x, nodes in running.items() if x != e.job
                     for n in nodes[:len(nodes) - obs[x].spec.num_ps] if n == node)
        f = float(e.data["used"]["cpu"]) / mine
        if f > 0:
            c = cores.get(node, 1.0)
            samples.append((since, until, max((c / f - mine - others) / c, 0.0)))
    return samples


def background_load(obs: dict[str, Observed], events: Sequence[Event], cluster: ClusterSpec) -> float:
    """The run's background load: the median of :func:`background_samples` (0 if none: the record has
    no CPU measurements)."""
    samples = background_samples(obs, events, cluster)
    return statistics.median(b for _, _, b in samples) if samples else 0.0


def background_series(samples: Sequence[tuple[float, float, float]],
                      window: float = WINDOW_S) -> tuple[tuple[float, float], ...]:
    """The background as it changed through the run: in each ``window`` seconds from 0, the median of
    the ``samples`` that overlap it, as ``SimConfig.host_background_series`` takes it (a window without
    samples keeps the value before it; empty without samples)."""
    if not window > 0:
        raise ValueError(f"window must be > 0 seconds, got {window!r}")
    bins: dict[int, list[float]] = {}
    for since, until, b in samples:
        for k in range(max(int(since // window), 0), max(int(math.ceil(until / window)), 1)):
            bins.setdefault(k, []).append(b)
    out: list[tuple[float, float]] = []
    for k in sorted(bins):
        b = statistics.median(bins[k])
        if not out or b != out[-1][1]:
            out.append((k * window, b))
    return tuple(out)


def host_costs(specs: Sequence[JobSpec], events: Iterable[Event], cluster: ClusterSpec,
               background: Background | None = None) -> dict[str, HostTruth]:
    """Each job's :class:`HostTruth` measured from a real run's record (see the module docstring),
    with ``background`` load, one value or a series (default: :func:`background_series` of the record),
    taken at each report's time.

    A job with no progress report and no reporting twin in the record is left out."""
    events = list(events)
    obs = observe(specs, events)
    if background is None:
        background = background_series(background_samples(obs, events, cluster))
    series = () if isinstance(background, (int, float)) else tuple(background)
    constant = float(background) if isinstance(background, (int, float)) else 0.0
    cores = {i: float(n.capacity["cpu"]) for i, n in enumerate(cluster.nodes)}
    spec_of = {s.id: s for s in specs}
    wires = {j: wire_seconds(o, events, cluster) for j, o in obs.items()}
    costs: dict[str, HostTruth] = {}
    for j, o in obs.items():  # pass 0: the reports as they are
        if o.reports:
            cpu, link = zip(*(_raw(o, r, 1.0, 1.0) for r in o.reports))
            costs[j] = _cost(cpu, link, wires[j])
    # the running set changes only at allocation events: group the reports by it
    at = {(j, k): _running_at(obs, r.time) for j, o in obs.items() for k, r in enumerate(o.reports)}
    for _ in range(PASSES):
        new: dict[str, HostTruth] = {}
        for j, o in obs.items():
            if j not in costs:
                continue
            vals = []
            for k, r in enumerate(o.reports):
                running = {x: n for x, n in at[(j, k)].items() if x in costs}
                running.setdefault(j, o.intervals[-1].nodes)
                order = [j, *sorted(x for x in running if x != j)]
                placed = [host_physics.placed(spec_of[x], running[x], costs[x]) for x in order]
                b = host_physics.background_at(series, constant, r.time)
                f_cpu, f_link = host_physics.factors(placed, cores, b)[0]
                vals.append(_raw(o, r, f_cpu, f_link, wires[j]))
            cpu, link = zip(*vals)
            new[j] = _cost(cpu, link, wires[j])
        moved = max((abs(new[j].iter_s / costs[j].iter_s - 1) for j in new), default=0.0)
        costs = new
        if moved < TOLERANCE:
            break
    for j, o in obs.items():  # never reported (placed and done or paused before a report): a twin's cost
        twins = [costs[x] for x, t in obs.items() if x in costs and t.spec.model == o.spec.model
                 and t.spec.workload == o.spec.workload and t.spec.architecture == o.spec.architecture]
        if j not in costs and twins:
            wire = [c.wire_s for c in twins if c.wire_s is not None]
            costs[j] = _cost([c.cpu_s for c in twins], [c.link_s for c in twins],
                             statistics.median(wire) if wire else None)
    delays = {j: _launch_delays(o) for j, o in obs.items()}
    all_resumes = [d for _, rs in delays.values() for d in rs]
    warm = warm_starts(obs, delays)
    out: dict[str, HostTruth] = {}
    for j, c in costs.items():
        start, resumes = delays[j]
        if start is None:  # its first placement not measured: the nearest launches that were
            model = obs[j].spec.model
            for pool in ([d[0] for x, d in delays.items() if d[0] is not None and obs[x].spec.model == model],
                         resumes, [r for x, d in delays.items() if obs[x].spec.model == model for r in d[1]],
                         [d[0] for d in delays.values() if d[0] is not None], all_resumes):
                if pool:
                    start = statistics.median(pool)
                    break
            else:
                start = 0.0
        model_resumes = [r for x, d in delays.items() if obs[x].spec.model == obs[j].spec.model for r in d[1]]
        if resumes or model_resumes:
            restore = statistics.median(resumes or model_resumes)
        elif _tasks(obs[j].spec) == 1 and (pool := warm.get(obs[j].spec.model) or list(chain(*warm.values()))):
            restore = statistics.median(pool)  # no resume seen (a FIFO run): a warm launch of its model
        else:
            restore = statistics.median(all_resumes) if all_resumes else start
        out[j] = replace(c, start_s=start, restore_s=restore)
    return out


def _tasks(spec: JobSpec) -> int:
    return spec.workers.count + spec.num_ps


def warm_starts(obs: dict[str, Observed], delays: dict[str, tuple[float | None, list[float]]]) -> dict[str, list[float]]:
    """Measured first starts of one-task jobs whose model had been launched before in the run, per model.

    LocalBackend keeps a warm spare per kind of workload after its first launch (a process that has
    imported its modules, ``runtime/local.py``): such a start, like every resume of a one-task job,
    skips the imports (0.1-0.3 s here against 3-7 s for a cold torch process under load). A run
    without preemptions (FIFO) measures no resume; these starts stand for them."""
    first: dict[str, float] = {}
    for o in obs.values():
        if o.intervals:
            first[o.spec.model] = min(first.get(o.spec.model, math.inf), o.intervals[0].start)
    out: dict[str, list[float]] = {}
    for j, o in obs.items():
        start = delays[j][0]
        if start is not None and _tasks(o.spec) == 1 and o.intervals[0].start > first[o.spec.model]:
            out.setdefault(o.spec.model, []).append(start)
    return out


@dataclass
class Calibration:
    """A real run as the simulator replays it: the jobs with their measured costs, and the ``local``
    physics with the machine's measured background load (its median ``background`` and, unless
    calibrated with ``window=None``, its ``series`` through the run)."""

    trace: list[TraceJob]
    config: SimConfig
    background: float
    series: tuple[tuple[float, float], ...] = ()

    def in_environment(self, other: Calibration) -> Calibration:
        """These jobs' costs and latencies on the machine as ``other``'s run found it (its background
        load and series): predicting another run from this one's profiles, with only the machine's load
        (other processes' CPU use, not the jobs') taken from that run."""
        cfg = replace(self.config, host_background=other.background, host_background_series=other.series)
        return Calibration(self.trace, cfg, other.background, other.series)


def calibrate(specs: Sequence[JobSpec], events: Iterable[Event], cluster: ClusterSpec,
              base: SimConfig | None = None, window: float | None = WINDOW_S) -> Calibration:
    """:func:`trace_from_run` and physics ``local`` (on ``base``) with the background of the record:
    its :func:`background_series` in ``window`` seconds, or with ``window=None`` one value through the
    run (:func:`background_load`)."""
    events = list(events)
    samples = background_samples(observe(specs, events), events, cluster)
    b = statistics.median(v for _, _, v in samples) if samples else 0.0
    series = background_series(samples, window) if window is not None else ()
    cfg = physics_config("local", replace(base or SimConfig(), host_background=b, host_background_series=series))
    return Calibration(trace_from_run(specs, events, cluster, background=series or b), cfg, b, series)


def trace_from_run(specs: Sequence[JobSpec], events: Iterable[Event], cluster: ClusterSpec,
                   background: Background | None = None) -> list[TraceJob]:
    """The jobs of a real run as a simulator trace: each spec with a truth of its measured
    :func:`host_costs` (``duration`` = iterations x seconds per iteration on cores of its own).
    Jobs without a report in the record are left out (they would have no cost to replay)."""
    costs = host_costs(specs, events, cluster, background)
    out = []
    for s in specs:
        c = costs.get(s.id)
        if c is None:
            continue
        n = int(s.iterations or 1)
        out.append(TraceJob(s, JobTruth(iterations=n, duration=n * c.iter_s, host=c)))
    return out
