"""From a target set of job groups to the actions that reach it (shared by every PS-group policy).

The target is a list of groups ``(jobs, nodes)``; jobs running now but in no target group are
paused (they wait, checkpointed at an iteration boundary). A target group needs a
``Colocate`` when one of its jobs is not already running in it. The scheduler refuses a
``Colocate`` whose machines still hold jobs that are not moving into it, so the groups are
emitted in an order where each one's machines are clear; when groups block each other in a
cycle, one blocking job is paused first (and resumed by its own group's ``Colocate``):
Harmony's migration is exactly pause-then-resume (§IV-B4).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...engine.actions import Colocate, Pause, Plan
from ...engine.view import ClusterView


def current_groups(view: ClusterView, mode: str) -> dict[tuple[int, ...], list[str]]:
    """Running groups of ``mode``: sorted machines -> members (in the order they joined)."""
    out: dict[tuple[int, ...], list[str]] = {}
    for jid in view.running:
        alloc = view.allocation_of(jid)
        if alloc is not None and alloc.group is not None and alloc.group[0] == mode:
            out.setdefault(alloc.group[1], []).append(jid)
    return out


def emit(view: ClusterView, target: Sequence[tuple[Sequence[str], Sequence[int]]], mode: str) -> Plan:
    """Actions that take the running groups to ``target`` (see module doc)."""
    where: dict[str, tuple[int, ...] | None] = {}  # running job -> its group's machines (None: not grouped)
    occupancy: dict[int, set[str]] = {}
    for jid in view.running:
        alloc = view.allocation_of(jid)
        if alloc is None:
            continue
        key = alloc.group[1] if alloc.group is not None and alloc.group[0] == mode else None
        where[jid] = key
        for n in set(alloc.nodes):
            occupancy.setdefault(n, set()).add(jid)
    in_target = {j for jobs, _ in target for j in jobs}
    plan: Plan = []
    for jid in sorted(where, key=lambda j: view.running[j].seq):
        if jid not in in_target:
            plan.append(Pause(jid, reason="harmony: regrouped out, waiting"))
            _leave(jid, where, occupancy)
    todo = []
    for jobs, nodes in target:
        key = tuple(sorted(int(n) for n in nodes))
        if any(where.get(j, ()) != key for j in jobs):
            todo.append((list(jobs), key))
    while todo:
        applied = False
        for item in list(todo):
            jobs, key = item
            exists = any(k == key for k in where.values())
            if not exists and any(occupancy.get(n, set()) - set(jobs) for n in key):
                continue
            plan.append(Colocate(tuple(jobs), key, mode=mode))
            for j in jobs:
                if j in where and where[j] != key:
                    _leave(j, where, occupancy)
                where[j] = key
                for n in key:
                    occupancy.setdefault(n, set()).add(j)
            todo.remove(item)
            applied = True
        if applied:
            continue
        # a cycle: pause one job that blocks the first waiting group
        jobs, key = todo[0]
        blocker = sorted(set().union(*(occupancy.get(n, set()) for n in key)) - set(jobs))[0]
        plan.append(Pause(blocker, reason="harmony: moving between groups"))
        _leave(blocker, where, occupancy)
    return plan


def _leave(jid: str, where: dict[str, tuple[int, ...] | None], occupancy: dict[int, set[str]]) -> None:
    where.pop(jid, None)
    for held in occupancy.values():
        held.discard(jid)
