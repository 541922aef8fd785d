"""Ratchet (cohabit.ratchet): checkpoint triggering and memory/disk tiering."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.ratchet import CheckpointTrigger, TieredStateStore
from cohabit.runtime.checkpoint import CheckpointStore
from runtime_helpers import no_orphans  # noqa: F401


def test_ratchet_trigger_waits_the_fixed_interval_until_it_knows_the_cost():
    t = CheckpointTrigger(first_after_s=2.0)
    assert not t.due(1.9, remaining_s=100.0) and t.due(2.0, remaining_s=100.0)


def test_ratchet_trigger_spaces_checkpoints_to_the_checkfreq_bound():
    t = CheckpointTrigger(bound=0.035, first_after_s=2.0)
    t.record_cost(0.07)
    assert t.interval_s() == pytest.approx(2.0)  # 0.07 s per checkpoint / 3.5%
    t.record_cost(0.0)  # a cheap checkpoint: the mean cost halves, so does the interval
    assert t.interval_s() == pytest.approx(1.0)
    assert not t.due(0.99, remaining_s=100.0) and t.due(1.0, remaining_s=100.0)
    # work done over checkpoints taken at every due point: overhead = cost / interval = the bound
    assert 0.035 / t.interval_s() <= 0.035 + 1e-12


def test_ratchet_trigger_skips_a_checkpoint_the_job_will_outrun():
    t = CheckpointTrigger(first_after_s=2.0)
    assert t.due(5.0, remaining_s=None)
    assert not t.due(5.0, remaining_s=1.5)  # ends before the next interval: its final state is saved anyway
    assert CheckpointTrigger.worth_preempting(10.0, 1.0) and not CheckpointTrigger.worth_preempting(0.5, 1.0)


def test_ratchet_trigger_rejects_a_bound_outside_0_1():
    with pytest.raises(ValueError, match="bound"):
        CheckpointTrigger(bound=1.5)


def _state(n: int) -> dict:
    return {"iteration": n, "w": np.arange(n, dtype=np.float64)}


def test_ratchet_tiering_keeps_states_in_memory_within_the_budget_and_spills_the_rest(tmp_path):
    store = TieredStateStore(CheckpointStore(tmp_path, fsync=False), budget_bytes=20_000)
    assert store.put("small", _state(100), iteration=1) == "memory"
    assert store.put("big", _state(5_000), iteration=2) == "disk"  # 40 kB does not fit the budget
    assert store.memory_bytes <= 20_000
    assert store.tier_of("small") == "memory" and store.tier_of("big") == "disk"
    back = store.take("big")
    assert np.array_equal(back["w"], _state(5_000)["w"]) and store.tier_of("big") is None
    assert np.array_equal(store.take("small")["w"], _state(100)["w"])
    with pytest.raises(KeyError, match="no paused state"):
        store.take("small")


def test_ratchet_tiering_prefers_the_state_expected_back_soonest(tmp_path):
    store = TieredStateStore(CheckpointStore(tmp_path, fsync=False), budget_bytes=9_000)
    store.put("later", _state(1_000), iteration=1, resume_weight=1.0)
    store.put("soon", _state(1_000), iteration=1, resume_weight=5.0)  # both do not fit: "later" spills
    assert store.tier_of("soon") == "memory" and store.tier_of("later") == "disk"
    ops = [(e["op"], e["job"]) for e in store.log]
    assert ("evict", "later") in ops and store.costs.per_byte("disk") is not None


def test_ratchet_drives_a_real_workers_periodic_checkpoints(tmp_path):
    """A worker under checkpoint_policy="ratchet" checkpoints mid-run (first after the fixed
    interval, then at the overhead bound); LocalBackend refuses an unknown policy."""
    from cohabit.engine.backend import BackendEventKind as K
    from cohabit.runtime.local import LocalBackend
    from runtime_helpers import allocate, cluster, ended, final_event, job, wait_for

    cl = cluster(1)
    with pytest.raises(ValueError, match="checkpoint_policy"):
        LocalBackend(cl, root=tmp_path / "bad", checkpoint_policy="sometimes")
    spec = job("mlr", {"name": "mlr", "data": "synthetic", "n_samples": 2000, "n_features": 20, "seed": 1}, 150_000)
    # ~3 s of ~20 us iterations: long enough for a first checkpoint (after 0.3 s) and later reports
    seen: list[int | None] = []  # the newest checkpoint's iteration, as each progress report gives it
    with LocalBackend(cl, root=tmp_path / "run", report_interval=0.1, checkpoint_interval=0.3,
                      checkpoint_policy="ratchet", fsync=False,
                      listener=lambda job, msg: seen.append(msg.get("checkpoint_iteration"))
                      if msg.get("type") == "progress" else None) as be:
        be.launch(spec, allocate(cl, spec, (0,)), 0.0, from_checkpoint=False)
        events = wait_for(be, ended("mlr"), 120.0)
    assert final_event(events, "mlr").kind is K.FINISHED
    assert any(c is not None and 0 < c < 150_000 for c in seen), seen


def test_ratchet_trigger_pays_back_an_expensive_first_checkpoint_within_the_bound():
    t = CheckpointTrigger(bound=0.035, first_after_s=2.0)
    assert t.due(2.0, None, elapsed_s=2.0)  # cost unknown: the fixed interval
    t.record_cost(0.2)  # 0.2 s after 2 s of work: 9% so far
    assert t.interval_s() == pytest.approx(0.2 / 0.035)
    # the interval alone would allow the next one 5.7 s later (at 7.9 s); the budget waits until
    # 0.4 s of checkpoints fit 3.5% of the run: elapsed >= 0.4 / 0.035 - 0.2 = 11.2 s
    assert t.due(5.8, None) and not t.due(5.8, None, elapsed_s=8.0)
    assert not t.due(9.0, None, elapsed_s=11.1) and t.due(9.1, None, elapsed_s=11.3)
    # simulated run: work in 0.01 s steps, each checkpoint costs 0.2 s; overhead from the 2nd on <= bound
    t = CheckpointTrigger(bound=0.035, first_after_s=2.0)
    clock, last, spent = 0.0, 0.0, 0.0
    for _ in range(20_000):
        clock += 0.01
        if t.due(clock - last, None, elapsed_s=clock):
            clock += 0.2
            spent += 0.2
            t.record_cost(0.2)
            last = clock
            if len(t._costs) > 1:
                assert spent / clock <= 0.035 + 1e-9
    assert spent / clock <= 0.035 and len(t._costs) > 5


def test_cohabit_run_checkpoint_option_picks_ratchets_trigger(tmp_path, monkeypatch):
    """``cohabit run --checkpoint ratchet`` hands the backend Ratchet's trigger (``interval``: the fixed
    one); an unknown choice is refused with the option's name before anything runs."""
    import textwrap

    from typer.testing import CliRunner

    from cohabit.cli import app
    from cohabit.runtime import local

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(textwrap.dedent("""
        jobs:
          - id: m
            workers: {count: 1, demand: {cpu: 1, mem_gb: 0.2}}
            iterations: 300
            workload: {name: mlr, data: synthetic, n_samples: 500, n_features: 10, seed: 1}
    """))
    runner = CliRunner()
    bad = runner.invoke(app, ["run", str(jobs), "--policy", "fifo", "--nodes", "1", "--checkpoint", "often"])
    assert bad.exit_code != 0 and "--checkpoint" in bad.output and "ratchet" in bad.output
    seen: list[str] = []
    original = local.LocalBackend.__init__

    def spy(self, *args, **kw):
        seen.append(kw.get("checkpoint_policy"))
        original(self, *args, **kw)

    monkeypatch.setattr(local.LocalBackend, "__init__", spy)
    for choice in ("ratchet", "interval"):
        res = runner.invoke(app, ["run", str(jobs), "--policy", "fifo", "--nodes", "1", "--checkpoint", choice])
        assert res.exit_code == 0, res.output
    assert seen == ["ratchet", "fixed"]
