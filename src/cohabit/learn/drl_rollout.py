"""A rollout expert for Harmony-DRL's actor, used only in training (``cohabit train drl-dagger
--teacher rollout``): each candidate action is scored by running the cluster forward.

Why: the reward-model lookahead (:class:`~cohabit.learn.drl_expert.LookaheadExpert`) maximises
the summed normalised speed of the jobs placed *now*; it cannot see that a job placed where it
runs a little faster may hold GPUs that the jobs waiting behind it need, nor that a short job
slowed down costs the average JCT more than a long one. On bursty arrivals the queue dominates
(``bench/drl_bounds.py``: with no interference the bursty workload's average JCT would be 2.2
intervals instead of 5.7), so the teacher has to value completion times, not speeds.

:class:`DrainRollout` (a :data:`~cohabit.policies.drl.taskwise.Chooser`): for each valid action
for the next task of a job, the job is completed by the consolidating rule
(:func:`~cohabit.learn.drl_expert.complete`), then a small fluid simulation drains the cluster:
no new arrivals; the running jobs, the candidate and the jobs waiting behind it (in arrival
order, each started by the same consolidating rule as soon as it fits, later ones passing a
blocked one as the task-by-task loop does) train at the speeds the simulator's interference
world gives their co-location (:func:`cohabit.sim.drl_physics.speeds`: the *observed* speeds of
the paper's online stage, §IV), the speeds recomputed at every start and finish, until every
job is done. The candidate's score is minus the sum of the jobs' completion times from now:
exactly the contribution of these jobs to the average JCT if nothing else arrived.

What it reads: the placement state (as the actor), the work each job has left (its declared
``iterations`` minus the progress it reported, :meth:`DrainRollout.observe`) and the
simulator's interference world. The last is not an observation: this chooser labels training
states and is never a policy (``drl`` decides with the actor alone; ``tests/test_barrier.py``).
"""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..policies.drl.state import JobEntry, PlacementState
from ..policies.drl.taskwise import Chooser, place_new
from ..sim.drl_physics import InterferenceWorld, Placed, base_speed, speeds
from .drl_expert import Job, LookaheadExpert, take_action

_EPS = 1e-9


def _placed(e: JobEntry, pw: np.ndarray, pp: np.ndarray) -> Placed:
    return Placed(e.model, e.allreduce, {s: int(c) for s, c in enumerate(pw) if c},
                  {s: int(c) for s, c in enumerate(pp) if c})


def _used(e: JobEntry, pw: np.ndarray, pp: np.ndarray) -> np.ndarray:
    return np.outer(pw, e.worker_demand) + np.outer(pp, e.ps_demand)


class PhysicsScorer:
    """Sum of the normalised speeds the simulator's interference world gives each candidate's jobs
    (speed over solo speed; the scorer of :class:`~cohabit.learn.drl_expert.LookaheadExpert`
    with observed instead of predicted speeds)."""

    def __init__(self, world: InterferenceWorld, cores: float = 8.0) -> None:
        self.world, self.cores = world, cores

    def __call__(self, cands: list[list[Job]]) -> np.ndarray:
        out = np.zeros(len(cands))
        for i, c in enumerate(cands):
            placed = [Placed(mo, ar, {s: int(n) for s, n in enumerate(pw) if n},
                             {s: int(n) for s, n in enumerate(pp) if n}) for mo, ar, _, _, pw, pp in c]
            got = speeds(placed, {s: self.cores for s in range(len(c[0][4]))}, self.world)
            out[i] = sum(g / base_speed(mo, ar, nw, npp) for g, (mo, ar, nw, npp, _, _) in zip(got, c))
        return out


def _copy(e: JobEntry, new: bool) -> JobEntry:
    return replace(e, placed_w=e.placed_w.copy(), placed_p=e.placed_p.copy(), new=new)


def _solo_estimate(e: JobEntry, work: float) -> float:
    """Seconds ``e`` would take alone with ``work`` samples left (the rollouts' ``order=short``)."""
    return work / max(base_speed(e.model, e.allreduce, e.n_workers, e.n_ps), _EPS)


def drain(state: PlacementState, left: dict[str, float], placer: Chooser, world: InterferenceWorld,
          cores: float = 8.0, max_events: int = 200,
          arrivals: Sequence[tuple[float, JobEntry]] = ()) -> float:
    """Sum of completion times (seconds from now) of every job of ``state`` (its placed jobs keep
    their placement; its new ones start in order, placed task by task by ``placer`` through
    :func:`~cohabit.policies.drl.taskwise.place_new`, whenever they fit), each with ``left[key]``
    samples to train, the speeds recomputed at every start and finish. ``arrivals``: jobs that
    arrive later, ``(seconds from now, entry)`` in time order (their work in ``left`` too); each
    joins the waiting jobs at its time, the waiting jobs then offered shortest (estimated solo
    time) first as ``drl``'s ``order=short`` does, and counts its time from its arrival. Without
    arrivals nothing else arrives (the drained cluster). Jobs still unfinished after
    ``max_events`` count the time left at their solo speed. ``state`` is not modified."""
    st = PlacementState(state.free.copy(), [_copy(e, e.new) for e in state.jobs])
    rem = {e.key: left[e.key] for e in st.jobs}
    born = {e.key: 0.0 for e in st.jobs}
    later = [(float(at), _copy(e, True)) for at, e in arrivals]
    cores_of = {s: cores for s in range(st.m)}
    t, total, nxt = 0.0, 0.0, 0
    for _ in range(max_events):
        if nxt < len(later) and later[nxt][0] <= t + _EPS:
            while nxt < len(later) and later[nxt][0] <= t + _EPS:
                at, e = later[nxt]
                rem[e.key], born[e.key] = left[e.key], at
                st.jobs.append(e)
                nxt += 1
            new = sorted((e for e in st.jobs if e.new), key=lambda e: _solo_estimate(e, rem[e.key]))
            st.jobs[:] = [e for e in st.jobs if not e.new] + new
        if any(e.new for e in st.jobs):
            _, waiting = place_new(st, placer)
            st.jobs.extend(waiting)  # place_new took them out; they wait, in order, for the next event
            st.decisions.clear()
        run = [e for e in st.jobs if not e.new]
        if not run:
            if nxt >= len(later):
                break
            t = later[nxt][0]  # an idle cluster until the next arrival
            continue
        rate = speeds([_placed(e, e.placed_w, e.placed_p) for e in run], cores_of, world)
        dt = min(rem[e.key] / max(v, _EPS) for e, v in zip(run, rate))
        if nxt < len(later):
            dt = min(dt, later[nxt][0] - t)
        t += dt
        for e, v in zip(run, rate):
            rem[e.key] -= v * dt
            if rem[e.key] <= 1e-6 * max(v, 1.0):
                total += t - born[e.key]
                st.free += _used(e, e.placed_w, e.placed_p)
                st.jobs.remove(e)
        if not st.jobs and nxt >= len(later):
            break
    else:  # out of events: the rest at solo speed
        for e in st.jobs:
            total += t - born[e.key] + _solo_estimate(e, rem[e.key])
        for at, e in later[nxt:]:
            total += max(t - at, 0.0) + _solo_estimate(e, left[e.key])
    return total


class DrainRollout:
    """Chooser: the action whose drained cluster has the least sum of completion times (module doc).

    :meth:`observe` must be called with the deciding view before the decision's first task (the
    :class:`~cohabit.learn.drl_dagger.RecordingPolicy` does it in ``begin``); jobs it has not seen
    count their declared work. Running jobs' freed room only returns in the rollout when they
    finish, so ``free`` in the state must be the cluster's free room now."""

    def __init__(self, world: InterferenceWorld | None = None, cores: float = 8.0, max_events: int = 200,
                 placer: Chooser | None = None, margin: float = 0.0) -> None:
        self.margin = margin
        self.last = np.zeros(0)
        self.world = world if world is not None else InterferenceWorld()
        #: how the rollout places the candidate's other tasks and the waiting jobs: by default the
        #: myopic lookahead on observed speeds (each task where the summed normalised speed is highest)
        self.placer = placer if placer is not None else LookaheadExpert(PhysicsScorer(self.world, cores), horizon=0)
        self.cores = cores
        self.max_events = max_events
        self.left: dict[str, float] = {}
        self.work: dict[str, float] = {}
        self.hopeless = False
        self.calls = 0

    def observe(self, view: Any) -> None:
        """Samples left per job: declared ``iterations`` minus the progress reported so far."""
        self.left = {}
        for jid, job in view.running.items():
            self.left[jid] = max(float(job.spec.iterations) - float(job.iterations_done(view.now)), 1.0)
        for jid, job in view.pending.items():
            self.left[jid] = float(job.spec.iterations)

    def _left(self, e: JobEntry) -> float:
        return self.left.get(e.key, 1.0)

    def scores(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> np.ndarray:
        """Per action, minus the drained sum of completion times (``-inf``: masked, or the job
        cannot be completed after it)."""
        out = np.full(mask.size, -np.inf)
        pos = state.jobs.index(job)
        keep = [j for j in state.jobs if j is not job and j.complete and (j.placed_w.sum() + j.placed_p.sum()) > 0]
        queue = [e for e in state.jobs[pos + 1:] if e.new]
        left = {e.key: self._left(e) for e in state.jobs}
        for a in np.flatnonzero(mask):
            pw, pp, free = take_action(state, job, a)
            done = self._complete(state, free, job, pw, pp, keep)
            if done is None:
                continue
            free -= _used(job, done[0] - pw, done[1] - pp)
            me = replace(job, placed_w=done[0], placed_p=done[1], new=False)
            out[a] = -self.cost(PlacementState(free, [*keep, me, *queue]), left)
        self.calls += 1
        return out

    def cost(self, state: PlacementState, left: dict[str, float]) -> float:
        """What a candidate's state costs: its drained sum of completion times."""
        return drain(state, left, self.placer, self.world, self.cores, self.max_events)

    def _complete(self, state: PlacementState, free: np.ndarray, job: JobEntry, pw: np.ndarray, pp: np.ndarray,
                  keep: list[JobEntry]) -> tuple[np.ndarray, np.ndarray] | None:
        """The candidate's other tasks, placed by the rollout's placer."""
        me = replace(job, placed_w=pw.copy(), placed_p=pp.copy(), new=True)
        st = PlacementState(free.copy(), [*keep, me])
        placed, _ = place_new(st, self.placer)
        return (me.placed_w, me.placed_p) if placed else None

    def label(self, own: int) -> int:
        """The training label for a state where the actor would take ``own``: the last call's best
        action when it beats ``own`` by more than ``margin`` (relative, in the drained sum of
        completion times), else ``own``. Near-ties in a rollout are noise, not advice: labelling
        them would move the actor away from choices that are as good (conservative policy
        improvement)."""
        s = self.last
        best = int(np.argmax(s))
        if not np.isfinite(s[own]) or s[best] - s[own] > self.margin * abs(s[own]):
            return best
        return own

    def __call__(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        s = self.scores(state, job, mask)
        self.last = s
        self.hopeless = not np.isfinite(s).any()
        if not self.hopeless:
            return int(np.argmax(s))
        return int(np.flatnonzero(mask)[0])


class FutureRollout(DrainRollout):
    """The rollout teacher with sampled future arrivals (session drl14): each candidate's cost is
    the mean, over ``futures`` sampled futures, of the sum of completion times of the jobs there
    now **and** of the jobs that arrive in the next ``horizon_s`` seconds (each counted from its
    arrival), the same futures for every candidate of a decision (common random numbers).

    Why: :class:`DrainRollout` drains the cluster with nothing else arriving, so it never keeps
    room for the next jobs; on the Poisson validation seeds its placements leave later arrivals
    beside running jobs (``docs/drl.md``, "Session drl13": slowdown, not waiting, is Poisson's excess).

    Futures are drawn from the **arrival history the scheduler has seen** (never the workload
    generator's parameters or the trace's future): the arrival rate is the number of jobs submitted
    so far over the time elapsed (at least ``min_window_s``), arrivals a Poisson process of that
    rate, each job a copy of one submitted so far (model, architecture, tasks, demands, declared
    work) drawn uniformly. :meth:`observe` records the history from the deciding view and draws the
    decision's futures (seeded by ``seed`` and the clock, so a rerun labels alike)."""

    def __init__(self, *args: Any, futures: int = 4, horizon_s: float = 2400.0, min_window_s: float = 1200.0,
                 seed: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if futures < 1 or not horizon_s > 0 or not min_window_s > 0:
            raise ValueError("futures must be >= 1 and horizon_s, min_window_s > 0")
        self.futures, self.horizon_s, self.min_window_s, self.seed = futures, horizon_s, min_window_s, seed
        self.seen: dict[str, tuple[JobEntry, float]] = {}  # job id -> (template, declared work)
        self.rate = 0.0  # arrivals per second seen so far
        self.sampled: list[list[tuple[float, JobEntry]]] = []
        self.sampled_left: dict[str, float] = {}

    def observe(self, view: Any) -> None:
        """Work left per job (as :class:`DrainRollout`), the arrival history, and this decision's futures."""
        from ..policies.drl.taskwise import job_entry

        super().observe(view)
        now = float(view.now)
        for jid, job in view.jobs.items():
            if jid not in self.seen and float(job.spec.submit_time) <= now and job.spec.iterations is not None:
                self.seen[jid] = (job_entry(view, job), float(job.spec.iterations))
        self.rate = len(self.seen) / max(now, self.min_window_s)
        self.sample(now)

    def sample(self, now: float) -> None:
        """Draws ``futures`` arrival sequences over the next ``horizon_s`` seconds from the history."""
        rng = np.random.default_rng([self.seed, int(now * 1000) & 0x7FFFFFFF])
        history = list(self.seen.values())
        self.sampled, self.sampled_left = [], {}
        for f in range(self.futures):
            n = int(rng.poisson(self.rate * self.horizon_s)) if history else 0
            times = np.sort(rng.uniform(0.0, self.horizon_s, n))
            picks = rng.integers(0, len(history), n) if n else []
            seq = []
            for i, (at, k) in enumerate(zip(times, picks)):
                entry, work = history[int(k)]
                key = f"future-{f}-{i}"
                seq.append((float(at), replace(entry, key=key)))
                self.sampled_left[key] = work
            self.sampled.append(seq)

    def cost(self, state: PlacementState, left: dict[str, float]) -> float:
        """Mean over the sampled futures of the sum of completion times, the arrivals included."""
        if not self.sampled:
            return super().cost(state, left)
        both = {**left, **self.sampled_left}
        return float(np.mean([drain(state, both, self.placer, self.world, self.cores, self.max_events * 3, seq)
                              for seq in self.sampled]))
