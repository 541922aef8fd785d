"""SRTF: shortest remaining time first, preemptive.

Remaining time is estimated from what a scheduler observes, unless the user
explicitly grants the oracle (``--oracle``):

* observed (default): remaining iterations x measured seconds per iteration,
  when the job declared its iterations; before its first measurement, the
  mean iteration time of finished jobs of the same model. A job that declared
  no length (Philly) is expected to run as long as the mean finished job,
  minus what it has run (so it degrades to least-attained-service ordering
  until history accumulates).
* oracle: remaining = true iterations left x measured iteration time, or the
  trace's duration scaled by the fraction left before the first measurement.

Preemption: a waiting job that does not fit may pause running jobs whose
remaining time exceeds its own by more than the checkpoint/restore margin,
longest first. A job that (re)started less than ``min_run_time`` seconds ago
(default 60: twice cohabit's default checkpoint + restore) is not paused: if it
is one the textbook rule would pause, nothing is paused now and the policy
decides again when its minimum run ends (``next_decision_time``), so the
victims are the textbook ones, at most ``min_run_time`` late. Without it
(``srtf:min_run_time=0``, the textbook rule and the Muri artifact's) a burst of
shorter arrivals pauses a job a second after it resumed. Measured (issue 19,
``bench/preemption_bound.py``, cohabit physics): on the Muri artifact's trace1
avg JCT 1,495,896 s with 0 and 1,495,945 s with 60, preemptions 6,035 and
5,046; on tiresias_480 1,194 s and 1,175 s, preemptions 1,019 and 488.
Jobs are started consolidated-first.

Waiting jobs without a declared length stay ordered across rounds (``srtf_queue.MeanQueue``):
the same order and estimates as re-estimating and sorting them every round, without the work.
The others stay in one sorted list per placement shape; when the history grows only the jobs whose
estimate reads it (no measured iteration time yet, and whose model's mean iteration time moved) are
estimated again. Once a shape's preemption fails in a round, the rest of its jobs are skipped. In a round
where nobody can be paused (the job with the least work left would not pause anyone), the shapes the free
capacity is known not to hold (the ledger's no-room index, or more GPUs than are free) are left out before
the streams are merged, and a job needing more GPUs than are free is not tried (``ROOM_EPS``).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Hashable, Iterator

import numpy as np

from ..engine.actions import Pause, Plan, Resume, Start
from ..engine.job import JobView
from ..engine.oracle import Oracle
from ..engine.state import JobState
from ..engine.view import ClusterView
from .base import BasePolicy
from .srtf_queue import MeanQueue, Streams
from .placement import Draft
from .params import build

def _minus_first(entry: tuple[float, float, JobView]) -> float:
    return -entry[0]


def _bound_inputs(job: JobView, n_history: int) -> tuple[object, ...]:
    """What a running job's estimate reads besides the time (:meth:`SRTF._running_bound`): while these stay the same
    its estimate only falls, so the one made on them bounds it."""
    return n_history, job.report_time, job.iter_time, job.preemptions, job.reported_iterations


#: GPUs: a job whose workers need more GPUs than are free by more than this cannot be placed (the free
#: total summed in another order differs by rounding only; ``Draft.place`` checks with 1e-9)
ROOM_EPS = 1e-6


class SRTF(BasePolicy):
    def __init__(self, use_oracle: bool = False, preempt_margin: float = 60.0, preemptive: bool = True,
                 min_run_time: float = 60.0) -> None:
        if preempt_margin < 0:
            raise ValueError(f"preempt_margin must be >= 0 seconds, got {preempt_margin!r}")
        if not min_run_time >= 0:
            raise ValueError(f"min_run_time must be >= 0 seconds, got {min_run_time!r}")
        self.min_run_time = min_run_time
        self._started: dict[str, float] = {}  # job -> when this policy last started or resumed it
        self._wake: float | None = None  # see next_decision_time
        self.uses_oracle = use_oracle
        self.preempt_margin = preempt_margin
        self.preemptive = preemptive
        self._oracle: Oracle | None = None
        # job id -> (inputs, estimate) of a job that is not running: its estimate changes only when the
        # history grows or the job itself ran again (a new pause), so a round does not recompute it
        self._waiting_rem: dict[str, tuple[tuple[object, ...], float]] = {}
        self._running_rem: dict[str, tuple[tuple[object, ...], float]] = {}  # see _running_bound
        # waiting jobs whose estimate is `mean finished run time - run time` (no declared length, no
        # oracle), kept ordered across rounds, one queue per placement shape (see _shape_key); the
        # others are estimated each round (see _ordered)
        self._mean: dict[Hashable, MeanQueue] = {}
        self._mean_key: dict[str, Hashable] = {}  # job id -> its queue in _mean
        self._other: dict[str, JobView] = {}  # the engine keeps one JobView per job
        # the jobs of _other in (estimate, seq) order, one list per placement shape (see _shape_key), kept
        # across rounds; when the history grows (their estimates' only input that moves while they wait)
        # each one's estimate is looked up again (a cache hit unless its inputs moved) and the lists re-sorted;
        # joined ones are inserted at the next round
        self._other_sorted: dict[Hashable, list[tuple[float, int, str]]] = {}
        self._other_pos: dict[str, tuple[float, int, str]] = {}
        self._other_shape: dict[str, Hashable] = {}
        self._other_new: list[str] = []
        self._other_hist = -1
        # the jobs of _other whose estimate reads the history (no measured iteration time yet), by what they
        # read: their model's mean iteration time (declared length, no oracle; key: the model), or more
        # (key None: re-estimated at every growth); and each model's mean when they were last estimated
        self._dep: dict[Hashable, dict[str, JobView]] = {}
        self._dep_key: dict[str, Hashable] = {}
        self._dep_seen: dict[Hashable, object] = {}
        self._just_paused: list[str] = []  # paused by the last plan: they wait again (see _sync_waiting)
        # placement shape -> (worker demand row, workers) of its jobs (jobs without parameter servers), to
        # look the shape up in the free-capacity index's failures (see _ordered); shapes seen, never dropped
        self._shape_rep: dict[Hashable, tuple[np.ndarray, int, float]] = {}  # ... and the GPUs they need
        self._bound: float | None = None  # _running_bound of this round, once computed
        self._bound_key: tuple[int, int, int] | None = None  # (allocation version, history, reports) of ...
        self._bound_last = math.inf  # ... the last _running_bound computed
        self._reports = 0  # progress reports seen
        self._criteria = False  # a job with a completion criterion arrived
        self._gpu_needs: dict[int, tuple[object, float]] = {}  # id(worker demand row) -> (row, its GPUs)
        self._seen: set[str] = set()  # jobs classified for _running_bound (dropped when they end)
        self._seen_version = -1  # the allocation version when _seen last took in the running jobs
        self._estimated: set[str] = set()  # of those, the ones whose running estimate is computed per job
        self._seen_mark: int | None = None  # the running set's journal position when _seen took it in
        self._joins = 0  # jobs that joined the waiting structures (see _join)
        self._first = math.inf  # the least estimate of a waiting job in the last round (see _ordered)
        # a round after which the next one plans nothing while nothing it reads moves: see _settled_now
        self._settled: tuple[int, int, float, int, tuple[bytes, ...] | None] | None = None
        self.name = "srtf[oracle]" if use_oracle else "srtf"

    def bind_oracle(self, oracle: Oracle) -> None:
        self._oracle = oracle
        self._other_hist = -1
        for held in (self._mean, self._mean_key, self._other, self._seen, self._estimated, self._other_pos,
                     self._other_new, self._other_sorted, self._other_shape, self._dep, self._dep_key,
                     self._dep_seen):
            held.clear()  # sorted without the oracle: sorted again at the next round
        self._seen_version = -1
        self._seen_mark = None
        self._bound_key = None
        self._settled = None

    # -------------------------------------------------------------- estimate
    def remaining(self, job: JobView, view: ClusterView) -> float:
        """Estimated seconds of running left for ``job`` at ``view.now``."""
        now = view.now
        done = job.iterations_done(now)
        it = job.iter_time or view.history.mean_iter_time(job.spec.model)
        if self._oracle is not None:
            total = self._oracle.total_iterations(job.id)
            if job.iter_time:
                return max(total - done, 0.0) * job.iter_time
            dur = self._oracle.duration(job.id)
            if dur is not None:
                return dur * max(1.0 - done / total, 0.0)
            return max(total - done, 0.0) * it if it else math.inf
        if job.spec.iterations is not None and it:
            return max(job.spec.iterations - done, 0.0) * it
        mean = view.history.mean_run_time()
        if mean is None:
            return math.inf
        return max(mean - job.executed_time(now), 0.0)

    def _history_input(self, job: JobView, view: ClusterView, n_history: int) -> object:
        """What :meth:`remaining` of a job that is not running reads from the history: nothing once the
        job measured its iteration time; the mean iteration time of its model for a declared length
        without the oracle (when the model has one); else (conservatively) the history's length."""
        if job.iter_time:
            return None
        if self._oracle is None and job.spec.iterations is not None:
            it = view.history.mean_iter_time(job.spec.model)
            if it:
                return ("it", it)
        return ("n", n_history)

    def _waiting_remaining(self, job: JobView, view: ClusterView, n_history: int) -> float:
        """:meth:`remaining` of a job that is not running, cached while its inputs stay the same (its own
        progress, state and speed, and what it reads from the history: see :meth:`_history_input`)."""
        inputs = (self._history_input(job, view, n_history), job.preemptions, job.state, job.iter_time,
                  job.reported_iterations)
        hit = self._waiting_rem.get(job.id)
        if hit is not None and hit[0] == inputs:
            return hit[1]
        rem = self.remaining(job, view)
        self._waiting_rem[job.id] = (inputs, rem)
        return rem

    def _running_bound(self, view: ClusterView, n_history: int) -> float:
        """An upper bound of :meth:`remaining` over the running jobs (only a pruning test: any upper
        bound gives the same decisions). A running job's estimate only falls as time passes while the
        history and its last report stay the same (it extrapolates its progress, or its run time,
        forward), so the estimate made at its last change bounds it; a job without a declared length
        (no oracle) is bounded by the mean finished run time (``max(mean - run time, 0)``, run
        time >= 0), which needs no per-job work."""
        best = -math.inf
        cache = self._running_rem
        running = view.running
        no_oracle = self._oracle is None
        version = view.allocation_version  # (the running set changes only with an allocation)
        if version != self._seen_version:
            self._seen_version = version
            # the jobs that started since the last look (the running set's journal), else all of them (a set
            # difference at C speed); a job is classified once (by its spec), dropped when it ends
            changed = view.running_changes(self._seen_mark)
            self._seen_mark = view.running_mark
            for job_id in (running.keys() - self._seen) if changed is None else changed:
                if job_id in running and job_id not in self._seen:
                    self._seen.add(job_id)
                    if not (no_oracle and running[job_id].spec.iterations is None):
                        self._estimated.add(job_id)
        estimated = running.keys() & self._estimated if self._estimated else ()
        mean_bounded = len(estimated) < len(running)
        for job_id in estimated:
            r = running[job_id]
            inputs = _bound_inputs(r, n_history)
            hit = cache.get(r.id)
            if hit is None or hit[0] != inputs:
                hit = cache[r.id] = (inputs, self.remaining(r, view))
            if hit[1] > best:
                best = hit[1]
        if mean_bounded:
            mean = view.history.mean_run_time()
            best = max(best, math.inf if mean is None else max(mean, 0.0))
        return best

    def _victims(self, view: ClusterView, over: float) -> list[tuple[float, float, JobView]]:
        """The running jobs as ``(remaining, end of its minimum run, job)``, most remaining first (ties in running
        order), less the jobs whose upper bound (:meth:`_running_bound`'s, per job: its estimate kept from its last
        change, or the mean finished run time) is at most ``over``, without their estimates. A round asks with
        ``over`` = the estimate of the first waiting job it could not place + the margin; a job left out has at most
        that much left, so it is worth pausing neither for that job nor for any later one (the waiting jobs come in
        ascending estimates), and in the full list it would stand after every job worth pausing, where no walk of the
        victims goes (:meth:`_preempt_for` stops at the first job not worth pausing). A job's kept estimate is used only while its inputs are the ones it was made on (else it is
        estimated). On the Muri artifact's trace1 about 18 jobs run and 5-6 of them are kept."""
        cache = self._running_rem
        n_history = len(view.history)
        mean = view.history.mean_run_time()
        mean_bound = math.inf if mean is None else max(mean, 0.0)
        no_oracle = self._oracle is None
        started, min_run = self._started, self.min_run_time
        out = []
        for job_id, r in view.running.items():
            if no_oracle and r.spec.iterations is None:  # (as _running_bound: bounded by the mean)
                if mean_bound <= over:
                    continue
            else:
                hit = cache.get(job_id)
                if hit is not None and hit[1] <= over and hit[0] == _bound_inputs(r, n_history):
                    continue
            out.append((self.remaining(r, view), started.get(job_id, -math.inf) + min_run, r))
        out.sort(key=_minus_first)
        return out

    def next_decision_time(self) -> float | None:
        """When a job spared by ``min_run_time`` for a waiting job with less work left may be paused."""
        return self._wake

    def _bound_now(self, view: ClusterView, n_history: int) -> float:
        """:meth:`_running_bound` once per round (the running jobs do not change while a round plans), and
        the last one again while no input of it moved: no allocation changed (the running set, their
        placements and speeds: every start, pause, end or move allocates or releases), the history kept its
        length and no job reported. Its per-job estimates would all be cache hits, so it is the same number.
        (Only while no job has a completion criterion: the scheduler may fold a running job's progress to
        check one without a report.)"""
        if self._bound is None:
            key = (view.allocation_version, n_history, self._reports)
            if key == self._bound_key and not self._criteria:
                self._bound = self._bound_last
            else:
                self._bound = self._bound_last = self._running_bound(view, n_history)
                self._bound_key = key
        return self._bound

    def on_progress(self, job: JobView, view: ClusterView) -> None:
        """A running job reported (its estimate's inputs moved: see :meth:`_bound_now`)."""
        self._reports += 1

    # ---------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Plan:
        self._wake = None
        if not view.pending and not view.paused:
            return []
        n_history = len(view.history)
        self._bound = None  # (computed at most once per round: see _bound_now)
        if self._settled is not None and self._settled_now(view, n_history):
            return []
        self._settled = None
        draft = Draft(view)
        plan: Plan = []
        victims: list[tuple[float, float, JobView]] | None = None  # (remaining, end of its minimum run, job)
        started: list[str] = []
        stream = self._ordered(view, n_history)
        # shapes whose preemption failed since the last one that succeeded: a later job of the shape has as
        # much work left (so at most the same victims) and at most the same room, and fails the same way.
        # It fails for the rest of the round, in fact: a later success (of a job with at least as much work
        # left, so with victims from the same ranked list, stopping no later) gives back only victims the
        # failed shape was already given back together with, and takes room from them; so the rest of the
        # shape's stream is skipped (before: each of its jobs was tried, 30 placement attempts per round on
        # the Muri artifact's trace1).
        no_preempt: set[Hashable] = set()
        g = view.gpu_col
        free_gpus = float(view.free_total[g]) if g is not None else math.inf
        needs = self._gpu_needs
        for mine, _, job in stream:
            w, n = view.shape(job)
            need = needs.get(id(w))
            if need is None or need[0] is not w:
                need = needs[id(w)] = (w, float(w[g]) if g is not None else 0.0)
            # fewer GPUs free than the workers need, by more than rounding: Draft.place would fail on its
            # total check; the draft's free GPUs are re-read after every change below
            p = None if need[1] * n > free_gpus + ROOM_EPS else draft.place(job)
            if p is None and self.preemptive and view.running:
                if victims is None:
                    if mine + self.preempt_margin == math.inf or \
                            self._bound_now(view, n_history) <= mine + self.preempt_margin:
                        victims = []  # nobody is worth pausing for this job, nor for any later one
                    else:
                        victims = self._victims(view, mine + self.preempt_margin)
                if victims and victims[0][0] > mine + self.preempt_margin:
                    shape = self._shape_key(job, view)
                    if shape not in no_preempt:
                        p = self._preempt_for(job, mine, draft, victims, plan, view.now)
                        if p is None:
                            no_preempt.add(shape)
                        else:
                            no_preempt.clear()
                            if g is not None:
                                free_gpus = float(draft.free_now[:, g].sum())
                    if p is None:  # the rest of this shape's stream fails the same way (see no_preempt)
                        stream.skip_rest()
                        continue
            if p is None:
                # Waiting jobs come in order of remaining time and victims only leave the list: once
                # nobody is worth pausing for this job and no room is left, none of the later ones
                # can start either.
                # From here on nobody is paused (victims only leave, later jobs have as much work left),
                # so room only shrinks: a shape that failed keeps failing, skip the rest of its jobs.
                if not self.preemptive or not victims or victims[0][0] <= mine + self.preempt_margin:
                    if draft.exhausted():
                        break
                    stream.skip_rest()
                continue
            plan.append(Resume(job.id, p) if job.state is JobState.PAUSED else Start(job.id, p))
            self._started[job.id] = view.now
            started.append(job.id)
            if g is not None:
                free_gpus = float(draft.free_now[:, g].sum())
        for job_id in started:  # after the loop: _ordered's streams must not change while read
            self._forget_waiting(job_id)
        if not victims and self._wake is None:  # nobody was paused or worth pausing: see _settled_now
            room = None if not plan else tuple(a.tobytes() for a in draft.save())
            self._settled = (self._joins, n_history, self._first, view.allocation_version, room)
        return plan

    def _settled_now(self, view: ClusterView, n_history: int) -> bool:
        """True if this round would plan nothing: the last one paused nobody and found nobody worth pausing
        (it asked for no wake-up), so every waiting job it did not start failed to be placed on at least the
        room it left (a shape that failed is skipped or left out, room only shrinking while that round
        planned; or no room was left: ``Draft.exhausted``); and since then no job joined the waiting ones,
        none left them otherwise than by that plan (the counts agree), the history kept its length (every
        waiting job's estimate is the same), the free room is the one that plan left, and nobody can be
        paused now (the running bound is at most the least estimate then + margin: the least estimate now,
        of fewer jobs, is no smaller). Then each waiting job fails again, as the round would find."""
        joins, hist, first, version, room = self._settled  # type: ignore[misc]
        if joins != self._joins or hist != n_history or self._just_paused or \
                len(view.pending) + len(view.paused) != len(self._mean_key) + len(self._other):
            return False
        if version != view.allocation_version:
            if room is None or room[0] != view.free.tobytes() or room[1] != view.device_free.tobytes():
                return False
            self._settled = (joins, hist, first, view.allocation_version, None)  # (the same room: by version)
        return not self.preemptive or not view.running or first + self.preempt_margin == math.inf or \
            self._bound_now(view, n_history) <= first + self.preempt_margin

    def _forget_waiting(self, job_id: str) -> None:
        """Drop a job from the ordered waiting structures (it starts, or it ended)."""
        key = self._mean_key.pop(job_id, None)
        if key is not None:
            queue = self._mean[key]
            queue.discard(job_id)
            if not queue.ids:
                del self._mean[key]
        self._other.pop(job_id, None)
        if job_id in self._dep_key:
            group = self._dep[self._dep_key.pop(job_id)]
            del group[job_id]
        entry = self._other_pos.pop(job_id, None)
        shape = self._other_shape.pop(job_id, None)
        if entry is not None:
            lst = self._other_sorted[shape]
            del lst[bisect_left(lst, entry)]
            if not lst:
                del self._other_sorted[shape]

    @staticmethod
    def _shape_key(job: JobView, view: ClusterView) -> Hashable:
        """What ``Draft.place`` depends on besides the free room: the worker demand row and count for a job
        without parameter servers; a job with them is its own shape (never skipped with others)."""
        if job.spec.num_ps:
            return ("job", job.id)
        w, n = view.shape(job)
        return w.tobytes(), n

    def _sync_waiting(self, view: ClusterView) -> None:
        """Bring the ordered waiting structures up to date with ``view``'s pending and paused jobs.
        Arrivals joined in ``on_arrival`` and the jobs the last plan paused join here; a job leaves when
        this policy starts it or it ends (``on_finish``), so the structures hold a subset of the waiting
        jobs, and equal sizes mean equal sets. Otherwise (a start the scheduler refused, a pause of
        someone else's, a view built without the hooks): set differences of the ids (C speed), then one
        estimate input per newcomer. A waiting job's run time is fixed while it waits, and a job that ran
        and came back is always a newcomer with its new run time."""
        pending, paused = view.pending, view.paused
        for job_id in self._just_paused:
            job = paused.get(job_id)
            if job is not None and job_id not in self._mean_key and job_id not in self._other:
                self._join(job, view)
        self._just_paused.clear()
        if len(pending) + len(paused) == len(self._mean_key) + len(self._other):
            return
        known = self._mean_key.keys() | self._other.keys()
        waiting = pending.keys() | paused.keys()
        for gone in known - waiting:
            self._forget_waiting(gone)
        for job_id in waiting - known:
            self._join(pending.get(job_id) or paused[job_id], view)

    def _join(self, job: JobView, view: ClusterView) -> None:
        """Add a waiting job: to its shape's :class:`MeanQueue` if its estimate is the mean finished run
        time less its run time (no declared length, no oracle), else to the per-round estimated ones."""
        self._joins += 1
        shape = self._shape_key(job, view)
        if not job.spec.num_ps and shape not in self._shape_rep:
            w, n = view.shape(job)
            g = view.gpu_col
            self._shape_rep[shape] = (w, n, float(w[g]) * n if g is not None else 0.0)
        if self._oracle is None and job.spec.iterations is None:
            key = self._mean_key[job.id] = shape
            queue = self._mean.get(key)
            if queue is None:
                queue = self._mean[key] = MeanQueue()
            queue.add(job.id, job.executed_time(view.now), job.seq)
        else:
            self._other[job.id] = job
            self._other_shape[job.id] = shape
            self._other_new.append(job.id)
            if not job.iter_time:  # (a waiting job reports nothing: its own inputs stay as they are)
                key = self._dep_key[job.id] = job.spec.model if self._oracle is None and \
                    job.spec.iterations is not None else None
                self._dep.setdefault(key, {})[job.id] = job

    def _ordered(self, view: ClusterView, n_history: int) -> Streams[JobView]:
        """The waiting jobs as ``(remaining, seq, job)`` in ascending order, lazily: the same order
        and the same estimates as sorting every waiting job by ``(remaining(job), seq)``. Jobs with
        no declared length come from the incremental :class:`MeanQueue` of their shape; the others from
        a sorted list per shape, re-sorted when the history grew (estimates cached while their inputs
        stay the same); every stream is one shape, so droppable (see ``Streams.skip_rest``); the streams
        are merged."""
        self._sync_waiting(view)
        pending, paused = view.pending, view.paused
        mean = view.history.mean_run_time()
        self._first = math.inf

        def jobs(queue: MeanQueue) -> Iterator[tuple[float, int, JobView]]:
            for r, seq, job_id in queue.ordered(mean):
                yield r, seq, pending.get(job_id) or paused[job_id]

        other = self._other
        if other:
            rem = self._waiting_remaining
            by_shape, pos, shapes = self._other_sorted, self._other_pos, self._other_shape
            if self._other_hist != n_history:  # the history grew: estimates that read it may move
                self._other_hist = n_history
                self._reestimate(view, n_history)  # (newcomers are estimated below, on this history)
            batch = len(self._other_new) > 16  # many newcomers (a burst of arrivals): append, sort once
            touched: set[Hashable] = set()
            for job_id in self._other_new:
                job = other.get(job_id)
                if job is not None and job_id not in pos:
                    entry = pos[job_id] = (rem(job, view, n_history), job.seq, job_id)
                    lst = by_shape.get(shapes[job_id])
                    if lst is None:
                        by_shape[shapes[job_id]] = [entry]
                    elif batch:
                        lst.append(entry)
                        touched.add(shapes[job_id])
                    else:
                        insort(lst, entry)
            for shape in touched:
                by_shape[shape].sort()
            self._other_new.clear()
        mean_queues: list[tuple[Hashable, MeanQueue]] = list(self._mean.items())
        other_lists = list(self._other_sorted.items())
        if mean_queues or other_lists:
            first = min(min((q.first_estimate(mean) for _, q in mean_queues), default=math.inf),
                        min((lst[0][0] for _, lst in other_lists), default=math.inf))
            self._first = first
            if not self.preemptive or not view.running or first + self.preempt_margin == math.inf or \
                    self._bound_now(view, n_history) <= first + self.preempt_margin:
                # nobody can be paused in this round (the first job has the least work left): room only
                # shrinks while it plans, so a shape the free capacity is known not to hold fails whenever
                # its jobs come up, and is skipped then (see decide); leave its stream out from the start
                # (and one whose workers need more GPUs than are free: Draft.place's total check fails)
                no_room, rep, g = view.no_room_now(), self._shape_rep, view.gpu_col
                limit = float(view.free_total[g]) + ROOM_EPS if g is not None else math.inf
                mean_queues = [(k, q) for k, q in mean_queues if (r := rep.get(k)) is None or
                               (r[2] <= limit and (id(r[0]), r[1]) not in no_room)]
                other_lists = [(k, lst) for k, lst in other_lists if (r := rep.get(k)) is None or
                               (r[2] <= limit and (id(r[0]), r[1]) not in no_room)]
        streams: list[tuple[bool, Iterator[tuple[float, int, JobView]]]] = [(True, jobs(q)) for _, q in mean_queues]
        for _, lst in other_lists:
            streams.append((True, ((r, seq, other[job_id]) for r, seq, job_id in lst)))
        return Streams(streams)

    def _reestimate(self, view: ClusterView, n_history: int) -> None:
        """After the history grew: estimate again the waiting jobs of ``_other`` whose estimate reads it and
        move the ones whose estimate changed in their shape's list (the lists stay sorted by (estimate,
        seq), as sorting everything again would make them). A model whose mean iteration time is what its
        jobs read and has not moved is skipped whole."""
        rem, pos, by_shape, shapes = self._waiting_remaining, self._other_pos, self._other_sorted, self._other_shape
        history, seen = view.history, self._dep_seen
        for key, jobs in self._dep.items():
            if key is not None:
                it = history.mean_iter_time(key)  # type: ignore[arg-type]
                if it and seen.get(key) == it:
                    continue
                seen[key] = it
            for job_id, job in jobs.items():
                old = pos.get(job_id)
                if old is None:  # joined since the last round: not in a list yet
                    continue
                new = (rem(job, view, n_history), old[1], job_id)
                if new != old:
                    lst = by_shape[shapes[job_id]]
                    del lst[bisect_left(lst, old)]
                    insort(lst, new)
                    pos[job_id] = new

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        """Forget an ended job (one ``on_finish``: a second definition used to replace this one, and
        the estimate caches kept every finished job)."""
        self._started.pop(job.id, None)
        self._waiting_rem.pop(job.id, None)
        self._running_rem.pop(job.id, None)
        self._forget_waiting(job.id)
        self._seen.discard(job.id)
        self._estimated.discard(job.id)

    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        """A newcomer joins the waiting structures at once (no set difference needed for it)."""
        if job.criterion is not None:
            self._criteria = True
        if job.id not in self._mean_key and job.id not in self._other:
            self._join(job, view)

    def _preempt_for(self, job: JobView, mine: float, draft: Draft,
                     victims: list[tuple[float, float, JobView]], plan: Plan, now: float) -> tuple[int, ...] | None:
        """Pause the longest-remaining running jobs until ``job`` (``mine`` seconds left) fits;
        undo if it never does. If one of those jobs has not run ``min_run_time`` since it (re)started,
        nothing is paused now: the policy decides again when that job's minimum run ends (the
        textbook choice of victims, delayed; pausing a shorter job in its place costs avg JCT)."""
        if not victims or victims[0][0] <= mine + self.preempt_margin:
            return None  # nobody has enough more work left to be worth pausing
        saved = None  # (saved before the first give-back: most calls stop at a spared first victim)
        chosen: list[int] = []
        for k, (rem, free_at, r) in enumerate(victims):
            if rem <= mine + self.preempt_margin:
                break
            if free_at > now + 1e-6:  # spared: wait for it (1e-6: the wake-up lands on its time)
                self._wake = free_at if self._wake is None else min(self._wake, free_at)
                break
            if saved is None:
                saved = draft.checkpoint()
            draft.give_back(r)
            chosen.append(k)
            p = draft.place(job)
            if p is not None:
                for idx in sorted(chosen, reverse=True):
                    plan.append(Pause(victims[idx][2].id, reason=f"srtf: {job.id} has less work left"))
                    self._just_paused.append(victims[idx][2].id)
                    del victims[idx]
                return p
        if saved is not None:
            draft.restore(saved)
        return None


def make(oracle: bool = False, **params: object) -> SRTF:
    return build(SRTF, params, policy="srtf", fixed={"use_oracle": oracle})
