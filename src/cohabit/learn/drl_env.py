"""Harmony-DRL's training environment (Bao et al., ToN'22, §IV, §V-A, §VII-A).

Intervals of 20 minutes of a generated workload (:mod:`cohabit.sim.drl_workload`) on ``M``
servers. At the start of each interval the jobs that arrived during it (and those that did not
fit before) join the state as new jobs (``u_n = 1``) and are placed task by task through
:func:`cohabit.policies.drl.taskwise.place_new`, the very loop the ``drl`` policy runs in the
simulator, so training states and deciding states are built alike; a job that cannot be placed
whole waits. Then every placed job trains for the interval at its speed, and the interval's
reward is Eq. 1, ``r = sum_n c_n / e_n`` (epochs trained this interval over total epochs:
normalised speed x interval / the job's length alone). Offline the speeds come from the reward
model (:class:`~cohabit.policies.drl.nets.RewardNet`); online from the simulator's physics, the
speeds a running cluster reports. Each inference's sample gets its interval's reward and the
discounted return over inferences ``Q_i = sum_{i' >= i} gamma^{i' - i} r_{i'}`` (Eq. 2).

Who acts: the policy network (sampling, or argmax when ``greedy``), or a ``rule``: ``"bp"``
(bin packing), ``"lb"`` (load balancing) or any chooser (the LIF-Quad teacher of the imitation
warm start). With ``epsilon`` > 0, each job is placed by bin packing or load balancing (drawn per
job) with probability ``epsilon``: the paper's job-aware exploration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..policies.drl.state import JobEntry, PlacementState, heuristic_action, new_entry, reward_token
from ..policies.drl.taskwise import Chooser, place_new
from ..sim.drl_physics import InterferenceWorld, Placed, base_speed, speeds
from ..sim.drl_workload import INTERVAL_S, SERVER, generate
from ..sim.truth import TraceJob

GAMMA = 0.9
_CAP = np.array([SERVER["gpu"], SERVER["cpu"], SERVER["mem_gb"]], dtype=float)


@dataclass
class Sample:
    """One inference: the state the network saw, the mask, the action, and (later) its return."""

    jobs: np.ndarray
    current: int
    decisions: np.ndarray
    mask: np.ndarray
    action: int
    ret: float = 0.0
    #: every action the teacher rates as good as ``action`` (ties), or None: ``action`` alone
    good: np.ndarray | None = None
    #: weight of the sample in an imitation fit (cost-weighted DAgger: what the actor's own choice
    #: costs by the teacher's score; 1 = plain cross-entropy)
    weight: float = 1.0


@dataclass
class _Live:
    entry: JobEntry
    length_s: float  # seconds alone at its size (e_n in intervals x 1200)
    done: float = 0.0  # fraction of its epochs trained
    submit: int = 0


def job_entry(tj: TraceJob, m: int) -> tuple[JobEntry, float]:
    """The state's entry for a generated job and its length alone (seconds)."""
    s = tj.spec
    allreduce = s.num_ps == 0
    wd = np.array([s.workers.demand["gpu"], s.workers.demand["cpu"], s.workers.demand["mem_gb"]]) / _CAP
    pd = (np.array([s.ps.demand["gpu"], s.ps.demand["cpu"], s.ps.demand["mem_gb"]]) / _CAP
          if s.ps is not None else np.zeros(3))
    e = new_entry(s.id, s.model, allreduce, s.workers.count, s.num_ps, wd, pd, m)
    speed = base_speed(s.model, allreduce, s.workers.count, s.num_ps)
    return e, tj.truth.iterations / speed


@dataclass
class EpisodeResult:
    samples: list[Sample]
    rewards: list[float] = field(default_factory=list)
    jct_intervals: list[float] = field(default_factory=list)


class Speeds:
    """Normalised speeds of the placed jobs: from the reward model or from the simulator."""

    def __init__(self, reward_net: Any | None, m: int) -> None:
        self.net = reward_net
        self.m = m
        self.world = InterferenceWorld(node_cores=(float(SERVER["cpu"]),) * m)

    def __call__(self, jobs: list[JobEntry]) -> np.ndarray:
        if not jobs:
            return np.zeros(0)
        if self.net is None:
            placed = [Placed(j.model, j.allreduce, {s: int(c) for s, c in enumerate(j.placed_w) if c},
                             {s: int(c) for s, c in enumerate(j.placed_p) if c}) for j in jobs]
            got = speeds(placed, {s: float(SERVER["cpu"]) for s in range(self.m)}, self.world)
            return np.array([g / base_speed(j.model, j.allreduce, j.n_workers, j.n_ps) for g, j in zip(got, jobs)])
        import torch

        x = np.stack([reward_token(j.model, j.allreduce, j.n_workers, j.n_ps, j.placed_w, j.placed_p) for j in jobs])
        with torch.no_grad():
            out = self.net(torch.from_numpy(x).unsqueeze(0), torch.zeros(1, len(jobs), dtype=torch.bool))[0]
        return out.numpy().astype(float)


def net_probabilities(net: Any, state: PlacementState, job: JobEntry, mask: np.ndarray) -> np.ndarray:
    """The policy network's distribution over the ``2M`` actions for ``job``'s next task."""
    import torch

    from ..policies.drl.nets import masked_log_probs

    toks, dec = state.tokens(), state.decision_tokens()
    with torch.no_grad():
        logits = net(torch.from_numpy(toks).unsqueeze(0), torch.zeros(1, len(toks), dtype=torch.bool),
                     torch.tensor([state.jobs.index(job)]), torch.from_numpy(dec).unsqueeze(0),
                     torch.zeros(1, len(dec), dtype=torch.bool))
        return masked_log_probs(logits, torch.from_numpy(mask).unsqueeze(0))[0].exp().numpy()


def lif_teacher(kind: str = "quad") -> Chooser:
    """LIF-Quad (or -Line) as a chooser on 8-core servers: the imitation warm start's teacher."""
    from ..policies.lif_line import LIFPolicy

    pol = LIFPolicy(kind)
    pol._cores = {s: float(SERVER["cpu"]) for s in range(64)}
    return pol.choose


def run_episode(policy: Any, speed_of: Speeds, jobs: list[TraceJob], m: int, n_intervals: int,
                rng: np.random.Generator, epsilon: float, *, greedy: bool = False,
                rule: str | Chooser | None = None, record: bool | None = None) -> EpisodeResult:
    """Play ``n_intervals`` intervals of ``jobs`` (then keep running until they finish, without new
    arrivals, when ``greedy`` is set: an evaluation). ``rule`` ("bp", "lb" or a chooser) plays
    instead of the network. ``record``: keep a sample per inference (default: when the network
    plays and samples); with a ``rule`` the samples carry the rule's actions (imitation data)."""
    if record is None:
        record = not greedy and rule is None
    state = PlacementState(np.ones((m, 3)), [])
    live: dict[str, _Live] = {}
    waiting: list[tuple[JobEntry, float, int]] = []
    arrivals: dict[int, list[TraceJob]] = {}
    for tj in jobs:
        arrivals.setdefault(int(tj.spec.submit_time // INTERVAL_S), []).append(tj)
    result = EpisodeResult([])
    sample_interval: list[int] = []
    job_rule: dict[str, str | Chooser | None] = {}

    def choose(st: PlacementState, e: JobEntry, mask: np.ndarray) -> int:
        if e.key not in job_rule:  # job-aware exploration: one rule for all of a job's tasks
            job_rule[e.key] = rule if rule is not None else (
                ("bp", "lb")[int(rng.integers(2))] if rng.random() < epsilon else None)
        how = job_rule[e.key]
        if how is None:
            p = net_probabilities(policy, st, e, mask)
            a = int(np.argmax(np.where(mask, p, -1.0))) if greedy else int(rng.choice(p.size, p=p / p.sum()))
        elif isinstance(how, str):
            a = heuristic_action(st, e, mask, how)
        else:
            a = int(how(st, e, mask))
        if record:
            result.samples.append(Sample(st.tokens(), st.jobs.index(e), st.decision_tokens(), mask.copy(), a))
            sample_interval.append(t)
        return a

    t = 0
    limit = n_intervals if not greedy else n_intervals + 400
    while t < limit:
        for tj in arrivals.get(t, []) if t < n_intervals else []:
            e, length = job_entry(tj, m)
            waiting.append((e, length, t))
        state.decisions = []
        info = {e.key: (length, sub) for e, length, sub in waiting}
        for e, _, _ in waiting:
            e.new = True
            state.jobs.append(e)
        placed, still = place_new(state, choose)
        for e in placed:
            length, sub = info[e.key]
            live[e.key] = _Live(e, length, submit=sub)
        waiting = [(e, *info[e.key]) for e in still]
        sp = speed_of([lv.entry for lv in live.values()])
        r = 0.0
        for lv, s in zip(list(live.values()), sp):
            gain = float(s) * INTERVAL_S / lv.length_s
            r += gain
            if lv.done + gain >= 1.0:  # finishes within this interval
                result.jct_intervals.append(t + (1.0 - lv.done) / gain - lv.submit)
                state.free += (np.outer(lv.entry.placed_w, lv.entry.worker_demand)
                               + np.outer(lv.entry.placed_p, lv.entry.ps_demand))
                state.jobs.remove(lv.entry)
                del live[lv.entry.key]
            else:
                lv.done += gain
        result.rewards.append(r)
        t += 1
        if greedy and t >= n_intervals and not live and not waiting:
            break
    # returns over inferences (Eq. 2): every sample carries its interval's reward
    g = 0.0
    for k in range(len(result.samples) - 1, -1, -1):
        g = result.rewards[sample_interval[k]] + GAMMA * g
        result.samples[k].ret = g
    return result


def normalise_returns(samples: list[Sample]) -> None:
    """Per-episode return normalisation: an episode's returns to mean 0 and standard deviation 1,
    so that episodes of a busy cluster (many running jobs, large rewards whatever the placement)
    do not drown those of a quiet one."""
    if not samples:
        return
    r = np.array([s.ret for s in samples])
    mu, sd = float(r.mean()), float(r.std())
    for s in samples:
        s.ret = (s.ret - mu) / (sd + 1e-6)


def evaluate(net: Any, m: int, seeds: list[int], intervals: int, arrival: str, reward: Any | None = None,
             rules: tuple[str, ...] = ("drl", "bp", "lb")) -> dict[str, float]:
    """Average JCT (intervals) of the greedy policy and of the named rules (``bp``, ``lb``,
    ``lif-quad``) in the environment (the simulator's physics unless ``reward`` is given)."""
    out: dict[str, list[float]] = {k: [] for k in rules}
    for s in seeds:
        jobs = generate(intervals, arrival=arrival, seed=s, n_servers=m)
        for name in rules:
            rule: str | Chooser | None = (None if name == "drl" else lif_teacher(name.split("-")[1])
                                          if name.startswith("lif-") else name)
            res = run_episode(net, Speeds(reward, m), jobs, m, intervals, np.random.default_rng(s), 0.0,
                              greedy=True, rule=rule)
            out[name].extend(res.jct_intervals)
    return {k: float(np.mean(v)) if v else math.nan for k, v in out.items()}
