"""How the scheduler loop carries out a plan: one handler per action, each checked against the
state machine and the ledger before the backend is told (mixed into
:class:`~cohabit.engine.loop.Scheduler`; :mod:`.loop` folds events and asks the policy).

An action that cannot be carried out raises :class:`ActionError`, ``AllocationError``,
``IllegalTransition`` or ``Unsupported``; ``_apply`` records it as ``action_rejected`` with the
reason (and re-raises under ``strict``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..spec.resources import Resources
from . import actions as A
from .backend import Unsupported
from .job import NO_ALLOCATION, JobView
from .ledger import Allocation, AllocationError
from .record import EventKind
from .state import IllegalTransition, JobState, check_transition

if TYPE_CHECKING:
    from .loop import Scheduler


_PENDING, _RUNNING, _PAUSED = JobState.PENDING, JobState.RUNNING, JobState.PAUSED


class ActionError(ValueError):
    """A plan action that cannot be carried out (wrong state, wrong size, unknown job)."""


class ActionHandlers:
    """The scheduler's action handlers (``Scheduler._handlers`` maps each action type to one)."""

    def _apply(self: Scheduler, action: object) -> None:
        handler = self._handlers.get(type(action))
        if self._lazy is not None:  # the grid reports of the jobs it touches, before it touches them
            for jid in getattr(action, "jobs", None) or (getattr(action, "job", None),):
                if type(jid) is str:
                    self._fold_reports(jid)
        try:
            if handler is None:
                raise Unsupported(f"{type(action).__name__} is not supported by this scheduler/backend yet")
            handler(action)
        except (ActionError, AllocationError, IllegalTransition, Unsupported, KeyError) as exc:
            msg = str(exc) if not isinstance(exc, KeyError) else f"unknown job {exc}"
            self.record.append(self.now, EventKind.ACTION_REJECTED, getattr(action, "job", None),
                               action=type(action).__name__, reason=msg)
            if self.strict:
                raise

    def _job(self: Scheduler, job_id: str, *states: JobState) -> JobView:
        job = self.jobs.get(job_id)
        if job is None:
            raise ActionError(f"unknown job {job_id!r}")
        if job._state not in states:
            want = " or ".join(str(s) for s in states)
            raise ActionError(f"job {job_id!r} is {job._state}, needs to be {want}")
        return job

    def _n_workers(self: Scheduler, job: JobView, placement: A.Placement) -> int:
        n = len(placement) - job.spec.num_ps
        lo, hi = job.spec.min_workers, job.spec.max_workers
        if not lo <= n <= hi:
            raise ActionError(
                f"job {job.id!r}: placement gives {n} workers, must be in [{lo}, {hi}] "
                f"(plus {job.spec.num_ps} parameter servers)"
            )
        return n

    def _place(self: Scheduler, job: JobView, placement: A.Placement, kind: EventKind, *, from_checkpoint: bool,
               share_gpus: bool = False, group: tuple[str, tuple[int, ...]] | None = None,
               only_devices: frozenset[tuple[int, int]] | None = None, **extra: object) -> None:
        spec = job._spec
        jid, now = spec.id, self.now
        num_ps = spec.num_ps
        n = len(placement) - num_ps
        if not spec.min_workers <= n <= spec.max_workers:
            self._n_workers(job, placement)  # (refuses, naming the bounds)
        vectors = self._task_vectors(jid, n, num_ps)
        if group is not None:
            alloc = self.ledger.allocate_group(jid, placement, vectors, mode=group[0], nodes=group[1])
        elif share_gpus or only_devices is not None:
            alloc = self.ledger.allocate(jid, placement, vectors, share_gpus=share_gpus, only_devices=only_devices)
        else:
            alloc = self.ledger.allocate(jid, placement, vectors)
        self._occupy(job, alloc, placement, vectors)
        self.backend.launch(spec, alloc, now, from_checkpoint=from_checkpoint)
        if extra:
            self.record.append(now, kind, jid, alloc=self._alloc_dict(alloc.total), nodes=list(placement), **extra)
        else:
            self.record.append_alloc(now, kind, jid, self._alloc_dict(alloc.total), list(placement))

    def _alloc_dict(self: Scheduler, total: Resources) -> dict[str, float]:
        """``total.as_dict()``, one dict per ``Resources`` object (the ledger keeps one per distinct
        total): the record then shares it without hashing its contents again. Never change it."""
        cache = self._alloc_dicts
        hit = cache.get(id(total))
        if hit is None or hit[0] is not total:
            if len(cache) > 4096:
                cache.clear()
            hit = cache[id(total)] = (total, total.as_dict())  # (keeps total alive: its id stays its own)
        return hit[1]

    def _occupy(self: Scheduler, job: JobView, alloc: Allocation, placement: A.Placement,
                vectors: list[np.ndarray] | None = None) -> None:
        """Mark ``job`` running on ``alloc`` (before the backend launches it); ``vectors``: its task rows on
        ``placement`` (``_task_vectors``) if the caller has them."""
        jid, now = job._spec.id, self.now
        job._settle(now)
        state = job._state
        if state is not _PENDING and state is not _PAUSED:  # (pending or paused -> running: always allowed)
            check_transition(jid, state, _RUNNING)
        job._state = _RUNNING
        job._placement = placement if type(placement) is tuple else tuple(placement)
        job._alloc = alloc.total
        col = self.ledger._gpu_col
        if vectors is not None and col is not None:
            hit = _GPUS_OF_LIST.get(id(vectors))  # (_gpus_of's memo of the shared lists, looked up here first)
            job._gpus = hit[2] if hit is not None and hit[0] is vectors and hit[1] == col else _gpus_of(vectors, col)
        else:
            job._gpus = self._demand_gpus(jid, len(placement))
        job._iter_time = None  # a new placement must be measured anew
        job._report_time = now
        if job._first_start is None:
            job._first_start = now
        self.running[jid] = job
        if job._criterion is not None:
            self.criteria.placed(jid, now, job._run_time)

    def _demand_gpus(self: Scheduler, job_id: str, n_tasks: int) -> float:
        """GPUs a job uses on ``n_tasks`` tasks (shared or owned): the rate of its attained service."""
        col = self.ledger.gpu_col
        if col is None:
            return 0.0
        spec = self.jobs[job_id].spec
        return _gpus_of(self._task_vectors(job_id, n_tasks - spec.num_ps), col)

    def _release(self: Scheduler, job_id: str) -> None:
        """Free a job's allocation; GPU time-sharing guests that inherit a device are recorded.
        A pack member leaving its pack is recorded as ``unpacked`` (the others continue)."""
        held = self.ledger.allocations.get(job_id)
        device = held.pack if held is not None else None
        for guest in self.ledger.release(job_id):
            self._reallocated(guest, f"inherited GPU from {job_id}")
        if device is not None:
            self.record.append(self.now, EventKind.UNPACKED, None, device=list(device), left=job_id,
                               members=list(self.ledger.packs.get(device, ())))

    def _reallocated(self: Scheduler, job_id: str, reason: str) -> None:
        g = self.jobs[job_id]
        g._settle(self.now)
        g._alloc = self.ledger.owned(job_id)
        self.record.append(self.now, EventKind.REALLOCATED, job_id, alloc=g._alloc.as_dict(), reason=reason)

    def _start(self: Scheduler, a: A.Start) -> None:
        jid = a.job
        job = self.jobs.get(jid)
        if job is None or job._state is not _PENDING:
            job = self._job(jid, JobState.PENDING)  # (refuses, naming the state)
        self._place(job, a.placement, EventKind.STARTED, from_checkpoint=False)
        del self.pending[jid]

    def _resume(self: Scheduler, a: A.Resume) -> None:
        jid = a.job
        job = self.jobs.get(jid)
        if job is None or job._state is not _PAUSED:
            job = self._job(jid, JobState.PAUSED)
        self._place(job, a.placement, EventKind.RESUMED, from_checkpoint=True)
        del self.paused[jid]

    def _colocate(self: Scheduler, a: A.Colocate) -> None:
        """Mode ``share``: start or resume ``a.jobs[0]`` on ``a.nodes``, time-sharing GPUs already in
        use (Gandiva's packing, naive co-location); ``a.jobs[1:]`` name the intended hosts.
        Modes ``pipelined`` / ``naive``: see :meth:`_group`."""
        if a.mode in A.GROUP_MODES:
            self._group(a)
            return
        if a.mode != "share":
            raise Unsupported(f"Colocate mode {a.mode!r} is not supported "
                              f"(supported: 'share', {', '.join(repr(m) for m in A.GROUP_MODES)})")
        if not a.jobs:
            raise ActionError("Colocate needs at least one job")
        job = self._job(a.jobs[0], JobState.PENDING, JobState.PAUSED)
        resumed = job._state is JobState.PAUSED
        kind = EventKind.RESUMED if resumed else EventKind.STARTED
        only = None
        if a.on_hosts:
            held = [self.ledger.allocations[h].devices for h in a.jobs[1:] if h in self.ledger.allocations]
            if not held:
                raise ActionError(f"Colocate(on_hosts=True): none of the hosts {list(a.jobs[1:])} holds GPUs")
            only = frozenset().union(*held)
        self._place(job, a.nodes, kind, from_checkpoint=resumed, share_gpus=True, only_devices=only,
                    colocated_with=list(a.jobs[1:]))
        (self.paused if resumed else self.pending).pop(job.id)

    def _group(self: Scheduler, a: A.Colocate) -> None:
        """Put ``a.jobs`` in the group that holds machines ``a.nodes`` (Harmony's job group).

        Each job runs one worker on every machine of the group (its DoP is ``len(nodes)``) and its
        parameter servers co-located on the same machines. Pending jobs start, paused ones resume
        from their checkpoint, running ones already in this group stay untouched, running ones
        elsewhere move here (checkpoint at the iteration boundary, restore: a migration, or a
        resize if their DoP changes). Members of the group not listed stay. Every machine must be
        held by this group already or be left empty once the moving jobs have gone; otherwise the
        whole action is refused and nothing changes."""
        if not a.jobs or len(set(a.jobs)) != len(a.jobs):
            raise ActionError(f"Colocate needs distinct jobs, got {list(a.jobs)}")
        nodes = tuple(int(n) for n in a.nodes)
        if not nodes or len(set(nodes)) != len(nodes):
            raise ActionError(f"Colocate({a.mode!r}) needs distinct nodes, got {list(a.nodes)}")
        key = self.ledger.group_key(a.mode, nodes)
        jobs = [self._job(j, JobState.PENDING, JobState.PAUSED, JobState.RUNNING) for j in a.jobs]
        placements = {j.id: self._group_placement(j, nodes) for j in jobs}
        for j in jobs:
            self._n_workers(j, placements[j.id])
        alloc_of = self.ledger.allocations
        joining = [j for j in jobs if j._state is not JobState.RUNNING or alloc_of[j.id].group != key]
        movers = {j.id for j in joining if j._state is JobState.RUNNING}
        reason = self.ledger.group_blocked(nodes, key, movers)
        for j in joining:
            if reason is None:
                reason = self.ledger.group_task_fits(j.id, placements[j.id],
                                                     self._task_vectors(j.id, len(nodes)))
        if reason is not None:
            raise AllocationError(reason)
        kinds: dict[str, EventKind] = {}
        for j in joining:  # every mover leaves its old place first (checkpoint at the iteration boundary)
            if j.id in movers:
                j._settle(self.now)
                resized = j.n_workers != len(nodes)
                self._release(j.id)
                self.backend.halt(j.id, self.now, checkpoint=True)
                del self.running[j.id]
                kinds[j.id] = EventKind.RESIZED if resized else EventKind.MIGRATED
        for j in joining:
            kind = kinds.get(j.id)
            if kind is None:
                kind = EventKind.RESUMED if j._state is JobState.PAUSED else EventKind.STARTED
            elif kind is EventKind.RESIZED:
                j._resizes += 1
            else:
                j._migrations += 1
            others = [o for o in a.jobs if o != j.id]
            self._place(j, placements[j.id], kind, from_checkpoint=kind is not EventKind.STARTED, group=key,
                        group_nodes=list(key[1]), mode=a.mode, colocated_with=others)
            self.pending.pop(j.id, None)
            self.paused.pop(j.id, None)

    def _pack(self: Scheduler, a: A.Pack) -> None:
        """Train ``a.jobs`` jointly as one packed model on ``a.device`` (Liu, Pack, §2.1.2).

        Pending jobs start and paused ones resume (from their own checkpoints) into the pack;
        members already in this pack stay and keep training (a job may be *loaded* into a
        running pack, §2.2.3). Only single-task jobs pack; a job running elsewhere must be paused
        first. The ledger checks the device (wholly free, or already this pack's), the node's
        resources and the pack's device memory; the backend must support packing
        (``launch_pack``). All-or-nothing."""
        if not a.jobs or len(set(a.jobs)) != len(a.jobs):
            raise ActionError(f"Pack needs distinct jobs, got {list(a.jobs)}")
        try:
            device = (int(a.device[0]), int(a.device[1]))
        except (TypeError, ValueError, IndexError):
            raise ActionError(f"Pack device must be (node, gpu), got {a.device!r}") from None
        jobs = [self._job(j, JobState.PENDING, JobState.PAUSED, JobState.RUNNING) for j in a.jobs]
        members = set(self.ledger.packs.get(device, ()))
        for j in jobs:
            if j.spec.num_ps or j.spec.min_workers != 1:
                raise ActionError(f"job {j.id!r} has {j.spec.workers.count} workers and {j.spec.num_ps} parameter "
                                  f"servers; only single-task jobs can be packed")
            if j._state is JobState.RUNNING and j.id not in members:
                raise ActionError(f"job {j.id!r} is running outside the pack on {list(device)}; pause it first")
        joining = [j for j in jobs if j._state is not JobState.RUNNING]
        if not joining:
            raise ActionError(f"Pack: every job of {list(a.jobs)} already trains in the pack on {list(device)}")
        launch = getattr(self.backend, "launch_pack", None)
        if launch is None:
            raise Unsupported(f"backend {type(self.backend).__name__} cannot run packs (no launch_pack)")
        reason = self.ledger.pack_blocked(device, [(j.id, self._demands[j.id][0]) for j in joining])
        if reason is not None:
            raise AllocationError(reason)
        owner = self.ledger.packs[device][0] if device in self.ledger.packs else None
        owner_total = self.ledger.allocations[owner].total if owner is not None else None
        allocs = [self.ledger.allocate_pack(j.id, device, self._demands[j.id][0]) for j in joining]
        if owner is not None and self.ledger.allocations[owner].total != owner_total:
            self._reallocated(owner, f"pack on {list(device)} needs more CPU for its new members")
        resumed = [j._state is JobState.PAUSED for j in joining]
        for j, alloc in zip(joining, allocs):
            self._occupy(j, alloc, (device[0],))
            self.pending.pop(j.id, None)
            self.paused.pop(j.id, None)
        launch(device, [j.spec for j in joining], allocs, self.now, from_checkpoint=resumed)
        everyone = list(self.ledger.packs[device])
        for j, alloc, r in zip(joining, allocs, resumed):
            self.record.append(self.now, EventKind.RESUMED if r else EventKind.STARTED, j.id,
                               alloc=alloc.total.as_dict(), nodes=[device[0]], pack=list(device),
                               packed_with=[o for o in everyone if o != j.id])
        self.record.append(self.now, EventKind.PACKED, None, device=list(device), members=everyone,
                           joined=[j.id for j in joining], mem_gb=self.ledger.pack_mem[device])

    @staticmethod
    def _group_placement(job: JobView, nodes: tuple[int, ...]) -> A.Placement:
        """One worker per machine of the group, parameter servers co-located round-robin."""
        return nodes + tuple(nodes[i % len(nodes)] for i in range(job.spec.num_ps))

    def _unplace(self: Scheduler, job: JobView) -> None:
        jid, now = job.id, self.now
        job._settle(now)
        self._release(jid)
        self.backend.halt(jid, now, checkpoint=True)
        del self.running[jid]

    def _pause(self: Scheduler, a: A.Pause) -> None:
        """Release, halt (checkpoint) and record ``a.job`` as paused (:meth:`_unplace`, :meth:`_paused`, in one)."""
        jid = a.job
        job = self.jobs.get(jid)
        if job is None or job._state is not _RUNNING:
            job = self._job(jid, JobState.RUNNING)
        now = self.now
        job._settle(now)
        ledger = self.ledger
        held = ledger.allocations.get(jid)
        if held is not None and held.pack is None:  # (_release without a pack to leave)
            for guest in ledger.release(jid):
                self._reallocated(guest, f"inherited GPU from {jid}")
        else:
            self._release(jid)
        self.backend.halt(jid, now, checkpoint=True)
        del self.running[jid]
        self._paused(job, a.reason)

    def _paused(self: Scheduler, job: JobView, reason: str) -> None:
        """Record ``job`` (already halted and released) as paused, for the policy to place again."""
        jid = job._spec.id
        if job._state is not _RUNNING:  # (running -> paused: always allowed)
            check_transition(jid, job._state, JobState.PAUSED)
        job._state = JobState.PAUSED
        job._placement = ()
        job._alloc = NO_ALLOCATION
        job._preemptions += 1
        self.paused[jid] = job
        self.record.append_paused(self.now, jid, reason)

    def _move(self: Scheduler, job: JobView, placement: A.Placement, kind: EventKind) -> None:
        """Checkpoint ``job``, release it, and restore it on ``placement`` (Migrate / Resize)."""
        n_new = self._n_workers(job, placement)
        alloc_now = self.ledger.allocations.get(job.id)
        if alloc_now is not None and alloc_now.group is not None:
            raise ActionError(f"job {job.id!r} is in a {alloc_now.group[0]} group; move it with Colocate "
                              f"or Pause it")
        vectors = self._task_vectors(job.id, n_new)
        # Try the move on a scratch copy first: releasing has effects that cannot be undone exactly
        # (time-sharing guests inherit the job's GPUs, a pack member leaves its pack), so a move that
        # does not fit must be refused before anything changes. AllocationError leaves all as it was.
        trial = self.ledger.draft()
        trial.release(job.id)
        trial.allocate(job.id, placement, vectors)
        job._settle(self.now)
        self._release(job.id)  # a pack member moves out of its pack: it runs alone afterwards
        alloc = self.ledger.allocate(job.id, placement, vectors)
        self.backend.halt(job.id, self.now, checkpoint=True)
        job._placement = tuple(placement)
        job._alloc = alloc.total
        job._gpus = self._demand_gpus(job.id, len(placement))
        job._iter_time = None
        job._report_time = self.now
        self.backend.launch(job.spec, alloc, self.now, from_checkpoint=True)
        self.record.append(self.now, kind, job.id, alloc=alloc.total.as_dict(), nodes=list(placement))

    def _migrate(self: Scheduler, a: A.Migrate) -> None:
        job = self._job(a.job, JobState.RUNNING)
        if len(a.placement) != len(job._placement):
            raise ActionError(f"Migrate keeps the task count ({len(job._placement)}); use Resize to change it")
        self._move(job, a.placement, EventKind.MIGRATED)
        job._migrations += 1

    def _resize(self: Scheduler, a: A.Resize) -> None:
        job = self._job(a.job, JobState.RUNNING)
        self._move(job, a.placement, EventKind.RESIZED)
        job._resizes += 1

    def _set_share(self: Scheduler, a: A.SetShare) -> None:
        """Change a running single-task job's share in place (Rotary-AQP's extra cores, Alg. 4).

        ``a.share`` names the resources to change and their new amounts for the task (the others
        keep the job's demand); the job stays on its node and keeps running (no checkpoint). Only
        jobs holding no GPU, outside groups and packs; the backend must support it (``set_share``).
        The share lasts until the job is paused, moved or ends: a resumed job gets its demand again.
        """
        job = self._job(a.job, JobState.RUNNING)
        set_share = getattr(self.backend, "set_share", None)
        if set_share is None:
            raise Unsupported(f"backend {type(self.backend).__name__} cannot change a running job's share "
                              f"(no set_share)")
        alloc_now = self.ledger.allocations[job.id]
        if len(alloc_now.slots) != 1 or alloc_now.group is not None or alloc_now.pack is not None:
            raise ActionError(f"SetShare changes the share of a single-task job running alone; job {job.id!r} "
                              f"has {len(alloc_now.slots)} tasks" + (" in a group or pack" if len(alloc_now.slots) == 1 else ""))
        if alloc_now.devices or "gpu" in a.share:
            raise ActionError(f"SetShare does not change GPUs; job {job.id!r} holds or names GPUs")
        if not a.share:
            raise ActionError("SetShare needs at least one resource")
        base = dict(job.spec.workers.demand.items())
        for name, amount in a.share.items():
            if not amount > 0:
                raise ActionError(f"SetShare {name}={amount!r} for job {job.id!r}: amounts must be > 0")
            base[name] = float(amount)
        vec = self.ledger.vector(Resources(base))
        if vec is None:
            raise ActionError(f"SetShare for job {job.id!r} names a resource no node has: {sorted(a.share)}")
        placement = job._placement
        trial = self.ledger.draft()  # all-or-nothing: a share that does not fit changes nothing
        trial.release(job.id)
        trial.allocate(job.id, placement, [vec])
        job._settle(self.now)
        self.ledger.release(job.id)
        alloc = self.ledger.allocate(job.id, placement, [vec])
        job._alloc = alloc.total
        job._iter_time = None  # a new share runs at a new speed: measured anew
        job._report_time = self.now
        set_share(job.id, alloc, self.now)
        self.record.append(self.now, EventKind.REALLOCATED, job.id, alloc=alloc.total.as_dict(),
                           reason="share set by the policy")

    def _stop(self: Scheduler, a: A.Stop) -> None:
        job = self._job(a.job, JobState.PENDING, JobState.RUNNING, JobState.PAUSED)
        if job._state is JobState.RUNNING:
            self.backend.halt(job.id, self.now, checkpoint=True)
        if a.outcome == "cancelled":
            self._end(job, JobState.CANCELLED, EventKind.CANCELLED, a.reason)
        else:
            self._end(job, JobState.STOPPED_EARLY, EventKind.STOPPED, a.reason)


#: (GPU column, ids of a job's task rows) -> (the rows, their GPU sum): :func:`_gpus_of` of read-only rows
_GPUS: dict[tuple[int, ...], tuple[list[np.ndarray], float]] = {}


#: id(a shared list of task rows) -> (the list, GPU column, :func:`_gpus_of`): the scheduler's ``_task_vectors`` lists
_GPUS_OF_LIST: dict[int, tuple[list[np.ndarray], int, float]] = {}


def _gpus_of(vectors: list[np.ndarray], col: int) -> float:
    """The sum of the rows' GPU column, added in task order; kept per sequence of read-only rows (the
    ledger's own, see ``Ledger.vector``: a start or resume asks it for the same few shapes again and again),
    and per list for the scheduler's shared lists of them (``Scheduler._task_vectors``, never changed)."""
    hit_list = _GPUS_OF_LIST.get(id(vectors))
    if hit_list is not None and hit_list[0] is vectors and hit_list[1] == col:
        return hit_list[2]
    total = _gpus_of_rows(vectors, col)
    if not any(v.flags.writeable for v in vectors):
        if len(_GPUS_OF_LIST) > 4096:
            _GPUS_OF_LIST.clear()
        _GPUS_OF_LIST[id(vectors)] = (vectors, col, total)  # (keeps the list alive: its id stays its own)
    return total


def _gpus_of_rows(vectors: list[np.ndarray], col: int) -> float:
    key = (col, *map(id, vectors))
    hit = _GPUS.get(key)
    if hit is not None:
        return hit[1]
    total = float(sum(v[col] for v in vectors))
    if not any(v.flags.writeable for v in vectors):
        if len(_GPUS) > 4096:
            _GPUS.clear()
        _GPUS[key] = (vectors, total)  # (keeps the rows alive: their ids stay theirs)
    return total
