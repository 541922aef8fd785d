"""Each trace loader on its embedded trace: counts, fields, ordering, default cluster."""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime

import pytest

from cohabit.sim.traces import EMBEDDED, FORMATS, TraceLoad, embedded_trace, load_trace
from cohabit.sim.traces.pollux import MAX_REPLICAS, app_profile, known_apps
from cohabit.spec import simple_job
from cohabit.spec.cluster import PRESETS


def _sorted(load: TraceLoad) -> bool:
    times = [j.spec.submit_time for j in load.jobs]
    return times == sorted(times)


@pytest.fixture(scope="module")
def philly() -> TraceLoad:
    return load_trace("philly_82k", "philly")


def test_embedded_names_formats_and_files() -> None:
    assert FORMATS == ("tiresias", "philly", "pollux", "alibaba", "cohabit", "harmony", "muri", "gavel")
    for name, (filename, fmt) in EMBEDDED.items():
        assert fmt in FORMATS
        assert embedded_trace(name).name == filename
        assert embedded_trace(name).is_file()


def test_embedded_trace_unknown_name_lists_known() -> None:
    with pytest.raises(ValueError, match="tiresias_480"):
        embedded_trace("nope")


def test_tiresias_embedded_480_jobs() -> None:
    load = load_trace("tiresias_480", "tiresias")
    assert (len(load.jobs), load.skipped, load.excluded) == (480, [], [])
    assert (load.fmt, load.default_cluster, load.path) == ("tiresias", "tiresias", "tiresias_480")
    assert _sorted(load)
    first = load.jobs[0]
    # 0,4,0,271,inception3,128,33
    assert first.spec == simple_job("0", 4, submit_time=0.0, model="inception3", iterations=271)
    assert (first.truth.iterations, first.truth.duration, first.truth.ref_workers) == (271, 128.0, 4)
    assert Counter(j.spec.workers.count for j in load.jobs) == {1: 244, 8: 85, 4: 80, 2: 42, 16: 24, 32: 5}
    assert len({j.spec.model for j in load.jobs}) == 10


def test_tiresias_fmt_may_be_omitted_for_embedded() -> None:
    assert load_trace("tiresias_480").jobs == load_trace("tiresias_480", "tiresias").jobs


def test_embedded_with_wrong_format_is_an_error() -> None:
    with pytest.raises(ValueError, match="format 'tiresias', not 'philly'"):
        load_trace("tiresias_480", "philly")


def test_philly_embedded_all_rows(philly: TraceLoad) -> None:
    assert len(philly.jobs) == 82_247
    assert (philly.skipped, philly.default_cluster) == ([], "philly")
    assert _sorted(philly)
    assert philly.jobs[0].spec.submit_time == 0.0
    assert len({j.spec.id for j in philly.jobs}) == 82_247
    # Sep 4 10:30:41 to Dec 22 08:02:11, 2017
    assert philly.jobs[-1].spec.submit_time == pytest.approx(108 * 86400 + 21 * 3600 + 31 * 60 + 30)
    sizes = Counter(j.spec.workers.count for j in philly.jobs)
    assert sizes[1] == 76_627 and sizes[128] == 3
    assert len({j.spec.tenant for j in philly.jobs}) == 15


def test_philly_row_fields(philly: TraceLoad) -> None:
    # line 2 of the file: 2017-10-09 07:01:55,66.0,1,66.0,11cb48  -> data row 0
    job = next(j for j in philly.jobs if j.spec.id == "philly-00000")
    delta = datetime(2017, 10, 9, 7, 1, 55) - datetime(2017, 9, 4, 10, 30, 41)  # earliest timestamp
    assert job.spec.submit_time == delta.total_seconds()
    assert (job.spec.tenant, job.spec.iterations, job.spec.model) == ("11cb48", None, "unknown")
    assert job.spec == simple_job("philly-00000", 1, submit_time=job.spec.submit_time, tenant="11cb48")
    assert (job.truth.iterations, job.truth.duration, job.truth.ref_workers) == (66, 66.0, 1)


def test_philly_limit_keeps_the_earliest_jobs(philly: TraceLoad) -> None:
    small = load_trace("philly_82k", "philly", limit=1000)
    assert small.jobs == philly.jobs[:1000]


def test_pollux_embedded_160_jobs() -> None:
    load = load_trace("pollux_workload-1", "pollux")
    assert (len(load.jobs), load.skipped, load.default_cluster) == (160, [], "pollux")
    assert _sorted(load)
    job = load.jobs[0]  # cifar10-0,107,cifar10,6,2048
    assert (job.spec.id, job.spec.submit_time, job.spec.model, job.spec.batch_size) == ("cifar10-0", 107.0, "cifar10",
                                                                                        2048)
    assert (job.spec.architecture, job.spec.workers.count, job.spec.n_min, job.spec.n_max) == ("allreduce", 6, 1,
                                                                                              MAX_REPLICAS)
    assert job.spec.workers.demand["gpu"] == 1.0
    assert job.spec.epochs == 100
    assert (job.truth.app, job.truth.ref_workers, job.truth.duration) == ("cifar10", 6, None)
    assert job.truth.iterations == 39_063  # 100 epochs x 50,000 images / 128 (smallest profiled batch)
    assert Counter(j.spec.model for j in load.jobs)["ncf"] == 68


def test_pollux_app_profiles() -> None:
    assert known_apps() == ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
    epochs = {a: app_profile(a).epochs for a in known_apps()}
    assert epochs == {"bert": 2, "cifar10": 100, "deepspeech2": 80, "imagenet": 90, "ncf": 10, "yolov3": 50}
    cifar = app_profile("cifar10")
    assert cifar.init_batch_size == 128 and cifar.batch_sizes[-1] == 4096
    assert math.isclose(cifar.target_progress, 39062.90816659533)  # validation-256.csv, last row
    with pytest.raises(ValueError, match="known: bert"):
        app_profile("gpt")


def test_alibaba_embedded_pods() -> None:
    load = load_trace("alibaba_openb", "alibaba")
    assert load.default_cluster == "alibaba-openb" and load.default_cluster in PRESETS
    assert (len(load.jobs), len(load.excluded), load.skipped) == (7255, 897, [])
    assert len(load.jobs) + len(load.excluded) == 8152
    assert all("never scheduled" in str(e) for e in load.excluded)
    assert _sorted(load)
    by_id = {j.spec.id: j for j in load.jobs}
    # openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
    pod = by_id["openb-pod-0001"]
    assert pod.spec.workers.count == 1 and pod.spec.architecture == "single"
    assert dict(pod.spec.workers.demand) == {"gpu": 0.46, "cpu": 6.0, "mem_gb": 12.0}
    assert (pod.spec.tenant, pod.spec.submit_time, pod.spec.workload) == ("LS", 427061.0, None)
    assert pod.truth.duration == 12902960 - 427061
    multi = [j for j in load.jobs if j.spec.workers.count > 1]
    assert multi and all(j.spec.architecture == "allreduce" and j.spec.workers.demand["gpu"] == 1.0 for j in multi)
    cpu_only = [j for j in load.jobs if j.spec.num_gpus == 0]
    assert len(cpu_only) == 1052 and all(j.spec.workers.count == 1 for j in cpu_only)
    assert {j.spec.tenant for j in load.jobs} == {"LS", "BE", "Burstable", "Guaranteed"}


def test_alibaba_multi_gpu_pod_splits_cpu_and_memory(tmp_path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\n"
        "p8,88000,327680,8,1000,V100M16|V100M32,Burstable,Succeeded,100,2000,150\n"
        "c0,4000,8192,0,0,nan,BE,Running,50,80,60\n"
    )
    load = load_trace(path, "alibaba")
    c0, p8 = load.jobs
    assert (p8.spec.workers.count, dict(p8.spec.workers.demand)) == (8, {"gpu": 1.0, "cpu": 11.0, "mem_gb": 40.0})
    assert p8.spec.workload == {"gpu_spec": "V100M16|V100M32"}
    assert (p8.spec.submit_time, p8.truth.duration, p8.truth.ref_workers) == (50.0, 1850.0, 8)
    assert dict(c0.spec.workers.demand) == {"cpu": 4.0, "mem_gb": 8.0} and c0.spec.workload is None


def test_load_accepts_pathlike_and_reports_path(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval,extra\n"
                    "b,1,5,10,vgg16,3.5,0,x\na,2,5,20,alexnet,7,0,y\n")
    load = load_trace(path, "tiresias")
    assert [j.spec.id for j in load.jobs] == ["a", "b"]  # same submit time: by id
    assert load.path == str(path)


def test_jobs_sorted_by_time_then_natural_id(tmp_path) -> None:
    path = tmp_path / "t.csv"
    rows = ["j10,1,0,1,m,1,0", "j9,1,0,1,m,1,0", "j2,1,1,1,m,1,0", "j1,1,0,1,m,1,0"]
    path.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n" + "\n".join(rows))
    assert [j.spec.id for j in load_trace(path, "tiresias").jobs] == ["j1", "j9", "j10", "j2"]
