"""``bench/policy_floor.py``: a run replayed from its recorded decisions with a stand-in that computes nothing
gives the same result (so its CPU is the engine's floor for that schedule), and the comparison notices when
the stand-in does not reproduce the run."""

from __future__ import annotations

import pytest

from conftest import load_bench


@pytest.mark.parametrize("policy", ["optimus", "fifo"])
def test_the_replayed_run_is_the_run(policy: str) -> None:
    mod = load_bench("policy_floor")
    row = mod._child(policy, "300", "philly-512", False)
    assert row["same"] is True
    assert row["run_s"] > 0 and row["floor_s"] > 0


@pytest.mark.parametrize("setting", ["report_interval"])
def test_a_stand_in_without_the_policys_settings_is_noticed(setting: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without its report interval the stand-in is asked at other times, so answers are left over or
    run out: the replay is never reported the same (fails when leftover answers go unnoticed)."""
    mod = load_bench("policy_floor")
    monkeypatch.setattr(mod, "SETTINGS", tuple(s for s in mod.SETTINGS if s != setting))
    try:
        row = mod._child("optimus", "300", "philly-512", False)
    except StopIteration:
        return
    assert row["same"] is False
