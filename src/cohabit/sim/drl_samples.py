"""Training samples for Harmony-DRL's reward model and the LIF baselines: random placements
measured in the simulator (Bao et al., §VII-A: "we generate jobs with random resource
configurations, place them randomly and measure the training speed of each job; the number
of jobs ... sufficient to saturate resource capacity of our cluster").

One sample is a set of concurrent jobs on ``M`` servers of the ``drl`` preset: jobs drawn as
the workload generator draws them (model, architecture, 1-3 workers and PS), each task on a
random server with room, until a job no longer fits (or a random target count is reached, so
lightly loaded clusters appear too); the label of each job is its speed under
:mod:`cohabit.sim.drl_physics` over its speed alone and consolidated (1 = no interference, no
spreading cost). The profile the LIF baselines use (CPU cores per worker and per parameter
server, communication share) is "profiled" here too, from the same physics, by
:func:`lif_profiles`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .drl_physics import InterferenceWorld, Placed, base_speed, comm_share, speeds, task_cpu
from .drl_workload import DEMANDS, MODELS, SERVER


@dataclass(frozen=True)
class SampleJob:
    """One job of a sample: what the reward model reads and its measured normalised speed."""

    model: str
    allreduce: bool
    n_workers: int
    n_ps: int
    placed_w: tuple[int, ...]
    placed_p: tuple[int, ...]
    speed: float  # measured speed / speed alone and consolidated


def _demand(model: str, allreduce: bool, ps: bool) -> np.ndarray:
    w_cpu, w_mem, p_cpu, p_mem = DEMANDS[model]
    if ps:
        return np.array([0.0, p_cpu, p_mem])
    return np.array([1.0, w_cpu + (1 if allreduce else 0), w_mem])


#: placement rules a job of a ``mix`` sample follows (:func:`_pick`)
RULES: tuple[str, ...] = ("random", "pack", "isolate", "spread")


def _pick(rule: str, room: np.ndarray, free: np.ndarray, mine: np.ndarray, rng: np.random.Generator) -> int:
    """The server (among ``room``) a task goes to: ``random``; ``pack``: the server holding most of
    the job's tasks, ties to the least room left (bin packing); ``isolate``: most of the job's
    tasks, ties to the most room left (consolidated but away from others, as LIF places on an
    idle cluster); ``spread``: the most room left (load balancing)."""
    if rule == "random":
        return int(room[rng.integers(room.size)])
    left = free[room].sum(axis=1)
    if rule == "spread":
        return int(room[int(np.argmax(left))])
    order = np.lexsort((left if rule == "pack" else -left, -mine[room]))
    return int(room[order[0]])


def random_sample(rng: np.random.Generator, m: int = 6, models: tuple[str, ...] = MODELS,
                  world: InterferenceWorld | None = None, max_tasks: int = 3, max_jobs: int | None = None,
                  mix: bool = False) -> list[SampleJob]:
    """One random placement of random jobs on ``m`` servers and every job's normalised speed.

    ``max_jobs``: the target job count is uniform in [1, max_jobs] (default ``4 m``); ``mix``:
    each job's tasks follow one of :data:`RULES` drawn at random (default: every task on a random
    server with room, the paper's random placements), so that the consolidated placements a
    scheduler makes are sampled as well as random ones."""
    world = world or InterferenceWorld(node_cores=(float(SERVER["cpu"]),) * m)
    cap = np.array([SERVER["gpu"], SERVER["cpu"], SERVER["mem_gb"]], dtype=float)
    free = np.tile(cap, (m, 1))
    target = int(rng.integers(1, (max_jobs or 4 * m) + 1))
    jobs: list[tuple[str, bool, int, int, np.ndarray, np.ndarray]] = []
    while len(jobs) < target:
        model = models[int(rng.integers(len(models)))]
        allreduce = bool(rng.random() < 0.5)
        w = int(rng.integers(1, max_tasks + 1))
        p = 0 if allreduce else int(rng.integers(1, max_tasks + 1))
        pw, pp = np.zeros(m, np.int64), np.zeros(m, np.int64)
        trial = free.copy()
        ok = True
        rule = RULES[int(rng.integers(len(RULES)))] if mix else "random"
        for is_ps, count in ((False, w), (True, p)):
            d = _demand(model, allreduce, is_ps)
            for _ in range(count):
                room = np.flatnonzero((trial + 1e-9 >= d).all(axis=1))
                if room.size == 0:
                    ok = False
                    break
                s = _pick(rule, room, trial, pw + pp, rng)
                trial[s] -= d
                (pp if is_ps else pw)[s] += 1
            if not ok:
                break
        if not ok:
            break
        free = trial
        jobs.append((model, allreduce, w, p, pw, pp))
    placed = [Placed(mo, ar, {s: int(c) for s, c in enumerate(pw) if c}, {s: int(c) for s, c in enumerate(pp) if c})
              for mo, ar, _, _, pw, pp in jobs]
    got = speeds(placed, {s: float(SERVER["cpu"]) for s in range(m)}, world) if placed else []
    return [SampleJob(mo, ar, w, p, tuple(int(x) for x in pw), tuple(int(x) for x in pp),
                      float(sp / base_speed(mo, ar, w, p)))
            for (mo, ar, w, p, pw, pp), sp in zip(jobs, got)]


def samples(n: int, seed: int = 0, m: int = 6, models: tuple[str, ...] = MODELS, max_tasks: int = 3,
            max_jobs: int | None = None, mix: bool = False) -> list[list[SampleJob]]:
    """``n`` random samples (each a list of concurrent jobs), reproducible from ``seed``; the other
    arguments as :func:`random_sample`'s (1-``max_tasks`` workers and PS per job)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        s = random_sample(rng, m, models, max_tasks=max_tasks, max_jobs=max_jobs, mix=mix)
        if s:
            out.append(s)
    return out


def lif_profiles(models: tuple[str, ...] = MODELS) -> dict[str, dict[str, float]]:
    """Per model: CPU cores per worker and per PS (a 2-worker, 2-PS job) and communication share."""
    out = {}
    for model in models:
        c_w, c_p = task_cpu(model, False, 2, 2)
        out[model] = {"cpu_worker": float(c_w), "cpu_ps": float(c_p), "comm": float(comm_share(model))}
    return out


def solo_profile(models: tuple[str, ...] = MODELS, max_tasks: int = 10) -> dict[str, dict[str, float]]:
    """Per model, the speed (samples/s) of a job alone and consolidated, as a profiling run measures
    it: keys ``"ps W P"`` (W workers, P parameter servers) and ``"allreduce W"``, 1 to ``max_tasks``.
    The ``drl`` policy divides the speeds running jobs report by these to retrain its reward model
    online (``policies.drl.online``)."""
    out: dict[str, dict[str, float]] = {}
    for model in models:
        row = {f"allreduce {w}": float(base_speed(model, True, w, 0)) for w in range(1, max_tasks + 1)}
        row.update({f"ps {w} {p}": float(base_speed(model, False, w, p))
                    for w in range(1, max_tasks + 1) for p in range(1, max_tasks + 1)})
        out[model] = row
    return out
