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
  longest goes first. The slice is ``tick_interval`` (60 s, the paper's
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
from operator import attrgetter

import numpy as np

from ..engine.actions import Colocate, Migrate, Pause, Placement, Plan, Resume, Start
from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft, consolidated_first, fill
from .params import build

LEDGER_MAX_SHARE = 4  # the scheduler's ledger refuses more jobs than this on one GPU
MAX_DEFRAG_ATTEMPTS = 3  # per decision, so that a long queue keeps decisions fast
DEFRAG_CANDIDATES = 16  # target nodes considered per defragmentation attempt (most free GPUs first)
MAX_PACK_SCAN = 32  # hosts examined per packing attempt
_EPS = 1e-9


def _canonical(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


class _Rec:
    """What the policy keeps per active job."""

    __slots__ = ("job", "cls", "ci", "n", "whole", "shape", "model", "running", "turn_start", "wait_since",
                 "solo_iter", "nodes", "key")

    def __init__(self, job: JobView, now: float) -> None:
        self.job = job
        self.cls = 0.0  # GPU count: Gandiva's size class and node affinity
        self.ci = 0  # column of the class in the affinity table
        self.n = 1  # workers
        self.whole = False  # whole-GPU workers, no parameter servers: packable
        self.shape: tuple[bytes, int] = (b"", 0)
        self.model = ""
        self.running = False
        self.turn_start = -math.inf  # when it last got GPUs
        self.wait_since = now  # when it last started waiting
        self.solo_iter: float | None = None  # iteration time last measured while not sharing
        self.nodes: tuple[int, ...] = ()  # worker nodes it holds
        self.key = (now, job.seq)  # round-robin order: longest waiting first


_KEY = attrgetter("key")


class _PackTrial:
    """A guest packed onto a host at ``time``; the host's solo iteration time before packing."""

    __slots__ = ("host", "time", "host_solo")

    def __init__(self, host: str, time: float, host_solo: float) -> None:
        self.host = host
        self.time = time
        self.host_solo = host_solo


class Gandiva(BasePolicy):
    """Affinity placement, defragmenting migration, introspective packing and time-slicing."""

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
        self.tick_interval = float(slice_length)
        self.max_suspend_overhead = max_suspend_overhead
        self.packing = packing
        self.pack_threshold = float(pack_threshold)
        self.migration = migration
        self.max_migrations = max_migrations
        self.cross_class_after = float(cross_class_after)
        self.name = "gandiva"
        self._recs: dict[str, _Rec] = {}
        self._wait: dict[str, _Rec] = {}
        self._run: dict[str, _Rec] = {}  # in the order their current turn started
        self._idle: dict[tuple[int, float], dict[str, _Rec]] = defaultdict(dict)  # packing hosts by (workers, class)
        self._partner: dict[str, str] = {}  # both directions of every packed pair
        self._shared_devs: dict[str, frozenset[tuple[int, int]]] = {}  # guest -> the host devices it shares
        self._shared: set[tuple[int, int]] = set()
        self._trials: dict[str, _PackTrial] = {}  # guest -> its pack being measured
        self._bad_pairs: set[frozenset[str]] = set()
        self._good_pairs: set[frozenset[str]] = set()
        self._resumed_at: dict[str, float] = {}  # resumes whose cost is not measured yet
        self._classes: dict[float, int] = {}
        self._aff: np.ndarray | None = None  # per node and class: tasks of running jobs of that class
        self._node_jobs: list[dict[str, _Rec]] = []
        self._last_plan: list[tuple[str, str]] = []
        self.suspend_cost: float | None = None  # measured seconds lost per resume (EWMA)

    # ---------------------------------------------------------------- hooks
    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        if self._aff is None:
            self._aff = np.zeros((view.capacity.shape[0], 1), dtype=np.int64)
            self._node_jobs = [{} for _ in range(view.capacity.shape[0])]
        rec = _Rec(job, view.now)
        g = view.gpu_col
        w = view.demand_vector(job)
        per = float(w[g]) if g is not None else 0.0
        rec.n = view.target_workers(job)
        rec.cls = per * rec.n
        rec.whole = g is not None and job.spec.num_ps == 0 and abs(per - 1.0) < _EPS
        ps = view.ps_demand_vector(job)
        rec.shape = (w.tobytes() + (ps.tobytes() if ps is not None else b""), rec.n)
        rec.model = _canonical(job.spec.model)
        ci = self._classes.get(rec.cls)
        if ci is None:
            ci = self._classes[rec.cls] = len(self._classes)
            if ci >= self._aff.shape[1]:
                self._aff = np.hstack([self._aff, np.zeros_like(self._aff)])
        rec.ci = ci
        self._recs[job.id] = rec
        self._wait[job.id] = rec

    def on_progress(self, job: JobView, view: ClusterView) -> None:
        rec = self._recs.get(job.id)
        it = job.iter_time
        if rec is None or not rec.running or it is None:
            return
        if view.sharers(job.id):
            self._idle[(rec.n, rec.cls)].pop(job.id, None)
        else:
            rec.solo_iter = it
            self._dissolve(job.id)
            if rec.whole:
                self._idle[(rec.n, rec.cls)][job.id] = rec
        t0 = self._resumed_at.pop(job.id, None)
        if t0 is not None:
            cost = max(view.now - t0 - it, 0.0)
            self.suspend_cost = cost if self.suspend_cost is None else 0.7 * self.suspend_cost + 0.3 * cost

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        rec = self._recs.pop(job.id, None)
        if rec is None:
            return
        if rec.running:
            del self._run[job.id]
            self._release_nodes(rec)
            self._idle[(rec.n, rec.cls)].pop(job.id, None)
        else:
            self._wait.pop(job.id, None)
        self._dissolve(job.id)
        self._trials.pop(job.id, None)
        self._resumed_at.pop(job.id, None)

    # ------------------------------------------------------- state tracking
    @property
    def slice_now(self) -> float:
        """The slice in force: ``slice_length``, stretched to bound the measured suspend/resume cost."""
        if self.max_suspend_overhead is None or not self.suspend_cost:
            return self.slice_length
        return max(self.slice_length, self.suspend_cost / self.max_suspend_overhead)

    def _hold(self, rec: _Rec, nodes: tuple[int, ...]) -> None:
        assert self._aff is not None
        rec.nodes = nodes
        for node in nodes:
            self._aff[node, rec.ci] += 1
            self._node_jobs[node][rec.job.id] = rec

    def _release_nodes(self, rec: _Rec) -> None:
        assert self._aff is not None
        for node in rec.nodes:
            self._aff[node, rec.ci] -= 1
            self._node_jobs[node].pop(rec.job.id, None)
        rec.nodes = ()

    def _dissolve(self, job_id: str) -> None:
        """Forget the packed pair ``job_id`` belongs to (either side)."""
        other = self._partner.pop(job_id, None)
        if other is None:
            return
        self._partner.pop(other, None)
        for guest in (job_id, other):
            devs = self._shared_devs.pop(guest, None)
            if devs:
                self._shared.difference_update(devs)

    def _to_running(self, rec: _Rec, nodes: tuple[int, ...], now: float) -> None:
        if rec.job.state is JobState.PAUSED:
            self._resumed_at[rec.job.id] = now
        self._wait.pop(rec.job.id, None)
        self._run.pop(rec.job.id, None)
        self._run[rec.job.id] = rec
        rec.running = True
        rec.turn_start = now
        self._release_nodes(rec)
        self._hold(rec, nodes)

    def _to_waiting(self, rec: _Rec, now: float) -> None:
        self._run.pop(rec.job.id, None)
        self._release_nodes(rec)
        self._idle[(rec.n, rec.cls)].pop(rec.job.id, None)
        self._dissolve(rec.job.id)
        rec.running = False
        rec.wait_since = now
        rec.key = (now, rec.job.seq)
        self._wait[rec.job.id] = rec

    def _relocated(self, rec: _Rec, nodes: tuple[int, ...], now: float) -> None:
        """A running job was migrated: it restarts its turn on ``nodes``, unmeasured."""
        self._idle[(rec.n, rec.cls)].pop(rec.job.id, None)
        self._dissolve(rec.job.id)
        self._resumed_at[rec.job.id] = now
        self._run.pop(rec.job.id, None)
        self._run[rec.job.id] = rec
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

    def _pair(self, a: _Rec, b: _Rec) -> frozenset[str]:
        return frozenset((a.model, b.model))

    # ---------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Plan:
        self._catch_up(view)
        plan: Plan = []
        rnd = _Round(self, view, plan)
        if self._trials:
            self._evaluate_packs(rnd)
        if self._wait:
            rnd.schedule(sorted(self._wait.values(), key=_KEY))
        self._last_plan = rnd.log
        return plan

    def _evaluate_packs(self, rnd: _Round) -> None:
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
            rnd.unpack(guest, f"gandiva: packed progress {s_host + s_guest:.2f} < {self.pack_threshold:g} "
                              f"(time-slicing); unpacked from {host.job.id}")


class _Round:
    """One decision: the draft, the plan, and what its steps share."""

    def __init__(self, policy: Gandiva, view: ClusterView, plan: Plan) -> None:
        self.p = policy
        self.view = view
        self.draft = Draft(view)
        self.plan = plan
        self.log: list[tuple[str, str]] = []
        self.now = view.now
        self.g = view.gpu_col
        self.slice = policy.slice_now
        self.failed: set[tuple[bytes, int]] = set()  # shapes that found no free room this round
        self.failed_pack: set[tuple[int, float, str]] = set()
        self.failed_turn: set[tuple[tuple[bytes, int], bool]] = set()
        self.dirty: set[int] = set()  # nodes whose GPUs this plan already changed
        self.moved: set[str] = set()  # running jobs this plan already paused, migrated or packed onto
        self.migrations = 0
        self.defrag_attempts = 0
        # per host: would the ledger time-share its devices (_ledger_picks)? The ledger does not change
        # within a round, and a pack makes its host's nodes dirty before it changes the shared devices
        # there, so an answer holds for the round (hosts on dirty nodes are not asked again)
        self._picks: dict[str, bool] = {}
        self._free_dev: list[bool] | None = None  # per node: has a whole free GPU device (the ledger's)
        self._gpu_cap = float(view.capacity[:, self.g].max()) if self.g is not None and len(view.capacity) else 0.0

    # -------------------------------------------------------------- the round
    def schedule(self, waiting: list[_Rec]) -> None:
        g = self.g
        free = float(self.draft.free[:, g].sum()) if g is not None else math.inf
        left: list[_Rec] = []
        for rec in waiting:
            if rec.job.id in self.moved:
                continue  # suspended in this very round (unpacked): its turn comes later
            if free + _EPS >= rec.cls and self.place_free(rec):
                free = float(self.draft.free[:, g].sum()) if g is not None else math.inf
                continue
            if self.p.packing and rec.whole and self.pack(rec):
                continue
            left.append(rec)
        if left:
            self.time_slice(left)

    def _start(self, rec: _Rec, placement: Placement) -> None:
        job = rec.job
        self.plan.append(Resume(job.id, placement) if job.state is JobState.PAUSED else Start(job.id, placement))
        self.log.append(("run", job.id))
        self.p._to_running(rec, tuple(placement[: rec.n]), self.now)
        self.dirty.update(placement)

    def _suspend(self, rec: _Rec, reason: str) -> None:
        self.plan.append(Pause(rec.job.id, reason=reason))
        self.log.append(("wait", rec.job.id))
        self.dirty.update(rec.nodes)
        self.moved.add(rec.job.id)
        self.p._to_waiting(rec, self.now)

    def _migrate(self, rec: _Rec, placement: Placement) -> None:
        self.plan.append(Migrate(rec.job.id, placement))
        self.log.append(("move", rec.job.id))
        self.dirty.update(rec.nodes)
        self.dirty.update(placement)
        self.moved.add(rec.job.id)
        self.p._relocated(rec, tuple(placement[: rec.n]), self.now)

    # ------------------------------------------------------- free capacity
    def place(self, rec: _Rec) -> Placement | None:
        """Affinity placement on the draft's free room (reserved); None if it does not fit."""
        view, draft, job = self.view, self.draft, rec.job
        n = rec.n
        fit = draft.tasks_fit(view.demand_vector(job))
        whole = np.flatnonzero(fit >= n)
        if whole.size and job.spec.num_ps == 0:
            assert self.p._aff is not None
            same = self.p._aff[whole, rec.ci] > 0
            empty = (draft.free[whole, self.g] >= view.capacity[whole, self.g] - _EPS) if self.g is not None \
                else np.zeros(whole.size, bool)
            rank = np.where(same, 0, np.where(empty, 1, 2))
            node = int(whole[np.lexsort((fit[whole], rank))[0]])
            p: Placement | None = (node,) * n
        else:
            p = consolidated_first(draft, job, n)
        if p is None or not draft.reserve(job, p):
            return None
        return p

    def min_nodes(self, rec: _Rec) -> int:
        if rec.cls <= _EPS or self._gpu_cap <= 0:
            return 1
        return max(1, math.ceil(rec.cls / self._gpu_cap - _EPS))

    def place_free(self, rec: _Rec) -> bool:
        if rec.shape in self.failed:
            return False
        saved = self.draft.save()
        p = self.place(rec)
        spread = p is not None and len(set(p[: rec.n])) > self.min_nodes(rec)
        if (p is None or spread) and self.p.migration and rec.whole and rec.n > 1 \
                and self.migrations < self.p.max_migrations and self.defrag_attempts < MAX_DEFRAG_ATTEMPTS:
            self.defrag_attempts += 1
            if p is not None:
                self.draft.restore(saved)
            q = self.defragment(rec)
            if q is not None:
                self._start(rec, q)
                return True
            if p is not None and not self.draft.reserve(rec.job, p):
                p = None
        if p is None:
            self.failed.add(rec.shape)
            return False
        self._start(rec, p)
        return True

    def defragment(self, rec: _Rec) -> Placement | None:
        """Migrate jobs off the nodes with the most reclaimable GPUs so ``rec`` starts consolidated
        (paper §4.1 "Migration")."""
        view, draft, g, p = self.view, self.draft, self.g, self.p
        assert g is not None
        n = rec.n
        free = draft.free[:, g]
        if float(free.sum()) + _EPS < rec.cls:
            return None  # not fragmentation: the GPUs are simply busy
        k = min(DEFRAG_CANDIDATES, free.size)
        cand = np.argpartition(-free, k - 1)[:k] if k < free.size else np.arange(free.size)

        def movable(node: int) -> list[_Rec]:
            return [r for r in p._node_jobs[node].values()
                    if r.job.id not in self.moved and r.job.id not in p._partner and not r.job.spec.num_ps
                    and len(set(r.nodes)) == 1 and self.now - r.turn_start >= self.slice - _EPS]

        movers_by = {int(i): movable(int(i)) for i in cand}
        gain = {i: float(free[i]) + sum(r.cls for r in movers_by[i]) for i in movers_by}
        targets = sorted(gain, key=lambda i: (-gain[i], i))[: self.min_nodes(rec)]
        if sum(gain[i] for i in targets) + _EPS < rec.cls:
            return None
        movers: list[_Rec] = []
        short = rec.cls - float(free[targets].sum())
        for node in targets:
            for r in sorted(movers_by[node], key=lambda r: (r.cls, r.job.seq)):
                if short <= _EPS:
                    break
                movers.append(r)
                short -= r.cls
        if not movers or len(movers) + self.migrations > p.max_migrations:
            return None
        saved = draft.save()
        for r in movers:
            draft.give_back(r.job)
        fit = np.zeros(free.size, dtype=np.int64)
        fit[targets] = draft.tasks_fit(view.demand_vector(rec.job))[targets]
        nodes = fill(fit, n, np.array(targets))
        if nodes is None or not draft.reserve(rec.job, tuple(nodes)):
            draft.restore(saved)
            return None
        moves: list[tuple[_Rec, Placement]] = []
        for r in movers:
            q = consolidated_first(draft, r.job, r.n)
            if q is None or set(q) & set(targets) or not draft.reserve(r.job, q):
                draft.restore(saved)
                return None
            moves.append((r, q))
        for r, q in moves:
            self._migrate(r, q)
        self.migrations += len(moves)
        return tuple(nodes)

    # ---------------------------------------------------------------- packing
    def pack(self, rec: _Rec) -> bool:
        """Colocate ``rec`` on the GPUs of a running job of its size (paper §4.1 "Packing")."""
        view, draft, g, p = self.view, self.draft, self.g, self.p
        key = (rec.n, rec.cls, rec.model)
        hosts = p._idle.get((rec.n, rec.cls))
        if g is None or not hosts or key in self.failed_pack:
            return False
        rest = view.demand_vector(rec.job).copy()
        rest[g] = 0.0
        for scanned, host in enumerate(list(hosts.values())):
            if scanned >= MAX_PACK_SCAN:
                break
            hid = host.job.id
            if hid in self.moved or hid in p._partner or host.job.iter_time is None \
                    or p._pair(rec, host) in p._bad_pairs or any(node in self.dirty for node in host.nodes):
                continue
            ok = self._picks.get(hid)
            if ok is None:
                alloc = view.allocation_of(hid)
                ok = self._picks[hid] = alloc is not None and self._ledger_picks(host.nodes, alloc.devices)
            if not ok:
                continue
            alloc = view.allocation_of(hid)
            assert alloc is not None
            per_node: dict[int, int] = {}
            for node in host.nodes:
                per_node[node] = per_node.get(node, 0) + 1
            if any((draft.free[node] - rest * c < -_EPS).any() for node, c in per_node.items()):
                continue
            for node, c in per_node.items():
                draft.free[node] -= rest * c
            self.plan.append(Colocate((rec.job.id, hid), host.nodes))
            self.log.append(("run", rec.job.id))
            p._trials[rec.job.id] = _PackTrial(hid, self.now, float(host.job.iter_time))
            p._to_running(rec, host.nodes, self.now)
            p._partner[rec.job.id] = hid
            p._partner[hid] = rec.job.id
            p._shared_devs[rec.job.id] = alloc.devices
            p._shared.update(alloc.devices)
            p._idle[(host.n, host.cls)].pop(hid, None)
            self.moved.add(hid)  # a host is not sliced or migrated in the round it packs
            self.dirty.update(host.nodes)
            return True
        self.failed_pack.add(key)
        return False

    def _ledger_picks(self, nodes: tuple[int, ...], host_devices: frozenset[tuple[int, int]]) -> bool:
        """True if the ledger would time-share exactly the host's devices: it gives a guest the
        devices with the fewest jobs, then the most free room, then the lowest index."""
        dev = self.view.device_free
        shared = self.p._shared
        if self._free_dev is None:
            self._free_dev = (dev >= 1.0 - _EPS).any(axis=1).tolist()  # (-1 marks no device: never free)
        free_dev = self._free_dev
        for node in set(nodes):
            if free_dev[node]:
                return False  # a free device on the node: the guest would own it instead
            ids = np.flatnonzero(dev[node] >= 0)
            cand = sorted((1 + ((node, int(i)) in shared), -float(dev[node, i]), int(i)) for i in ids)
            cand = [x for x in cand if x[0] < LEDGER_MAX_SHARE][: nodes.count(node)]
            if {(node, x[2]) for x in cand} != {key for key in host_devices if key[0] == node}:
                return False
        return True

    def unpack(self, guest: _Rec, reason: str) -> None:
        """Move the guest to free GPUs if any, else suspend it (it is time-sliced from then on)."""
        if guest.job.id in self.moved:
            return
        p = self.place(guest)
        if p is not None:
            self._migrate(guest, p)
        else:
            self._suspend(guest, reason)

    # ------------------------------------------------------------ time-slicing
    def time_slice(self, waiting: list[_Rec]) -> None:
        """Round-robin (paper §4.1 "Suspend-Resume"): jobs that had a full slice make way for
        waiting ones, the same size class first."""
        now, p = self.now, self.p
        done: list[_Rec] = []
        for r in p._run.values():  # in the order their turns started: oldest turns first
            if now - r.turn_start < self.slice - _EPS:
                break
            if r.job.id not in self.moved and r.job.id not in p._partner:
                done.append(r)
        if not done:
            return
        by_class: dict[float, list[_Rec]] = defaultdict(list)
        for r in done:
            by_class[r.cls].append(r)
        taken: set[str] = set()
        head: dict[float, int] = defaultdict(int)  # per class: first victim not yet taken
        remaining = len(done)
        for rec in waiting:
            if remaining == 0:
                return
            same = by_class.get(rec.cls, [])
            i = head[rec.cls]
            while i < len(same) and same[i].job.id in taken:
                i += 1
            head[rec.cls] = i
            cross = i == len(same)
            if cross and now - rec.wait_since < p.cross_class_after * self.slice - _EPS:
                continue  # its own class has no turn to give yet; other classes only after a full slice
            key = (rec.shape, cross)
            if key in self.failed_turn:
                continue
            pool = done if cross else same[i:]
            got = self._take_turns(rec, (r for r in pool if r.job.id not in taken))
            if got is None:
                self.failed_turn.add(key)
                continue
            victims, placement = got
            for v in victims:
                taken.add(v.job.id)
                remaining -= 1
                self._suspend(v, f"gandiva: time slice over, {rec.job.id} resumes")
            self._start(rec, placement)
            self.failed.clear()

    def _take_turns(self, rec: _Rec, pool) -> tuple[list[_Rec], Placement] | None:  # type: ignore[no-untyped-def]
        draft = self.draft
        saved = draft.save()
        chosen: list[_Rec] = []
        width = rec.n + rec.job.spec.num_ps
        for v in pool:
            draft.give_back(v.job)
            chosen.append(v)
            placement = v.job.placement
            if len(placement) == width and draft.reserve(rec.job, placement):
                return chosen, placement  # the same nodes the suspended job had
            q = self.place(rec)
            if q is not None:
                return chosen, q
        draft.restore(saved)
        return None


def make(oracle: bool = False, **params: object) -> Gandiva:
    return build(Gandiva, params, policy="gandiva")
