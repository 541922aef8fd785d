"""Dorm on real processes (LocalBackend): an arrival shrinks a running application and its
completion grows it back — two checkpoint-kill-resume round trips that keep the model's state."""

from __future__ import annotations

from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.dorm import DormApp
from cohabit.runtime.runner import run_local
from cohabit.spec import Resources

from runtime_helpers import cluster, no_orphans  # noqa: F401


def test_dorm_resizes_a_real_application_twice_and_it_resumes_where_it_was(tmp_path) -> None:
    elastic = DormApp(id="mlp", executor="cohabit", demand=Resources(cpu=1, mem_gb=0.5), n_min=1, n_max=2,
                      cmd={"name": "torch-mlp", "n_samples": 512}, iterations=5000).to_spec()
    # arrives late enough that the 2-rank torch job has trained some iterations even on a loaded machine
    # (its torch import + gloo set-up took over 4 s there)
    small = DormApp(id="mlr", executor="cohabit", demand=Resources(cpu=1, mem_gb=0.5), n_max=1,
                    cmd={"name": "mlr"}, iterations=600, submit_time=6.0).to_spec()
    out = run_local([elastic, small], cluster(2), make_policy("dorm"), root=tmp_path, strict=True,
                    report_interval=0.1)
    rec = out.result.record
    assert all(str(v.state) == "finished" for v in out.result.jobs.values()) and not out.result.unfinished
    sizes = [len(e.data["nodes"]) for e in rec if e.job == "mlp" and e.kind in (EventKind.STARTED,
                                                                                  EventKind.RESIZED)]
    assert sizes == [2, 1, 2]  # alone: n_max; shares with mlr: 1; mlr done: back to 2
    assert out.status["mlp"].iterations == 5000
    halts = [t["checkpoint_iteration"] for t in out.timings if t["kind"] == "halt" and t["job"] == "mlp"]
    restored = [t["restored_iteration"] for t in out.timings if t["kind"] == "start" and t["job"] == "mlp"
                and t["rank"] == 0 and t["restored_iteration"] is not None]
    assert len(halts) == 2 and 0 < halts[0] < halts[1] < 5000  # each kill saved later progress
    assert restored[-2:] == halts  # and each resume started from exactly what was saved
