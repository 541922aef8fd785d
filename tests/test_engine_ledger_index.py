"""The ledger's free-capacity index (``Ledger.fit_of`` / ``no_room``) answers as ``tasks_fit`` would,
forgets its fits as soon as the free capacity changes (allocate, release, groups, packs), and keeps
the shapes that did not fit (``no_room``) while room only shrinks: until a release."""

from __future__ import annotations

import numpy as np

from cohabit.engine.ledger import Ledger
from cohabit.spec.resources import Resources

from conftest import small_cluster


def _row(led: Ledger, **r: float) -> np.ndarray:
    v = led.vector(Resources(**r))
    assert v is not None
    return v


def test_fits_follow_every_allocate_and_release() -> None:
    led = Ledger(small_cluster(2, 4))
    w = _row(led, gpu=2, cpu=1)
    assert led.fit_of(w).tolist() == [2, 2] and led.fit_of(w) is led.fit_of(w)  # kept
    led.no_room().add(("shape", 3))
    led.allocate("a", [0, 0], [w, w])
    assert led.fit_of(w).tolist() == led.tasks_fit(w).tolist() == [0, 2]
    assert ("shape", 3) in led.no_room()  # room only shrank: what did not fit still does not
    led.allocate("b", [1], [w])
    assert ("shape", 3) in led.no_room() and led.fit_of(w).tolist() == [0, 1]
    led.release("a")
    assert led.fit_of(w).tolist() == [2, 1] and not led.no_room()  # room grew: forgotten


def test_groups_and_packs_keep_no_room_until_they_release() -> None:
    led = Ledger(small_cluster(2, 4))
    w = _row(led, gpu=1, cpu=1)
    c = _row(led, cpu=1)
    led.no_room().add("x")
    led.allocate_group("g", [0], [c], mode="naive", nodes=[0])
    assert "x" in led.no_room() and led.fit_of(w).tolist() == [0, 4]
    led.allocate_pack("p", (1, 0), w)
    assert "x" in led.no_room()
    led.release("p")
    assert not led.no_room()
    led.no_room().add("x")
    led.release("g")
    assert not led.no_room() and led.fit_of(w).tolist() == [4, 4]


def test_a_planning_draft_that_wrote_the_free_capacity_forgets_its_memos() -> None:
    led = Ledger(small_cluster(1, 4))
    w = _row(led, gpu=1, cpu=1)
    led.allocate("a", [0], [w])
    led.no_room().add("x")
    assert led.fit_of(w).tolist() == [3]
    led.free[0] += w  # a draft sharing the arrays gave room back
    led.device_free[0, 0] = 1.0
    led.room_changed()
    assert not led.no_room() and led.fit_of(w).tolist() == [4]


def test_fits_are_read_only_and_drafts_keep_their_own() -> None:
    led = Ledger(small_cluster(1, 4))
    w = _row(led, gpu=1, cpu=1)
    fit = led.fit_of(w)
    assert not fit.flags.writeable
    d = led.draft()
    d.allocate("a", [0], [w])
    assert d.fit_of(w).tolist() == [3] and led.fit_of(w).tolist() == [4]
