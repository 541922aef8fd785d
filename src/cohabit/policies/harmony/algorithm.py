"""Harmony's job grouping and machine allocation (Lee et al., §IV-B3, Algorithm 1).

:func:`schedule` takes profiled jobs (running first, then waiting, in the order they should
be considered) and a number of machines, and returns job groups with their machines:

* L4-13 — grow the considered set one job at a time; for each set:
  * L6 :func:`num_groups` — the number of groups whose equal DoP (``M / n_G``) best balances
    the jobs' total CPU and network time (``T_cpu`` grows with ``n_G`` by Eq. 2);
  * L7 :func:`fill_groups` — sort the jobs by iteration time and fill the groups one by one
    from the sorted list, greedily picking, among the next few jobs, the one that leaves the
    group being filled best used by Eq. 1 and 3 (balanced, and similar iteration times
    together: no job-bound case);
    then :func:`fine_tune` — swap jobs between the most imbalanced group and its most
    complementary group while a swap lowers their imbalance;
  * L8 :func:`allocate_machines` — one machine per group (or its memory floor), then each
    further machine to the most computation-bound group;
  * L10 — keep growing while U (Eq. 4, :func:`~cohabit.models.harmony_perf.score`) improves
    (``patience`` steps without improvement stop it);
* L12-14 — return the best grouping found; the preference for fewer jobs per group picks the
  smallest considered set whose score is within ``margin`` of the best.

Scalability: up to ``exact_until`` jobs the set grows one job at a time, as in the paper;
beyond, it grows geometrically (``growth``) and the stopping point is refined by bisection,
so thousands of jobs cost tens of evaluations rather than thousands. Everything is numpy
over flat per-job arrays.

:func:`exhaustive` is the oracle of §V-F for small instances: every subset of jobs, every
partition of it, every split of the machines.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...models.harmony_perf import CPU_WEIGHT as CPU_W
from ...models.harmony_perf import cluster_eval, score


@dataclass(frozen=True)
class JobStat:
    """What the scheduler knows of a job: profiled one-machine COMP ``c1`` and COMM ``net``
    seconds per iteration, and the memory it needs per group (GB, summed over machines)."""

    id: str
    c1: float
    net: float
    mem_gb: float = 0.0  # memory the job adds to its group (spill-aware estimate)
    mem_peak_gb: float = 0.0  # memory of the job when it is the active one (counted once per group)

    def t_itr(self, m: float) -> float:
        return self.c1 / m + self.net


@dataclass
class Grouping:
    """Groups of job ids, machines per group, and the predicted utilisation (Eq. 4)."""

    groups: list[list[str]]
    machines: list[int]
    u_cpu: float = 0.0
    u_net: float = 0.0
    considered: int = 0
    evaluations: int = 0
    trace: list[tuple[int, float]] = field(default_factory=list)  # (jobs considered, score)

    @property
    def score(self) -> float:
        return score(self.u_cpu, self.u_net)

    @property
    def n_jobs(self) -> int:
        return sum(len(g) for g in self.groups)


@dataclass(frozen=True)
class Params:
    """Knobs of Algorithm 1 (defaults used throughout)."""

    margin: float = 0.005  # the smallest set of jobs whose score is within this of the best wins
    patience: int = 3  # growth steps without improvement before stopping
    window: int = 4  # greedy fill: candidates looked at beyond the head of the sorted list
    max_swaps: int | None = None  # fine-tuning swaps per grouping (None: 4 x groups + 16)
    exact_until: int = 128  # grow one job at a time up to this many jobs
    growth: float = 1.15  # then by this factor per step
    usable_gb: float = 28.0  # memory per machine for the groups' memory floors
    max_group_jobs: int | None = None  # cap on jobs per group (None: no cap)
    both_sides: bool = True  # L6: carry both integers around the balance point through L7-L9
    retune: bool = True  # a second fine-tuning pass at the DoPs L8 allocated
    # (both only while the set grows one job at a time: they matter on small instances)


# --------------------------------------------------------------------------- L6


def num_groups(c1: np.ndarray, net: np.ndarray, machines: int, limit: int | None = None) -> int:
    """The number of groups n_G whose equal DoP ``M / n_G`` balances CPU and network best.

    With equal DoP, the groups' total CPU time is ``sum c1 * n_G / M`` (Eq. 2) and their total
    network time ``sum net``: balance at ``n_G = M * sum net / sum c1``. The integers either
    side are scored with Eq. 3 on the aggregate (CPU weighted above network)."""
    k = c1.shape[0]
    hi = max(1, min(k, machines, limit if limit is not None else k))
    C, N = float(c1.sum()), float(net.sum())
    x = machines * N / C if C > 0 else hi
    best, best_s = 1, -1.0
    for n in {max(1, min(hi, int(math.floor(x)))), max(1, min(hi, int(math.ceil(x))))}:
        cpu = C * n / machines
        t = max(cpu, N)
        s = score(cpu / t, N / t)
        if s > best_s + 1e-12 or (abs(s - best_s) <= 1e-12 and n < best):
            best, best_s = n, s
    return best


# --------------------------------------------------------------------------- L7


def _imbalance(cs: np.ndarray | float, ns: np.ndarray | float) -> np.ndarray | float:
    """Signed imbalance of groups with CPU time ``cs`` and network time ``ns``: > 0 CPU-bound."""
    return (cs - ns) / np.maximum(np.maximum(cs, ns), 1e-12)


def fill_groups(c1: np.ndarray, net: np.ndarray, n_groups: int, machines: int, window: int = 4) -> np.ndarray:
    """Group index per job: jobs sorted by iteration time (at the equal DoP ``M / n_G``) fill the
    groups one by one, each taking about ``k / n_G`` jobs; while a group fills, the next job is
    the one among the head of the remaining list and the ``window`` after it that leaves the
    group best used (Eq. 1 and 3 at that DoP: balanced CPU and network, no job-bound case)."""
    k = c1.shape[0]
    m0 = machines / n_groups
    cpu = c1 / m0
    order = np.argsort(cpu + net, kind="stable").tolist()
    sizes = [k // n_groups + (1 if g < k % n_groups else 0) for g in range(n_groups)]
    gid = np.empty(k, dtype=np.int64)
    if window <= 0:  # contiguous chunks of the sorted list
        gid[order] = np.repeat(np.arange(n_groups), sizes)
        return gid
    cpu_l, net_l = cpu.tolist(), net.tolist()
    taken = [False] * k
    head = 0
    w_c, w_n = CPU_W, 1.0 - CPU_W
    for g, size in enumerate(sizes):
        cs = ns = top = 0.0
        for _ in range(size):
            while taken[order[head]]:
                head += 1
            best_j, best_v = -1, 1.0
            seen, i = 0, head
            while i < k and seen <= window:
                j = order[i]
                i += 1
                if taken[j]:
                    continue
                seen += 1
                a = cs + cpu_l[j]
                b = ns + net_l[j]
                t = a if a > b else b
                own = cpu_l[j] + net_l[j]
                if top > t:
                    t = top
                if own > t:
                    t = own
                v = -(w_c * a + w_n * b) / t  # Eq. 1 and 3: minus the used share of the group
                if v < best_v - 1e-12:
                    best_j, best_v = j, v
            taken[best_j] = True
            gid[best_j] = g
            cs += cpu_l[best_j]
            ns += net_l[best_j]
            own = cpu_l[best_j] + net_l[best_j]
            if own > top:
                top = own
    return gid


def fine_tune(c1: np.ndarray, net: np.ndarray, gid: np.ndarray, n_groups: int, machines: int,
              max_swaps: int | None = None, dop: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Swap jobs between the most imbalanced group and its most complementary group (the most
    imbalanced the other way) while the best swap lowers the sum of their imbalances (at the
    equal DoP ``M / n_G``, or at the groups' DoPs ``dop``). Returns the new group indices and
    the number of swaps."""
    if n_groups < 2:
        return gid, 0
    gid = gid.copy()
    if dop is None:
        cpu_of = lambda g: c1 / (machines / n_groups)  # noqa: E731
    else:
        d = np.asarray(dop, dtype=np.float64)
        cpu_of = lambda g: c1 / d[g]  # noqa: E731
    cs = np.bincount(gid, weights=c1 / (machines / n_groups) if dop is None else c1 / np.asarray(dop)[gid],
                     minlength=n_groups)
    ns = np.bincount(gid, weights=net, minlength=n_groups)
    members: list[list[int]] = [[] for _ in range(n_groups)]
    for j, g in enumerate(gid.tolist()):
        members[g].append(j)
    limit = max_swaps if max_swaps is not None else 4 * n_groups + 16
    swaps = 0
    while swaps < limit:
        imb = _imbalance(cs, ns)
        g1 = int(np.argmax(np.abs(imb)))
        if abs(imb[g1]) < 1e-9:
            break
        other = imb * np.sign(imb[g1])
        g2 = int(np.argmin(other))
        if other[g2] >= 0:
            break  # no group leans the other way
        a = np.asarray(members[g1])
        b = np.asarray(members[g2])
        c_1, c_2 = cpu_of(g1), cpu_of(g2)  # COMP times at each group's DoP
        # new sums for every (a, b) swap
        in1 = c_1[b][None, :] - c_1[a][:, None]
        in2 = c_2[a][:, None] - c_2[b][None, :]
        dn = net[b][None, :] - net[a][:, None]
        i1 = np.abs(_imbalance(cs[g1] + in1, ns[g1] + dn))
        i2 = np.abs(_imbalance(cs[g2] + in2, ns[g2] - dn))
        tot = i1 + i2
        flat = int(np.argmin(tot))
        ia, ib = divmod(flat, tot.shape[1])
        if tot[ia, ib] >= abs(imb[g1]) + abs(imb[g2]) - 1e-9:
            break
        ja, jb = int(a[ia]), int(b[ib])
        members[g1][ia], members[g2][ib] = jb, ja
        gid[ja], gid[jb] = g2, g1
        cs[g1] += in1[ia, ib]
        ns[g1] += dn[ia, ib]
        cs[g2] += in2[ia, ib]
        ns[g2] -= dn[ia, ib]
        swaps += 1
    return gid, swaps


# --------------------------------------------------------------------------- L8


def allocate_machines(c1: np.ndarray, net: np.ndarray, gid: np.ndarray, n_groups: int, machines: int,
                      floors: np.ndarray | None = None) -> np.ndarray | None:
    """Machines per group: first one each (or the group's memory floor), then each further
    machine to the most computation-bound group (largest ``sum T_cpu / sum T_net`` at its
    current DoP). None if the floors alone exceed ``machines``.

    Equivalent to the one-at-a-time greedy, computed at once: the ratio ``C_g / (m N_g)``
    falls with ``m``, so the greedy hands out the largest values of the merged sequences;
    the threshold is found by bisection and the remainder given by descending next ratio."""
    C = np.bincount(gid, weights=c1, minlength=n_groups)
    N = np.maximum(np.bincount(gid, weights=net, minlength=n_groups), 1e-12)
    base = np.ones(n_groups, dtype=np.int64) if floors is None else np.maximum(floors.astype(np.int64), 1)
    R = machines - int(base.sum())
    if R < 0:
        return None
    if R == 0:
        return base
    a = C / N  # r_g(m) = a_g / m

    def extra(tau: float) -> np.ndarray:  # machines beyond the floor whose ratio a/m >= tau
        return np.maximum(np.floor(a / tau + 1e-12).astype(np.int64) - base + 1, 0)

    lo, hi = 0.0, float((a / base).max()) * (1 + 1e-9) + 1e-12  # extra(hi) = 0
    if extra(hi).sum() >= R:
        lo = hi
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mid <= 0:
            break
        if extra(mid).sum() >= R:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    m = base + extra(hi)
    left = R - int((m - base).sum())
    if left > 0:  # ties at the threshold: by descending next ratio, then group index
        nxt = a / m
        take = np.lexsort((np.arange(n_groups), -nxt))[:left]
        m[take] += 1
    return m


def allocate_machines_greedy(c1: np.ndarray, net: np.ndarray, gid: np.ndarray, n_groups: int, machines: int,
                             floors: np.ndarray | None = None) -> np.ndarray | None:
    """The one-machine-at-a-time form of :func:`allocate_machines` (reference for tests)."""
    C = np.bincount(gid, weights=c1, minlength=n_groups)
    N = np.maximum(np.bincount(gid, weights=net, minlength=n_groups), 1e-12)
    m = np.ones(n_groups, dtype=np.int64) if floors is None else np.maximum(floors.astype(np.int64), 1)
    if m.sum() > machines:
        return None
    for _ in range(machines - int(m.sum())):
        m[int(np.argmax(C / (m * N)))] += 1
    return m


# --------------------------------------------------------------------------- L4-14


def _group_floors(jobs_mem: np.ndarray, jobs_peak: np.ndarray, gid: np.ndarray, n_groups: int,
                  usable_gb: float) -> np.ndarray | None:
    if not jobs_mem.any() and not jobs_peak.any():
        return None
    need = np.bincount(gid, weights=jobs_mem, minlength=n_groups)
    peak = np.zeros(n_groups)
    np.maximum.at(peak, gid, jobs_peak)
    return np.maximum(np.ceil((need + peak) / usable_gb - 1e-9), 1).astype(np.int64)


def _evaluate(c1: np.ndarray, net: np.ndarray, mem: np.ndarray, peak: np.ndarray, k: int, machines: int,
              p: Params) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """L6-L9 for the first ``k`` jobs: number of groups, fill, fine-tune, machines, U. The
    integers either side of the balance point of L6 are both carried through (the one with
    the better U wins), as is one group fewer when the memory floors do not fit."""
    c, n = c1[:k], net[:k]
    x = num_groups(c, n, machines)
    cands = {x}
    C, N = float(c.sum()), float(n.sum())
    if C > 0 and p.both_sides and k <= p.exact_until:
        ideal = machines * N / C
        hi = max(1, min(k, machines))
        cands |= {max(1, min(hi, int(np.floor(ideal)))), max(1, min(hi, int(np.ceil(ideal))))}
    if p.max_group_jobs is not None:
        cands = {min(max(g, math.ceil(k / p.max_group_jobs)), k, machines) for g in cands}
    best = None
    best_s = -math.inf
    for ng in sorted(cands):
        gid = fill_groups(c, n, ng, machines, p.window)
        gid, _ = fine_tune(c, n, gid, ng, machines, p.max_swaps)
        floors = _group_floors(mem[:k], peak[:k], gid, ng, p.usable_gb)
        m = allocate_machines(c, n, gid, ng, machines, floors)
        if m is None:
            continue
        if p.retune and ng > 1 and k <= p.exact_until:  # fine-tune again at the allocated DoPs, then re-allocate
            gid2, swaps = fine_tune(c, n, gid, ng, machines, p.max_swaps, dop=m)
            if swaps:
                floors2 = _group_floors(mem[:k], peak[:k], gid2, ng, p.usable_gb)
                m2 = allocate_machines(c, n, gid2, ng, machines, floors2)
                if m2 is not None and score(*cluster_eval(c, n, gid2, m2.astype(np.float64))) > score(
                        *cluster_eval(c, n, gid, m.astype(np.float64))):
                    gid, m = gid2, m2
        uc, un = cluster_eval(c, n, gid, m.astype(np.float64))
        s = score(uc, un)
        if s > best_s + 1e-12:
            best, best_s = (gid, m, uc, un), s
    return best


def _steps(n: int, p: Params) -> list[int]:
    """Sizes of the considered set: 1, 2, ... up to ``exact_until``, then geometric, then ``n``."""
    ks: list[int] = []
    k = 1
    while k < n:
        ks.append(k)
        k = k + 1 if k < p.exact_until else max(k + 1, int(k * p.growth))
    ks.append(n)
    return ks


def schedule(jobs: Sequence[JobStat], machines: int, params: Params | None = None) -> Grouping:
    """Algorithm 1: the grouping of a prefix of ``jobs`` with the best utilisation (see module doc)."""
    p = params or Params()
    n = len(jobs)
    if n == 0 or machines < 1:
        return Grouping([], [])
    c1 = np.array([j.c1 for j in jobs], dtype=np.float64)
    net = np.array([j.net for j in jobs], dtype=np.float64)
    mem = np.array([j.mem_gb for j in jobs], dtype=np.float64)
    peak = np.array([j.mem_peak_gb for j in jobs], dtype=np.float64)
    found: dict[int, tuple[np.ndarray, np.ndarray, float, float]] = {}
    trace: list[tuple[int, float]] = []
    evals = 0
    top = -math.inf
    misses = 0
    stop_k = n
    steps = _steps(n, p)
    for k in steps:
        r = _evaluate(c1, net, mem, peak, k, machines, p)
        evals += 1
        if r is None:  # the groups' memory floors exceed the machines: no larger set fits either
            stop_k = k
            break
        s = score(r[2], r[3])
        found[k] = r
        trace.append((k, s))
        if s > top * (1 + 1e-9) + 1e-12:
            top, misses = s, 0
        else:
            misses += 1
            if misses >= p.patience:
                stop_k = k
                break
    if found:
        # refine between the best geometric step and the next size tried
        k_top = max(found, key=lambda x: (score(found[x][2], found[x][3]), -x))
        later = [x for x in steps if x > k_top]
        lo, hi = k_top, min(later[0] if later else k_top, stop_k)
        while hi - lo > 1 and k_top >= p.exact_until:
            mid = (lo + hi) // 2
            r = _evaluate(c1, net, mem, peak, mid, machines, p)
            evals += 1
            if r is None:
                hi = mid
                continue
            found[mid] = r
            s = score(r[2], r[3])
            trace.append((mid, s))
            if s > score(found[lo][2], found[lo][3]):
                lo = mid
            else:
                hi = mid
    # L12-14 with the preference for fewer jobs: the smallest set within ``margin`` of the best
    best = None
    if found:
        top = max(score(r[2], r[3]) for r in found.values())
        k = min(x for x, r in found.items() if score(r[2], r[3]) >= top - p.margin)
        best = (k, *found[k])
    if best is None:
        return Grouping([], [], evaluations=evals, trace=trace)
    k, gid, m, uc, un = best
    groups: list[list[str]] = [[] for _ in range(int(m.shape[0]))]
    for j, g in enumerate(gid.tolist()):
        groups[g].append(jobs[j].id)
    return Grouping(groups, [int(x) for x in m], uc, un, considered=k, evaluations=evals, trace=trace)


def evaluate_grouping(jobs: dict[str, JobStat], groups: Sequence[Sequence[str]], machines: Sequence[int]) -> tuple[float, float]:
    """U (Eq. 4) of a given grouping."""
    ids = [j for g in groups for j in g]
    if not ids:
        return 0.0, 0.0
    c1 = np.array([jobs[j].c1 for j in ids])
    net = np.array([jobs[j].net for j in ids])
    gid = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    return cluster_eval(c1, net, gid, np.asarray(machines, dtype=np.float64))


# --------------------------------------------------------------------------- oracle


def _partitions(items: list[int]) -> Iterator[list[list[int]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        for i in range(len(part)):
            yield part[:i] + [[first] + part[i]] + part[i + 1:]
        yield [[first]] + part


def _compositions(total: int, parts: int, floors: Sequence[int]) -> Iterator[tuple[int, ...]]:
    if parts == 1:
        if total >= floors[0]:
            yield (total,)
        return
    for x in range(floors[0], total - sum(floors[1:]) + 1):
        for rest in _compositions(total - x, parts - 1, floors[1:]):
            yield (x, *rest)


def exhaustive(jobs: Sequence[JobStat], machines: int, usable_gb: float = 28.0,
               use_all_machines: bool = True) -> Grouping:
    """The oracle of §V-F: the best score over every subset of ``jobs``, every partition of it
    into groups and every split of the machines (all of them, as Algorithm 1 hands out).
    Ties go to fewer jobs. Exponential: for a handful of jobs only."""
    best: Grouping | None = None
    idx = list(range(len(jobs)))
    for r in range(1, len(jobs) + 1):
        for subset in itertools.combinations(idx, r):
            for part in _partitions(list(subset)):
                if len(part) > machines:
                    continue
                floors = []
                for g in part:
                    need = sum(jobs[j].mem_gb for j in g) + max(jobs[j].mem_peak_gb for j in g)
                    floors.append(max(1, math.ceil(need / usable_gb - 1e-9)) if need > 0 else 1)
                sizes = [machines] if use_all_machines else range(len(part), machines + 1)
                for total in sizes:
                    for comp in _compositions(total, len(part), floors):
                        groups = [[jobs[j].id for j in g] for g in part]
                        uc, un = evaluate_grouping({j.id: j for j in jobs}, groups, comp)
                        s = score(uc, un)
                        if best is None or s > best.score + 1e-12 or (
                                abs(s - best.score) <= 1e-12 and r < best.n_jobs):
                            best = Grouping(groups, list(comp), uc, un, considered=r)
    return best if best is not None else Grouping([], [])
