"""bench/fidelity_pollux.py: reference inputs intact, and cohabit within 5% of the Pollux artifact for
Tiresias on the embedded workload with the documented option (and not without it)."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from pathlib import Path
from types import ModuleType

import pytest

from conftest import load_bench

ROOT = Path(__file__).resolve().parents[1]


def bench() -> ModuleType:
    return load_bench("fidelity_pollux")


def test_reference_inputs_match_their_recorded_hashes() -> None:
    ref = bench().reference()
    assert ref["commit"] and ref["runs"]
    for name, entry in ref["inputs"].items():
        if "embedded" in entry:
            data = files("cohabit.data").joinpath(f"traces/{entry['embedded']}.csv").read_bytes()
        else:
            data = (ROOT / "bench" / "reference" / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
    assert {r["workload"] for r in ref["runs"]} <= set(ref["inputs"])


def test_tiresias_on_workload_1_within_5_percent_with_the_artifact_option_only() -> None:
    rows = bench().rows(["workload-1"], ["tiresias"], ["default", "pollux-artifact"])
    avg = {r["setting"]: r for r in rows if r["metric"] == "avg_jct"}
    assert avg["pollux-artifact"]["ratio"] == pytest.approx(1.0, abs=0.05)
    assert avg["default"]["ratio"] < 0.8  # throughput physics is optimistic (docs/pollux.md)
    assert {r["simulator"] for r in rows} == {"pollux-artifact"}
