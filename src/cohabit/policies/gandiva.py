"""Gandiva (Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep Learning", OSDI'18).

Gandiva exploits the intra-job predictability of training (paper §3: jobs are
long loops of near-identical mini-batches) to move, pause and pack jobs
cheaply, and decides by *measuring* what happens (introspection). This policy
implements its four mechanisms (§4.1) under its scheduling policy (§4.2):

* **Affinity** (§4.2, reactive mode): a node takes the *affinity* of the GPU
  count of the jobs it hosts. A job of ``k`` GPUs that fits on one node goes,
  in order of preference, to a node whose affinity is ``k``, then to an
  empty node (no affinity), then to any node; best fit within each group.
  Jobs needing several nodes take the fewest nodes (``consolidated_first``).
* **Migration to defragment** (§4.1 "Migration", §4.2 introspective mode):
  when a multi-GPU job could only start spread over more nodes than it
  needs although enough GPUs are free, running jobs on the candidate nodes
  are migrated elsewhere (checkpoint/restore, ``Migrate``) so that the job
  starts consolidated; at most ``max_migrations`` moves per decision, only
  jobs that are not sharing a GPU and have run a full slice.
* **Packing** (§4.1 "Packing", §4.2 introspective mode): when the cluster
  is oversubscribed, a waiting job is packed onto the GPUs of a running job
  of the same size (``Colocate``: both time-share the devices) instead of
  waiting. Policies see no GPU utilisation, so the proxy is Gandiva's own
  introspective measure of useful progress: each job's measured iteration
  time after packing against its solo iteration time before
  (``JobView.iter_time``). With ``s = solo / packed`` for each job, packing is
  kept if ``s_host + s_guest >= pack_threshold`` (1.0: what time-slicing
  gives the two jobs together, before its suspend/resume overhead);
  otherwise the pair is *unpacked* (the guest moves to a free GPU if there
  is one, else it is suspended and time-sliced) and the pair of models is
  remembered as bad and never packed again. A guest with no solo
  measurement yet is assumed to slow down as much as its host.
* **Time-slicing by suspend/resume** (§4.1 "Suspend-Resume", §4.2): when
  jobs still wait, running jobs that have had a full slice are suspended
  (``Pause``) and waiting jobs of the *same size class* resume in their place
  (on the same nodes when the shapes match), round-robin: the job waiting
  longest goes first. The slice is ``slice_length`` (60 s, the paper's
  time quantum). Gandiva's suspend/resume costs well under a second; where
  it does not (the simulator charges ``checkpoint_s + restore_s``), the
  policy *measures* it (time from ``Resume`` to the first progress report,
  minus one iteration) and stretches the slice so that the overhead stays
  below ``max_suspend_overhead`` of a slice (``None`` keeps the slice fixed).
  So that no size class starves, a job that has waited a full slice may
  also take the turn of jobs of other sizes (the paper does not say how
  classes interleave; this is our choice). Jobs sharing a GPU are not
  time-sliced.

Gandiva's grow-shrink mechanism is not modelled (jobs keep their size).
Packing is limited to pairs (one guest per host) of jobs with whole-GPU
workers and the same worker count; the guest is placed so that the ledger
time-shares exactly the host's devices. A packed guest stays packed when GPUs
free up elsewhere (it gets the device to itself when its host ends).
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from ..engine.actions import Plan
from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from .base import BasePolicy
from .gandiva_queue import TurnOrder, WaitGroups
from .gandiva_records import EPS, JobRec, PackTrial, full_slices
from .gandiva_pack import MAX_PACK_SCAN
from .gandiva_round import GandivaRound
from .params import build
from .skipped_ticks import SkippedTicks


def _canonical(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


class Gandiva(BasePolicy):
    """Affinity placement, defragmenting migration, introspective packing and time-slicing."""

    round_class = GandivaRound  # one decision round (tests substitute a plain reference)

    def __init__(
        self,
        slice_length: float = 60.0,
        *,
        max_suspend_overhead: float | None = 0.1,
        packing: bool = True,
        pack_threshold: float = 1.0,
        migration: bool = True,
        max_migrations: int = 4,
        cross_class_after: float = 1.0,
    ) -> None:
        s = _number(slice_length)
        if s is None or s <= 0:
            raise ValueError(f"slice_length must be > 0 seconds, got {slice_length!r}")
        if max_suspend_overhead is not None:
            o = _number(max_suspend_overhead)
            if o is None or not 0 < o < 1:
                raise ValueError(f"max_suspend_overhead must be in (0, 1) or None, got {max_suspend_overhead!r}")
        if not isinstance(packing, bool):
            raise ValueError(f"packing must be True or False, got {packing!r}")
        t = _number(pack_threshold)
        if t is None or t <= 0:
            raise ValueError(f"pack_threshold must be > 0 (sum of the pair's normalised speeds), got {pack_threshold!r}")
        if not isinstance(migration, bool):
            raise ValueError(f"migration must be True or False, got {migration!r}")
        if isinstance(max_migrations, bool) or not isinstance(max_migrations, int) or max_migrations < 0:
            raise ValueError(f"max_migrations must be an int >= 0 per decision, got {max_migrations!r}")
        c = _number(cross_class_after)
        if c is None or c < 0:
            raise ValueError(f"cross_class_after must be >= 0 slices, got {cross_class_after!r}")
        self.slice_length = float(slice_length)
        # the engine's tick every slice, minus the ticks whose round is known quiet: decisions are asked
        # for with next_decision_time() on the same instants (see skipped_ticks); the shortest-interval
        # check of the parameters reads wake_interval
        self.tick_interval = None
        self.wake_interval = float(slice_length)
        self._ticks = SkippedTicks(self.slice_length)
        self.max_suspend_overhead = max_suspend_overhead
        self.packing = packing
        self.pack_threshold = float(pack_threshold)
        self.migration = migration
        self.max_migrations = max_migrations
        self.cross_class_after = float(cross_class_after)
        self.name = "gandiva"
        self._recs: dict[str, JobRec] = {}
        self._wait: dict[str, JobRec] = {}
        self._queue = WaitGroups()  # the same jobs by group, each in round-robin order (gandiva_queue)
        self._run: dict[str, JobRec] = {}  # in the order their current turn started
        self._run_order = TurnOrder()  # the same jobs as a list (read by bisection in _quiet_until, no copy)
        # the running jobs that time-slicing may suspend (not packed), in the same order, overall and per class
        self._victims = TurnOrder()
        self._victims_cls: dict[float, TurnOrder] = defaultdict(TurnOrder)
        self._turns = 0  # turns started (JobRec.turn_no)
        self._idle: dict[tuple[int, float], dict[str, JobRec]] = defaultdict(dict)  # packing hosts by (workers, class)
        self._partner: dict[str, str] = {}  # both directions of every packed pair
        self._shared_devs: dict[str, frozenset[tuple[int, int]]] = {}  # guest -> the host devices it shares
        self._shared: set[tuple[int, int]] = set()
        self._shared_version = 0  # bumped whenever _shared changes
        # per packing host: its _ledger_picks answer while what it read is unchanged, and the ledger's device
        # table as last seen (view, ledger version, a copy) to find the nodes whose rows changed (GandivaRound)
        self._host_ok: dict[str, bool] = {}
        self._dev_seen: tuple[ClusterView, int, np.ndarray] | None = None
        # the view, (ledger version, _shared_version), the free-device row and each node's devices in the
        # order the ledger gives them to a guest
        self._picks_memo: tuple[ClusterView, tuple[int, int], list[list[bool] | None],
                                dict[int, list[int]]] | None = None
        # the view, its nodes' largest GPU count, and per node its GPU count less EPS (GandivaRound)
        self._gpu_cap: tuple[ClusterView, float, list[float]] | None = None
        self._trials: dict[str, PackTrial] = {}  # guest -> its pack being measured
        self._bad_pairs: set[frozenset[str]] = set()
        self._bad_with: dict[str, set[str]] = defaultdict(set)  # model -> the models it must not pack with
        self._good_pairs: set[frozenset[str]] = set()
        self._resumed_at: dict[str, float] = {}  # resumes whose cost is not measured yet
        self._classes: dict[float, int] = {}
        self._aff: np.ndarray | None = None  # per node and class: tasks of running jobs of that class
        self._node_jobs: list[dict[str, JobRec]] = []
        # failed time-slice turns carried across rounds: (view, the ledger's room version) and per (shape,
        # cross) the victims tried and the ledger's allocation version then (see GandivaRound._take_turns)
        self._turn_memo: tuple[ClusterView, int, dict[tuple[tuple[bytes, int], bool],
                                                      tuple[tuple[str, ...], int]]] | None = None
        self._last_plan: list[tuple[str, str]] = []
        self.suspend_cost: float | None = None  # measured seconds lost per resume (EWMA)
        # quiet rounds: bumped by every change of what a round reads besides the ledger, the slice and the
        # clock (the waiting set, packing hosts, pairs); a round after an empty one with the same stamp,
        # ledger version and slice, before the next slice or cross-class threshold, plans nothing
        self._stamp = 0
        self._quiet: tuple[ClusterView, int, int, float, float | None, float | None] | None = None
        # that round's failures (GandivaRound.failures) and the jobs that arrived since: a round after arrivals
        # alone is still quiet when none of them would try anything (_quiet_after_arrivals)
        self._quiet_fail: tuple[set[tuple[bytes, int]], set[tuple[int, float, str]],
                                set[tuple[tuple[bytes, int], bool]], float] | None = None
        self._arrived: list[JobRec] = []

    # ---------------------------------------------------------------- hooks
    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        if self._aff is None:
            self._aff = np.zeros((view.capacity.shape[0], 1), dtype=np.int64)
            self._node_jobs = [{} for _ in range(view.capacity.shape[0])]
        rec = JobRec(job, view.now)
        g = view.gpu_col
        w = view.demand_vector(job)
        per = float(w[g]) if g is not None else 0.0
        rec.n = view.target_workers(job)
        rec.cls = per * rec.n
        rec.whole = g is not None and job.spec.num_ps == 0 and abs(per - 1.0) < EPS
        ps = view.ps_demand_vector(job)
        rec.shape = (w.tobytes() + (ps.tobytes() if ps is not None else b""), rec.n)
        rec.model = _canonical(job.spec.model)
        rec.pack_key = (rec.n, rec.cls, rec.model)
        rec.ikey = (rec.n, rec.cls)
        ci = self._classes.get(rec.cls)
        if ci is None:
            ci = self._classes[rec.cls] = len(self._classes)
            if ci >= self._aff.shape[1]:
                self._aff = np.hstack([self._aff, np.zeros_like(self._aff)])
        rec.ci = ci
        rec.gkey = (rec.shape, rec.pack_key, rec.whole)
        self._recs[job.id] = rec
        self._wait_add(rec)
        self._stamp += 1
        self._arrived.append(rec)

    def on_progress(self, job: JobView, view: ClusterView) -> None:
        rec = self._recs.get(job.id)
        it = job.iter_time
        if rec is None or not rec.running or it is None:
            return
        if view.sharers(job.id):
            if self._idle[(rec.n, rec.cls)].pop(job.id, None) is not None:
                self._stamp += 1
        else:
            rec.solo_iter = it
            self._dissolve(job.id)
            if rec.whole:
                hosts = self._idle[(rec.n, rec.cls)]
                if job.id not in hosts:
                    hosts[job.id] = rec
                    # a new host is last in its list: a round reads it only within the first MAX_PACK_SCAN
                    # hosts and for a waiting whole-GPU job of its size (a later arrival bumps the stamp)
                    if self.packing and len(hosts) <= MAX_PACK_SCAN and self._queue.packs_onto(rec.ikey):
                        self._stamp += 1
        t0 = self._resumed_at.pop(job.id, None)
        if t0 is not None:
            cost = max(view.now - t0 - it, 0.0)
            self.suspend_cost = cost if self.suspend_cost is None else 0.7 * self.suspend_cost + 0.3 * cost

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        rec = self._recs.pop(job.id, None)
        if rec is None:
            return
        self._stamp += 1
        if rec.running:
            self._run_drop(rec)
            self._release_nodes(rec)
            self._idle[(rec.n, rec.cls)].pop(job.id, None)
        else:
            self._wait_drop(rec)
        self._dissolve(job.id)
        self._trials.pop(job.id, None)
        self._resumed_at.pop(job.id, None)
        self._host_ok.pop(job.id, None)

    # ------------------------------------------------------- state tracking
    @property
    def slice_now(self) -> float:
        """The slice in force: ``slice_length``, stretched to bound the measured suspend/resume cost."""
        if self.max_suspend_overhead is None or not self.suspend_cost:
            return self.slice_length
        return max(self.slice_length, self.suspend_cost / self.max_suspend_overhead)

    def _forget_host_answers(self, nodes: Iterable[int]) -> None:
        """Forget the kept ``_ledger_picks`` answers of the jobs holding ``nodes`` (their rows changed)."""
        ok, held = self._host_ok, self._node_jobs
        if ok:
            for node in nodes:
                for job_id in held[node]:
                    ok.pop(job_id, None)

    def _hold(self, rec: JobRec, nodes: tuple[int, ...]) -> None:
        assert self._aff is not None
        self._host_ok.pop(rec.id, None)
        rec.nodes = nodes
        for node in nodes:
            self._aff[node, rec.ci] += 1
            self._node_jobs[node][rec.id] = rec

    def _release_nodes(self, rec: JobRec) -> None:
        assert self._aff is not None
        self._host_ok.pop(rec.id, None)
        for node in rec.nodes:
            self._aff[node, rec.ci] -= 1
            self._node_jobs[node].pop(rec.id, None)
        rec.nodes = ()

    def _dissolve(self, job_id: str) -> None:
        """Forget the packed pair ``job_id`` belongs to (either side)."""
        other = self._partner.pop(job_id, None)
        if other is None:
            return
        self._partner.pop(other, None)
        self._stamp += 1
        for guest in (job_id, other):
            devs = self._shared_devs.pop(guest, None)
            if devs:
                self._shared.difference_update(devs)
                self._shared_version += 1
                self._forget_host_answers({node for node, _ in devs})
            rec = self._recs.get(guest)
            if rec is not None:
                self._victim(rec)

    def _wait_add(self, rec: JobRec) -> None:
        self._wait[rec.id] = rec
        self._queue.add(rec)

    def _wait_drop(self, rec: JobRec) -> None:
        if self._wait.pop(rec.id, None) is not None:
            self._queue.remove(rec)

    def _run_last(self, rec: JobRec) -> None:
        """Put ``rec`` last in the turn order (its turn starts now), and among the victims unless packed."""
        self._not_victim(rec)
        if self._run.pop(rec.id, None) is not None:
            self._run_order.remove(rec)
        self._run[rec.id] = rec
        rec.turn_no = self._turns
        self._run_order.add(rec)
        self._turns += 1
        self._victim(rec)

    def _run_drop(self, rec: JobRec) -> None:
        if self._run.pop(rec.id, None) is not None:
            self._run_order.remove(rec)
        self._not_victim(rec)

    def _victim(self, rec: JobRec) -> None:
        """Back among the victims at its place in the turn order, if running and not packed."""
        if not rec.victim and rec.id in self._run and rec.id not in self._partner:
            rec.victim = True
            self._victims.add(rec)
            self._victims_cls[rec.cls].add(rec)

    def _not_victim(self, rec: JobRec) -> None:
        if rec.victim:
            rec.victim = False
            self._victims.remove(rec)
            self._victims_cls[rec.cls].remove(rec)

    def _to_running(self, rec: JobRec, nodes: tuple[int, ...], now: float) -> None:
        if rec.job.state is JobState.PAUSED:
            self._resumed_at[rec.id] = now
        self._wait_drop(rec)
        self._run_last(rec)
        rec.running = True
        rec.turn_start = now
        self._release_nodes(rec)
        self._hold(rec, nodes)

    def _to_waiting(self, rec: JobRec, now: float) -> None:
        self._run_drop(rec)
        self._release_nodes(rec)
        self._idle[(rec.n, rec.cls)].pop(rec.id, None)
        self._dissolve(rec.id)
        rec.running = False
        rec.wait_since = now
        self._wait_drop(rec)
        rec.key = (now, rec.job.seq)
        self._wait_add(rec)

    def _relocated(self, rec: JobRec, nodes: tuple[int, ...], now: float) -> None:
        """A running job was migrated: it restarts its turn on ``nodes``, unmeasured."""
        self._idle[(rec.n, rec.cls)].pop(rec.id, None)
        self._dissolve(rec.id)
        self._resumed_at[rec.id] = now
        self._run_last(rec)
        rec.turn_start = now
        self._release_nodes(rec)
        self._hold(rec, nodes)

    def _catch_up(self, view: ClusterView) -> None:
        """Reconcile with what the scheduler actually did with the last plan (it may refuse actions)."""
        now = view.now
        for kind, job_id in self._last_plan:
            rec = self._recs.get(job_id)
            if rec is None:
                continue
            job = rec.job
            running = job.state is JobState.RUNNING
            if kind == "run" and not running and rec.running:
                self._to_waiting(rec, now)
            elif kind == "wait" and running and not rec.running:
                self._to_running(rec, tuple(job.placement[: job.n_workers]), now)
            elif kind == "move" and running and tuple(job.placement[: job.n_workers]) != rec.nodes:
                self._release_nodes(rec)
                self._hold(rec, tuple(job.placement[: job.n_workers]))
        self._last_plan = []

    def _pair(self, a: JobRec, b: JobRec) -> frozenset[str]:
        return frozenset((a.model, b.model))

    # ---------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Plan:
        self._ticks.decided(view)
        plan = self._decide(view)
        self._arrived = []  # (this round saw them)
        self._ticks.planned(bool(plan))
        return plan

    def next_decision_time(self) -> float | None:
        """The next tick (every slice after the last decision, as the engine ticks) whose round is not
        known to be quiet; None when no later tick can matter before an event."""
        return self._ticks.wake(self._quiet_at, self._quiet_forever)

    def _decide(self, view: ClusterView) -> Plan:
        self._catch_up(view)
        plan: Plan = []
        if not self._trials and not self._wait:
            return plan  # nothing to measure, nobody waiting: a round would plan nothing
        rnd: GandivaRound | None = None
        if self._trials:
            rnd = self.round_class(self, view, plan)
            self._evaluate_packs(rnd)
        if self._wait and (plan or not (self._still_quiet(view) or self._quiet_after_arrivals(view))):
            if rnd is None:
                rnd = self.round_class(self, view, plan)
            rnd.schedule(self._queue)
            self._quiet = None if plan else self._quiet_until(view, rnd.slice)
            self._quiet_fail = None if plan else rnd.failures()
        if plan:
            self._quiet = self._quiet_fail = None
        if rnd is not None:
            self._last_plan = rnd.log
        return plan

    # ----------------------------------------------------------- quiet rounds
    def _quiet_until(self, view: ClusterView, slice_: float) -> tuple[
            ClusterView, int, int, float, float | None, float | None]:
        """What made the round that just planned nothing: the ledger version, the stamp, the slice, and
        the two clock thresholds a later round could cross: the turn start of the first running job (in
        turn order) without a full slice (time-slicing and defragmentation take only jobs with one), and
        the latest wait start among the waiting jobs that may not yet take another class's turn."""
        now = view.now
        runs = self._run_order.recs  # (self._run's jobs in its order)
        i = full_slices(runs, now, slice_)
        run_ts = runs[i].turn_start if i < len(runs) else None
        wait_ws = self._queue.earliest_under(now, self.cross_class_after * slice_ - EPS)
        return (view, view.allocation_version, self._stamp, slice_, run_ts, wait_ws)

    def _still_quiet(self, view: ClusterView) -> bool:
        """True when the last round planned nothing and nothing it read has changed since: the same
        ledger (free room, devices, running set), waiting set, packing hosts and pairs (``_stamp``), the
        same slice, and no running job reached a full slice nor a waiting job the cross-class bar. That
        round would then plan nothing again (its failures are the same), so it is skipped."""
        q = self._quiet
        if q is None or q[0] is not view or q[1] != view.allocation_version or q[2] != self._stamp:
            return False
        return self._quiet_at(view.now)

    def _quiet_after_arrivals(self, view: ClusterView) -> bool:
        """True when the last full round planned nothing, nothing it read changed since but the jobs that
        arrived, and none of those would try anything in a full round now: then that round plans nothing
        either (it is skipped; the quiet state is taken afresh with them).

        Why: with the same ledger, slice and clock thresholds, a full round repeats the last one's steps for
        the jobs it saw (the argument of :meth:`_still_quiet`); the new jobs come last in round-robin order
        (their keys are their arrival times, the latest), so they change nothing for those, and they see
        what the last round left: the same free GPUs and its failures (the shapes that found no free room,
        the packing keys that found no host, the turns that failed, ``GandivaRound.failures``; with
        nothing planned, nothing cleared them). A new job tries nothing when its shape cannot start on free
        room (its GPUs exceed the free ones, or its shape failed), it cannot pack (not packable, no host of
        its size, or its key failed), and it cannot take a turn (nobody has a full slice; its class has no
        victim and it has not waited the cross-class bar; or its turn (shape, cross-class) failed). If one
        might try something, the round is full."""
        q, fail, arrived = self._quiet, self._quiet_fail, self._arrived
        if q is None or fail is None or not arrived or q[0] is not view or q[1] != view.allocation_version \
                or q[2] + len(arrived) != self._stamp or not self._quiet_at(view.now):
            return False  # (another change too: every stamp bump but an arrival's breaks the count)
        failed, failed_pack, failed_turn, lim = fail
        now, slice_ = view.now, q[3]
        nd = full_slices(self._victims.recs, now, slice_)  # (victims with a full slice, of every class)
        bar = self.cross_class_after * slice_ - EPS
        for rec in arrived:
            if rec.id not in self._wait:
                return False
            if lim >= rec.cls and rec.shape not in failed:
                return False  # it would try free room
            if self.packing and rec.whole and rec.pack_key not in failed_pack and self._idle.get(rec.ikey):
                return False  # it would look for a host
            if nd:
                order = self._victims_cls.get(rec.cls)
                cross = order is None or full_slices(order.recs, now, slice_) == 0
                if not (cross and now - rec.wait_since < bar) and (rec.shape, cross) not in failed_turn:
                    return False  # it would try a turn
        self._quiet = self._quiet_until(view, slice_)
        return True

    def _quiet_at(self, now: float) -> bool:
        """Whether a round at ``now`` with the state as it is is known to plan nothing and change nothing
        (asked for the ticks after a decision: the state is that decision's until the next event)."""
        if not self._wait:
            return True  # nobody waits: only packs under measurement, which only reports move
        q = self._quiet
        if q is None:
            return False
        slice_ = self.slice_now
        if slice_ != q[3]:
            return False
        if q[4] is not None and not now - q[4] < slice_ - EPS:
            return False
        return q[5] is None or now - q[5] < self.cross_class_after * slice_ - EPS

    def _quiet_forever(self) -> bool:
        """No clock threshold is left to cross: later rounds stay quiet until an event."""
        q = self._quiet
        return not self._wait or (q is not None and q[4] is None and q[5] is None)

    def _evaluate_packs(self, rnd: GandivaRound) -> None:
        """Introspection: keep a pack whose measured progress beats time-slicing, else unpack."""
        view = rnd.view
        for guest_id, trial in list(self._trials.items()):
            guest, host = self._recs.get(guest_id), self._recs.get(trial.host)
            if guest is None or host is None or not guest.running or not host.running \
                    or self._partner.get(guest_id) != trial.host or trial.host not in view.sharers(guest_id):
                del self._trials[guest_id]  # one of them left: the pack is over
                continue
            g_it, h_it = guest.job.iter_time, host.job.iter_time
            if g_it is None or h_it is None or host.job.report_time <= trial.time:
                continue  # not measured since packing yet
            del self._trials[guest_id]
            s_host = trial.host_solo / h_it
            s_guest = guest.solo_iter / g_it if guest.solo_iter is not None else s_host
            pair = self._pair(guest, host)
            if s_host + s_guest >= self.pack_threshold:
                self._good_pairs.add(pair)
                continue
            self._bad_pairs.add(pair)
            self._bad_with[guest.model].add(host.model)
            self._bad_with[host.model].add(guest.model)
            rnd.unpack(guest, f"gandiva: packed progress {s_host + s_guest:.2f} < {self.pack_threshold:g} "
                              f"(time-slicing); unpacked from {host.id}")


def make(oracle: bool = False, **params: object) -> Gandiva:
    return build(Gandiva, params, policy="gandiva")
