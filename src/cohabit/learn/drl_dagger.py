"""``cohabit train drl-dagger``: Harmony-DRL's actor trained toward a reward-model lookahead
expert by dataset aggregation (expert iteration; ours, in the place of the paper's offline stage
on reward-model samples, Bao et al., ToN'22 §IV, §V-B).

Why: REINFORCE from the imitation warm start raised the training environment's score but not
the simulator's (``docs/drl.md``): its signal (Eq. 1 rewards summed over every running job,
per-inference discounting) is too noisy for an hour of this machine. Here every decision gets a
target instead: the action of :class:`~cohabit.learn.drl_expert.LookaheadExpert`, which scores
each candidate with the learned reward model (never the simulator's physics), or of the LIF-Quad
rule (``--teacher lif-quad``, for cluster sizes without a reward model), or of
:class:`~cohabit.learn.drl_rollout.DrainRollout` (``--teacher rollout``: each candidate scored by
draining the cluster with the simulator's speeds and the current actor placing; training only).

Where the states come from: the simulator itself (:func:`cohabit.sim.runner.simulate` on the
``drl`` / ``drl-30`` preset), through :class:`RecordingPolicy`, the same task-by-task placement
loop the ``drl`` policy runs (decisions at arrivals and finishes, every waiting job in the
state), so the training states are the deciding states; the policy reads only the cluster view
(``tests/test_barrier.py``). Workloads: a MIX of uniform, Poisson and bursty arrivals
(:mod:`cohabit.sim.drl_workload`, the six Table I models) on seeds from 1000 up; the bench's
workloads (seeds 0-2 embedded, 101, 102, 201, and the DSSM / Inception-BN jobs) are never
trained on.

Algorithm (DAgger, Ross et al. 2011): round 0, the expert places and its decisions are recorded;
round ``k``, the current actor places, each decision taken by the expert with probability
``beta_k = 0.5^k``, and the expert's action is recorded for every state the actor visits; after
each round the actor is fitted (cross-entropy, :func:`cohabit.learn.drl_rl.imitate`) on the
data so far (at most ``max_fit`` samples of it, drawn at random; states with one valid action
are not recorded, nor those where the expert finds no way to complete the job) and scored in the simulator on fixed validation workloads (seeds 900-902 of each
arrival pattern); the best-scoring weights are kept.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import typer

from ..policies.drl.isolate import ISOLATE
from ..policies.drl.order import ORDERS, PendingOrder
from ..policies.drl.prior import WEIGHS
from ..policies.drl.state import JobEntry, PlacementState
from ..policies.drl.taskwise import Chooser, TaskwisePolicy
from ..sim.drl_workload import ARRIVALS, generate, matched_rate_scale
from .drl_env import Sample, lif_teacher

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / "drl"
VALIDATION_SEEDS = (900, 901, 902)
TRAIN_SEED0 = 1000


def reward_for(servers: int) -> Path:
    """The shipped reward model for ``servers`` servers (``reward.pt``, ``reward-30.pt``)."""
    from .drl_reward import REWARD_FILES

    return DEFAULT_OUT / REWARD_FILES.get(servers, "reward.pt")


class RecordingPolicy(TaskwisePolicy):
    """Places like ``drl`` (the actor's argmax), or as the expert with probability ``beta``;
    records the expert's action for every state it decides on (a :class:`Sample`)."""

    def __init__(self, actor: Any | None, expert: Chooser, beta: float, rng: np.random.Generator,
                 cost_weight: float = 0.0, prior: float = 0.0, weigh: str = "none") -> None:
        self.actor, self.expert, self.beta, self.rng = actor, expert, beta, rng
        self.cost_weight = cost_weight
        # the actor's own choices tilted by LIF-Line's interference score, as ``drl:prior=W`` decides
        # (:mod:`cohabit.policies.drl.prior`; session drl17b); 0: the actor's argmax; ``weigh="left"``: each
        # job's slowdown in the score weighted by its estimated run time left, as ``drl:weigh=left`` (drl19a)
        self.prior_w = prior
        self.weigh = weigh
        self._weights: dict[str, float] | None = None
        self._solo: dict[str, dict[str, float]] | None = None
        self._lif: Any = None
        self.samples: list[Sample] = []
        self.name = "drl-dagger"
        self.record = True  # False: a validation run of the actor alone, the expert not consulted

    def begin(self, state: PlacementState, view: Any) -> None:
        """Experts that need the work each job has left (the rollout teacher) see the view first;
        with a prior, LIF-Line reads the servers' cores for this decision."""
        observe = getattr(self.expert, "observe", None)
        if observe is not None:
            observe(view)
        if self.prior_w > 0:
            if self._lif is None:
                from ..policies.lif_line import LIFPolicy

                self._lif = LIFPolicy("line")
            self._lif.begin(state, view)
            if self.weigh == "left":
                from ..policies.drl.online import load_solo
                from ..policies.drl.prior import remaining_intervals

                if self._solo is None:
                    self._solo = load_solo()
                self._weights = remaining_intervals(view, self._solo)

    def own(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        """The actor's choice as ``drl`` makes it: the argmax, tilted by the prior when it has one."""
        from .drl_env import net_probabilities

        probs = net_probabilities(self.actor, state, job, mask)
        if self.prior_w > 0:
            from ..policies.drl.prior import lif_scores, tilted_choice

            return tilted_choice(probs, lif_scores(self._lif, state, job, mask, self._weights), mask, self.prior_w)
        return int(np.argmax(np.where(mask, probs, -1.0)))

    def choose(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        if not self.record and self.actor is not None and self.beta == 0.0:
            return self.own(state, job, mask)
        target = int(self.expert(state, job, mask))
        own = None if self.actor is None else self.own(state, job, mask)
        # a state with one valid action teaches nothing; nor one where the expert sees that the job
        # cannot be completed whatever the action (it will wait; its label would be arbitrary)
        if mask.sum() > 1 and not getattr(self.expert, "hopeless", False):
            good = getattr(self.expert, "good", None)
            # an expert with a `label` (the rollout teacher with a margin) keeps the actor's own
            # choice where its best action is no clear gain over it
            label = self.expert.label(own) if own is not None and hasattr(self.expert, "label") else target
            self.samples.append(Sample(state.tokens(), state.jobs.index(job), state.decision_tokens(), mask.copy(),
                                       label, good=None if good is None else good.copy(),
                                       weight=self.weight(own, target, good)))
        if own is None or self.rng.random() < self.beta:
            return target
        return own

    def weight(self, own: int | None, target: int, good: np.ndarray | None) -> float:
        """Cost-weighted DAgger: ``1 + cost_weight x gap``, ``gap`` = how much worse the actor's own
        action is than the teacher's by the teacher's own score (``expert.last_scores``, higher is
        better; for LIF: the rise in the server's predicted slowdown sum). 0 where the actor's
        action is one of the teacher's equally good ones, or without ``cost_weight``."""
        scores = getattr(self.expert, "last_scores", None)
        if self.cost_weight <= 0 or own is None or scores is None or (good is not None and good[own]):
            return 1.0
        gap = float(scores[target] - scores[own])
        return 1.0 + self.cost_weight * gap if np.isfinite(gap) and gap > 0 else 1.0


def make_expert(teacher: str, m: int, reward_sd: dict[str, Any] | None, horizon: int, actor: Any = None,
                margin: float = 0.0, tie: float = 0.0, futures: int = 0, future_horizon_s: float = 2400.0,
                seed: int = 0) -> Chooser:
    """The expert chooser: ``lookahead`` (reward model), ``rollout`` (drained cluster with the
    simulator's speeds, the ``actor`` placing in the rollouts; :mod:`.drl_rollout`) or
    ``lif-quad`` / ``lif-line``. ``tie > 0``: the expert also names the actions it rates within
    ``tie`` of its choice (``Sample.good``; for LIF, exact ties of the interference score).
    ``futures > 0`` (rollout only): each candidate scored over that many futures sampled from the
    arrival history seen, ``future_horizon_s`` seconds of arrivals (:class:`.drl_rollout.FutureRollout`)."""
    if teacher == "rollout":
        from .drl_env import net_probabilities
        from .drl_rollout import DrainRollout, FutureRollout

        if actor is None:
            raise ValueError("the rollout teacher needs actor weights (--init) to place in its rollouts")

        def placer(state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
            return int(np.argmax(np.where(mask, net_probabilities(actor, state, job, mask), -1.0)))

        if futures > 0:
            return FutureRollout(placer=placer, margin=margin, futures=futures, horizon_s=future_horizon_s, seed=seed)
        return DrainRollout(placer=placer, margin=margin)
    if teacher == "lookahead":
        from ..policies.drl.nets import RewardNet
        from .drl_expert import LookaheadExpert

        net = RewardNet(m)
        net.load_state_dict(reward_sd)
        net.eval()
        return LookaheadExpert(net, horizon=horizon, tie=tie)
    if tie > 0:
        from .drl_expert import LIFExpert

        return LIFExpert(teacher.split("-")[1], tie=tie)
    return lif_teacher(teacher.split("-")[1])


class ActorChooser:
    """The argmax of a fixed policy network (the initial actor): the labels of anchor episodes
    (``--anchor``, session drl13), so that a fine-tune toward one pattern's teacher keeps the
    initial actor's choices on the other patterns instead of drifting there (a distillation term
    in the data)."""

    def __init__(self, net: Any) -> None:
        self.net = net

    def __call__(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        from .drl_env import net_probabilities

        return int(np.argmax(np.where(mask, net_probabilities(self.net, state, job, mask), -1.0)))


class IsolatedTeacher:
    """An expert that chooses within the ``isolate`` rule's narrowed mask (:mod:`cohabit.policies.drl.isolate`)
    while the actor decides with the loop's own mask (``--teacher-isolate``, session drl12): the
    actor is taught to keep new jobs off shared servers itself instead of having its masks
    narrowed by the hand-coded rule. ``good``, ``hopeless`` and ``last_scores`` are the inner
    expert's (relative to the narrowed mask, a subset of the recorded one)."""

    def __init__(self, expert: Chooser, mode: str) -> None:
        self.expert, self.mode = expert, mode
        self._alone: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name in ("good", "hopeless", "last_scores", "observe", "label"):
            return getattr(self.expert, name)
        raise AttributeError(name)

    def __call__(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        from ..policies.drl.isolate import narrow, unshared_room

        if int(job.placed_w.sum() + job.placed_p.sum()) == 0 or job.key not in self._alone:
            self._alone[job.key] = unshared_room(state, job)  # as the loop computes it, at the job's turn
        return int(self.expert(state, job, narrow(mask, job, self._alone[job.key], self.mode)))


def workload(m: int, arrival: str, seed: int, intervals: int, rate_scale: float = 1.0) -> list[Any]:
    return generate(intervals, arrival=arrival, seed=seed, n_servers=m, rate_scale=rate_scale)


def episode(args: tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any]]) -> tuple[list[Sample], float]:
    """One simulated workload placed by the actor (weights ``args[0]``; ``None``: the expert only);
    returns the recorded samples and the average JCT in intervals."""
    import torch

    from ..policies.drl.nets import PolicyNet
    from ..sim.runner import simulate
    from ..spec.cluster import preset

    torch.set_num_threads(1)
    actor_sd, reward_sd, cfg = args
    m = cfg["m"]
    actor = None
    if actor_sd is not None:
        actor = PolicyNet(m)
        actor.load_state_dict(actor_sd)
        actor.eval()
    if cfg["arrival"] in cfg.get("anchor", ()) and cfg.get("anchor_sd") is not None:
        ref = PolicyNet(m)
        ref.load_state_dict(cfg["anchor_sd"])
        ref.eval()
        expert: Chooser = ActorChooser(ref)
    else:
        placer = actor
        if cfg.get("placer_sd") is not None:  # --rollout-actor: other weights place in the rollouts
            placer = PolicyNet(m)
            placer.load_state_dict(cfg["placer_sd"])
            placer.eval()
        expert = make_expert(cfg["teacher"], m, reward_sd, cfg["horizon"], placer, cfg.get("margin", 0.0),
                             cfg.get("tie", 0.0), cfg.get("futures", 0), cfg.get("future_horizon_s", 2400.0),
                             cfg["seed"])
    if cfg.get("teacher_isolate", "never") != "never":
        expert = IsolatedTeacher(expert, cfg["teacher_isolate"])
    pol = RecordingPolicy(actor, expert, cfg["beta"], np.random.default_rng(cfg["seed"]), cfg.get("cost_weight", 0.0),
                          cfg.get("prior", 0.0), cfg.get("weigh", "none"))
    pol.pending_order = PendingOrder(cfg.get("order", "arrival"))  # the order ``drl`` decides in
    pol.isolate = cfg.get("isolate", "never")  # and the masks it decides with (policies.drl.isolate)
    pol.hold_s = cfg.get("hold", 0.0)  # and its hold rule (policies.drl.hold; 0: off)
    pol.record = cfg.get("record", True)
    jobs = workload(m, cfg["arrival"], cfg["seed"], cfg["intervals"], cfg.get("rate_scale", 1.0))
    res = simulate(jobs, preset("drl" if m == 6 else "drl-30"), pol)
    return pol.samples, float(res.metrics.avg_jct or 0.0) / 1200.0


def dagger(*, m: int = 6, rounds: int = 4, episodes: int = 12, intervals: int = 30, epochs: int = 4,
           teacher: str = "lookahead", horizon: int = 3, reward_path: Path | None = None, init: Path | None = None,
           workers: int = 2, seed: int = 0, lr: float = 5e-4, time_budget_s: float | None = None,
           max_fit: int = 20_000, tie: float = 0.0, first_round: int = 0,
           log: Any = print, expert_validation: bool = True,
           margin: float = 0.0, order: str = "arrival", cost_weight: float = 0.0, isolate: str = "never",
           validation_seeds: tuple[int, ...] = VALIDATION_SEEDS, rate_scale: float = 1.0,
           teacher_isolate: str = "never", arrivals: tuple[str, ...] = ARRIVALS, select: str = "mean",
           guard: float = 0.02, save_rounds: Path | None = None,
           anchor: tuple[str, ...] = (), futures: int = 0,
           future_horizon_s: float = 2400.0, rollout_actor: Path | None = None, hold: float = 0.0,
           prior: float = 0.0, weigh: str = "none") -> tuple[Any, dict[str, Any]]:
    """The DAgger loop of the module docstring; returns the best actor and a report.
    ``first_round`` > 0 skips the expert's own rounds: from ``init`` weights, the first states
    come from the actor itself (with the expert acting with probability ``0.5^first_round``).
    ``expert_validation=False`` skips scoring the expert alone on the validation workloads (for
    the rollout teacher that costs as much as a round). ``cost_weight``: each recorded state
    weighs ``1 + cost_weight x`` the teacher's score gap to the actor's own action in the fits
    (:meth:`RecordingPolicy.weight`); ``isolate``: the isolation rule of the placement loop
    (:mod:`cohabit.policies.drl.isolate`) in every episode, validation included. ``order``: the pending-job order of the
    placement loop (:mod:`cohabit.policies.drl.order`) in every episode, validation included;
    ``validation_seeds``: the seeds of each arrival pattern the best weights are chosen on;
    ``rate_scale``: every workload's arrival rates times this (``drl_workload.LOAD_MATCHED_30``:
    the load-matched rack); ``teacher_isolate``: the expert chooses within that rule's mask
    (:class:`IsolatedTeacher`) while the actor plays with the loop's (``isolate``).
    ``arrivals``: the arrival patterns of the training episodes, in turn (validation always scores
    every pattern); ``select``: ``mean`` keeps the round of least validation mean over every
    workload, an arrival pattern (session drl13: ``poisson``) the round of least mean on that
    pattern among the rounds whose mean on each other pattern is at most ``1 + guard`` times the
    initial actor's (:func:`selectable`), so that a gain on one pattern is never bought with
    another; ``save_rounds``: a folder where every round's weights are written
    (``round-K.pt``); ``anchor``: training episodes of these patterns are labelled with the
    initial actor's own choices (:class:`ActorChooser`), not the teacher's. ``futures`` /
    ``future_horizon_s``: the rollout teacher samples that many futures of arrivals from the
    history seen (:class:`~cohabit.learn.drl_rollout.FutureRollout`, session drl14);
    ``rollout_actor``: weights that place in the rollout teacher's rollouts instead of the
    current actor (a fixed teacher: session drl14); ``hold``: the hold rule of the placement loop
    (:mod:`cohabit.policies.drl.hold`, seconds, ``inf`` unbounded) and ``prior``: the LIF-Line prior's
    weight on the actor's own choices (:mod:`cohabit.policies.drl.prior`), and ``weigh`` its score's weighting
    (``left``: ``drl:weigh=left``), in every episode, validation included, so that the actor is trained and
    chosen under the rules ``drl`` decides with (sessions drl17b, drl19a)."""
    import multiprocessing as mp

    import torch

    from ..policies.drl.nets import PolicyNet
    from .drl_rl import imitate

    if first_round > 0 and init is None:
        raise ValueError("first_round > 0 needs init weights (the actor plays from the first round)")
    if anchor and init is None:
        raise ValueError("anchor episodes are labelled by the initial actor: give init weights")
    torch.manual_seed(seed)
    actor = PolicyNet(m)
    if init is not None:
        actor.load_state_dict(torch.load(init, map_location="cpu", weights_only=True))
    actor.eval()
    reward_sd = (torch.load(reward_path, map_location="cpu", weights_only=True)
                 if teacher == "lookahead" and reward_path is not None else None)
    if teacher == "lookahead" and reward_sd is None:
        raise ValueError("the lookahead teacher needs a reward model")
    pool = mp.get_context("spawn").Pool(workers) if workers > 1 else None
    t0, w0 = time.process_time(), time.time()
    next_seed = TRAIN_SEED0 + 1000 * seed

    def run(args: list[Any]) -> list[tuple[list[Sample], float]]:
        return pool.map(episode, args) if pool is not None else [episode(a) for a in args]

    def cfg(**kw: Any) -> dict[str, Any]:
        return {"m": m, "teacher": teacher, "horizon": horizon, "intervals": intervals, "tie": tie,
                "margin": margin, "order": order, "cost_weight": cost_weight, "isolate": isolate,
                "rate_scale": rate_scale, "teacher_isolate": teacher_isolate, "anchor": anchor,
                "anchor_sd": anchor_sd, "placer_sd": placer_sd, "futures": futures,
                "future_horizon_s": future_horizon_s, "hold": hold, "prior": prior, "weigh": weigh, **kw}

    def validate(sd: dict[str, Any] | None, expert: bool = False) -> dict[str, float]:
        got = run([(sd, reward_sd, cfg(arrival=a, seed=s, beta=1.0 if expert else 0.0, record=expert))
                   for a in ARRIVALS for s in validation_seeds])
        keys = [f"{a}-{s}" for a in ARRIVALS for s in validation_seeds]
        out = {k: jct for k, (_, jct) in zip(keys, got)}
        out["mean"] = float(np.mean([jct for _, jct in got]))
        for a in ARRIVALS:
            out[f"mean {a}"] = float(np.mean([out[f"{a}-{s}"] for s in validation_seeds]))
        return out

    anchor_sd = {k: v.detach().clone() for k, v in actor.state_dict().items()} if anchor else None
    placer_sd = (torch.load(rollout_actor, map_location="cpu", weights_only=True)
                 if rollout_actor is not None else None)
    data: list[Sample] = []
    rng = np.random.default_rng(seed)
    report: dict[str, Any] = {"rounds": []}
    best_sd = {k: v.detach().clone() for k, v in actor.state_dict().items()}
    try:
        # the rollout teacher places with the actor inside its rollouts: it needs the weights even
        # where it plays alone (beta = 1: the actor's own choices are never taken)
        rollout = teacher == "rollout"
        report["expert_validation"] = (validate(best_sd if rollout else None, expert=True) if expert_validation
                                       else {"mean": float("nan")})
        init_val = validate(best_sd) if init is not None else None
        best = init_val[_key(select)] if init_val is not None else float("inf")
        report["init_validation_mean"] = init_val["mean"] if init_val is not None else float("inf")
        report["init_validation"] = init_val
        report["select"] = select
        log(f"validation (avg JCT, intervals, mean of {3 * len(validation_seeds)} workloads): expert "
            f"{report['expert_validation']['mean']:.3f}, initial actor {report['init_validation_mean']:.3f} "
            + ("" if init_val is None else "(" + " / ".join(f"{a} {init_val['mean ' + a]:.3f}" for a in ARRIVALS) + ")"))
        for k in range(first_round, rounds + 1):
            beta = 0.5 ** k
            sd = None if k == 0 and not rollout else {n: v.detach().clone() for n, v in actor.state_dict().items()}
            args = []
            for i in range(episodes):
                args.append((sd, reward_sd, cfg(arrival=arrivals[i % len(arrivals)], seed=next_seed, beta=beta)))
                next_seed += 1
            got = run(args)
            fresh = [s for samples, _ in got for s in samples]
            data.extend(fresh)
            pick = rng.permutation(len(data))[:max_fit] if len(data) > max_fit else np.arange(len(data))
            fit = imitate(actor, [data[i] for i in pick], epochs=epochs, seed=seed + k, lr=lr, log=log)
            val = validate({n: v.detach().clone() for n, v in actor.state_dict().items()})
            if save_rounds is not None:
                save_rounds.mkdir(parents=True, exist_ok=True)
                torch.save(actor.state_dict(), save_rounds / f"round-{k}.pt")
            if val[_key(select)] < best and selectable(val, init_val, select, guard):
                best = val[_key(select)]
                best_sd = {n: v.detach().clone() for n, v in actor.state_dict().items()}
            row = {"round": k, "beta": beta, "episodes": episodes, "new_samples": len(fresh), "samples": len(data),
                   "episode_avg_jct": float(np.mean([j for _, j in got])), "heldout_agreement":
                   fit["heldout_agreement"], "validation": val, "cpu_s_main": time.process_time() - t0,
                   "wall_s": time.time() - w0}
            report["rounds"].append(row)
            log(f"round {k} (beta {beta:.3f}): {len(fresh)} new samples ({len(data)} in all), agreement "
                f"{fit['heldout_agreement']:.3f}, validation avg JCT {val['mean']:.3f} ("
                + " / ".join(f"{a} {val['mean ' + a]:.3f}" for a in ARRIVALS) + f"; best {select} {best:.3f}), "
                f"{time.time() - w0:.0f} s wall")
            if time_budget_s is not None and time.time() - w0 > time_budget_s:
                log(f"stopping after round {k}: wall-time budget {time_budget_s:g} s spent")
                break
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    actor.load_state_dict(best_sd)
    report.update({"best_validation_mean": best, "best_validation_on": select, "wall_s": time.time() - w0, "cpu_s_main": time.process_time() - t0})
    return actor, report


def _key(select: str) -> str:
    return "mean" if select == "mean" else f"mean {select}"


def selectable(val: dict[str, float], init: dict[str, float] | None, select: str, guard: float) -> bool:
    """Whether a round's validation ``val`` may be kept when selecting on ``select``: always for
    ``mean``; for an arrival pattern, only if the mean of every other pattern is at most
    ``1 + guard`` times the initial actor's (``init``; no initial actor: always)."""
    if select == "mean" or init is None:
        return True
    return all(val[f"mean {a}"] <= (1.0 + guard) * init[f"mean {a}"] for a in ARRIVALS if a != select)


def train_drl_dagger(
    servers: int = typer.Option(6, help="servers M (6: the 'drl' preset, 30: 'drl-30')"),
    rounds: int = typer.Option(4, help="DAgger rounds after the expert's own round"),
    episodes: int = typer.Option(12, help="simulated workloads per round (arrival patterns in turn)"),
    intervals: int = typer.Option(30, help="intervals of arrivals per workload"),
    epochs: int = typer.Option(4, help="passes over the data after each round"),
    max_fit: int = typer.Option(20_000, help="at most this many samples (drawn at random) in each fit"),
    teacher: str = typer.Option("lookahead", help="expert: lookahead (reward model), rollout (drained cluster, "
                                "simulator speeds, needs --init), lif-quad or lif-line"),
    horizon: int = typer.Option(3, help="lookahead: waiting jobs also placed in each candidate's score"),
    first_round: int = typer.Option(0, help="start at this round (> 0: the --init actor plays from the start, "
                                             "the expert with probability 0.5^round)"),
    tie: float = typer.Option(0.0, help="> 0: fit the actor to every action the expert rates within this of its "
                                        "choice (for lif-*: exact ties, e.g. 1e-9); 0: the expert's action alone"),
    lr: float = typer.Option(5e-4, help="Adam learning rate of the fits"),
    workers: int = typer.Option(2, help="processes simulating workloads in parallel"),
    seed: int = typer.Option(0, help="seed of the fits; workload seeds are 1000 + 1000 x seed onwards"),
    budget_s: float = typer.Option(0.0, "--budget-s", help="stop after the round that passes this wall time"),
    margin: float = typer.Option(0.0, help="rollout teacher: label the actor's own action unless the best one "
                                 "beats it by more than this share of the drained sum of completion times"),
    skip_expert_validation: bool = typer.Option(False, help="do not score the expert alone on the validation "
                                                "workloads (saves a round's time with --teacher rollout)"),
    reward: Path = typer.Option(None, help="reward model (lookahead teacher; default: the shipped one for --servers, "
                                         "reward.pt or reward-30.pt)"),
    init: Path = typer.Option(None, help="start the actor from these policy weights"),
    cost_weight: float = typer.Option(0.0, help="> 0: cost-weighted DAgger, each state weighs 1 + this x the "
                                      "teacher's score gap between its action and the actor's own"),
    isolate: str = typer.Option("auto", help="isolation rule of the placement loop in the episodes: never, idle, "
                                "compact, or auto (drl's default: compact on 30 servers, never on 6)"),
    order: str = typer.Option("short", help="pending-job order of the placement loop in the episodes: short "
                              "(drl's default) or arrival (the paper's; what the weights before drl10 saw)"),
    validation: int = typer.Option(len(VALIDATION_SEEDS), help="validation seeds per arrival pattern (900 up): "
                                   "the best round's weights are chosen on these"),
    rate_scale: str = typer.Option("1", help="arrival rates times this in every workload, or 'matched': the "
                                   "30-server rack at the 6-server testbed's offered load per GPU"),
    teacher_isolate: str = typer.Option("never", help="the expert chooses within this isolation rule's mask "
                                        "(never, idle, compact) while the actor plays with --isolate's"),
    arrivals: str = typer.Option(",".join(ARRIVALS), help="arrival patterns of the training episodes, in turn "
                                 "(comma-separated; e.g. poisson,poisson,uniform,bursty for Poisson-heavy)"),
    select: str = typer.Option("mean", help="keep the round of least validation mean over all workloads (mean), or "
                               "of least mean on one arrival pattern whose other patterns stay within --guard of "
                               "the initial actor's"),
    guard: float = typer.Option(0.02, help="with --select PATTERN: largest relative rise allowed on the other "
                                "patterns' validation means"),
    save_rounds: Path = typer.Option(None, help="folder where every round's weights are written (round-K.pt)"),
    anchor: str = typer.Option("", help="comma-separated arrival patterns whose training episodes are labelled with "
                               "the --init actor's own choices instead of the teacher's (keeps them there)"),
    futures: int = typer.Option(0, help="rollout teacher: > 0 scores each candidate over this many futures of "
                                "arrivals sampled from the arrival history seen (FutureRollout)"),
    future_horizon: float = typer.Option(2400.0, help="with --futures: seconds of sampled arrivals"),
    rollout_actor: Path = typer.Option(None, help="rollout teacher: these weights place in its rollouts (default: "
                                       "the current actor)"),
    hold: str = typer.Option("0", help="hold rule of the placement loop in the episodes (seconds a job may wait "
                             "rather than run spread; inf: unbounded, drl's default on 6 servers; 0: off)"),
    prior: float = typer.Option(0.0, help="the actor's own choices tilted by LIF-Line's score with this weight, as "
                                "drl:prior=W (drl's default on 6 servers: 1000 with --weigh left; 3 unweighted "
                                "before session drl19a; 0: the actor's argmax)"),
    weigh: str = typer.Option("none", help="with --prior: 'left' weights each job's slowdown in LIF-Line's score by "
                              "its estimated run time left, as drl:weigh=left; 'none': unweighted"),
    out: Path = typer.Option(DEFAULT_OUT / "policy.pt", help="where to write the policy weights (+ .json)"),
) -> None:
    """Train Harmony-DRL's actor toward a reward-model lookahead expert (DAgger in the simulator)."""
    import torch

    if teacher not in ("lookahead", "rollout", "lif-quad", "lif-line"):
        raise typer.BadParameter(f"--teacher must be lookahead, rollout, lif-quad or lif-line, got {teacher!r}")
    if teacher == "rollout" and init is None:
        raise typer.BadParameter("--teacher rollout places with the actor in its rollouts: give --init weights")
    if servers not in (6, 30):
        raise typer.BadParameter(f"--servers must be 6 or 30 (the drl and drl-30 presets), got {servers}")
    if min(episodes, intervals, epochs, workers, max_fit) < 1 or rounds < 0 or horizon < 0 or not lr > 0 or margin < 0:
        raise typer.BadParameter("--episodes, --intervals, --epochs, --workers and --max-fit must be >= 1, --rounds and "
                                 "--horizon >= 0, --lr > 0, --margin >= 0")
    if not 1 <= validation <= 99:
        raise typer.BadParameter(f"--validation must be in [1, 99] (seeds 900 up, below the training seeds), got "
                                 f"{validation}")
    val_seeds = tuple(range(VALIDATION_SEEDS[0], VALIDATION_SEEDS[0] + validation))
    if order not in ORDERS:
        raise typer.BadParameter(f"--order must be one of {', '.join(ORDERS)}, got {order!r}")
    if min(tie, 0.0) < 0:
        raise typer.BadParameter(f"--tie must be >= 0, got {tie}")
    if isolate not in ISOLATE + ("auto",):
        raise typer.BadParameter(f"--isolate must be one of {', '.join(ISOLATE + ('auto',))}, got {isolate!r}")
    if isolate == "auto":
        isolate = "compact" if servers >= 30 else "never"
    if teacher_isolate not in ISOLATE:
        raise typer.BadParameter(f"--teacher-isolate must be one of {', '.join(ISOLATE)}, got {teacher_isolate!r}")
    try:
        scale = matched_rate_scale(servers) if rate_scale == "matched" else float(rate_scale)
    except ValueError:
        scale = float("nan")
    if not scale > 0:
        raise typer.BadParameter(f"--rate-scale must be a number > 0 or 'matched', got {rate_scale!r}")
    if cost_weight < 0:
        raise typer.BadParameter(f"--cost-weight must be >= 0, got {cost_weight}")
    if first_round < 0 or first_round > rounds or (first_round > 0 and init is None):
        raise typer.BadParameter(f"--first-round must be in [0, --rounds] and needs --init when > 0, got {first_round}")
    train_arrivals = tuple(a.strip() for a in arrivals.split(",") if a.strip())
    if not train_arrivals or any(a not in ARRIVALS for a in train_arrivals):
        raise typer.BadParameter(f"--arrivals must be a comma-separated list of {', '.join(ARRIVALS)}, got {arrivals!r}")
    if select != "mean" and select not in ARRIVALS:
        raise typer.BadParameter(f"--select must be mean or one of {', '.join(ARRIVALS)}, got {select!r}")
    if select != "mean" and init is None:
        raise typer.BadParameter("--select PATTERN compares with the initial actor: give --init weights")
    anchors = tuple(a.strip() for a in anchor.split(",") if a.strip())
    if any(a not in ARRIVALS for a in anchors) or (anchors and init is None):
        raise typer.BadParameter(f"--anchor must be a comma-separated list of {', '.join(ARRIVALS)} and needs --init, "
                                 f"got {anchor!r}")
    if futures < 0 or (futures > 0 and teacher != "rollout") or not future_horizon > 0:
        raise typer.BadParameter(f"--futures must be >= 0 and only with --teacher rollout, --future-horizon > 0; got "
                                 f"{futures}, {future_horizon}")
    if rollout_actor is not None and (teacher != "rollout" or not rollout_actor.is_file()):
        raise typer.BadParameter(f"--rollout-actor needs --teacher rollout and an existing weights file, got "
                                 f"{rollout_actor}")
    try:
        hold_s = float(hold)
    except ValueError:
        hold_s = float("nan")
    if not hold_s >= 0 or not prior >= 0:
        raise typer.BadParameter(f"--hold must be a number >= 0 or inf and --prior >= 0, got {hold!r}, {prior}")
    if weigh not in WEIGHS:
        raise typer.BadParameter(f"--weigh must be one of {', '.join(WEIGHS)}, got {weigh!r}")
    if not guard >= 0:
        raise typer.BadParameter(f"--guard must be >= 0, got {guard}")
    if reward is None:
        reward = reward_for(servers)
    if teacher == "lookahead":
        meta_r = reward.with_suffix(".json")
        if not reward.is_file():
            raise typer.BadParameter(f"reward model {reward} not found: run 'cohabit train drl-reward' first")
        if meta_r.is_file() and int(json.loads(meta_r.read_text()).get("servers", 6)) != servers:
            raise typer.BadParameter(f"reward model {reward} was trained for another number of servers than "
                                     f"--servers {servers}")
    torch.set_num_threads(1)
    actor, report = dagger(m=servers, rounds=rounds, episodes=episodes, intervals=intervals, epochs=epochs,
                           teacher=teacher, horizon=horizon, reward_path=reward, init=init, workers=workers,
                           seed=seed, lr=lr, time_budget_s=budget_s or None, max_fit=max_fit, tie=tie,
                           first_round=first_round, log=lambda s: typer.echo(s, err=True),
                           expert_validation=not skip_expert_validation, margin=margin, order=order,
                           cost_weight=cost_weight, isolate=isolate,
                           validation_seeds=val_seeds, rate_scale=scale, teacher_isolate=teacher_isolate,
                           arrivals=train_arrivals, select=select, guard=guard, save_rounds=save_rounds,
                           anchor=anchors, futures=futures, future_horizon_s=future_horizon,
                           rollout_actor=rollout_actor, hold=hold_s, prior=prior, weigh=weigh)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(actor.state_dict(), out)
    meta = {"command": "cohabit train drl-dagger " + " ".join(sys.argv[3:]), "seed": seed, "servers": servers,
            "heads": actor.heads, "teacher": teacher, "horizon": horizon, "tie": tie, "first_round": first_round,
            "cost_weight": cost_weight, "isolate": isolate, "teacher_isolate": teacher_isolate,
            "order": order, "rate_scale": scale, "arrivals": list(train_arrivals), "guard": guard,
            "anchor": list(anchors), "margin": margin, "futures": futures, "future_horizon_s": future_horizon,
            "rollout_actor": str(rollout_actor) if rollout_actor else None, "hold": hold_s, "prior": prior,
            "weigh": weigh, "workload": f"drl_workload.generate({intervals} intervals, rate_scale={scale:.4f}), arrivals "
                        f"{'/'.join(train_arrivals)} in turn, "
                        f"seeds {TRAIN_SEED0 + 1000 * seed} onwards; validation seeds {list(val_seeds)}",
            "reward_model": reward.name if teacher == "lookahead" else None, "init": str(init) if init else None,
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "params": int(sum(p.numel() for p in actor.parameters())), **report}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    typer.echo(f"wrote {out}: validation avg JCT (intervals) {report['best_validation_mean']:.3f}, expert "
               f"{report['expert_validation']['mean']:.3f}, {report['wall_s']:.0f} s wall")
