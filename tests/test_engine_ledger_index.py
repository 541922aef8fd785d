"""The ledger's free-capacity index (``Ledger.fit_of`` / ``no_room``) answers as ``tasks_fit`` would,
and forgets what it kept as soon as the free capacity changes (allocate, release, groups, packs)."""

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
    assert ("shape", 3) not in led.no_room()  # the capacity changed: the memo is empty again
    led.no_room().add(("shape", 3))
    led.release("a")
    assert led.fit_of(w).tolist() == [2, 2] and not led.no_room()


def test_fits_are_read_only_and_drafts_keep_their_own() -> None:
    led = Ledger(small_cluster(1, 4))
    w = _row(led, gpu=1, cpu=1)
    fit = led.fit_of(w)
    assert not fit.flags.writeable
    d = led.draft()
    d.allocate("a", [0], [w])
    assert d.fit_of(w).tolist() == [3] and led.fit_of(w).tolist() == [4]
