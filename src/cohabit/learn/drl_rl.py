"""``cohabit train drl``: Harmony-DRL's policy training (Bao et al., ToN'22, §V-B, §VII-A).

**Environment** (:class:`Episode`): intervals of 20 minutes of a generated workload
(:mod:`cohabit.sim.drl_workload`, ``--arrival``) on ``M`` servers. In each interval the new jobs
(and those that did not fit before) are placed task by task, one inference per task, the state
updated between inferences (:mod:`cohabit.policies.drl.state`); a job that cannot be placed
whole waits. Then every placed job trains for the interval at its speed, and the interval's
reward is Eq. 1, ``r = sum_n c_n / e_n`` (epochs trained this interval over total epochs:
normalised speed x interval / the job's length alone). Offline the speeds come from the reward
model (:class:`~cohabit.policies.drl.nets.RewardNet`, trained by ``cohabit train drl-reward``);
online (``--online``) from the simulator's physics, i.e. the speeds a running cluster reports.
Each inference's sample gets its interval's reward.

**Learning**: REINFORCE (Eq. 2) with discounted returns over inferences
``Q_i = sum_{i' >= i} gamma^{i' - i} r_{i'}`` (gamma 0.9), the advantage ``Q_i - V(s_i)`` with
the value network as baseline (actor-critic; ``--no-value``: an exponential moving average of
the returns instead), entropy regularisation ``beta H(pi(s_i, .))``, job-aware epsilon
exploration (with probability epsilon the action comes from bin packing or load balancing,
chosen at random per job), an experience replay buffer of 8192 samples with minibatches of 32
(``--no-replay``: the latest 32 samples only), epsilon and beta annealed linearly from 0.5,
Adam with learning rate 1e-4. Episodes are generated in parallel by ``--workers`` processes
(multiprocessing) with the current weights. Deviation: the value network regresses on the
Monte-Carlo returns ``Q_i`` instead of a temporal-difference target.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import typer

from ..policies.drl.state import JobEntry, PlacementState, heuristic_action, new_entry, reward_token
from ..sim.drl_physics import InterferenceWorld, Placed, base_speed, speeds
from ..sim.drl_workload import INTERVAL_S, SERVER, generate
from ..sim.truth import TraceJob

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / "drl"
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


@dataclass
class _Live:
    entry: JobEntry
    length_s: float  # seconds alone at its size (e_n in intervals x 1200)
    done: float = 0.0  # fraction of its epochs trained
    start: int = -1
    submit: int = 0


def _entry(tj: TraceJob, m: int) -> tuple[JobEntry, float]:
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


def run_episode(policy: Any, speed_of: Speeds, jobs: list[TraceJob], m: int, n_intervals: int,
                rng: np.random.Generator, epsilon: float, *, greedy: bool = False,
                rule: str | None = None) -> EpisodeResult:
    """Play ``n_intervals`` intervals of ``jobs`` (then keep running until they finish, without new
    samples, when ``greedy`` is set: an evaluation). ``rule`` ("bp"/"lb") plays that heuristic."""
    import torch

    from ..policies.drl.nets import masked_log_probs

    state = PlacementState(np.ones((m, 3)), [])
    live: dict[str, _Live] = {}
    waiting: list[tuple[JobEntry, float, int]] = []
    arrivals: dict[int, list[TraceJob]] = {}
    for tj in jobs:
        arrivals.setdefault(int(tj.spec.submit_time // INTERVAL_S), []).append(tj)
    result = EpisodeResult([])
    inference_reward_index: list[int] = []
    t = 0
    limit = n_intervals if not greedy else n_intervals + 400
    while t < limit:
        for tj in arrivals.get(t, []) if t < n_intervals else []:
            e, length = _entry(tj, m)
            waiting.append((e, length, t))
        state.decisions = []
        still: list[tuple[JobEntry, float, int]] = []
        for e, length, sub in waiting:
            e.new = True
            state.jobs.append(e)
            job_rule = rule if rule is not None else (("bp", "lb")[int(rng.integers(2))]
                                                      if rng.random() < epsilon else None)
            while not e.complete:
                mask = state.mask(e)
                if not mask.any():
                    break
                if job_rule is not None:
                    a = heuristic_action(state, e, mask, job_rule)
                else:
                    toks, dec = state.tokens(), state.decision_tokens()
                    with torch.no_grad():
                        logits = policy(torch.from_numpy(toks).unsqueeze(0), torch.zeros(1, len(toks), dtype=torch.bool),
                                        torch.tensor([len(state.jobs) - 1]), torch.from_numpy(dec).unsqueeze(0),
                                        torch.zeros(1, len(dec), dtype=torch.bool))
                        p = masked_log_probs(logits, torch.from_numpy(mask).unsqueeze(0))[0].exp().numpy()
                    a = int(np.argmax(p)) if greedy else int(rng.choice(p.size, p=p / p.sum()))
                if not greedy and rule is None:
                    result.samples.append(Sample(state.tokens(), len(state.jobs) - 1, state.decision_tokens(),
                                                 mask.copy(), a))
                    inference_reward_index.append(t)
                state.apply(e, a)
            if e.complete:
                e.new = False
                live[e.key] = _Live(e, length, start=t, submit=sub)
            else:
                if not greedy and rule is None:  # its samples stay; the job waits
                    pass
                state.undo(e)
                state.jobs.remove(e)
                still.append((e, length, sub))
        waiting = still
        placed = [lv.entry for lv in live.values()]
        sp = speed_of(placed)
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
    rewards = [result.rewards[i] for i in inference_reward_index]
    g = 0.0
    for k in range(len(rewards) - 1, -1, -1):
        g = rewards[k] + GAMMA * g
        result.samples[k].ret = g
    return result


GAMMA = 0.9
RET_SCALE = 10.0  # returns are divided by this for the value network (they run to ~50)


def _worker(args: tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]) -> list[Sample]:
    """One episode in a worker process with the given weights (parallel sample generation)."""
    import torch

    from ..policies.drl.nets import PolicyNet, RewardNet

    torch.set_num_threads(1)
    policy_sd, reward_sd, cfg = args
    net = PolicyNet(cfg["m"], heads=cfg["heads"])
    net.load_state_dict(policy_sd)
    reward = None
    if reward_sd is not None:
        reward = RewardNet(cfg["m"])
        reward.load_state_dict(reward_sd)
        reward.eval()
    rng = np.random.default_rng(cfg["seed"])
    jobs = generate(cfg["intervals"], arrival=cfg["arrival"], seed=cfg["seed"])
    return run_episode(net, Speeds(reward, cfg["m"]), jobs, cfg["m"], cfg["intervals"], rng, cfg["epsilon"]).samples


def update(policy: Any, value: Any | None, opt: Any, batch: list[Sample], beta: float, baseline: list[float]) -> dict[str, float]:
    """One actor-critic step on ``batch`` (Eq. 2 with the advantage, plus the entropy term)."""
    import torch

    from ..policies.drl.nets import masked_log_probs, pad_batch

    jobs, jpad = pad_batch([torch.from_numpy(s.jobs) for s in batch], batch[0].jobs.shape[1])
    dec, dpad = pad_batch([torch.from_numpy(s.decisions) for s in batch], batch[0].decisions.shape[1])
    cur = torch.tensor([s.current for s in batch])
    mask = torch.from_numpy(np.stack([s.mask for s in batch]))
    act = torch.tensor([s.action for s in batch])
    ret = torch.tensor([s.ret for s in batch], dtype=torch.float32) / RET_SCALE
    logp = masked_log_probs(policy(jobs, jpad, cur, dec, dpad), mask)
    chosen = logp.gather(1, act.unsqueeze(1)).squeeze(1)
    probs = logp.exp()
    entropy = -(probs * logp.masked_fill(~mask, 0.0)).sum(1)
    if value is not None:
        v = value(jobs, jpad, cur, dec, dpad)
        adv = ret - v.detach()
        v_loss = ((v - ret) ** 2).mean()
    else:  # ablation: exponential moving average of the returns as the baseline
        adv = ret - baseline[0]
        baseline[0] = 0.95 * baseline[0] + 0.05 * float(ret.mean())
        v_loss = torch.zeros(())
    adv = adv / (adv.std() + 1e-6) if len(batch) > 1 else adv
    loss = -(chosen * adv).mean() - beta * entropy.mean() + v_loss
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    if value is not None:
        torch.nn.utils.clip_grad_norm_(value.parameters(), 1.0)
    opt.step()
    return {"loss": float(loss.detach()), "entropy": float(entropy.mean().detach()), "v_loss": float(v_loss.detach())}


def evaluate(net: Any, m: int, seeds: list[int], intervals: int, arrival: str, reward: Any | None = None
             ) -> dict[str, float]:
    """Average JCT (intervals) of the greedy policy and of bin packing / load balancing in the
    environment (the simulator's physics unless ``reward`` is given), over ``seeds``."""
    out: dict[str, list[float]] = {"drl": [], "bp": [], "lb": []}
    for s in seeds:
        jobs = generate(intervals, arrival=arrival, seed=s)
        for name, rule in (("drl", None), ("bp", "bp"), ("lb", "lb")):
            res = run_episode(net, Speeds(reward, m), jobs, m, intervals, np.random.default_rng(s), 0.0,
                              greedy=True, rule=rule)
            out[name].extend(res.jct_intervals)
    return {k: float(np.mean(v)) if v else math.nan for k, v in out.items()}


def train(*, iterations: int = 100, online: int = 20, workers: int = 2, episodes: int = 2, updates: int = 8,
          intervals: int = 10, arrival: str = "uniform", seed: int = 0, m: int = 6, heads: int = 8,
          use_value: bool = True, explore: bool = True, replay: bool = True, reward_path: Path | None = None,
          time_budget_s: float | None = None, init: Path | None = None, log: Any = print
          ) -> tuple[Any, dict[str, Any]]:
    """Offline iterations on reward-model samples, then ``online`` iterations on simulator speeds."""
    import multiprocessing as mp

    import torch

    from ..policies.drl.nets import PolicyNet, RewardNet

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    policy = PolicyNet(m, heads=heads)
    if init is not None:  # continue from earlier weights (the value network starts afresh)
        policy.load_state_dict(torch.load(init, map_location="cpu", weights_only=True))
    value = PolicyNet(m, heads=heads, value=True) if use_value else None
    params = list(policy.parameters()) + (list(value.parameters()) if value is not None else [])
    opt = torch.optim.Adam(params, lr=1e-4)
    reward_sd = None
    if reward_path is not None:
        reward_sd = torch.load(reward_path, map_location="cpu", weights_only=True)
    buffer: deque[Sample] = deque(maxlen=8192)
    baseline = [0.0]
    total = iterations + online
    t0 = time.process_time()
    w0 = time.time()
    history = []
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(workers) if workers > 1 else None
    try:
        for it in range(total):
            frac = it / max(total - 1, 1)
            eps = 0.5 * (1.0 - frac) if explore else 0.0
            beta = 0.5 * (1.0 - frac) * 0.1  # annealed from 0.5 (scaled to the normalised advantage)
            offline = it < iterations and reward_sd is not None
            cfg = [{"m": m, "heads": heads, "seed": int(rng.integers(1 << 30)), "intervals": intervals,
                    "arrival": arrival, "epsilon": eps} for _ in range(episodes)]
            sd = {k: v.detach().clone() for k, v in policy.state_dict().items()}
            args = [(sd, reward_sd if offline else None, c) for c in cfg]
            batches = pool.map(_worker, args) if pool is not None else [_worker(a) for a in args]
            fresh = [s for b in batches for s in b]
            buffer.extend(fresh)
            stats: dict[str, float] = {}
            for _ in range(updates):
                pool_s = list(buffer) if replay else fresh
                if not pool_s:
                    break
                idx = rng.choice(len(pool_s), size=min(32, len(pool_s)), replace=False)
                stats = update(policy, value, opt, [pool_s[i] for i in idx], beta, baseline)
            history.append({"iteration": it, "offline": offline, "samples": len(fresh), "eps": eps, **stats})
            if it % 10 == 0 or it == total - 1:
                log(f"iteration {it + 1}/{total} ({'offline' if offline else 'online'}): {len(fresh)} samples, "
                    f"eps {eps:.2f}, loss {stats.get('loss', math.nan):.3f}, entropy {stats.get('entropy', math.nan):.3f}"
                    f", {time.process_time() - t0:.0f} s CPU")
            if time_budget_s is not None and time.time() - w0 > time_budget_s:
                log(f"stopping after {it + 1} iterations: wall-time budget {time_budget_s:g} s spent")
                break
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    report = {"iterations_done": len(history), "offline_iterations": sum(1 for h in history if h["offline"]),
              "cpu_s_main": time.process_time() - t0, "wall_s": time.time() - w0,
              "samples_seen": int(sum(h["samples"] for h in history))}
    _ = RewardNet  # the reward net class is built in the workers
    return policy, report


def train_drl(
    iterations: int = typer.Option(100, help="offline iterations (reward-model rewards)"),
    online: int = typer.Option(20, help="online iterations after them (the simulator's observed speeds)"),
    workers: int = typer.Option(2, help="processes generating episodes in parallel"),
    episodes: int = typer.Option(2, help="episodes per iteration"),
    updates: int = typer.Option(8, help="minibatch updates per iteration"),
    intervals: int = typer.Option(10, help="scheduling intervals per episode"),
    arrival: str = typer.Option("uniform", help="arrival pattern of the training workload"),
    seed: int = typer.Option(0, help="seed of the workloads, exploration and initial weights"),
    heads: int = typer.Option(8, help="attention heads (1: Table II's ablation)"),
    no_value: bool = typer.Option(False, "--no-value", help="ablation: moving-average baseline"),
    no_explore: bool = typer.Option(False, "--no-explore", help="ablation: no epsilon exploration"),
    no_replay: bool = typer.Option(False, "--no-replay", help="ablation: no experience replay"),
    budget_s: float = typer.Option(0.0, "--budget-s", help="stop after this much wall time (0: no limit)"),
    reward: Path = typer.Option(DEFAULT_OUT / "reward.pt", help="reward model from 'cohabit train drl-reward'"),
    init: Path = typer.Option(None, help="start from these policy weights (continue a training)"),
    out: Path = typer.Option(DEFAULT_OUT / "policy.pt", help="where to write the policy weights (+ .json)"),
) -> None:
    """Train Harmony-DRL's policy: offline on reward-model samples, then online (Bao et al. §V-B)."""
    import torch

    if arrival not in ("uniform", "poisson", "bursty"):
        raise typer.BadParameter(f"--arrival must be uniform, poisson or bursty, got {arrival!r}")
    if not reward.is_file():
        raise typer.BadParameter(f"reward model {reward} not found: run 'cohabit train drl-reward' first")
    torch.set_num_threads(1)
    policy, report = train(iterations=iterations, online=online, workers=workers, episodes=episodes,
                           updates=updates, intervals=intervals, arrival=arrival, seed=seed, heads=heads,
                           use_value=not no_value, explore=not no_explore, replay=not no_replay,
                           reward_path=reward, time_budget_s=budget_s or None, init=init, log=lambda s: typer.echo(s, err=True))
    ev = evaluate(policy, 6, [1000 + i for i in range(3)], intervals, arrival)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(policy.state_dict(), out)
    meta = {"command": "cohabit train drl " + " ".join(sys.argv[3:]), "seed": seed, "servers": 6, "heads": heads,
            "workload": f"drl_workload.generate({intervals} intervals, arrival={arrival!r}, fresh seed per episode)",
            "reward_model": str(reward.name), "init": str(init) if init else None, "ablations": {"no_value": no_value, "no_explore": no_explore,
                                                             "no_replay": no_replay},
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "params": int(sum(p.numel() for p in policy.parameters())),
            "eval_avg_jct_intervals_env": ev, **report}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    typer.echo(f"wrote {out} ({meta['params']} parameters) after {report['iterations_done']} iterations, "
               f"{report['wall_s']:.0f} s; environment avg JCT (intervals): drl {ev['drl']:.2f}, "
               f"bin packing {ev['bp']:.2f}, load balancing {ev['lb']:.2f}")
