"""Regression pins: a change to the engine, ledger, placement or a policy's data structures
must not change what any deterministic baseline does on the 480-job Tiresias trace.

The pinned fingerprints (average JCT, makespan, every record event kind's count, preemptions
and a digest of each job's start and end) are in ``tests/data/sim_pins_tiresias_480.json``,
written by ``bench/sim_pins.py``. A deliberate change of behaviour re-pins there and says why.
"""

from __future__ import annotations

import json

import pytest

from cohabit.report.fingerprint import differences
from sim_pins_helpers import (CONTENDED_PIN_FILE, CONTENDED_POLICIES, PIN_FILE, PINNED_POLICIES, TENANT_PIN_FILE,
                              TENANT_POLICIES, run_contended_pinned, run_pinned, run_tenant_pinned)

PINS = json.loads(PIN_FILE.read_text())["pins"]
TENANT_PINS = json.loads(TENANT_PIN_FILE.read_text())["pins"]
CONTENDED_PINS = json.loads(CONTENDED_PIN_FILE.read_text())["pins"]


def test_every_pinned_policy_has_a_pin():
    assert sorted(PINS) == sorted(PINNED_POLICIES)


@pytest.mark.parametrize("policy", PINNED_POLICIES)
def test_result_unchanged(policy):
    now = run_pinned(policy)
    diff = differences(PINS[policy], now)
    assert not diff, f"{policy} on tiresias_480 changed: " + "; ".join(diff)


@pytest.mark.parametrize("policy", TENANT_POLICIES)
def test_tenant_result_unchanged(policy):
    """Per-tenant queues (DRF, static slices, Tetris' fairness knob) on 11 tenants, contended."""
    assert sorted(TENANT_PINS) == sorted(TENANT_POLICIES)
    now = run_tenant_pinned(policy)
    diff = differences(TENANT_PINS[policy], now)
    assert not diff, f"{policy} on philly_82k[:600] changed: " + "; ".join(diff)


@pytest.mark.parametrize("policy", CONTENDED_POLICIES)
def test_contended_result_unchanged(policy):
    """Policies whose rounds scan a long queue (gandiva, tetris) on 2,000 Philly jobs on philly-512."""
    assert sorted(CONTENDED_PINS) == sorted(CONTENDED_POLICIES)
    now = run_contended_pinned(policy)
    diff = differences(CONTENDED_PINS[policy], now)
    assert not diff, f"{policy} on philly_82k[:2000] at philly-512 changed: " + "; ".join(diff)


def test_differences_names_what_moved():
    a = {"avg_jct": 1.0, "events": {"paused": 3, "started": 2}}
    b = {"avg_jct": 1.5, "events": {"paused": 4, "started": 2}}
    assert differences(a, b) == ["avg_jct: pinned 1.0, now 1.5", "events[paused]: pinned 3, now 4"]
    assert differences(a, dict(a)) == []
