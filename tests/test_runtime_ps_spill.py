"""Harmony's spill/reload inside real PS workers: the ``spill`` workload option (runtime/ps/spilling.py)."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.engine.backend import BackendEventKind as K
from cohabit.engine.ledger import Ledger
from cohabit.runtime.local import LocalBackend
from cohabit.runtime.ps import load_model
from cohabit.runtime.ps.reference import run_in_process
from cohabit.runtime.ps.spilling import SpillOption, WorkerSpill, parse_spill
from cohabit.runtime.workloads import WorkloadContext, WorkloadError, build, parse_config

from runtime_helpers import cluster, ended, final_event, wait_for  # noqa: F401
from test_runtime_ps_local import place, ps_job


@pytest.mark.parametrize("value, fragment", [
    (0.5, "workload.spill: expected a mapping"),
    ({"alpha": 0.5}, "workload.spill.blocks is missing"),
    ({"blocks": 4}, "workload.spill.alpha is missing"),
    ({"alpha": 1.5, "blocks": 4}, "workload.spill.alpha: expected a number in [0, 1] or 'auto', got 1.5"),
    ({"alpha": "half", "blocks": 4}, "workload.spill.alpha: expected a number in [0, 1] or 'auto'"),
    ({"alpha": True, "blocks": 4}, "workload.spill.alpha"),
    ({"alpha": 0.5, "blocks": 0}, "workload.spill.blocks: expected an integer >= 1, got 0"),
    ({"alpha": 0.5, "blocks": 2.5}, "workload.spill.blocks: expected an integer >= 1"),
    ({"alpha": 0.5, "blocks": 4, "ratio": 1}, "unknown key(s) ['ratio']"),
    ({"alpha": 0.5, "blocks": 4, "memory_mb": 10}, "memory_mb: only with alpha 'auto'"),
    ({"alpha": "auto", "blocks": 4, "memory_mb": -1}, "memory_mb: expected a number of MB > 0"),
])
def test_bad_spill_options_are_refused_naming_the_field(value, fragment) -> None:
    with pytest.raises(WorkloadError, match="job 'j': ") as err:
        parse_spill("j", value)
    assert fragment in str(err.value)


def test_spill_option_is_a_parameter_of_mlr_and_lasso_only() -> None:
    assert parse_spill("j", {"alpha": "auto", "blocks": 3}) == SpillOption(None, 3)
    assert parse_config("j", {"name": "ps-lasso", "spill": {"alpha": 0, "blocks": 2}}).params["spill"]
    with pytest.raises(WorkloadError, match="workload.spill is not a parameter of 'ps-nmf'"):
        parse_config("j", {"name": "ps-nmf", "spill": {"alpha": 0, "blocks": 2}})
    with pytest.raises(WorkloadError, match="workload.lr2 is not a parameter of 'ps-mlr'"):
        parse_config("j", {"name": "ps-mlr", "lr2": 1})  # the other keys are still checked by name


def _mlr(spill: dict | None, iterations: int = 40):
    cfg = parse_config("j", {"name": "ps-mlr", **({"spill": spill} if spill else {})})
    return build(cfg, WorkloadContext(job="j", seed=0, iterations=iterations))


def test_worker_spill_blocks_limit_and_auto_climb(tmp_path) -> None:
    w = _mlr({"alpha": 0.5, "blocks": 10**9})
    with pytest.raises(WorkloadError, match="workload.spill.blocks: expected at most the worker's"):
        WorkerSpill(w, w.spill_option, tmp_path / "a")
    w = _mlr({"alpha": "auto", "blocks": 4, "memory_mb": 1e-3})  # a budget nothing fits in: all blocks on disk
    ws = WorkerSpill(w, w.spill_option, tmp_path / "b")
    assert ws.spill.alpha == 1.0 and ws.tuner is not None and ws.tuner.floor == 1.0
    ws.close()
    w = _mlr({"alpha": "auto", "blocks": 4})
    ws = WorkerSpill(w, w.spill_option, tmp_path / "c")
    assert ws.spill.alpha == 0.0
    ws.observe(1.0)  # first measure: step up one block
    assert ws.spill.alpha == 0.25 and len(ws.spill.on_disk) == 1
    ws.observe(1.0)  # as fast: keep freeing memory
    assert ws.spill.alpha == 0.5
    ws.observe(5.0)  # much slower: back to the best, done
    assert ws.spill.alpha == 0.25 and ws.tuner.done
    assert ws.report()["alpha"] == 0.25
    ws.close()
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("alpha", [0.5, "auto"])
def test_ps_mlr_with_spill_paused_and_resumed_equals_the_all_in_memory_reference(tmp_path, alpha) -> None:
    cl = cluster(2)
    iterations = 200
    spec = ps_job("mlr", {"name": "ps-mlr", "spill": {"alpha": alpha, "blocks": 8}}, iterations, workers=2)
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05, checkpoint_interval=0) as be:
        be.launch(spec, place(led, spec, (0, 1, 1)), 0.0, from_checkpoint=False)
        seen = wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] > 20 for e in ev))
        be.halt("mlr", be.now(), checkpoint=True)
        led.release("mlr")
        be.launch(spec, place(led, spec, (1, 0, 0)), be.now(), from_checkpoint=True)
        seen += wait_for(be, ended("mlr"))
        assert final_event(seen, "mlr").kind is K.FINISHED
        it, model, _ = load_model(be.store.root, "mlr")
        assert not (be.store.job_dir("mlr") / "spill" / "worker-0").exists()  # blocks removed at the end
    reports = [e.data for e in seen if e.kind is K.PROGRESS and e.job == "mlr"]
    assert reports and all("alpha" in r for r in reports)
    if alpha == 0.5:
        assert {r["alpha"] for r in reports} == {0.5}
        assert max(r["reload_mb"] for r in reports) > 0  # rows really came back from disk
    ref, _, _ = run_in_process({"name": "ps-mlr"}, iterations=iterations, n_workers=2, n_servers=1)
    assert it == iterations
    for k in ("W", "b"):
        np.testing.assert_allclose(model[k], ref[k], rtol=1e-9, atol=1e-12)
