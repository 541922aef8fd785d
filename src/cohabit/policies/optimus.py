"""Optimus: greedy marginal-gain allocation on online loss and speed models (Peng et al., EuroSys'18).

What the paper does, and how it maps here:

* **Convergence model (§3.1, Eq. 1).** Each job's training loss is fitted online as
  ``l(k) = 1/(beta0 k + beta1) + beta2`` (NNLS, :mod:`cohabit.models.loss_curve`) from the
  loss the job reports every ``report_interval`` seconds; the fit predicts the iterations
  left until convergence, ``Q_j`` (convergence: reducible loss down to ``tolerance`` of
  its value at the first report). A job that declared an iteration count stops there at
  the latest, so ``Q_j`` is capped by it. Optimus *estimates* the number of epochs — the
  paper assumes no known length — so there is no oracle switch.
* **Resource-speed model (§3.2, Eq. 3-4).** ``f_j(p, w)`` is fitted by NNLS from the
  speeds the job measured at the configurations it ran with (:mod:`cohabit.models.speed`).
  The engine fixes a job's parameter-server count in its spec (``Resize`` changes workers
  only), so Optimus here allocates workers; ``p`` enters the model as the job's constant.
* **Allocation (§4.1).** Every job first gets its minimum (``n_min`` workers plus its
  parameter servers) — running jobs keep at least that, waiting jobs are admitted in
  arrival order while the cluster's aggregate free capacity holds their minimum (the paper
  assumes room for every job's minimum; when there is none, jobs queue in arrival order,
  later ones back-filling). Then, repeatedly, the next worker goes to the job with the
  largest marginal gain ``(T_j(w) - T_j(w+1)) / d_j``, where ``T_j(w) = Q_j / f_j(p, w)``
  is the estimated remaining time and ``d_j`` the worker's dominant share of the cluster,
  until resources run out or no gain is positive. Rigid jobs (``n_min == n_max``) keep
  their size. With ``1/f_j(w) = A/w + B + C w`` (the model at the job's ``p``) the gain is
  ``Q_j (A / (w (w+1)) - C)``, non-increasing in ``w``, so the one-worker-at-a-time loop
  hands out workers in globally sorted order of gain: :func:`greedy_by_value` sorts once
  instead of popping a heap per worker (same result, vectorised).
* **Resize cost (our addition).** Changing a running job's size costs a checkpoint-restore
  (Dorm-style ``Resize``), which the paper does not model: a running job grows only if the
  estimated time it saves, ``T_j(cur) - T_j(new)``, exceeds ``restart_cost``. Shrinks that
  make room for others always happen.
* **Placement (§4.2, Theorem 1).** A job's ``w`` workers and ``p`` parameter servers go on
  the fewest servers ``k`` that can each hold an even share (``ceil(w/k)`` workers,
  ``ceil(p/k)`` PS) (:func:`balanced_placement`). The theorem fixes ``k``, not which
  servers; among those that can hold the share we take the ones with the least room left
  (best fit), which keeps whole servers free for large jobs.

Start-up rule (the models need observations). A new job starts at once if its minimum
fits, sized by the same greedy over the room that is free, using the perfect-scaling
prior of the speed model (speed proportional to ``w``, scaled from the model's
finished-job iteration time, else 1 iteration/s). Its first report — after one
iteration — is the first measured speed; loss reports every ``report_interval`` seconds
feed the loss fit, which needs 4 reports. Until then ``Q_j`` is the declared iterations
left, else the mean iterations of finished jobs of the same model (any model if none),
else as many iterations as it has done (it is expected to run as long again).

Rounds. The full re-allocation (which may shrink and grow running jobs) runs every
``interval`` seconds (``tick_interval``); between rounds, arrivals and departures only
start waiting jobs in free room (no running job is touched).

Quiet rounds (issue 18, ninth session). A full round with only rigid running jobs (``n_min == n_max``)
and nobody to admit (no job waiting, or the room left below every job's first worker) keeps every size:
each running job's base is what it holds and has no room to grow. It is skipped (:meth:`Optimus._quiet`) (:meth:`JobModels.rigid_hold` reads the running jobs'
constants from the per-job table in one numpy pass); the loss points that arrived meanwhile are folded
in when a later round reads the job, with the fits and rates they would have given
(:meth:`~cohabit.models.loss_fits.LossFits.follow`). ``skip_quiet = False`` runs every round
(``tests/test_policy_quiet_rounds.py`` compares both).

Reports come every ``report_interval`` seconds, by default as often as the re-allocation
(300 s): the loss fit refits only once its points grew by 10% and thins them to 64, the speed
model gets the same point at an unchanged size, and decisions read both once per round, so
60-s reports (the default before issue 18) cost a simulator event each and changed no job's
start or end (``tiresias_480``; the first 500 jobs of Philly on ``philly-512``), only the
count of reports and of the decisions they trigger.

Shared with the SLAQ and Themis policies: the per-job models (:class:`JobModels`) and
their per-round arrays (:class:`Snapshot`); the sorted greedy and the step from target worker
counts to a plan live in :mod:`.targets` (:func:`~.targets.greedy_by_value`,
:func:`~.targets.apply_targets`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np

from ..engine.actions import Plan, Resume, Start
from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from .base import BasePolicy
from .job_models import JobModels, speed_mode  # noqa: F401  (speed_mode: re-exported, it lived here)
from .job_table import Snapshot
from .params import build
from .targets import (EPS, any_waiting, apply_targets, balanced_placement, balanced_start, below_floor, changed_rows,
                      greedy_by_value, room_for_none)
from .tetris_room import reserve_fits



# ----------------------------------------------------------------------------- validation
def check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    ok = value >= 0 if allow_zero else value > 0
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not ok or not math.isfinite(value):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


# ----------------------------------------------------------------------------- the policy
class ObservingPolicy(BasePolicy):
    """Hooks shared by the learning-curve policies (Optimus, SLAQ, Themis): refit a job's
    models on each report, forget them when it ends, and mark arrivals/finishes as events
    that trigger a re-plan. Subclasses set ``self.models`` and ``self._event``. ``skip_quiet``:
    skip the rounds whose plan is provably empty (each policy's docstring says which; False runs them)."""

    models: JobModels
    _event: bool
    skip_quiet = True
    # (now, allocation version, waiting, answer) of the quiet check ``wants_reports`` made for the coming decide
    _quiet_at: tuple[float, int, bool, bool] | None = None

    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        self._event = True

    def on_progress(self, job: JobView, view: ClusterView) -> None:
        self.models.observe(job)

    def on_reports(self, jobs: Sequence[JobView], view: ClusterView) -> None:
        """A batch of periodic reports (the simulator's report grid): :meth:`on_progress` of each."""
        self.models.observe_many(jobs)

    def wants_reports(self, view: ClusterView) -> bool | Collection[str]:
        """Which running jobs' reported telemetry the coming :meth:`decide` may read (True: any): the
        engine folds the simulator's periodic reports of those jobs in only then
        (``Scheduler._fold_reports``); they add loss points at the speed and placement of the segment's
        first-iteration report, which :meth:`on_progress` saw, so no hook is missed. A full round reads
        every running job; a round after an arrival or finish only the waiting ones. More than is read
        is only slower; fewer would read stale telemetry (``tests/test_sim_lazy_reports.py`` runs every
        such policy folding every report as it comes too and compares everything).

        A due full round that is quiet (:meth:`_skips`: it provably keeps every size and reads no running
        job's telemetry) wants none: the reports wait, and a later round or the job's end folds them in one
        batch, the same numbers in the same order (issue 18, tenth session). The answer is kept for
        :meth:`decide` (:meth:`_full_round_skipped`)."""
        now = view.now
        if now < self._next_full:  # type: ignore[attr-defined]
            return False
        waiting = any_waiting(view)
        if not (waiting or view.running) or not self.skip_quiet:
            return True
        quiet = self._skips(view, waiting)
        self._quiet_at = (now, view.allocation_version, waiting, quiet)
        return not quiet

    def _skips(self, view: ClusterView, waiting: bool) -> bool:
        """Whether the full round due now is skipped as quiet (each policy's rule; it reads no running job's
        reported telemetry, only the per-job table and the view's sets and capacities)."""
        return False

    def _full_round_skipped(self, view: ClusterView, waiting: bool) -> bool:
        """:meth:`_skips` for the full round :meth:`decide` is running now: the answer :meth:`wants_reports`
        found a moment ago at this time and allocation (only reports were folded since), else found now."""
        memo = self._quiet_at
        self._quiet_at = None
        if not self.skip_quiet:
            return False
        if memo is not None and memo[0] == view.now and memo[1] == view.allocation_version and memo[2] == waiting:
            return memo[3]
        return self._skips(view, waiting)

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self.models.forget(job)
        self._event = True


class Optimus(ObservingPolicy):
    """See the module docstring. All durations are seconds."""

    def __init__(self, interval: float = 300.0, report_interval: float = 300.0, tolerance: float = 0.05,
                 restart_cost: float = 30.0) -> None:
        self.tick_interval = check_positive("interval", interval)
        self.report_interval = check_positive("report_interval", report_interval)
        self.restart_cost = check_positive("restart_cost", restart_cost, allow_zero=True)
        self.models = JobModels(tolerance)
        self.name = "optimus"
        self._next_full = 0.0
        self._event = False
        # (view, allocation version, what the running jobs hold, all rigid): JobModels.rigid_hold, kept while
        # the allocation stays (_quiet at every due full round, then _rigid_round)
        self._held_at: tuple[ClusterView, int, np.ndarray] | None = None
        # (now, allocation version, _rigid_admission's answer) found by wants_reports for the coming round
        self._admitted_at: tuple[float, int, tuple[list[JobView], np.ndarray] | None] | None = None
        # (view, allocation version, task floor margin, waiting, answer): _quiet's last answer, kept while they stay
        self._quiet_memo: tuple[ClusterView, int, tuple[float, ...], bool, bool] | None = None

    # decision
    def decide(self, view: ClusterView) -> Plan:
        now = view.now
        waiting = any_waiting(view)  # decide runs after every report: no per-job work unless a round is due
        if now >= self._next_full and (waiting or view.running):
            self._next_full = now + self.tick_interval
            self._event = False
            if self._full_round_skipped(view, waiting):
                return []  # every running job rigid and nobody to admit: the round keeps every size (see below)
            return self._round(view, full=True)
        if self._event and waiting:
            self._event = False
            if room_for_none(view):  # the round below would admit nobody: the same empty plan
                return []
            return self._round(view, full=False)
        self._event = False
        return []

    def _skips(self, view: ClusterView, waiting: bool) -> bool:
        return self._quiet(view, waiting)

    def wants_reports(self, view: ClusterView) -> bool | Collection[str]:
        """:meth:`ObservingPolicy.wants_reports`, and none for a due full round that :meth:`_rigid_round` plans
        (every running job and every job admitted rigid): it reads no running job's telemetry. The reports wait
        and are folded in one batch by a later round that reads the job, or at its end (the same additions in
        the same order). The admission is kept for that round (:meth:`_rigid_round`)."""
        if view.now < self._next_full:
            return False  # (no round due: ObservingPolicy's answer, without the call)
        want = super().wants_reports(view)
        memo = self._quiet_at
        if want is True and memo is not None and memo[0] == view.now and not memo[3] and memo[2]:
            adm = self._rigid_admission(view, full=True)
            self._admitted_at = (view.now, view.allocation_version, adm)
            if adm is not None and all(j.spec.min_workers == j.spec.max_workers for j in adm[0]):
                return False
        return want

    def _held(self, view: ClusterView) -> np.ndarray | None:
        """:meth:`JobModels.rigid_hold` of the running jobs, kept while the allocation stays (issue 18, sixteenth
        session: across instants too). While :attr:`ClusterView.allocation_version` stays, the running set
        stays, and so do their slots in the per-job table and the table's constants there (a slot is dropped
        only when its job ends, which releases it): the same rows summed in the same order, the same floats.
        Only an answer (not None) is kept: a running job without a slot may get one from a round's rows
        without any allocation changing."""
        memo = self._held_at
        version = view.allocation_version
        if memo is not None and memo[0] is view and memo[1] == version:
            return memo[2]
        held = self.models.rigid_hold(view)
        if held is not None:
            held.flags.writeable = False  # (callers subtract it from their own arrays; kept, so never written)
            self._held_at = (view, version, held)
        return held

    def _quiet(self, view: ClusterView, waiting: bool) -> bool:
        """Whether a full round provably keeps every size: every running job is rigid (its base is what it
        holds and it has no room to grow) and nobody can be admitted, because nobody waits or because the
        room left after the running jobs' minimums, computed as the round computes it (the same sum in the
        same order: :meth:`JobModels.rigid_hold`), is below every admitted job's first worker
        (:meth:`JobModels.admit_waiting`'s test).

        The answer is kept while its inputs stay (issue 18, nineteenth session: most due full rounds find the
        allocation as the last one left it): the holdings while :attr:`ClusterView.allocation_version` stays
        (:meth:`_held`), the capacity (fixed), whether a job waits, and the task floor, whose
        :attr:`ClusterView.task_floor_margin` is a new tuple whenever the floor moves (kept here, so compared
        by identity). A None holdings answer is not kept (a slot may appear without an allocation change)."""
        version, floor = view.allocation_version, view.task_floor_margin
        memo = self._quiet_memo
        if memo is not None and memo[0] is view and memo[1] == version and memo[2] is floor and memo[3] == waiting:
            return memo[4]
        held = self._held(view)
        if held is None:
            return False
        if not waiting:
            quiet = True
        else:
            free = view.capacity.sum(axis=0)
            free -= held
            quiet = below_floor(free, view.task_floor)
        self._quiet_memo = (view, version, floor, waiting, quiet)
        return quiet

    def targets(self, view: ClusterView, waiting: Sequence[JobView] | None = None, *, full: bool) -> dict[str, int]:
        """Worker counts after Optimus's minimum-then-greedy allocation (§4.1).

        Full round: running jobs keep their minimum (rigid ones their size), waiting jobs are
        admitted at theirs in arrival order, then every elastic job grows by marginal gain.
        Event round: running jobs are left alone; waiting jobs are admitted into free room
        and sized by the same greedy. Waiting jobs not admitted (:meth:`JobModels.admit_waiting`:
        :func:`admit_in_order` over their minimums from the per-job table) are left out (not started)
        without a snapshot row; those past :func:`admission_window` are not looked at. ``waiting``: the queue in order (None: the view's, paused then pending, read by job id
        without a Python step per job). The targets are in order: running jobs, then the waiting ones in
        queue order."""
        snap, n = self._allocate(view, waiting, full=full)
        return dict(zip(snap.ids, n.tolist()))

    def _allocate(self, view: ClusterView, waiting: Sequence[JobView] | None, *, full: bool,
                  admission: tuple[list[JobView], np.ndarray] | None = None) -> tuple[Snapshot, np.ndarray]:
        """:meth:`targets` as the round's snapshot (its rows: the running jobs, then the waiting ones in
        queue order) and each row's target. ``admission``: :meth:`JobModels.admit_waiting`'s answer for this
        round, if :meth:`_rigid_round` found it already (from the same room left)."""
        running = list(view.running.values()) if full else []
        run = self.models.snapshot(view, running)
        n_run = len(running)
        rigid = run.n_min == run.n_max
        base_run = np.where(rigid, run.cur, run.n_min)
        free = run.total.copy() if full else view.free_total.copy()
        free -= run.bundle(base_run).sum(axis=0)
        # the waiting jobs admitted at their minimum, in queue order (rows only for them: the others get 0)
        admitted_jobs, free = admission or self.models.admit_waiting(view, waiting, free)
        snap = run.extend(self.models.snapshot(view, admitted_jobs)) if admitted_jobs else run
        base = snap.n_min.copy()
        base[:n_run] = base_run
        admitted = np.ones(len(snap), dtype=bool)
        counts = self.growth(snap, base, admitted, free)
        n = np.where(admitted, base + counts, 0)
        if not n_run:
            return snap, n  # (no running row: nobody's growth is weighed against a restart below)
        # a running job grows only if that saves more than the restart it costs
        with np.errstate(invalid="ignore"):
            saving = snap.remaining * (snap.inv_speed(snap.cur) - snap.inv_speed(n))
        stay = (snap.state == 1) & (n > snap.cur) & ~(saving >= self.restart_cost)
        return snap, np.where(stay, snap.cur, n)

    def growth(self, snap: Snapshot, base: np.ndarray, admitted: np.ndarray, free: np.ndarray) -> np.ndarray:
        """Workers added beyond ``base`` by the marginal-gain greedy.

        The gain of worker ``w -> w + 1`` is ``T(w) - T(w+1) = Q (A / (w (w+1)) - C)`` seconds
        (with ``T(w) = Q (A/w + B + C w)``), per dominant share of one worker. When no row may grow beyond its
        base (every job at its largest size, e.g. only rigid jobs), nothing is added, without the fits."""
        grow = snap.n_max - base
        if not len(grow) or grow.max() <= 0:
            return np.zeros(len(snap), dtype=np.int64)
        room = np.minimum(grow, snap.fits_units(free))
        room = np.where(admitted, np.maximum(room, 0), 0)
        width = int(room.max()) if len(room) else 0
        if width <= 0:
            return np.zeros(len(snap), dtype=np.int64)
        w = base[:, None] + np.arange(width)[None, :]
        gain = snap.remaining[:, None] * (snap.a[:, None] / (w * (w + 1.0)) - snap.c[:, None])
        d = np.maximum(snap.share(snap.worker), 1e-12)
        values = np.where(np.arange(width)[None, :] < room[:, None], gain / d[:, None], -np.inf)
        counts, _ = greedy_by_value(values, snap.worker, snap.worker, free)
        return counts

    def _rigid_round(self, view: ClusterView, *, full: bool) -> Plan | tuple[list[JobView], np.ndarray] | None:
        """A round in which every running job is rigid (or, in an event round, not looked at) and every job
        admitted is rigid: each running job keeps its size (its base is what it holds, and it cannot grow)
        and each admitted job starts at its minimum (it cannot grow either), so the plan is
        :func:`apply_targets` of the admitted jobs at ``n_min``, without the round's snapshot, fits or
        greedy. The room the admission reads is the round's: the capacity less the running jobs' holdings
        summed as the round sums them (:meth:`JobModels.rigid_hold`, as :meth:`_quiet`), or in an event round
        the free room. A rigid job's loss fit and speed model are read by no decision (they only size jobs
        that can grow and weigh their restarts), so leaving them unread changes no plan. Returns the plan;
        or the admission, when a job admitted is elastic (the round goes on from it); or None when a
        running job is elastic (or not in the per-job table)."""
        memo = self._admitted_at
        self._admitted_at = None
        if full and memo is not None and memo[0] == view.now and memo[1] == view.allocation_version:
            adm = memo[2]  # (found by wants_reports a moment ago: only reports were folded since)
        else:
            adm = self._rigid_admission(view, full=full)
        if adm is None:
            return None
        admitted, left = adm
        for job in admitted:
            if job.spec.min_workers != job.spec.max_workers:
                return admitted, left
        if not admitted:
            return []
        if len(admitted) == 1 and not admitted[0].spec.num_ps:  # (most rounds: no draft, see balanced_start)
            return lone_start(view, admitted[0])
        return apply_targets(view, {job.id: job.spec.min_workers for job in admitted}, admitted, balanced_placement,
                             reason="optimus: re-allocation", shrink=())

    def _rigid_admission(self, view: ClusterView, *, full: bool) -> tuple[list[JobView], np.ndarray] | None:
        """:meth:`JobModels.admit_waiting` from the room a round of rigid running jobs reads (see
        :meth:`_rigid_round`); None when a running job is elastic (or not in the per-job table)."""
        if full:
            free = view.capacity.sum(axis=0)
            if view.running:
                held = self._held(view)
                if held is None:
                    return None
                free -= held
        else:
            free = view.free_total.copy()  # (free.sum(axis=0), kept by the ledger while the room stays)
        return self.models.admit_waiting(view, None, free)

    def _round(self, view: ClusterView, *, full: bool) -> Plan:
        quick = self._rigid_round(view, full=full)
        if isinstance(quick, list):
            return quick
        snap, n = self._allocate(view, None, full=full, admission=quick)
        ids, jobs = snap.ids, view.jobs
        # the running jobs set lower, then those set higher and the waiting ones with a target (rows: running
        # jobs in running order, then the queue in order), the only ones the plan acts on
        shrink, grow = changed_rows(snap.state, snap.cur, n)
        return apply_targets(view, dict(zip(ids, n.tolist())), [jobs[ids[i]] for i in grow.tolist()],
                             balanced_placement, reason="optimus: re-allocation",
                             shrink=[jobs[ids[i]] for i in shrink.tolist()])


def lone_start(view: ClusterView, job: JobView) -> Plan:
    """:func:`~.targets.balanced_start` of one waiting job without parameter servers at ``n_min`` workers, its
    one-node spread found by one numpy pass (issue 18, nineteenth session; most Optimus rounds start one
    1-GPU job). ``balanced_start`` tries ``k = 1`` first when one node fits all ``n`` workers: among the nodes
    that fit ``n`` tasks (``fit_now``) and whose free row is at least ``need - EPS``, the one fitting fewest,
    the first on ties, then its reservation test. Here the node fitting fewest among those that fit ``n``
    (``argmin``, the first on ties) is found first; when its free row passes, it is that choice (every
    candidate fits ``n``, and a candidate fitting as few with a lower index would have been the ``argmin``),
    and when its reservation holds, the plan is the same ``Start``. Any other case (no node fits ``n``, the
    row test or the reservation fails) is ``balanced_start`` itself, which finds the same node again and goes on.

    The reservation test (:func:`~.tetris_room.reserve_fits`) is skipped where it provably holds: the demand
    row and the node's free row hold integers (``0 <= x < 2**30`` and ``2**40``) and ``n < 1024``. Then the
    row test ``f >= n d - EPS`` means ``f >= n d``, so taking ``d`` from ``f`` ``n`` times in turn is exact
    and never below 0 (``less_times``); and the node fits ``n`` tasks (``fit_now``), so for a GPU share
    ``g >= 1`` it has at least ``n g`` devices at ``>= 1 - EPS`` (``fit_counts``' count, the threshold
    ``take_many`` reads), and ``g = 0`` takes none: the reservation holds."""
    n = job.spec.min_workers
    w = view.demand_vector(job)
    wfit = view.fit_now(w)
    node = int(np.where(wfit >= n, wfit, _NO_FIT).argmin())
    if wfit[node] >= n:
        floor, whole = _need_floor(w, n)
        row = view.free[node].tolist()
        if all(x >= y for x, y in zip(row, floor)):
            placement = (node,) * n  # (_spread(n, [node]))
            if (whole and all(x.is_integer() and 0.0 <= x < _ROW_BOUND for x in row)) or \
                    reserve_fits(view, w, placement):
                return [Resume(job.id, placement) if job.state is JobState.PAUSED else Start(job.id, placement)]
    return balanced_start(view, job, n)


_NO_FIT = np.iinfo(np.int64).max  # (above any fit: fit_counts caps an unbounded fit at max // 4)
_ROW_BOUND = 2.0 ** 40  # (a free row of integers below this, less n < 1024 tasks of integers below 2**30: exact)
#: (id of a view's read-only demand row, n) -> (the row, ``(row * n - EPS).tolist()``, whether the reservation
#: test may be skipped on a free row of integers), what :func:`lone_start` reads
_FLOORS: dict[tuple[int, int], tuple[np.ndarray, list[float], bool]] = {}


def _need_floor(w: np.ndarray, n: int) -> tuple[list[float], bool]:
    """``(w * n - EPS).tolist()`` (``_balanced``'s ``need - EPS`` for ``k = 1``, ``a = n``, no parameter
    servers) and whether ``w`` holds integers ``0 <= x < 2**30`` and ``n < 1024`` (:func:`lone_start`), kept per
    read-only demand row of the view (kept alive here, so its id stays its own)."""
    key = (id(w), n)
    hit = _FLOORS.get(key)
    if hit is not None and hit[0] is w:
        return hit[1], hit[2]
    floor = (w * n - EPS).tolist()
    whole = n < 1024 and all(x.is_integer() and 0.0 <= x < 2.0 ** 30 for x in w.tolist())
    if not w.flags.writeable:
        if len(_FLOORS) > 4096:
            _FLOORS.clear()
        _FLOORS[key] = (w, floor, whole)
    return floor, whole


def make(oracle: bool = False, **params: object) -> Optimus:
    """Optimus estimates job lengths from the loss curve; ``oracle`` is ignored."""
    return build(Optimus, params, policy="optimus")
