"""Sim vs real calibration: the ``local`` physics (``sim.host_physics``) and the profile extraction
(``sim.calibrate``), first on the simulator's own records (exact), then on a small real run."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cohabit.policies import FIFO, SRTF
from cohabit.sim import host_physics
from cohabit.sim.calibrate import WINDOW_S, calibrate, host_costs, trace_from_run
from cohabit.sim.physics import SimConfig, physics_config
from cohabit.sim.runner import simulate
from cohabit.sim.truth import HostTruth, JobTruth, TraceJob
from cohabit.spec import ClusterSpec, JobSpec, NodeSpec, Resources, TaskGroup

LOCAL = physics_config("local", SimConfig(report_interval_s=0.5))


def cpu_cluster(nodes: int = 2, cores: float = 1.0, net_gbps: float = 0.0) -> ClusterSpec:
    return ClusterSpec.homogeneous("local", nodes, Resources(cpu=cores, mem_gb=4.0, net_gbps=net_gbps))


def spec(id: str, iterations: int, submit: float = 0.0, *, cpu: float = 0.5, workers: int = 1, ps: int = 0,
         model: str = "m") -> JobSpec:
    extra: dict = {}
    if ps:
        extra = {"architecture": "ps", "ps": TaskGroup(count=ps, demand=Resources(cpu=cpu, mem_gb=0.1))}
    elif workers > 1:
        extra = {"architecture": "allreduce"}
    return JobSpec(id=id, submit_time=submit, model=model, iterations=iterations, workload={"name": model},
                   workers=TaskGroup(count=workers, demand=Resources(cpu=cpu, mem_gb=0.1)), **extra)


def hosted(s: JobSpec, cost: HostTruth) -> TraceJob:
    n = int(s.iterations or 1)
    return TraceJob(s, JobTruth(iterations=n, duration=n * cost.iter_s, host=cost))


# ------------------------------------------------------------------ the model
def test_threads_on_one_core_share_it_and_a_job_goes_at_its_slowest_node() -> None:
    c = HostTruth(cpu_s=0.01)
    a = host_physics.Placed("a", (0,), (), 1, c)
    b = host_physics.Placed("b", (0,), (), 1, c)
    dp = host_physics.Placed("dp", (0, 1), (), 1, c)
    assert host_physics.factors([a], {0: 1.0}) == [(1.0, 1.0)]
    assert host_physics.factors([a, b], {0: 1.0}) == [(0.5, 1.0), (0.5, 1.0)]
    assert host_physics.factors([a, b], {0: 2.0}) == [(1.0, 1.0), (1.0, 1.0)]
    # three threads want node 0's core; node 1 has the dp rank alone: dp goes at node 0's third
    f = host_physics.factors([dp, a, b], {0: 1.0, 1: 1.0})
    assert f[0][0] == pytest.approx(1 / 3) and f[1][0] == pytest.approx(1 / 3)


def test_ps_jobs_share_the_links_they_cross_and_barely_the_cores() -> None:
    link_bound = HostTruth(cpu_s=0.001, link_s=0.099)
    a = host_physics.Placed("a", (0,), (1,), 1, link_bound)
    b = host_physics.Placed("b", (0,), (1,), 1, link_bound)
    local = host_physics.Placed("c", (0,), (0,), 1, link_bound)  # worker and server on one node: no link
    assert local.link_nodes() == frozenset()
    (fa_cpu, fa_link), (_, fb_link) = host_physics.factors([a, b], {0: 1.0, 1: 1.0})
    assert fa_cpu == pytest.approx(1 / 1.01)  # computing, it meets the other worker 1% of the time
    # while its bytes move each asks for the whole budget, and the other for the share of its iteration on
    # the wire (all its link time here: about 0.995): about half each
    assert fa_link == pytest.approx(fb_link) and 0.495 < fa_link < 0.505
    assert host_physics.factors([a, local], {0: 1.0, 1: 1.0})[0][1] == 1.0  # c's bytes never leave node 0
    assert host_physics.iter_time(link_bound, 1.0, 0.5) == pytest.approx(0.001 + 0.198)


def test_only_the_bytes_on_the_wire_share_a_bandwidth_budget() -> None:
    """Measured on LocalBackend (bench/sim_vs_real_cluster.py records): a ps-mlr job alone spends 0.069 s
    of an iteration on the links, 0.052 s of it its bytes at the 20 Mbps budget (``wire_s``); two such
    jobs through the same nodes took 0.113-0.119 s per iteration. Sharing all the link time fairly
    (``wire_s`` None, the first model) says 0.138."""
    cost = HostTruth(cpu_s=0.0003, link_s=0.069, wire_s=0.052)
    pair = [host_physics.Placed(j, (0,), (2,), 1, cost) for j in ("a", "b")]
    shared = host_physics.iter_time(cost, *host_physics.factors(pair, {0: 1.0, 2: 2.0})[0])
    assert 0.108 < shared < 0.116
    alone = host_physics.iter_time(cost, *host_physics.factors(pair[:1], {0: 1.0, 2: 2.0})[0])
    assert alone == pytest.approx(0.0693, rel=1e-6)
    whole = replace(cost, wire_s=None)
    pair = [host_physics.Placed(j, (0,), (2,), 1, whole) for j in ("a", "b")]
    assert host_physics.iter_time(whole, *host_physics.factors(pair, {0: 1.0, 2: 2.0})[0]) > 0.13
    with pytest.raises(ValueError, match="wire_s"):
        HostTruth(cpu_s=0.001, link_s=0.05, wire_s=0.06)


def test_local_physics_shares_a_core_and_charges_measured_latencies() -> None:
    cost = HostTruth(cpu_s=0.1, start_s=2.0, restore_s=3.0)
    jobs = [hosted(spec("a", 100), cost), hosted(spec("b", 100), cost)]
    one = cpu_cluster(1)
    shared = simulate(jobs, one, FIFO(), config=LOCAL)
    # both on node 0's one core: 10 s of work each at half a core, after their 2 s start
    assert shared.metrics.avg_jct == pytest.approx(22.0, rel=1e-6)
    apart = simulate(jobs, one, FIFO(), config=replace(LOCAL, host_sharing=False, checkpoint_s=0, restore_s=0))
    assert apart.metrics.avg_jct == pytest.approx(10.0, rel=1e-6)  # the default physics: no sharing, no latency


def test_a_halt_of_a_job_still_starting_blocks_the_launches_behind_it() -> None:
    """LocalBackend's halt waits for the job's process to come up and checkpoint: a job preempted 2 s
    into its 5 s start holds the scheduler until 5 s, so the job that replaces it starts then; the
    extraction does not take that wait for the second job's own start latency."""
    from cohabit.policies.tiresias import Tiresias

    def gpu_job(id: str, iterations: int, submit: float) -> JobSpec:
        return JobSpec(id=id, submit_time=submit, model="m", iterations=iterations, workload={"name": "m"},
                       workers=TaskGroup(count=1, demand=Resources(cpu=1, gpu=1, mem_gb=0.1)))

    jobs = [hosted(gpu_job("long", 1000, 0.0), HostTruth(cpu_s=0.01, start_s=5.0, restore_s=1.0)),
            hosted(gpu_job("short", 100, 2.0), HostTruth(cpu_s=0.01, start_s=1.0, restore_s=1.0))]
    cluster = ClusterSpec.homogeneous("local", 1, Resources(cpu=1, gpu=1, mem_gb=1.0))
    policy = lambda: Tiresias(thresholds=(0.5,), min_run_time=0.0, tick_interval=None, starve_limit=None)  # noqa: E731
    run = simulate(jobs, cluster, policy(), config=LOCAL)
    jct = dict(zip(run.metrics.jobs.ids, run.metrics.jobs.jct))
    assert jct["short"] == pytest.approx(5.0 - 2.0 + 1.0 + 1.0)  # waits for long's start, its own, 1 s of work
    free = simulate(jobs, cluster, policy(), config=replace(LOCAL, blocking_halts=False))
    assert dict(zip(free.metrics.jobs.ids, free.metrics.jobs.jct))["short"] == pytest.approx(2.0)
    costs = host_costs([tj.spec for tj in jobs], run.result.record, cluster)
    assert costs["short"].start_s == pytest.approx(1.0, abs=0.05)


# --------------------------------------------------------- extraction round trip
def world() -> tuple[list[TraceJob], ClusterSpec]:
    """A cluster-like mix on 2 one-core nodes: CPU jobs two to a core, a data-parallel job, two
    link-bound PS jobs; short jobs arrive later so SRTF preempts (and pays restores)."""
    cpu = lambda s, r=3.0: HostTruth(cpu_s=s, start_s=2.0, restore_s=r)  # noqa: E731
    jobs = [
        hosted(spec("long-a", 3000, 0.0, model="cnn"), cpu(0.02)),
        hosted(spec("long-b", 4000, 0.0, model="mlr"), cpu(0.01, 0.4)),
        hosted(spec("dp", 2000, 2.0, workers=2, model="mlp"), cpu(0.01)),
        hosted(spec("ps-a", 300, 4.0, cpu=0.25, ps=1, model="ps"), HostTruth(0.001, 0.07, 1.2, 2.0)),
        hosted(spec("ps-b", 300, 5.0, cpu=0.25, ps=1, model="ps"), HostTruth(0.001, 0.07, 1.2, 2.0)),
        hosted(spec("short-1", 300, 20.0, model="mlr"), cpu(0.01, 0.4)),
        hosted(spec("short-2", 200, 30.0, model="mlr"), cpu(0.01, 0.4)),
        hosted(spec("short-3", 300, 40.0, model="cnn"), cpu(0.02)),
    ]
    return jobs, cpu_cluster(2)


@pytest.mark.parametrize("background", [0.0, 2.5])
def test_profiles_taken_from_a_run_record_recover_the_costs_it_ran_with(background: float) -> None:
    """Including the machine's other load (2.5 runnable threads per core: a job alone on its core
    gets 1/3.5 of it), measured from the CPU time the jobs got."""
    jobs, cluster = world()
    run = simulate(jobs, cluster, SRTF(preempt_margin=1.0, min_run_time=0.0), config=replace(LOCAL, host_background=background))
    assert run.metrics.preemptions >= 2  # resumes happened: restore latencies are observable
    cal = calibrate([tj.spec for tj in jobs], run.result.record, cluster, SimConfig(report_interval_s=0.5))
    assert cal.background == pytest.approx(background, abs=0.02)
    assert cal.config.host_background == cal.background and cal.config.host_sharing
    costs = {tj.spec.id: tj.truth.host for tj in cal.trace}
    for tj in jobs:
        true, got = tj.truth.host, costs[tj.spec.id]
        assert got.cpu_s == pytest.approx(true.cpu_s, rel=0.02), tj.spec.id  # sharing taken out
        assert got.link_s == pytest.approx(true.link_s, rel=0.02, abs=1e-9), tj.spec.id
        assert got.start_s == pytest.approx(true.start_s, abs=0.05), tj.spec.id
    resumed = {e.job for e in run.result.record if e.kind == "resumed"}
    for j in resumed:
        true = next(tj.truth.host for tj in jobs if tj.spec.id == j)
        assert costs[j].restore_s == pytest.approx(true.restore_s, abs=0.05), j


def test_the_bytes_on_the_wire_are_measured_from_the_traffic_the_scheduler_saw() -> None:
    """Two PS jobs whose workers (one GPU each) and servers (on a node without GPUs) are on different
    nodes with 20 Mbps budgets, running together for a while: ``wire_s`` comes back from the ``used``
    traffic (``net_gbps``) and the reports, and ``link_s`` with only the wire's share of the sharing
    taken out; taking the sharing out of all the link time makes ``link_s`` too small."""
    gpu = Resources(cpu=1.0, gpu=2.0, mem_gb=4.0, net_gbps=0.02)
    cluster = ClusterSpec(name="ps", nodes=(NodeSpec(name="n0", capacity=gpu), NodeSpec(name="n1", capacity=gpu),
                                            NodeSpec(name="ps", capacity=Resources(cpu=2.0, mem_gb=4.0, net_gbps=0.02))))
    cost = HostTruth(0.001, 0.07, 1.0, 1.0, wire_s=0.05)
    specs = [JobSpec(id=j, submit_time=2.0 * k, model="ps", iterations=300 + 100 * k, workload={"name": "ps"},
                     architecture="ps", workers=TaskGroup(count=1, demand=Resources(cpu=0.25, gpu=1.0, mem_gb=0.1)),
                     ps=TaskGroup(count=1, demand=Resources(cpu=0.25, mem_gb=0.1))) for k, j in enumerate("ab")]
    run = simulate([hosted(s, cost) for s in specs], cluster, FIFO(), config=LOCAL)
    placed = {e.job: tuple(e.data["nodes"]) for e in run.result.record if e.kind == "started"}
    assert all(len(set(n)) == 2 for n in placed.values()), placed  # worker and server apart: traffic on the links
    got = {tj.spec.id: tj.truth.host for tj in calibrate(specs, run.result.record, cluster, LOCAL).trace}
    for j in ("a", "b"):
        assert got[j].wire_s == pytest.approx(0.05, rel=0.02) and got[j].link_s == pytest.approx(0.07, rel=0.02)
    whole = host_costs(specs, [e for e in run.result.record if "net_gbps" not in (e.data.get("used") or {})], cluster)
    assert whole["b"].wire_s is None and whole["b"].link_s < 0.065


def test_a_run_without_preemptions_takes_restores_from_warm_launches_of_the_same_model() -> None:
    """FIFO measures no resume. A job's restore is then a later first start of a one-task job of its
    model (LocalBackend had a warm spare for it), not its own cold start; a job of several tasks
    (some always start cold) keeps its start."""
    cold, warm = HostTruth(0.01, start_s=3.0, restore_s=0.2), HostTruth(0.01, start_s=0.2, restore_s=0.2)
    jobs = [hosted(spec("a", 500, 0.0, cpu=1.0, model="cnn"), cold), hosted(spec("dp", 300, 0.0, workers=2, model="mlp"), cold),
            hosted(spec("b", 200, 1.0, cpu=1.0, model="cnn"), warm)]
    run = simulate(jobs, cpu_cluster(2), FIFO(), config=LOCAL)
    assert run.metrics.preemptions == 0
    got = {tj.spec.id: tj.truth.host for tj in calibrate([tj.spec for tj in jobs], run.result.record, cpu_cluster(2)).trace}
    assert got["a"].start_s == pytest.approx(3.0, abs=0.05) and got["a"].restore_s == pytest.approx(0.2, abs=0.05)
    assert got["b"].restore_s == pytest.approx(0.2, abs=0.05)
    assert got["dp"].restore_s == pytest.approx(got["dp"].start_s) and got["dp"].start_s == pytest.approx(3.0, abs=0.05)


def test_replaying_extracted_profiles_reproduces_the_run_and_ignoring_restores_does_not() -> None:
    jobs, cluster = world()
    specs = [tj.spec for tj in jobs]
    run = simulate(jobs, cluster, SRTF(preempt_margin=1.0, min_run_time=0.0), config=replace(LOCAL, host_background=1.0))
    cal = calibrate(specs, run.result.record, cluster, SimConfig(report_interval_s=0.5))
    trace = cal.trace
    again = simulate(trace, cluster, SRTF(preempt_margin=1.0, min_run_time=0.0), config=cal.config)
    assert again.metrics.avg_jct == pytest.approx(run.metrics.avg_jct, rel=0.02)
    assert again.metrics.makespan == pytest.approx(run.metrics.makespan, rel=0.02)
    no_latency = [TraceJob(tj.spec, replace(tj.truth, host=replace(tj.truth.host, start_s=0.0, restore_s=0.0)))
                  for tj in trace]
    off = simulate(no_latency, cluster, SRTF(preempt_margin=1.0, min_run_time=0.0), config=cal.config)
    assert abs(off.metrics.avg_jct / run.metrics.avg_jct - 1) > 0.05
    no_sharing = simulate(trace, cluster, SRTF(preempt_margin=1.0, min_run_time=0.0), config=replace(cal.config, host_sharing=False))
    assert abs(no_sharing.metrics.avg_jct / run.metrics.avg_jct - 1) > 0.2
    # the background taken for 0: each job's cost includes it, but a job alone runs twice too fast
    quiet = calibrate(specs, run.result.record, cluster, SimConfig(report_interval_s=0.5))
    flat = trace_from_run(specs, run.result.record, cluster, background=0.0)
    unloaded = simulate(flat, cluster, SRTF(preempt_margin=1.0, min_run_time=0.0), config=replace(quiet.config, host_background=0.0))
    assert abs(unloaded.metrics.makespan / run.metrics.makespan - 1) > 0.05


def test_the_machine_load_can_change_through_a_run() -> None:
    """``host_background_series``: a job alone on a core at full speed for 10 s (background 0), then
    beside one other thread per core (half speed): 100 iterations of 0.1 s, then 100 at 0.2 s."""
    job = [hosted(spec("a", 200), HostTruth(cpu_s=0.1))]
    cfg = replace(LOCAL, host_background_series=((0.0, 0.0), (10.0, 1.0)))
    assert simulate(job, cpu_cluster(1), FIFO(), config=cfg).metrics.avg_jct == pytest.approx(30.0, rel=1e-6)
    assert simulate(job, cpu_cluster(1), FIFO(), config=LOCAL).metrics.avg_jct == pytest.approx(20.0, rel=1e-6)
    with pytest.raises(ValueError, match="host_background_series"):
        replace(LOCAL, host_background_series=((10.0, 1.0), (0.0, 0.0)))


def test_a_changing_background_is_measured_through_the_run_and_taken_out_of_each_report() -> None:
    """The machine's load changes twice (windows of :data:`WINDOW_S`): the calibration finds each
    level, recovers the costs, and its replay reproduces the run; one value for the whole run
    (``window=None``) leaves some job's cost off by more than 5%."""
    jobs, cluster = world()
    specs = [tj.spec for tj in jobs]
    truth = ((0.0, 0.5), (WINDOW_S, 3.0), (4 * WINDOW_S, 1.0))
    policy = lambda: SRTF(preempt_margin=1.0, min_run_time=0.0)  # noqa: E731
    run = simulate(jobs, cluster, policy(), config=replace(LOCAL, host_background_series=truth))
    cal = calibrate(specs, run.result.record, cluster, SimConfig(report_interval_s=0.5))
    for t, b in truth:
        assert host_physics.background_at(cal.series, -1.0, t + WINDOW_S / 2) == pytest.approx(b, abs=0.05), t
    assert cal.config.host_background_series == cal.series
    costs = {tj.spec.id: tj.truth.host for tj in cal.trace}
    for tj in jobs:
        assert costs[tj.spec.id].cpu_s == pytest.approx(tj.truth.host.cpu_s, rel=0.02), tj.spec.id
    again = simulate(cal.trace, cluster, policy(), config=cal.config)
    assert again.metrics.avg_jct == pytest.approx(run.metrics.avg_jct, rel=0.02)
    assert again.metrics.makespan == pytest.approx(run.metrics.makespan, rel=0.02)
    flat = {tj.spec.id: tj.truth.host for tj in calibrate(specs, run.result.record, cluster, window=None).trace}
    assert max(abs(flat[tj.spec.id].cpu_s / tj.truth.host.cpu_s - 1) for tj in jobs) > 0.05


def test_profiles_from_a_fifo_run_predict_an_srtf_run_on_the_machine_as_that_run_found_it() -> None:
    """Calibrate once (FIFO, the machine at one load), predict another policy's run made while the
    machine's load was different: with that run's measured load (``in_environment``) the prediction
    is within 3%; with the FIFO run's own load it is not."""
    jobs, cluster = world()
    specs = [tj.spec for tj in jobs]
    srtf = lambda: SRTF(preempt_margin=1.0, min_run_time=0.0)  # noqa: E731
    fifo_run = simulate(jobs, cluster, FIFO(), config=replace(LOCAL, host_background_series=((0.0, 3.0), (60.0, 2.0))))
    other = replace(LOCAL, host_background_series=((0.0, 0.5), (WINDOW_S, 1.5)))
    srtf_run = simulate(jobs, cluster, srtf(), config=other)
    fifo = calibrate(specs, fifo_run.result.record, cluster, SimConfig(report_interval_s=0.5))
    there = fifo.in_environment(calibrate(specs, srtf_run.result.record, cluster, SimConfig(report_interval_s=0.5)))
    assert there.trace is fifo.trace and there.series != fifo.series
    predicted = simulate(there.trace, cluster, srtf(), config=there.config)
    assert predicted.metrics.avg_jct == pytest.approx(srtf_run.metrics.avg_jct, rel=0.03)
    assert predicted.metrics.makespan == pytest.approx(srtf_run.metrics.makespan, rel=0.03)
    blind = simulate(fifo.trace, cluster, srtf(), config=fifo.config)
    assert abs(blind.metrics.avg_jct / srtf_run.metrics.avg_jct - 1) > 0.2


# ------------------------------------------------------------------- real run
@pytest.mark.timeout(180)
def test_a_real_run_with_preemptions_is_replayed_from_what_its_scheduler_observed(tmp_path) -> None:
    """One core; a torch job preempted by two short numpy jobs under Tiresias (fresh processes:
    no warm spares, so each resume pays the torch import). The arrivals are 10 s apart and the
    torch job is long enough to still be running at each of them, on a quiet machine or a
    loaded one (a finish close to an arrival would make a replay's decisions flip). The
    simulation of the same jobs from the run's record alone agrees with the real run within
    20% on average JCT and makespan (0-6% seen here at load 15-20 and quiet); the measured
    restore latencies are what the replay charges: without them it finishes sooner than the replay."""
    from cohabit.policies.tiresias import Tiresias
    from cohabit.runtime.runner import run_local

    def job(id: str, wl: dict, iterations: int, submit: float) -> JobSpec:
        return JobSpec(id=id, submit_time=submit, model=wl["name"], iterations=iterations, workload=wl,
                       workers=TaskGroup(count=1, demand=Resources(cpu=1, gpu=1, mem_gb=0.3)))

    # 115,000 iterations: about 22 s of running on a quiet machine (40,000 ended before the first
    # short job arrived there), longer under load; it still has ~40% of its work left at the last
    # arrival, as 160,000 had with a third short job at 28 s (that run took 40.7 CPU s, this one 27 s)
    specs = [job("long", {"name": "torch-mlp"}, 115_000, 0.0)]
    specs += [job(f"short-{k}", {"name": "mlr"}, 4000, 8.0 + 10.0 * k) for k in range(2)]
    # one logical GPU (Tiresias counts GPU-seconds and preempts for GPUs; with no GPU on this machine
    # the tasks train on the CPU), one core
    cluster = ClusterSpec.homogeneous("local", 1, Resources(cpu=1, gpu=1, mem_gb=2.0))
    policy = lambda: Tiresias(thresholds=(1.0,), min_run_time=0.0, tick_interval=0.5, starve_limit=None)  # noqa: E731
    real = run_local(specs, cluster, policy(), root=tmp_path, prewarm=False)
    assert not real.result.unfinished
    assert real.metrics.preemptions >= 1
    cal = calibrate(specs, real.result.record, cluster, SimConfig(report_interval_s=0.5))
    trace = cal.trace
    assert {tj.spec.id for tj in trace} == {s.id for s in specs}
    sim = simulate(trace, cluster, policy(), config=cal.config)
    err = {"avg_jct": sim.metrics.avg_jct / real.metrics.avg_jct - 1,
           "makespan": sim.metrics.makespan / real.metrics.makespan - 1}
    assert abs(err["avg_jct"]) < 0.2 and abs(err["makespan"]) < 0.2, err
    no_restore = [TraceJob(tj.spec, replace(tj.truth, host=replace(tj.truth.host, restore_s=0.0))) for tj in trace]
    off = simulate(no_restore, cluster, policy(), config=cal.config)
    # the torch job's resumes were measured (fresh processes pay the torch import); the replay
    # charges them, so ignoring the restores shortens the replay. (How either replay compares with the
    # real run beyond the 20% above is not asserted: with the bench on the other core a fresh-clone CI
    # saw 5.6% for the replay and 3.7% without latencies; another, on a quieter machine, saw the real
    # run 1.8% shorter than even the replay without restores; quiet and at load 15-20 the replay was
    # nearer, 0-5% against 8-80%.)
    long = next(tj for tj in trace if tj.spec.id == "long")
    assert long.truth.host is not None and long.truth.host.restore_s > 0, long.truth.host
    assert off.metrics.avg_jct < sim.metrics.avg_jct, (off.metrics.avg_jct, sim.metrics.avg_jct)
