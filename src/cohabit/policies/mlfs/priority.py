"""MLF-H task priorities: MLFS Eq. 2-6 (Wang, Liu, Shen, CoNEXT'20, §3.3.1).

Every input is something a scheduler observes: the job's urgency and deadline (spec), the
partition sizes and dependency graph (spec), iterations done and the measured seconds per
iteration (progress reports), the reported loss history, and the job's waiting time.

Tasks of a job are numbered as in :mod:`cohabit.spec.graph` (replica-major, then the
parameter servers). A job without a graph has one task per worker, each holding the whole
model (``S_k^J = 1``) with no dependencies between them.

Units (the paper gives none): times in Eq. 4 are in hours, so ``1/(d - t)`` and ``1/r`` are
per hour and ``w`` is hours waited. A deadline already passed counts as one minute away.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...engine.job import JobView

_HOUR = 3600.0
_MIN_LEFT_H = 1.0 / 60.0
_NDYN = 6
_FLUSH = 128  # arrivals merged into the flat arrays at once
_SUBSET = 8  # fewer than 1/_SUBSET of the known jobs asked for: compute on their tasks alone


@dataclass(frozen=True)
class PriorityParams:
    """Weights of Eq. 3-6 with the paper's defaults (§4.1)."""

    alpha: float = 0.3
    gamma: float = 0.8
    gamma_d: float = 0.3
    gamma_r: float = 0.3
    gamma_w: float = 0.35
    use_urgency: bool = True  # ablation of Fig. 6: L^J in Eq. 2
    use_deadline: bool = True  # ablation of Fig. 6: the deadline term of Eq. 4

    def __post_init__(self) -> None:
        for name in ("alpha",):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma!r}")
        for name in ("gamma_d", "gamma_r", "gamma_w"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite weight >= 0, got {v!r}")


def loss_reduction_share(job: JobView) -> float:
    """δl_{I-1} / Σ_{j<I} δl_j (Eq. 2) from the reported loss history.

    The last report interval's loss drop per iteration stands for δl_{I-1}; the drop since
    the first report stands for the sum. With fewer than two reports (nothing measured yet)
    the share is 1: the next iteration is the most important one yet."""
    hist = job.metrics.get("loss")
    if not hist or len(hist) < 2:
        return 1.0
    (i0, l0), (ia, la), (ib, lb) = hist[0], hist[-2], hist[-1]
    total = l0 - lb
    if ib <= ia or total <= 0:
        return 0.0 if total <= 0 and len(hist) > 2 else 1.0
    per_iter = max(la - lb, 0.0) / (ib - ia)
    return min(per_iter / total, 1.0)


def estimated_iter_time(job: JobView, fallback: float) -> float:
    """Measured seconds per iteration, or ``fallback`` (sample running time) before any report."""
    return job.iter_time if job.iter_time else fallback


def remaining_seconds(job: JobView, now: float, fallback_iter: float) -> float:
    """Estimated remaining running time of the job: iterations left x measured iteration time."""
    total = job.spec.iterations
    if total is None:
        return math.inf
    left = max(total - job.iterations_done(now), 0.0)
    return left * estimated_iter_time(job, fallback_iter)


class _Shape:
    """Static Eq. 3-5 structure of one job (from its spec): per task (workers then servers) the
    partition size share ``S_k^J``, the height share ``height / layers`` (for the task deadline)
    and whether it is a parameter server; the dependency edges (parent, child) within each
    replica and the parent's height (edges are summed lowest level first)."""

    __slots__ = ("n", "n_workers", "share", "hfrac", "is_ps", "parent", "child", "level")

    def __init__(self, job: JobView) -> None:
        g = job.spec.graph
        num_ps = job.spec.num_ps
        if g is None:
            nw = job.spec.workers.count
            share = np.ones(nw)
            hfrac = np.zeros(nw)
            parent = child = level = np.zeros(0, dtype=np.int64)
        else:
            p, reps = g.num_partitions, g.replicas
            nw = p * reps
            height = [0] * p
            for part in reversed(g.layers):
                height[part] = max((height[c] + 1 for c in g.children[part]), default=0)
            layers = float(max(height) + 1)
            share = np.tile(np.asarray(g.size_shares, dtype=float), reps)
            hfrac = np.tile(np.asarray(height, dtype=float) / layers, reps)
            edges = [(a, c) for a in range(p) for c in g.children[a]]
            base_p = np.array([a for a, _ in edges], dtype=np.int64)
            base_c = np.array([c for _, c in edges], dtype=np.int64)
            off = np.repeat(np.arange(reps, dtype=np.int64) * p, len(edges))
            parent = np.tile(base_p, reps) + off
            child = np.tile(base_c, reps) + off
            level = np.tile(np.array([height[a] for a, _ in edges], dtype=np.int64), reps)
        self.n_workers, self.n = nw, nw + num_ps
        self.share = np.concatenate([share, np.zeros(num_ps)])
        self.hfrac = np.concatenate([hfrac, np.zeros(num_ps)])
        self.is_ps = np.concatenate([np.zeros(nw, dtype=bool), np.ones(num_ps, dtype=bool)])
        self.parent, self.child, self.level = parent, child, level


class PriorityTable:
    """P_{k,J} (Eq. 2-6) of every task of many jobs at once, vectorised over all their tasks.

    Each job's static structure (:class:`_Shape`) is added once (``add``, on arrival) into flat
    per-task arrays; a job's per-job terms (urgency x 1/I x loss-reduction share of Eq. 2,
    iterations left, time run, measured iteration time) are recomputed only when it reported
    or ran since they were taken (a queued job's stay fixed; its waiting time and the time to
    its deadline are the only terms that move, and they are computed for all jobs in one pass).
    Eq. 3 and Eq. 5 (children discounted by γ) are applied level by level over the edges, lowest
    parents first, so every child is final before its parent adds it."""

    def __init__(self, params: PriorityParams, max_deadline: float = 7 * 24 * _HOUR) -> None:
        self.params = params
        self.max_deadline = max_deadline
        self._slot: dict[str, int] = {}
        self._shapes: list[_Shape | None] = []
        self._start: list[int] = []  # first flat task index of each slot
        self._ntasks = 0
        self._dead = 0
        self._flat: tuple | None = None
        self._flat_n = 0  # slots in the flat arrays
        self._models: dict[str, int] = {}
        # per slot, static
        self._submit: list[float] = []
        self._dl: list[float] = []
        self._model: list[int] = []
        # per slot, dynamic (refreshed when the signature changes)
        self._sig: list[tuple] = []
        self._dyn = np.zeros((64, _NDYN))  # per slot: see _refresh

    def __len__(self) -> int:
        return len(self._slot)

    def add(self, job: JobView) -> None:
        """Register ``job`` (its static structure); a job already known is left as it is."""
        if job.id in self._slot:
            return
        shape = _Shape(job)
        self._slot[job.id] = len(self._shapes)
        self._shapes.append(shape)
        self._start.append(self._ntasks)
        self._ntasks += shape.n
        spec = job.spec
        self._submit.append(spec.submit_time)
        dl = spec.absolute_deadline
        self._dl.append(dl if dl is not None else spec.submit_time + self.max_deadline)
        self._model.append(self._models.setdefault(spec.model, len(self._models)))
        self._sig.append(())
        if len(self._sig) > len(self._dyn):
            self._dyn = np.concatenate([self._dyn, np.zeros_like(self._dyn)])
        t = job.report_time  # its terms as they stand (a queued job's stay so until it runs)
        self._refresh(len(self._sig) - 1, job, t, (t, job.executed_time(t), job.iter_time))
        if len(self._shapes) - self._flat_n >= _FLUSH:
            self._build()

    def remove(self, job_id: str) -> None:
        """Forget a job that ended (its slot stays, unread, until half the slots are dead; then
        the flat arrays are compacted)."""
        k = self._slot.pop(job_id, None)
        if k is None:
            return
        self._dead += 1
        if self._dead * 2 > len(self._shapes) + 16:
            keep = sorted(self._slot.items(), key=lambda e: e[1])
            old = (self._shapes, self._submit, self._dl, self._model, self._sig)
            self._dyn = np.concatenate([self._dyn[[i for _, i in keep]], np.zeros((64, _NDYN))])
            self._slot, self._shapes, self._start, self._ntasks, self._dead = {}, [], [], 0, 0
            self._submit, self._dl, self._model, self._sig = [], [], [], []
            for jid, i in keep:
                shape = old[0][i]
                assert shape is not None
                self._slot[jid] = len(self._shapes)
                self._shapes.append(shape)
                self._start.append(self._ntasks)
                self._ntasks += shape.n
                for dst, src in zip((self._submit, self._dl, self._model, self._sig), old[1:]):
                    dst.append(src[i])
            self._flat, self._flat_n = None, 0

    def _build(self) -> tuple:
        """The flat per-task arrays of every slot: the slots added since the last call are
        appended (``add`` calls this every ``_FLUSH`` arrivals, so a decision merges few)."""
        n_slots = len(self._shapes)
        if self._flat is not None and self._flat_n == n_slots:
            return self._flat
        new = self._shapes[self._flat_n:]
        cat = np.concatenate
        starts_new = np.asarray(self._start[self._flat_n:], dtype=np.int64)
        sizes_new = np.array([s.n for s in new], dtype=np.int64)
        parts = [cat([s.share for s in new]), cat([s.hfrac for s in new]), cat([s.is_ps for s in new]),
                 np.repeat(np.arange(self._flat_n, n_slots), sizes_new), starts_new, sizes_new]
        ne = np.array([len(s.parent) for s in new], dtype=np.int64)
        eoff = np.repeat(starts_new, ne)
        e = [np.zeros(0, np.int64)]
        parent = cat([s.parent for s in new] + e) + eoff
        child = cat([s.child for s in new] + e) + eoff
        level = cat([s.level for s in new] + e)
        if self._flat is None:
            old = [np.zeros(0, a.dtype) for a in parts]
            edges: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        else:
            old, edges = list(self._flat[:6]), dict(self._flat[6])
        merged = [cat([a, b]) for a, b in zip(old, parts)]
        for lv in np.unique(level).tolist():
            m = level == lv
            po, co = edges.get(lv, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
            edges[lv] = (cat([po, parent[m]]), cat([co, child[m]]))
        self._flat = (*merged, dict(sorted(edges.items())), np.asarray(self._submit, dtype=float),
                      np.asarray(self._dl, dtype=float), np.asarray(self._model, dtype=np.int64))
        self._flat_n = n_slots
        return self._flat

    def _refresh(self, k: int, job: JobView, now: float, sig: tuple) -> None:
        """Recompute the job's per-job terms (it reported or ran since they were taken): urgency
        factor, iterations done, loss-reduction share, iterations left (inf: no total), time run,
        measured iteration time (nan: none yet)."""
        urgency = job.spec.urgency if self.params.use_urgency else 1.0
        done = job.iterations_done(now)
        total = job.spec.iterations
        left = math.inf if total is None else max(total - done, 0.0)
        self._sig[k] = sig
        self._dyn[k] = (urgency, done, loss_reduction_share(job), left, job.executed_time(now),
                        job.iter_time if job.iter_time else math.nan)

    def _refresh_all(self, jobs: list[JobView], now: float) -> list[int]:
        """Slots of ``jobs``; a job's terms are recomputed only when its signature (last report,
        time run, measured iteration time) changed: a queued job's never does, a running job's
        time run moves with ``now``."""
        slot, sigs = self._slot, self._sig
        out = []
        for job in jobs:
            k = slot[job.id]
            sig = (job.report_time, job.executed_time(now), job.iter_time)
            if sigs[k] != sig:
                self._refresh(k, job, now, sig)
            out.append(k)
        return out

    def _terms(self, now: float, fallback: dict[str, float], model: np.ndarray, submit: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(per-slot terms, remaining hours r, waiting hours w) of every slot."""
        dyn = self._dyn[: len(self._sig)]
        fb = np.array([fallback.get(m, 1.0) for m in self._models], dtype=float)
        itime = np.where(np.isnan(dyn[:, 5]), fb[model], dyn[:, 5])
        with np.errstate(invalid="ignore"):
            rem_h = dyn[:, 3] * itime / _HOUR
        rem_h = np.where(np.isfinite(rem_h), rem_h, self.max_deadline / _HOUR)
        w_h = np.maximum(now - submit - dyn[:, 4], 0.0) / _HOUR
        return dyn, rem_h, w_h

    def observed(self, jobs: list[JobView], now: float, fallback: dict[str, float]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(iterations done, loss-reduction share, remaining seconds (inf: no total), waiting
        seconds) of each of ``jobs``, from the same per-job terms as the priorities."""
        for job in jobs:
            if job.id not in self._slot:
                self.add(job)
        ks = np.asarray(self._refresh_all(jobs, now), dtype=np.int64)
        flat = self._build()
        dyn, rem_h, w_h = self._terms(now, fallback, flat[9], flat[7])
        rem_s = np.where(np.isinf(dyn[ks, 3]), np.inf, rem_h[ks] * _HOUR)
        return dyn[ks, 1], dyn[ks, 2], rem_s, w_h[ks] * _HOUR

    def compute(self, jobs: list[JobView], now: float, fallback: dict[str, float]
                ) -> tuple[np.ndarray, Slices]:
        """(highest task priority of each job, its task priorities: workers then servers).

        ``fallback[model]`` is the iteration time of a job of that model that has not reported
        yet (1 s for a model not named)."""
        for job in jobs:
            if job.id not in self._slot:
                self.add(job)
        if not jobs:
            return np.zeros(0), Slices(np.zeros(0), [], np.zeros(0, np.int64), np.zeros(0, np.int64))
        slots = self._refresh_all(jobs, now)
        share, hfrac, is_ps, owner, starts, sizes, edges, submit, dl, model = self._build()
        seg = owner  # per task: its segment (job) in ``starts``
        if len(slots) * _SUBSET < len(self._shapes):  # a few jobs (running ones): their tasks only
            share, hfrac, is_ps, owner, starts, sizes, edges = self._subset(slots)
            slots = list(range(len(slots)))
            seg = np.repeat(np.arange(len(slots)), sizes)
        p = self.params
        ks = np.asarray(slots, dtype=np.int64)
        dyn, rem_h, w_h = self._terms(now, fallback, model, submit)
        now_h = now / _HOUR
        # per task (all registered tasks; only the active jobs' results are read)
        ml_base = (dyn[:, 0] / (dyn[:, 1] + 1.0) * dyn[:, 2])[owner] * share  # Eq. 2: L x 1/I x δl share x S_k
        d_task = dl[owner] / _HOUR - rem_h[owner] * hfrac
        left = np.maximum(d_task - now_h, _MIN_LEFT_H)
        r_task = np.maximum(rem_h[owner] * share, 1.0 / _HOUR)
        c_base = p.gamma_r / r_task + p.gamma_w * w_h[owner]  # Eq. 4
        if p.use_deadline:
            c_base += p.gamma_d / left
        base = p.alpha * ml_base + (1.0 - p.alpha) * c_base  # Eq. 6 (the propagation is linear)
        out = base.copy()
        for parent, child in edges.values():  # Eq. 3 / Eq. 5, one level of parents at a time, lowest first
            out += p.gamma * np.bincount(parent, weights=out[child], minlength=len(out))
        # a parameter server: the job's largest worker priority + γ x the sum over its workers
        wmax = np.where(is_ps, -np.inf, out)
        wsum = np.where(is_ps, 0.0, out)
        top = np.maximum.reduceat(wmax, starts) + p.gamma * np.add.reduceat(wsum, starts)
        out = np.where(is_ps, top[seg], out)
        keys = np.maximum.reduceat(out, starts)[ks]
        return keys, Slices(out, slots, starts, sizes)

    def _subset(self, slots: list[int]) -> tuple:
        """The flat per-task arrays of ``slots`` alone (in that order; ``owner`` still names
        the slot, so the per-slot terms index as in the full arrays)."""
        shapes = [self._shapes[k] for k in slots]
        cat = np.concatenate
        sizes = np.array([s.n for s in shapes], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        ne = np.array([len(s.parent) for s in shapes], dtype=np.int64)
        e = [np.zeros(0, np.int64)]
        eoff = np.repeat(starts, ne)
        parent = cat([s.parent for s in shapes] + e) + eoff
        child = cat([s.child for s in shapes] + e) + eoff
        level = cat([s.level for s in shapes] + e)
        edges = {lv: (parent[level == lv], child[level == lv]) for lv in sorted(set(level.tolist()))}
        return (cat([s.share for s in shapes]), cat([s.hfrac for s in shapes]), cat([s.is_ps for s in shapes]),
                np.repeat(np.asarray(slots, dtype=np.int64), sizes), starts, sizes, edges)


class Slices:
    """The task priorities of each job of a :meth:`PriorityTable.compute` call, sliced on use."""

    __slots__ = ("_out", "_slots", "_starts", "_ends")

    def __init__(self, out: np.ndarray, slots: list[int], starts: np.ndarray, sizes: np.ndarray) -> None:
        self._out, self._slots = out, slots
        self._starts, self._ends = starts.tolist(), (starts + sizes).tolist()

    def __len__(self) -> int:
        return len(self._slots)

    def __getitem__(self, i: int) -> np.ndarray:
        k = self._slots[i]
        return self._out[self._starts[k]: self._ends[k]]


def task_priorities(job: JobView, now: float, params: PriorityParams, fallback_iter: float = 60.0,
                    max_deadline: float = 7 * 24 * _HOUR, table: PriorityTable | None = None) -> np.ndarray:
    """P_{k,J} (Eq. 6) of every task of ``job``: workers (graph order) then parameter servers.

    Eq. 2 ``L · 1/I · δl/Σδl · S_k``; Eq. 4 ``γ_d/(d_k − t) + γ_r/r_k + γ_w·w`` with the task's
    deadline the job's less the share of the remaining time its descendants need, and ``r_k``
    its share of the remaining work; Eq. 3 and Eq. 5 add the children discounted by γ; Eq. 6
    blends them by α. A parameter server gets the highest priority of its job (§3.3.1): the
    job's largest worker priority plus γ times the sum over the tasks it serves."""
    tab = table if table is not None else PriorityTable(params, max_deadline)
    return tab.compute([job], now, {job.spec.model: fallback_iter})[1][0]
