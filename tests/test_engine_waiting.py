"""engine.waiting.Waiting: the per-tenant index and positions follow the dict exactly."""

from __future__ import annotations

import random

import pytest

from cohabit.engine.job import JobView
from cohabit.engine.waiting import Running, Waiting
from cohabit.spec.job import JobSpec


def _job(i: int, tenant: str) -> JobView:
    spec = JobSpec(id=f"j{i}", tenant=tenant, submit_time=float(i), workers={"count": 1, "demand": {"gpu": 1}},
                   iterations=10)
    return JobView(spec, i)


def _check(w: Waiting) -> None:
    expect: dict[str, list[str]] = {}
    for jid, job in w.items():  # the dict's own order, grouped by tenant
        expect.setdefault(job.spec.tenant, []).append(jid)
    assert {t: list(q) for t, q in w.by_tenant.items()} == expect
    pos = [w.position(jid) for jid in w]
    assert pos == sorted(pos) and len(set(pos)) == len(pos)


def test_random_mutations_keep_the_index_in_step_with_the_dict() -> None:
    rng = random.Random(7)
    w = Waiting()
    jobs = [_job(i, rng.choice("abc")) for i in range(200)]
    out: list[JobView] = []
    for step in range(2000):
        r = rng.random()
        if r < 0.45 and jobs:
            j = jobs.pop(rng.randrange(len(jobs)))
            w[j.id] = j
        elif r < 0.7 and w:
            jid = rng.choice(list(w))
            out.append(w.pop(jid))
        elif r < 0.9 and w:
            jid = rng.choice(list(w))
            out.append(w[jid])
            del w[jid]
        elif out:  # a job comes back (unhold, a readmitted job): it goes to the end, as in a dict
            j = out.pop(rng.randrange(len(out)))
            w[j.id] = j
        _check(w)
    assert w.pop("nope", None) is None
    with pytest.raises(KeyError):
        w.pop("nope")


def test_setting_an_existing_id_keeps_its_place() -> None:
    w = Waiting()
    a, b = _job(1, "x"), _job(2, "x")
    w[a.id] = a
    w[b.id] = b
    w[a.id] = a
    assert list(w.by_tenant["x"]) == ["j1", "j2"] and w.position("j1") < w.position("j2")


def test_other_mutators_are_refused() -> None:
    w = Waiting()
    a = _job(1, "x")
    for call in (lambda: w.update({a.id: a}), lambda: w.setdefault(a.id, a), w.popitem, w.clear):
        with pytest.raises(TypeError, match="per-tenant index"):
            call()
    assert not w and not w.by_tenant


def test_the_running_journal_names_every_id_that_entered_or_left() -> None:
    """A reader that follows ``changed_since`` from its mark keeps an exact copy of the key set; a mark
    older than the kept journal reads None (the reader compares the whole set then)."""
    rng = random.Random(11)
    class Small(Running):
        KEEP = 8  # drop old entries often

    r = Small()
    jobs = {f"j{i}": _job(i, "t") for i in range(40)}
    copy: set[str] = set()
    mark = r.mark
    stale = 0
    for step in range(3000):
        jid = rng.choice(list(jobs))
        if jid in r:
            if rng.random() < 0.5:
                del r[jid]
            else:
                r.pop(jid)
        else:
            r[jid] = jobs[jid]
        if rng.random() < 0.3 or step % 17 == 0:
            changed = r.changed_since(mark)
            if changed is None:
                stale += 1
                copy = set(r)
            else:
                for c in changed:
                    copy.symmetric_difference_update({c} if (c in r) != (c in copy) else set())
            mark = r.mark
            assert copy == set(r)
    assert stale > 0  # the reader fell behind the kept journal at least once
    assert r.pop("nope", None) is None
    with pytest.raises(TypeError, match="journal"):
        r.update({})


def test_unchanged_removals_and_tenant_count_mean_unchanged_heads() -> None:
    """``Waiting.removals`` (``ClusterView.pending_removals``, read by ``spread.QuietRounds``): whenever it
    and the number of tenants stay across a mutation, every tenant's first job stays."""
    rng = random.Random(5)
    w = Waiting()
    jobs = [_job(i, rng.choice("abcd")) for i in range(300)]
    out: list[JobView] = []
    for _ in range(3000):
        before = (w.removals(), len(w.by_tenant), {t: next(iter(q)) for t, q in w.by_tenant.items()})
        r = rng.random()
        if r < 0.5 and jobs:
            j = jobs.pop(rng.randrange(len(jobs)))
            w[j.id] = j
        elif r < 0.8 and w:
            out.append(w.pop(rng.choice(list(w))))
        elif r < 0.9 and w:
            jid = rng.choice(list(w))
            w[jid] = w[jid]  # set again: same place
        elif out:
            j = out.pop(rng.randrange(len(out)))
            w[j.id] = j
        if (w.removals(), len(w.by_tenant)) == before[:2]:
            assert {t: next(iter(q)) for t, q in w.by_tenant.items()} == before[2]


def _shape(job: JobView) -> str:
    return "big" if int(job.id[1:]) % 3 == 0 else "small"


def test_a_queue_served_from_its_head_keeps_no_table_of_holes() -> None:
    """A dict never shrinks on deletion: every iteration walks the holes of removed entries before the first
    live one (FIFO's ``next(iter(pending))`` paid ~8 us a round at 82k jobs). ``Waiting`` rebuilds its table
    and its groups' in place once the holes reach ~16 x sqrt(len): a queue drained from its head ends with
    a table the size of a fresh one, the same jobs in the same order, the same positions and removals."""
    import sys

    w, plain = Waiting(), {}
    w.group_by(_shape)
    jobs = [_job(i, "ab"[i % 2]) for i in range(20_000)]
    for j in jobs:
        w[j.id] = j
        plain[j.id] = j
    for k, j in enumerate(jobs[:-10]):  # served from the head, by both mutators
        if k % 2:
            del w[j.id]
        else:
            w.pop(j.id)
        del plain[j.id]
        if k % 997 == 0:
            _check(w)
            assert list(w) == list(plain)
    assert list(w) == list(plain) == [j.id for j in jobs[-10:]]
    _check(w)
    assert w.removals() == 19_990
    assert [w.position(j.id) for j in jobs[-10:]] == list(range(19_990, 20_000))
    fresh = sys.getsizeof(dict(plain))
    assert sys.getsizeof(plain) > 100 * fresh  # (what a dict alone keeps: the whole table, holes and all)
    assert sys.getsizeof(w) <= 8 * fresh
    for shape, group in w._shapes._groups.items():
        assert list(group) == [j.id for j in jobs[-10:] if _shape(j) == shape]
        assert list(w.by_shape[shape]) == list(group)  # (the read-only proxies still show the rebuilt dicts)
        assert sys.getsizeof(group) <= 8 * fresh
    for tenant, group in w._tenants._groups.items():
        assert list(w.by_tenant[tenant]) == [j.id for j in jobs[-10:] if j.spec.tenant == tenant]
        assert sys.getsizeof(group) <= 8 * fresh
