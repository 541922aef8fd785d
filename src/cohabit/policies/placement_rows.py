"""Row arithmetic of :class:`~cohabit.policies.placement.Draft`: what a job's tasks take from (or give back to) a
node's free row, the same floats as one task after the other, and what they take from the free total.

A node taking ``k`` tasks of one demand row subtracts ``k`` times the row at once where that is exact
(:func:`exact_multiple`): rows of multiples of 2**-10 (whole GPUs, cores, GB and halves of them) take no
rounding at any step. Other rows are taken task by task.
"""

from __future__ import annotations

import numpy as np

from ..engine.alloc import EPS

#: fewer tasks than this on one node are taken or given back as one multiple of their row (see exact_multiple)
_MAX_TASKS = 1024


def exact_multiple(values: list[float]) -> bool:
    """True if every value is a multiple of 2**-10 below 2**40 in size. For such a free row ``a`` and a demand row
    ``d`` of the same kind below 2**30 (:func:`row_of`), and ``k`` < :data:`_MAX_TASKS`, every ``a - j * d``
    (``j <= k``) is a multiple of 2**-10 below 2**43, so exactly a double: ``k`` subtractions (or additions) of
    ``d`` in turn round nowhere, and give the same floats as one subtraction of ``k * d``."""
    for x in values:
        y = x * 1024.0
        if not (y.is_integer() and -_ROW_BOUND < y < _ROW_BOUND):
            return False
    return True


def less_times(row: list[float], d: list[float], k: int, exact: bool) -> list[float] | None:
    """``row`` less ``k`` tasks of the demand ``d`` (``exact``: :func:`row_of`'s answer for it), the same floats as
    subtracting ``d`` ``k`` times in turn; None if a value falls below -1e-9 (after any of them: the demand is
    >= 0, so the row after the last one is the smallest, and one check at the end says the same)."""
    if k == 1:
        out = [a - b for a, b in zip(row, d)]
    elif exact and k < _MAX_TASKS and exact_multiple(row):
        out = [a - k * b for a, b in zip(row, d)]
    else:
        out = row
        for _ in range(k):
            out = [a - b for a, b in zip(out, d)]
            if min(out) < -1e-9:
                return None
    return None if min(out) < -1e-9 else out


def plus_times(row: list[float], d: list[float], k: int, exact: bool) -> list[float]:
    """``row`` plus ``k`` tasks of the demand ``d``, the same floats as adding ``d`` ``k`` times in turn (see
    :func:`less_times`)."""
    if k == 1:
        return [a + b for a, b in zip(row, d)]
    if exact and k < _MAX_TASKS and exact_multiple(row):
        return [a + k * b for a, b in zip(row, d)]
    for _ in range(k):
        row = [a + b for a, b in zip(row, d)]
    return row


_ROW_BOUND = 2.0 ** 50  # (2**40, scaled by 2**10)
_DEMAND_BOUND = 2.0 ** 40  # (2**30, scaled by 2**10)

#: id(demand row) -> (row, its values as Python floats, whether they are >= 0 multiples of 2**-10 below 2**30)
_ROWS: dict[int, tuple[np.ndarray, list[float], bool]] = {}


def row_of(d: np.ndarray) -> tuple[list[float], bool]:
    """(``d.tolist()``, whether each value is >= 0 and a multiple of 2**-10 below 2**30: see
    :func:`exact_multiple`), kept for the view's read-only rows."""
    hit = _ROWS.get(id(d))
    if hit is not None and hit[0] is d:
        return hit[1], hit[2]
    vals = d.tolist()
    exact = all([x >= 0.0 and (x * 1024.0).is_integer() and x * 1024.0 < _DEMAND_BOUND for x in vals])
    if not d.flags.writeable:
        if len(_ROWS) > 4096:
            _ROWS.clear()
        _ROWS[id(d)] = (d, vals, exact)
    return vals, exact


#: ids of a job's task rows -> (the rows, their sum): what a reservation takes from the draft's free total
_SUMS: dict[tuple[int, ...], tuple[list[np.ndarray], np.ndarray]] = {}


def task_sum(vecs: list[np.ndarray]) -> np.ndarray:
    """``np.sum(vecs, axis=0)``, cached for the view's read-only rows (kept alive here: ids stay theirs)."""
    key = tuple(map(id, vecs))
    hit = _SUMS.get(key)
    if hit is not None:
        return hit[1]
    total = np.sum(vecs, axis=0)
    if not any(v.flags.writeable for v in vecs):
        if len(_SUMS) > 4096:
            _SUMS.clear()
        total.flags.writeable = False
        _SUMS[key] = (vecs, total)
    return total


#: (id(demand row), tasks) -> (row, what ``tasks`` tasks of it take from the free total)
_MULTIPLES: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def multiple_sum(w: np.ndarray, n: int) -> np.ndarray:
    """:func:`task_sum` of ``n`` tasks of the row ``w`` (``np.sum([w] * n, axis=0)``, the same floats), kept for the
    view's read-only rows."""
    hit = _MULTIPLES.get((id(w), n))
    if hit is not None and hit[0] is w:
        return hit[1]
    total = np.sum([w] * n, axis=0)
    if not w.flags.writeable:
        if len(_MULTIPLES) > 4096:
            _MULTIPLES.clear()
        total.flags.writeable = False
        _MULTIPLES[(id(w), n)] = (w, total)
    return total


def swap_leaves(free: np.ndarray, dev: np.ndarray, slots: tuple, placement: tuple[int, ...],  # type: ignore[type-arg]
                d: list[float], exact: bool, g: int) -> bool:
    """True when giving back a running job's room (its task ``slots``, every task of the demand ``d``, no more)
    and then reserving another job of the same demand on that job's own ``placement`` (``Draft.give_back``, then
    ``Draft.reserve``) succeeds and leaves ``free`` and ``dev`` exactly as they are; False when that is not
    shown (the caller then does both). Shown, node by node, when:

    * the GPU share ``d[g]`` is a whole number ``s >= 1`` and each task holds ``s`` devices with a share of
      exactly 1.0, each now at a free share of exactly 0.0 (giving back makes them 1.0), and no other device of
      the node has a whole free share: the reservation takes the lowest whole free devices, which are then
      exactly these, and sets them to 0.0 again (``take_whole``);
    * the node's free row and ``d`` are multiples of 2**-10 in range (:func:`exact_multiple`, ``exact``) and
      ``k < _MAX_TASKS`` tasks sit there: adding ``k`` rows and taking them away again rounds nowhere, so each
      value comes back to itself (a zero may come back as +0.0 where it was -0.0: the same for every
      comparison, sum and difference the draft makes), and no value is below -1e-9 (the reservation's test).
    """
    share = d[g]
    if not (share >= 1.0 and share.is_integer()) or not exact:
        return False
    per = int(share)
    counts: dict[int, int] = {}
    for node in placement:
        counts[node] = counts.get(node, 0) + 1
    held: dict[int, list[int]] = {}
    n = 0
    for slot in slots:
        devs = slot.devices
        if len(devs) != per:
            return False
        mine = held.get(slot.node)
        if mine is None:
            mine = held[slot.node] = []
        for i, s in devs:
            if s != 1.0:
                return False
            mine.append(i)
        n += 1
    if n != len(placement) or held.keys() != counts.keys():
        return False
    lo = 1.0 - EPS  # (a whole free device share, as take_whole and the ledger measure it)
    for node, k in counts.items():
        mine = held[node]
        if len(mine) != k * per or k >= _MAX_TASKS or len(set(mine)) != len(mine):
            return False
        drow = dev[node].tolist()
        if any(drow[i] != 0.0 for i in mine) or any(x >= lo for x in drow):
            return False  # (the held devices at 0.0 are below lo: any whole free device is another one)
        row = free[node].tolist()
        if min(row) < -1e-9 or not exact_multiple(row):
            return False
    return True
