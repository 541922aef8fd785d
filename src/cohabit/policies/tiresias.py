"""Tiresias (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI'19).

Scheduling (paper §3.2)
-----------------------
* **Two-dimensional attained service** (§3.2.2): a job's service is the
  product of its GPU count and the time it has run — GPU-seconds, exactly
  ``JobView.attained_service(now)``. No job length is needed.
* **Discretized 2D-LAS** (§3.2.3, Algorithm 1): ``K`` logical queues
  ``Q_1..Q_K`` split by ``K-1`` service thresholds. A job enters ``Q_1``
  and is demoted to ``Q_{i+1}`` once its attained service crosses the
  ``i``-th threshold. Queues are served in order; within a queue jobs are
  FIFO (by the time they entered the queue, then arrival order). A waiting
  job preempts (``Pause``, checkpointing) running jobs of *lower* queues —
  lowest priority first — when that makes it fit; jobs of the same queue
  never preempt each other. Jobs that cannot be placed are skipped and later
  jobs may use the room (the scheduler is work-conserving).
  Default thresholds ``(3250, 7200)`` GPU-seconds (``K = 3``) are the
  authors' simulator defaults (``queue_limit`` in SymbioticLab/Tiresias).
* **Starvation** (§3.2.3, "PROMOTEKNOB", sensitivity in §5.4): a waiting job
  outside ``Q_1`` whose waiting time since it last entered ``Q_1`` (counted
  after its first start) reaches ``starve_limit`` times the time it has run
  since then is promoted back to ``Q_1`` and its queue service restarts from
  zero (the authors' simulator resets both counters the same way). The rule
  is the paper's: waiting time >= knob x executed time. ``starve_limit=None``
  turns promotion off. *Executed time* is the job's whole executed time by default
  (``promote_basis="total"``); ``"since_promotion"`` counts it since the last promotion, as the
  authors' simulator does. Under sustained overload the latter is a fixed-period ping-pong: a
  promoted job runs one Q_1 quantum (3,250 GPU-s: 406 s on 8 GPUs), is demoted and preempted,
  and is promoted again after the same wait, forever (263,492 preemptions, 176 per job, on the
  Muri artifact's 1,494-job trace1; issue 19). With the whole executed time each promotion waits
  longer than the one before (the waits grow with the service the job already had), which bounds
  the cycles: 10 preemptions per job instead of 207 on trace1's first 300 jobs, with a lower
  average JCT (``tests/test_policy_tiresias.py``, ``docs/fidelity.md``).
* **Discretized 2D-Gittins index** (§3.2.2 eq. 1, §3.2.3; ``gittins=True``):
  within each queue, jobs are ordered by their Gittins index
  ``G(a) = sup_{Δ>0} P(S - a <= Δ | S > a) / E[min(S - a, Δ) | S > a]``
  (highest first) for attained service ``a`` and job size ``S`` (GPU-seconds)
  drawn from a distribution *learned from finished jobs*
  (``view.history.attained_services()``). Over the empirical distribution
  the supremum is reached at a sample point, so ``G`` is exact and cheap
  (:func:`gittins_index`). ``gittins_delta`` fixes ``Δ`` instead (the
  authors' simulator uses a static ``Δ`` equal to the first threshold).
  Until ``min_history`` jobs have finished the policy uses a documented
  prior: a log-normal size with median ``prior_median`` GPU-seconds and log
  standard deviation ``prior_sigma`` (heavy-tailed, as the paper's analysis
  of Microsoft's cluster found GPU time to be), or ``prior_samples`` if
  given (e.g. sizes from a previous run). The learned distribution is refit
  whenever the history has grown by 5 % (each refit recomputes every waiting
  job's index). With the oracle
  (``use_oracle=True``, name ``tiresias-gittins[oracle]``) the distribution
  is instead the *true* sizes of the jobs submitted so far (the paper's
  "distribution known in advance" setting).

Placement (paper §3.3)
----------------------
Only models with a skewed tensor-size distribution are consolidated (all workers on the fewest
machines, waiting if need be); see :mod:`cohabit.policies.tensor_skew` for the profile and rule.

Preemption cost
---------------
Preemption checkpoints and restores the job (seconds in the simulator,
paper §4). To avoid thrashing, a job that (re)started less than
``min_run_time`` seconds ago is not preempted again (default 120 s, four
times the simulator's default checkpoint + restore, so a preempted job
loses at most a fifth of its turn).

When to decide
--------------
Demotion and promotion happen with the passage of time, not only on arrivals and completions.
The policy asks the scheduler for a decision exactly when its queues can change between events
(``next_decision_time``): the next demotion threshold crossing of a running job, the next
starvation promotion of a waiting job, and, while jobs wait, the moment a running job reaches
``min_run_time`` (it becomes a possible victim). Nothing else a round reads changes between
events, so no periodic tick is needed (default ``tick_interval=None``; giving one adds periodic
rounds, which change nothing). Before, a 60-s tick re-evaluated the queues: on the Muri artifact's
trace1 362k of 473k events were such ticks, and queue changes were seen up to 60 s late.

Turns that cannot change the plan are not taken (``lazy_turns``, default on; off: a round at every one of
those moments and every event, the same schedule with more ``decision`` rows). After a round with nothing
left to do (it planned nothing, or only started jobs, each start taken), until a job arrives or ends: a
progress report alone is no reason to decide (``wants_turn``: a round reads no telemetry), nor is a
demotion into a queue no waiting job is below, nor a job reaching ``min_run_time`` there: victims come
from the queues below a waiting job's only, so such a round would be the last one again. Those demotions
are applied at their own times by the next round. On trace1 that is 20,359 rounds instead of 57,452.

Choices where the paper is silent: victims are taken from the lowest queue
first and, within a queue, the job that most recently (re)started or entered
it first; once a job fits, victims it turns out not to need are spared. Queue
changes are tracked incrementally (a heap of the next moment each job may be
demoted or promoted), so a decision costs about the number of waiting jobs,
not the number of all jobs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..engine.actions import Pause, Placement, Plan, Resume, Start
from ..engine.backend import BackendEvent, BackendEventKind
from ..engine.job import JobView
from ..engine.ledger import fit_counts
from ..engine.oracle import Oracle
from ..engine.state import JobState
from ..engine.view import ClusterView
from .base import BasePolicy
from .gittins import SizeDistribution, gittins_index, lognormal_prior
from .placement import Draft, consolidated_first
from .params import build
from .tensor_skew import DEFAULT_SKEW_THRESHOLD, MODEL_TENSOR_SKEW, canonical, tensor_skew
from .tiresias_order import Walk, WaitingOrder
from .tiresias_preempt import Rec, lower_gpus, most_first, preempt_for
from .tiresias_queues import TIME_EPS, LasQueues
from .tiresias_rounds import RoundShortcuts

#: Re-exported: the Gittins index and the skew profile lived here before the split.
__all__ = ["DEFAULT_THRESHOLDS", "MODEL_TENSOR_SKEW", "SizeDistribution", "Tiresias", "gittins_index",
           "lognormal_prior", "make", "make_gittins", "tensor_skew"]

#: Authors' simulator defaults (SymbioticLab/Tiresias ``jobs.py``: ``queue_limit``), GPU-seconds.
DEFAULT_THRESHOLDS: tuple[float, ...] = (3250.0, 7200.0)

_PROGRESS = BackendEventKind.PROGRESS

REFRESH_GROWTH = 1.05  # refit the learned size distribution when the history grew this much


def _positive(value: object, *, allow_zero: bool = False) -> bool:
    """A finite real number > 0 (>= 0 with ``allow_zero``); False for anything else (bools too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    v = float(value)
    return math.isfinite(v) and (v >= 0 if allow_zero else v > 0)


# ------------------------------------------------------------------ the policy
class Tiresias(LasQueues, RoundShortcuts, BasePolicy):
    """Discretized 2D-LAS (default) or 2D-Gittins-index scheduling with profile-based placement."""

    def __init__(
        self,
        thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
        *,
        starve_limit: float | None = 8.0,
        gittins: bool = False,
        use_oracle: bool = False,
        min_history: int = 20,
        prior_median: float = 3600.0,
        prior_sigma: float = 2.0,
        prior_samples: Sequence[float] | None = None,
        gittins_delta: float | None = None,
        skew_threshold: float = DEFAULT_SKEW_THRESHOLD,
        skew_table: Mapping[str, float] | None = None,
        consolidate_unknown: bool = True,
        min_run_time: float = 120.0,
        tick_interval: float | None = None,
        promote_basis: str = "total",
        lazy_turns: bool = True,
    ) -> None:
        try:
            th = tuple(float(t) for t in thresholds)
        except (TypeError, ValueError):
            raise ValueError(f"thresholds must be a sequence of GPU-second numbers, got {thresholds!r}") from None
        if any(not (math.isfinite(t) and t > 0) for t in th) or any(b <= a for a, b in zip(th, th[1:])):
            raise ValueError(f"thresholds must be finite, > 0 and strictly increasing GPU-seconds, got {thresholds!r}")
        if starve_limit is not None and not _positive(starve_limit):
            raise ValueError(f"starve_limit must be > 0 (or None to disable promotion), got {starve_limit!r}")
        if use_oracle and not gittins:
            raise ValueError(f"use_oracle={use_oracle!r} only applies to the Gittins variant (gittins=True)")
        if isinstance(min_history, bool) or not isinstance(min_history, int) or min_history < 1:
            raise ValueError(f"min_history must be an int >= 1 finished jobs, got {min_history!r}")
        if not _positive(prior_median):
            raise ValueError(f"prior_median must be > 0 GPU-seconds, got {prior_median!r}")
        if not _positive(prior_sigma):
            raise ValueError(f"prior_sigma must be > 0, got {prior_sigma!r}")
        prior: np.ndarray | None = None
        if prior_samples is not None:
            try:
                prior = np.asarray(list(prior_samples), dtype=np.float64)
            except (TypeError, ValueError):
                prior = None
            if prior is None or prior.ndim != 1 or prior.size == 0 or not np.all(np.isfinite(prior)) or (prior <= 0).any():
                raise ValueError(f"prior_samples must be a non-empty list of sizes > 0 GPU-seconds, got {prior_samples!r}")
        if gittins_delta is not None and not _positive(gittins_delta):
            raise ValueError(f"gittins_delta must be > 0 GPU-seconds or None, got {gittins_delta!r}")
        if not (_positive(skew_threshold, allow_zero=True) and skew_threshold <= 1):
            raise ValueError(f"skew_threshold must be in [0, 1], got {skew_threshold!r}")
        try:
            table = dict(MODEL_TENSOR_SKEW if skew_table is None else skew_table)
        except (TypeError, ValueError):
            raise ValueError(f"skew_table must map model names to skews in [0, 1], got {skew_table!r}") from None
        for k, v in table.items():
            if not (_positive(v, allow_zero=True) and v <= 1) or not canonical(str(k)):
                raise ValueError(f"skew_table entries must map a model name to a skew in [0, 1], got {k!r}: {v!r}")
        if not _positive(min_run_time, allow_zero=True):
            raise ValueError(f"min_run_time must be >= 0 seconds, got {min_run_time!r}")
        if tick_interval is not None and not _positive(tick_interval):
            raise ValueError(f"tick_interval must be > 0 seconds or None, got {tick_interval!r}")
        self.thresholds = th
        if promote_basis not in ("total", "since_promotion"):
            raise ValueError(f"promote_basis must be 'total' or 'since_promotion', got {promote_basis!r}")
        self.promote_basis = promote_basis
        self.starve_limit = starve_limit
        self.gittins = gittins
        self.uses_oracle = use_oracle
        self.min_history = min_history
        self.prior_median = prior_median
        self.prior_sigma = prior_sigma
        self.gittins_delta = gittins_delta
        self.skew_threshold = skew_threshold
        self.skew_table = {canonical(str(k)): float(v) for k, v in table.items()}
        self.consolidate_unknown = consolidate_unknown
        self.min_run_time = min_run_time
        self.tick_interval = tick_interval
        self.name = ("tiresias-gittins[oracle]" if use_oracle else "tiresias-gittins") if gittins else "tiresias"
        self._oracle: Oracle | None = None
        k = len(th) + 1
        self._recs: dict[str, Rec] = {}
        self._wait: list[dict[str, Rec]] = [{} for _ in range(k)]  # waiting jobs per queue
        self._run: list[dict[str, Rec]] = [{} for _ in range(k)]  # running jobs per queue, by entry
        self._run_gpus = [0.0] * k
        self._heap: list[tuple[float, int, str, int]] = []  # (when, seq, job, epoch): re-check a job
        self._seq = 0
        self._last_plan: list[tuple[bool, str]] = []  # (started?, job) of the previous plan
        self._consolidate: dict[str, bool] = {}
        #: model -> whether it is consolidated, for the profile (table, threshold, unknown rule) in _by_model_for
        self._by_model: dict[str | None, bool] = {}
        self._by_model_for: tuple[int, float, bool] | None = None
        self._min_nodes: dict[tuple[int, int], int] = {}
        self._dist: SizeDistribution | None = None
        self._dist_key: tuple[str, int] | None = None
        self._dist_version = 0
        self._dist_n = -1  # history length at the last distribution() without the oracle
        self._prior: np.ndarray | None = prior
        self.promotions = 0
        # shapes that failed to place at the end of the last round, and the room they failed on: they
        # keep failing while no node has more room than that (see _carried_failures)
        self._nofit: set[tuple[bytes, int, bool]] = set()
        self._nofit_room: tuple[np.ndarray, np.ndarray] | None = None
        self._nofit_version: int | None = None  # allocation version when _nofit_room was the ledger's room
        # the waiting jobs in priority order, kept across rounds, one list per (queue, shape) (keys are
        # unique: they end with the arrival number), with the count of each GPU size among them, and
        # (Gittins) the jobs whose index may have changed since it was computed
        self._order = WaitingOrder()
        self._wait_sizes = self._order.sizes
        self._stale: dict[str, Rec] = {}
        self._order_version = -1  # distribution version the Gittins keys in the order were computed with
        self._g_memo: dict[float, float] = {}  # Gittins index by attained service, for _order_version
        # a quiet round (empty plan) is repeated without work while nothing it depends on changed:
        # see _still_quiet
        self._quiet: tuple[int, int, bytes, bytes, int] | None = None
        # the ledger's room as read at an allocation version (free GPUs; its bytes and arrays viewing them, made
        # when first needed): the same while the version stays (see ClusterView.allocation_version)
        self._room_version = -1
        self._room_gpus = 0.0
        self._room_copy: tuple[bytes, bytes, tuple[np.ndarray, np.ndarray] | None] | None = None
        self._changed = True  # a job arrived, ended, started, stopped or changed queue since the last round
        self._eligible: list[tuple[float, str]] = []  # heap: (when a running job may first be preempted, job)
        self._decided_at = -math.inf  # time of the last decision
        # the last round planned nothing and no job arrived or ended since: a round now would plan nothing
        # until an arrival, an end or a wake-up (see wants_turn)
        self._settled = False
        self._unverified = False
        self.lazy_turns = bool(lazy_turns)
        self._deferred: list[tuple[float, int, str, int]] = []
        self._deferred_el: list[tuple[float, str]] = []
        self._deferred_top = 0
        self._later = math.inf

    def bind_oracle(self, oracle: Oracle) -> None:
        self._oracle = oracle

    def wants_turn(self, events: Sequence[BackendEvent]) -> bool:
        """A round after events the backend alone brought (no arrival or wake-up due): needed unless the last round
        planned nothing and only progress reports came since. A round reads no telemetry (attained service is GPUs
        x run time), so it would find what the last one found (the victims a round paused wait for the next round:
        after a plan, the next turn is always taken); a job's end or eviction is a change."""
        if not self.lazy_turns:
            return True
        for ev in events:
            if ev.kind is not _PROGRESS:
                return True
        return not self._quiet_now()

    # ------------------------------------------------------------- hooks
    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        rec = Rec(job, view.now)
        g = view.gpu_col
        per = float(view.demand_vector(job)[g]) if g is not None else 0.0
        rec.per_gpu = per
        n = view.target_workers(job)
        ps = view.ps_demand_vector(job)
        rec.gpus = per * n + (float(ps[g]) * job.spec.num_ps if ps is not None and g is not None else 0.0)
        if rec.gpus > 0:
            rec.rate = rec.gpus
        else:  # CPU-only: attained service is CPU-seconds
            cpu = view.resource_index("cpu")
            rec.rate = max(float(view.demand_vector(job)[cpu]) * n if cpu is not None else 0.0, 1e-9) or 1.0
        ps_bytes = ps.tobytes() if ps is not None else b""
        rec.shape = (view.demand_vector(job).tobytes() + ps_bytes, n, self.needs_consolidation(job))
        self._recs[job.id] = rec
        self._wait[0][job.id] = rec
        self._changed = True
        self._settled = False
        self._order_add(rec)
        if self.gittins:
            self._stale[job.id] = rec

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._changed = True
        self._settled = False
        rec = self._recs.pop(job.id, None)
        if rec is not None:
            if rec.running:
                del self._run[rec.q][job.id]
                self._run_gpus[rec.q] -= rec.gpus
            else:
                del self._wait[rec.q][job.id]
                self._order_remove(rec)
            self._stale.pop(job.id, None)
        self._consolidate.pop(job.id, None)

    def distribution(self, view: ClusterView) -> SizeDistribution:
        """The job-size distribution the Gittins index uses now (history, prior, or oracle)."""
        if self._oracle is not None:
            key = ("oracle", len(view.jobs))
            if self._dist_key != key:
                sizes = []
                for j in view.jobs.values():
                    dur = self._oracle.duration(j.id)
                    if dur is not None:
                        sizes.append(dur * float(j.spec.num_gpus))
                self._dist = SizeDistribution(sizes or [self.prior_median])
        else:
            n = len(view.history)
            if n == self._dist_n:  # (the key below depends on n and the last key only: the same one)
                assert self._dist is not None
                return self._dist
            self._dist_n = n
            key = ("history", n) if n >= self.min_history else ("prior", 0)
            old = self._dist_key
            if old is not None and old[0] == "history" and key[0] == "history" and n < old[1] * REFRESH_GROWTH:
                key = old  # refit once the history has grown by 5 %: every index is recomputed then
            if self._dist_key != key:
                if key[0] == "history":
                    self._dist = SizeDistribution(view.history.attained_services())
                else:
                    if self._prior is None:
                        self._prior = lognormal_prior(self.prior_median, self.prior_sigma)
                    self._dist = SizeDistribution(self._prior)
        if self._dist_key != key:
            self._dist_key = key
            self._dist_version += 1
        assert self._dist is not None
        return self._dist

    def _waiting_order(self, view: ClusterView) -> list[tuple[bool, list[Rec]]]:
        """Waiting jobs by priority: queue, then (Gittins: highest index first) FIFO by queue entry, as
        sorted lists (one per queue and shape, all droppable: see :mod:`.tiresias_order`) that
        :class:`Walk` merges.

        The order is kept across rounds (a job is inserted and removed where its state changes); with
        Gittins, only the jobs whose index may have changed are re-keyed, and all of them when the
        size distribution is refitted. Merged, the same order as sorting every waiting job each round."""
        if self.gittins:
            dist = self.distribution(view)
            version = self._dist_version
            memo = self._g_memo  # attained service -> index under this distribution (new and promoted jobs: 0)
            everyone = version != self._order_version
            if everyone:  # refitted: every waiting job's index changes
                self._order_version = version
                memo.clear()
                stale = list(self._order)
            else:
                stale = [r for r in self._stale.values() if not r.running and r.g_version != version]
            self._stale.clear()
            if stale and everyone:  # (every job re-keyed within its queue: each list sorted once)
                now = view.now
                a = [self.service(r.job, now) for r in stale]
                new = list(set(a))
                memo.update(zip(new, dist.indices(new, self.gittins_delta)))
                for r, gi in zip(stale, [memo[x] for x in a]):
                    r.g_index, r.g_version = gi, version
                    r.key = (r.q, -gi, r.entered, r.job.seq)
                self._order.resort()
            elif stale:
                now = view.now
                a = [self.service(r.job, now) for r in stale]
                new = [x for x in set(a) if x not in memo]
                if new:  # (each index depends on its own service only: computed alone or in a batch, the same)
                    memo.update(zip(new, dist.indices(new, self.gittins_delta)))
                for r, gi in zip(stale, [memo[x] for x in a]):
                    r.g_index, r.g_version = gi, version
                    key = (r.q, -gi, r.entered, r.job.seq)
                    if key != r.key:  # (a job re-checked while it waits keeps its service, so often its key)
                        self._order_remove(r)
                        r.key = key
                        self._order_add(r)
        return self._order.walkable()

    # ----------------------------------------------------------- placement
    def gpus_of(self, job: JobView, view: ClusterView) -> float:
        rec = self._recs.get(job.id)
        if rec is not None:
            return rec.gpus
        g = view.gpu_col
        return float(view.demand_vector(job)[g]) * view.target_workers(job) if g is not None else 0.0

    def needs_consolidation(self, job: JobView) -> bool:
        """Paper §3.3: consolidate only models with a skewed tensor-size distribution."""
        hit = self._consolidate.get(job.id)
        if hit is None:
            model = job.spec.model
            profile = (id(self.skew_table), self.skew_threshold, self.consolidate_unknown)
            if profile != self._by_model_for:  # (a profile changed after construction: start the memo afresh)
                self._by_model, self._by_model_for = {}, profile
            hit = self._by_model.get(model)
            if hit is None:  # (once per model: the table's prefix scan costs ~10 us a job)
                skew = tensor_skew(model, self.skew_table)
                hit = self._by_model[model] = self.consolidate_unknown if skew is None else skew >= self.skew_threshold
            self._consolidate[job.id] = hit
        return hit

    def min_nodes(self, view: ClusterView, w: np.ndarray, n: int) -> int:
        """Fewest nodes that can hold ``n`` tasks of ``w`` on the empty cluster."""
        key = (id(w), n)
        hit = self._min_nodes.get(key)
        if hit is None:
            empty = np.where(view.device_free >= 0, 1.0, -1.0)
            per = np.sort(fit_counts(view.capacity, empty, w, view.gpu_col))[::-1]
            hit = int(np.searchsorted(np.cumsum(per), n)) + 1
            self._min_nodes[key] = hit
        return hit

    def place(self, draft: Draft, job: JobView) -> Placement | None:
        """Reserve a placement: consolidated-first; skewed models only on the fewest nodes."""
        view = draft.view
        n = view.target_workers(job)
        p = consolidated_first(draft, job, n)
        if p is None:
            return None
        if n > 1 and self.needs_consolidation(job):
            if len(set(p[:n])) > self.min_nodes(view, view.demand_vector(job), n):
                return None  # would spread a skewed model: wait for a consolidated slot
        return p if draft.reserve(job, p) else None

    def _spreads(self, rec: Rec, view: ClusterView, node_gpus: list[float] | None) -> bool:
        """True if consolidated ``rec`` (paper §3.3: its workers on the fewest nodes that can hold them) certainly
        cannot be placed so on the free GPUs ``node_gpus`` (per node, most first): a node takes at most
        ``floor(free GPUs / GPUs per worker)`` workers (fewer if its devices are split or another resource is
        short), :meth:`place` fills the nodes that take most first (``consolidated_first``) and refuses a
        placement past :meth:`min_nodes` of them. A necessary condition, with 1e-6 of slack: :meth:`place` would
        fail. (On the contended Philly run nearly every failed placement was such a job: 21.5k of 36.5k.)"""
        assert node_gpus is not None
        per, n = rec.per_gpu, rec.shape[1]
        if per <= 0.0:
            return False
        got = 0
        for free in node_gpus[: self.min_nodes(view, view.demand_vector(rec.job), n)]:
            k = math.floor((free + 1e-6) / per)
            if k <= 0:
                break  # (most first: the rest take none either)
            got += k
            if got >= n:
                return False
        return True

    # -------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Plan:
        since, self._decided_at = self._decided_at, view.now
        self._catch_up(view, since)
        if not any(self._wait):
            self._quiet = None
            self._settled = True
            return []
        now = view.now
        if self._still_quiet(view):
            self._settled = True
            return []
        failed = self._carried_failures(view)  # shapes with no free room left this round
        top = len(self.thresholds)
        g = view.gpu_col
        lists = self._waiting_order(view)
        min_need = min(self._wait_sizes)
        free_gpus = self._free_gpus(view)  # (the draft is still the ledger)
        lower = lower_gpus(len(self.thresholds) + 1, self._run_gpus)  # lower[q]: GPUs held by running jobs of queues below q
        if self._nothing_starts(view, lists, failed, free_gpus, min_need, lower):
            return self._planned_nothing(view, failed)
        draft = Draft(view, sums=False)  # (this round reads no column sums: see place)
        plan: Plan = []
        hopeless: set[tuple[tuple[bytes, int, bool], int]] = set()  # (shape, queue): preemption failed
        victims: list[Rec] | None = None
        order = Walk(lists)
        node_gpus: list[float] | None = None
        for rec in order:
            if free_gpus + 1e-9 < min_need and lower[rec.q] <= 1e-9:
                break  # no room and nobody left to preempt for this queue or any later one
            job = rec.job
            p = None
            if rec.shape not in failed and free_gpus + 1e-9 >= rec.gpus:
                if draft.failed_before(("tiresias", rec.shape)):  # on the same free capacity as now
                    failed.add(rec.shape)
                else:
                    spreads = rec.shape[2] and rec.shape[1] > 1 and g is not None  # a consolidated job: see _spreads
                    if spreads and node_gpus is None:  # each node's free GPUs, most first (after the last change)
                        node_gpus = most_first(draft.free_now[:, g])
                    p = None if spreads and self._spreads(rec, view, node_gpus) else self.place(draft, job)
                    if p is None:
                        failed.add(rec.shape)
                        draft.note_failure(("tiresias", rec.shape))
            if p is None and lower[rec.q] > 1e-9 and (rec.shape, rec.q) not in hopeless:
                if victims is None:
                    victims = [v for q in range(top, 0, -1) for v in reversed(self._run[q].values())
                               if now - v.last_start >= self.min_run_time - TIME_EPS]
                got = preempt_for(rec, draft, victims, self.place, self.min_nodes)
                if got is None:
                    hopeless.add((rec.shape, rec.q))
                else:
                    p, paused = got
                    for v in paused:
                        plan.append(Pause(v.job.id, reason=f"tiresias: {job.id} is in a higher-priority queue"))
                        self._set_running(v, now, False)
                        order.hide(v)  # it waits from now on, but not in this round
                        self._last_plan.append((False, v.job.id))
                    for v in paused:  # (by identity, at C speed: a victim is in the list once)
                        victims.remove(v)
                    lower = lower_gpus(len(self.thresholds) + 1, self._run_gpus, victims)
                    free_gpus = (float(draft.free_now[:, g].sum()) + rec.gpus) if g is not None else math.inf
                    node_gpus = None
                    failed.clear()  # the victims' leftover room may fit shapes that failed before
                    hopeless.clear()
                    order.unpark(rec.key)
            if p is None:
                # it could not be placed (its shape is in `failed`, or too few GPUs are free) nor preempt (no
                # GPUs below its queue, or (shape, queue) is in `hopeless`): the rest of its (queue, shape)
                # list fails alike until a preemption succeeds (room, failures and victims stay as they are)
                order.park()
                continue
            plan.append(Resume(job.id, p) if job.state is JobState.PAUSED else Start(job.id, p))
            self._set_running(rec, now, True)
            order.taken()  # (it left its list)
            self._last_plan.append((True, job.id))
            free_gpus -= rec.gpus
            node_gpus = None
        if not plan:
            return self._planned_nothing(view, failed)
        self._nofit = failed
        self._changed = False
        self._nofit_room = draft.save() if failed else None  # the room after this plan
        self._nofit_version = None
        self._quiet = None
        # a plan that only starts jobs leaves a round with nothing to do: each job it could not place failed on
        # more room than is left, and with no victim paused (they wait for the next round) and none started
        # eligible yet (min_run_time > 0) the victims are the same; _quiet_now checks that every start took effect
        self._settled = self.min_run_time > TIME_EPS and not any(started is False for started, _ in self._last_plan)
        self._unverified = True
        return plan


def make(oracle: bool = False, **params: object) -> Tiresias:
    return build(Tiresias, params, policy="tiresias")


def make_gittins(oracle: bool = False, **params: object) -> Tiresias:
    return build(Tiresias, params, policy="tiresias-gittins", fixed={"gittins": True, "use_oracle": oracle})
