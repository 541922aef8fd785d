"""Placement of new jobs one task at a time (Bao et al., §V-A, Fig. 8), shared by ``drl`` and LIF.

At each decision the pending jobs (the interval's new jobs), in arrival order (or the policy's
``order``, :mod:`.order`), are placed task
by task: :meth:`TaskwisePolicy.choose` picks one of the ``2M`` actions among the valid ones,
the state is updated, and so on until the job is whole (it starts) or no valid action is left
(its tasks are taken back and it waits for the next decision). Running jobs are never moved.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np

from ...engine.actions import Plan, Start
from ...engine.job import JobView
from ...engine.view import ClusterView
from ...models.interference import LIFModel
from ..base import BasePolicy
from ..placement import Draft
from .hold import HoldRule, due, enforce
from .isolate import narrow, unshared_room
from .layout import fit as layout_fit
from .online import load_solo
from .order import PendingOrder, solo_estimate
from .state import RESOURCES, JobEntry, PlacementState, new_entry


def _columns(view: ClusterView) -> list[int | None]:
    return [view.resource_index(r) for r in RESOURCES]


def _scale(view: ClusterView) -> np.ndarray:
    """Each of :data:`RESOURCES` over the largest capacity of any server (the state's normalisation)."""
    cap = view.capacity
    return np.array([max(float(cap[:, c].max()), 1e-9) if c is not None else 1.0 for c in _columns(view)])


def capacity_matrix(view: ClusterView) -> np.ndarray:
    """M x K: each server's capacity of :data:`RESOURCES` in the placement state's normalisation."""
    cols, scale = _columns(view), _scale(view)
    return np.stack([_vector(view.capacity[i], cols, scale) for i in range(view.capacity.shape[0])])


def _vector(row: np.ndarray | None, cols: list[int | None], scale: np.ndarray) -> np.ndarray:
    out = np.zeros(len(cols))
    if row is None:
        return out
    for k, c in enumerate(cols):
        if c is not None:
            out[k] = row[c] / scale[k]
    return out


def state_from_view(view: ClusterView) -> tuple[PlacementState, list[JobView]]:
    """The placement state of ``view`` (running jobs placed, pending jobs new) and the pending jobs."""
    cols, scale = _columns(view), _scale(view)
    cap = view.capacity
    free = np.stack([_vector(view.free[i], cols, scale) for i in range(cap.shape[0])])
    m = cap.shape[0]
    jobs: list[JobEntry] = []
    for job in view.running.values():
        jobs.append(_entry(view, job, cols, scale, m, placed=job.placement, new=False))
    pending = list(view.pending.values())
    for job in pending:
        jobs.append(_entry(view, job, cols, scale, m, placed=(), new=True))
    return PlacementState(free, jobs), pending


def job_entry(view: ClusterView, job: JobView) -> JobEntry:
    """``job`` as a new, unplaced entry of ``view``'s placement state (its requested shape and demands)."""
    return _entry(view, job, _columns(view), _scale(view), view.capacity.shape[0], placed=(), new=True)


def _entry(view: ClusterView, job: JobView, cols: list[int | None], scale: np.ndarray, m: int, *,
           placed: tuple[int, ...], new: bool) -> JobEntry:
    spec = job.spec
    allreduce = spec.num_ps == 0
    n_workers = job.n_workers if placed else view.target_workers(job)
    return new_entry(job.id, spec.model, allreduce, n_workers, spec.num_ps,
                     _vector(view.demand_vector(job), cols, scale),
                     _vector(view.ps_demand_vector(job), cols, scale), m, placed=placed, new=new)


Chooser = Callable[[PlacementState, JobEntry, np.ndarray], int]


def place_new(state: PlacementState, choose: Chooser, accept: Callable[[JobEntry], bool] = lambda e: True,
              name: str = "policy", isolate: str = "never", hold: HoldRule | None = None,
              layout: Callable[[PlacementState, JobEntry], object] | None = None
              ) -> tuple[list[JobEntry], list[JobEntry]]:
    """Place ``state``'s new jobs (``u_n = 1``) in their order, one ``choose`` per task, the state
    updated between tasks (§V-A). Every new job is in the state from the first inference on (the
    paper's state holds all concurrent jobs, the interval's new ones flagged); a job whose tasks
    cannot all be placed, or that ``accept`` refuses, has its tasks taken back and leaves the
    state. ``isolate`` narrows each job's valid actions (:mod:`.isolate`). Returns (placed,
    waiting). The simulator's policies and the trainer's episodes both place through here, so
    the states the network is trained on are the states it decides on. A job whose tasks need
    more of some resource than all servers have free together waits without an inference: no
    sequence of choices could place it, and its turn would end with its tasks taken back anyway
    (on a queued 30-server rack this skips most of the inferences). ``layout`` lays a complete job's
    tasks out again on the servers they span (:mod:`.layout`) before ``accept``."""
    placed: list[JobEntry] = []
    waiting: list[JobEntry] = []
    for entry in [e for e in state.jobs if e.new]:
        if not state.room_in_total(entry):
            state.jobs.remove(entry)
            waiting.append(entry)
            continue
        alone = unshared_room(state, entry) if isolate != "never" else None
        while not entry.complete:
            mask = state.mask(entry)
            if not mask.any():
                break
            mask = narrow(mask, entry, alone, isolate)
            action = choose(state, entry, mask)
            if not mask[action]:
                raise RuntimeError(f"{name}: chose masked action {action} for job {entry.key!r}")
            state.apply(entry, action)
        kept = entry.complete and (hold is None or enforce(state, entry, choose, hold))
        if kept and layout is not None:
            layout(state, entry)  # (the same servers, the task counts on them chosen again)
        if kept and accept(entry):
            entry.new = False
            placed.append(entry)
        else:  # not enough room for the whole job: it waits, its tasks are taken back
            state.undo(entry)
            state.jobs.remove(entry)
            waiting.append(entry)
    return placed, waiting


class TaskwisePolicy(BasePolicy):
    """Places each pending job task by task with :meth:`choose`; subclasses pick the action.
    ``pending_order`` (:mod:`.order`, the ``order`` parameter of every subclass) says in which
    order the pending jobs are offered: arrival order unless set."""

    pending_order = PendingOrder("arrival")
    #: ``isolate`` parameter (:mod:`.isolate`): never, idle or compact
    isolate = "never"
    #: ``hold`` parameter (:mod:`.hold`): seconds a job may wait rather than run spread (0: never)
    hold_s = 0.0
    #: the hold's starvation bound (:func:`.hold.due`): a held job may run spread once it has waited
    #: this many times its estimated solo run time (0: no bound beyond ``hold_s``)
    starve = 0.0
    #: ``layout`` rule (:mod:`.layout`): ``keep`` the chooser's task counts per server, or ``fit``
    layout = "keep"
    _lif_profile: LIFModel | None = None
    _solo: dict[str, dict[str, float]] | None = None
    _wake: float | None = None

    def next_decision_time(self) -> float | None:
        """When the earliest job refused by the ``hold`` rule may be placed spread (None: no such job)."""
        return self._wake

    def isolate_for(self, m: int) -> str:
        """The ``isolate`` rule on a cluster of ``m`` servers."""
        return self.isolate

    def layout_for(self, m: int) -> str:
        """The ``layout`` rule (:mod:`.layout`) on a cluster of ``m`` servers."""
        return self.layout

    def choose(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:  # pragma: no cover
        raise NotImplementedError

    def begin(self, state: PlacementState, view: ClusterView) -> None:
        """Called once per decision before the first inference."""

    _last_failed: tuple[object, ...] | None = None

    def decide(self, view: ClusterView) -> Plan:
        if not view.pending:
            return []
        # nothing placed last time and neither the waiting jobs nor the free room changed since:
        # the same inferences would give the same answer (progress reports call decide often)
        key = (tuple(view.pending), view.free.tobytes(), tuple(view.running))
        if key == self._last_failed:
            return []
        state, pending = state_from_view(view)
        self.pending_order.apply(state, pending)
        self.begin(state, view)
        draft = Draft(view)
        plan: Plan = []
        by_id = {j.id: j for j in pending}

        self._wake = None

        if self.starve > 0 and self._solo is None:
            self._solo = load_solo()
        solo = self._solo if self.starve > 0 else None

        def may_spread(entry: JobEntry) -> bool:
            job = by_id[entry.key]
            when = due(job.spec.submit_time, self.hold_s, self.starve, solo_estimate(job, solo) if solo is not None else math.inf)
            if view.now >= when:
                return True
            if math.isfinite(when):  # (an unbounded hold depends on the room alone, not the clock)
                self._wake = when if self._wake is None else min(self._wake, when)
            return False

        hold = HoldRule(capacity_matrix(view), may_spread) if self.hold_s > 0 else None

        def accept(entry: JobEntry) -> bool:
            job = by_id[entry.key]
            if draft.reserve(job, state.placement(entry)):
                plan.append(Start(job.id, state.placement(entry)))
                return True
            return False

        fit: Callable[[PlacementState, JobEntry], bool] | None = None
        if self.layout_for(state.m) == "fit":
            if self._lif_profile is None:
                self._lif_profile = LIFModel.load("line")
            c = view.resource_index("cpu")
            cores = view.capacity[:, c].astype(float) if c is not None else np.full(state.m, 8.0)
            fit = partial(layout_fit, lif=self._lif_profile, cores=cores)

        place_new(state, self.choose, accept, self.name, self.isolate_for(state.m), hold, fit)
        self._last_failed = key if not plan and self._wake is None else None
        return plan
