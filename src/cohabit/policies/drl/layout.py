"""The ``layout`` rule of the task-by-task loop (:mod:`.taskwise`): once a job's tasks are all drawn
(and the :mod:`.hold` rule has had its say), how many of its workers and parameter servers go on
each of the servers they span is chosen again, so that the job's estimated speed is highest (ours,
session drl18a; a hand-coded rule, not learned; ``layout=fit``).

Why (``docs/drl.md``, "Session drl18a"): on the load-matched 30-server rack's Poisson workloads the
largest part of drl's JCT above the solo bound is parameter-server jobs running slower than alone
at their best layout, although they span no more servers than they need: the declared CPU of a
parameter server (1-2 cores) is below what it uses (up to about 1.9 cores), so a server the
placement loop fills to its declared 8 cores with one job's parameter servers is over-subscribed,
and the job runs at the pace of that server. The chooser (the actor, LIF) picks the servers, the
rule the counts on them.

The estimate (:func:`estimated_speed`) reads the LIF profile (``data/drl/lif.json``,
:class:`~cohabit.models.interference.ModelProfile`: the cores a worker and a parameter server of
each model use, and the model's communication share ``c``, from profiling runs), the jobs' declared
shapes and demands and the placement state, nothing of the simulator: an iteration is compute
``1 - c`` plus communication ``c``; the share ``x`` of the job's parameter traffic that crosses
servers takes twice as long, so the time per iteration grows by ``1 + c x``; the tasks of a server
share its cores, so a server whose tasks (the job's and the other jobs') use ``U > C`` cores runs
them at ``C / U`` and the job at its slowest server's pace::

    estimated speed = min over its servers of min(1, C_s / U_s)  /  (1 + c x)

with ``x = 1 - sum_s w_s p_s / (w p)`` for a job of ``w`` workers and ``p`` parameter servers
(worker-server pairs on different servers) and ``h / w`` for an all-reduce ring over ``h > 1``
servers. Layouts that do not fit the room free before the job's tasks (declared demands) are
skipped; the job's layout changes only when another one is estimated faster. ``drl``'s default
``layout=auto`` is :data:`AUTO`: ``fit`` on the 30-server rack (chosen on the load-matched selection
workloads 91000-91023, better on all three arrival patterns), ``keep`` on 6 servers (jobs of at most
3 workers and 3 parameter servers: no better on Poisson, worse on uniform arrivals there).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import product

import numpy as np

from ...models.interference import LIFModel, ModelProfile
from ..params import check_choice, choice_per_size
from .state import JobEntry, PlacementState

LAYOUTS = ("keep", "fit")

#: ``layout=auto`` per number of servers (a size not named: ``keep``, the chooser's layout; session drl18a)
AUTO: dict[int, str] = {30: "fit"}

#: at most this many worker x parameter-server count vectors are tried per job
LIMIT = 4096


def check_layout(value: str, allow_auto: bool = False) -> str:
    return check_choice("layout", value, LAYOUTS, allow_auto)


def layout_for(value: str, m: int) -> str:
    """The rule ``value`` means on ``m`` servers (``auto``: :data:`AUTO`'s, else ``keep``)."""
    return choice_per_size(value, AUTO, m, "keep")


def worker_cpu(prof: ModelProfile, allreduce: bool) -> float:
    """Cores one worker uses (an all-reduce worker is a worker and a server shard together)."""
    return prof.cpu_worker + (prof.cpu_ps if allreduce else 0.0)


def cross_share(allreduce: bool, ws: Sequence[int], ps: Sequence[int]) -> float:
    """The share of the job's parameter traffic that crosses servers (module docstring)."""
    w = sum(ws)
    if w == 0:
        return 0.0
    if allreduce:
        hosts = sum(1 for n in ws if n > 0)
        return hosts / w if hosts > 1 else 0.0
    p = sum(ps)
    if p == 0:
        return 0.0
    return 1.0 - sum(a * b for a, b in zip(ws, ps)) / (w * p)


def estimated_speed(prof: ModelProfile, allreduce: bool, ws: Sequence[int], ps: Sequence[int],
                    other_cpu: Sequence[float], cores: Sequence[float]) -> float:
    """Estimated speed (1 = alone, unshared, consolidated) of a job of profile ``prof`` with
    ``ws[i]`` workers and ``ps[i]`` parameter servers on the i-th of its servers, where the other
    jobs use ``other_cpu[i]`` of ``cores[i]`` cores (module docstring)."""
    cw = worker_cpu(prof, allreduce)
    pace = 1.0
    for w, p, oc, c in zip(ws, ps, other_cpu, cores):
        if w + p:
            use = oc + w * cw + p * prof.cpu_ps
            if use > c:
                pace = min(pace, c / use)
    return pace / (1.0 + prof.comm * cross_share(allreduce, ws, ps))


def _counts(n: int, caps: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Every way to put ``n`` alike tasks on servers holding at most ``caps[i]`` each."""
    if not caps:
        if n == 0:
            yield ()
        return
    for a in range(min(n, caps[0]), -1, -1):
        if n - a <= sum(caps[1:]):
            for rest in _counts(n - a, caps[1:]):
                yield (a,) + rest


def _fits(free: np.ndarray, wd: np.ndarray, pd: np.ndarray, ws: Sequence[int], ps: Sequence[int]) -> bool:
    return all((free[i] + 1e-9 >= w * wd + p * pd).all() for i, (w, p) in enumerate(zip(ws, ps)))


def best_counts(free: np.ndarray, entry: JobEntry, prof: ModelProfile, other_cpu: Sequence[float],
                cores: Sequence[float], current: tuple[tuple[int, ...], tuple[int, ...]]
                ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The (workers, parameter servers) per server of ``free`` (its rows: the job's servers, room free
    before its tasks) of highest :func:`estimated_speed`; ``current`` unless another is faster (ties
    and a search above :data:`LIMIT` count vectors keep it)."""
    wd, pd = entry.worker_demand, entry.ps_demand

    def cap(d: np.ndarray) -> list[int]:
        need = d > 1e-12
        return [int(np.floor(min(free[i][need] / d[need]) + 1e-9)) if need.any() else entry.n_workers + entry.n_ps
                for i in range(free.shape[0])]

    wcaps = [min(c, entry.n_workers) for c in cap(wd)]
    pcaps = [min(c, entry.n_ps) for c in cap(pd)] if entry.n_ps and not entry.allreduce else [0] * free.shape[0]
    wlist = list(_counts(entry.n_workers, wcaps))
    plist = list(_counts(entry.n_ps if not entry.allreduce else 0, pcaps))
    if len(wlist) * len(plist) > LIMIT:
        return current
    best, best_v = current, estimated_speed(prof, entry.allreduce, *current, other_cpu, cores) * (1 + 1e-9)
    for ws, ps in product(wlist, plist):
        if _fits(free, wd, pd, ws, ps):
            v = estimated_speed(prof, entry.allreduce, ws, ps, other_cpu, cores)
            if v > best_v:
                best, best_v = (ws, ps), v
    return best


def fit(state: PlacementState, entry: JobEntry, lif: LIFModel, cores: np.ndarray) -> bool:
    """Lay ``entry``'s placed tasks out again on the servers they span (:func:`best_counts`); True
    if the layout changed. ``cores``: each server's cores (the profile's unit)."""
    servers = [s for s in range(state.m) if entry.placed_w[s] + entry.placed_p[s] > 0]
    cur = (tuple(int(entry.placed_w[s]) for s in servers), tuple(int(entry.placed_p[s]) for s in servers))
    free = (state.free + np.outer(entry.placed_w, entry.worker_demand) + np.outer(entry.placed_p, entry.ps_demand))
    other = np.zeros(state.m)
    for j in state.jobs:
        if j is not entry and (j.placed_w.any() or j.placed_p.any()):
            pj = lif.profile(j.model)
            other += j.placed_w * worker_cpu(pj, j.allreduce) + j.placed_p * pj.cpu_ps
    ws, ps = best_counts(free[servers], entry, lif.profile(entry.model), other[servers], cores[servers], cur)
    if (ws, ps) == cur:
        return False
    state.undo(entry)
    for s, n in zip(servers, ws):
        for _ in range(n):
            state.apply(entry, 2 * s)
    for s, n in zip(servers, ps):
        for _ in range(n):
            state.apply(entry, 2 * s + 1)
    return True
