"""``cohabit train drl``: Harmony-DRL's policy training (Bao et al., ToN'22, §V-B, §VII-A).

The environment (intervals, Eq. 1 rewards from the reward model offline or the simulator's
speeds online, discounted returns) is :mod:`.drl_env`.

**Warm start** (``--imitate N``, ours, allowed as a documented deviation): ``N`` episodes placed by
the LIF-Quad teacher (``--teacher``) are recorded and the policy is fitted to its actions by
cross-entropy (:func:`imitate`); reinforcement learning then starts from there.

**Learning**: REINFORCE (Eq. 2) with discounted returns over inferences
``Q_i = sum_{i' >= i} gamma^{i' - i} r_{i'}`` (gamma 0.9), normalised per episode (mean 0,
standard deviation 1: a busy cluster's large rewards do not drown a quiet one's), the advantage
``Q_i - V(s_i)`` with the value network as baseline (actor-critic; ``--no-value``: an exponential
moving average of the returns instead), standardised over each minibatch, entropy
regularisation ``beta H(pi(s_i, .))``, job-aware epsilon exploration (with probability epsilon a
job is placed by bin packing or load balancing, drawn per job), an experience replay buffer of
8192 samples with minibatches of 32 (``--no-replay``: the latest episodes' samples only),
epsilon (from ``--eps0``, the paper's 0.5) and beta annealed linearly, Adam (``--lr``, the
paper's 1e-4). Episodes are generated in parallel by ``--workers`` processes (multiprocessing)
with the current weights.

**Convergence**: every ``--eval-every`` iterations the greedy policy's average JCT is measured in
the environment with the simulator's speeds on fixed workloads; the best weights are kept and
training stops, converged, after ``--patience`` evaluations without a 1% gain. The criterion,
the evaluations and whether it converged go into the weights' JSON.

Deviation: the value network regresses on the Monte-Carlo returns, not a temporal-difference
target.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import typer

from ..sim.drl_workload import generate
from .drl_env import GAMMA, Sample, Speeds, evaluate, lif_teacher, normalise_returns, run_episode

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / "drl"
__all__ = ["GAMMA", "Sample", "Speeds", "run_episode", "train", "train_drl", "update", "imitate"]


def _worker(args: tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]) -> list[Sample]:
    """One episode in a worker process with the given weights (parallel sample generation).

    ``cfg["rule"]`` set: the teacher plays and its actions are recorded (imitation data);
    otherwise the network samples (with exploration) and the returns are normalised per episode."""
    import torch

    from ..policies.drl.nets import PolicyNet, RewardNet

    torch.set_num_threads(1)
    policy_sd, reward_sd, cfg = args
    net = PolicyNet(cfg["m"], heads=cfg["heads"])
    net.load_state_dict(policy_sd)
    net.eval()
    reward = None
    if reward_sd is not None:
        reward = RewardNet(cfg["m"])
        reward.load_state_dict(reward_sd)
        reward.eval()
    rng = np.random.default_rng(cfg["seed"])
    jobs = generate(cfg["intervals"], arrival=cfg["arrival"], seed=cfg["seed"], n_servers=cfg["m"])
    rule = lif_teacher(cfg["rule"].split("-")[1]) if cfg.get("rule") else None
    res = run_episode(net, Speeds(reward, cfg["m"]), jobs, cfg["m"], cfg["intervals"], rng, cfg["epsilon"],
                      rule=rule, record=True)
    if rule is None:
        normalise_returns(res.samples)
    return res.samples


def _tensors(batch: list[Sample]) -> tuple[Any, ...]:
    import torch

    from ..policies.drl.nets import pad_batch

    jobs, jpad = pad_batch([torch.from_numpy(s.jobs) for s in batch], batch[0].jobs.shape[1])
    dec, dpad = pad_batch([torch.from_numpy(s.decisions) for s in batch], batch[0].decisions.shape[1])
    cur = torch.tensor([s.current for s in batch])
    mask = torch.from_numpy(np.stack([s.mask for s in batch]))
    act = torch.tensor([s.action for s in batch])
    return jobs, jpad, cur, dec, dpad, mask, act


def update(policy: Any, value: Any | None, opt: Any, batch: list[Sample], beta: float, baseline: list[float]
           ) -> dict[str, float]:
    """One actor-critic step on ``batch`` (Eq. 2 with the advantage ``Q - V``, standardised over
    the minibatch, plus the entropy term). ``Sample.ret`` is the per-episode normalised return."""
    import torch

    from ..policies.drl.nets import masked_log_probs

    jobs, jpad, cur, dec, dpad, mask, act = _tensors(batch)
    ret = torch.tensor([s.ret for s in batch], dtype=torch.float32)
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
    adv = (adv - adv.mean()) / (adv.std() + 1e-6) if len(batch) > 1 else adv
    loss = -(chosen * adv).mean() - beta * entropy.mean() + v_loss
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    if value is not None:
        torch.nn.utils.clip_grad_norm_(value.parameters(), 1.0)
    opt.step()
    return {"loss": float(loss.detach()), "entropy": float(entropy.mean().detach()), "v_loss": float(v_loss.detach())}


def _good(batch: list[Sample]) -> Any:
    """B x 2M booleans: the teacher's equally good actions of each sample (its action alone when
    ``Sample.good`` is None)."""
    import torch

    out = np.zeros((len(batch), batch[0].mask.size), dtype=bool)
    for i, s in enumerate(batch):
        if s.good is not None:
            out[i] = s.good & s.mask
        out[i, s.action] = True
    return torch.from_numpy(out)


def set_cross_entropy(logp: Any, good: Any, weight: Any = None) -> Any:
    """``-log sum_{a good} pi(a)`` averaged over the batch: cross-entropy toward a set of equally
    good actions (one action: the usual cross-entropy). ``logp``: B x 2M masked log-probabilities;
    ``weight`` (B, optional): each sample's weight in a weighted mean (cost-weighted DAgger)."""
    import torch

    nll = -torch.logsumexp(logp.masked_fill(~good, float("-inf")), dim=1)
    if weight is None:
        return nll.mean()
    return (nll * weight).sum() / weight.sum()


def imitate(policy: Any, samples: list[Sample], *, epochs: int, seed: int = 0, lr: float = 5e-4,
            batch: int = 64, log: Any = print) -> dict[str, float]:
    """Warm start: fit the policy to a teacher's actions (cross-entropy over the valid actions);
    returns the share of held-out decisions (10%) where its argmax agrees with the teacher.
    A sample whose teacher rated several actions best (``Sample.good``, ties) counts the
    probability of all of them: the loss is ``-log sum_{a good} pi(a)``, and the argmax agrees
    when it is one of them."""
    import torch

    from ..policies.drl.nets import masked_log_probs

    rng = np.random.default_rng(seed)
    order = rng.permutation(len(samples))
    cut = max(1, int(0.9 * len(samples)))
    train_s = [samples[i] for i in order[:cut]]
    test_s = [samples[i] for i in order[cut:]] or train_s[:1]
    opt = torch.optim.Adam(policy.parameters(), lr=lr)

    def agreement(data: list[Sample]) -> float:
        hit = 0
        with torch.no_grad():
            for b in range(0, len(data), 256):
                jobs, jpad, cur, dec, dpad, mask, act = _tensors(data[b: b + 256])
                pred = masked_log_probs(policy(jobs, jpad, cur, dec, dpad), mask).argmax(1)
                hit += int(_good(data[b: b + 256]).gather(1, pred.unsqueeze(1)).sum())
        return hit / len(data)

    policy.train()
    for epoch in range(epochs):
        perm = rng.permutation(len(train_s))
        total = 0.0
        for b in range(0, len(perm), batch):
            chunk = [train_s[i] for i in perm[b: b + batch]]
            jobs, jpad, cur, dec, dpad, mask, act = _tensors(chunk)
            logp = masked_log_probs(policy(jobs, jpad, cur, dec, dpad), mask)
            weight = torch.tensor([s.weight for s in chunk], dtype=torch.float32)
            loss = set_cross_entropy(logp, _good(chunk), weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(act)
        log(f"imitation epoch {epoch + 1}/{epochs}: cross-entropy {total / len(perm):.3f}, held-out agreement "
            f"{agreement(test_s):.3f}")
    policy.eval()
    return {"samples": len(samples), "epochs": epochs, "heldout_agreement": agreement(test_s)}


def train(*, iterations: int = 100, online: int = 20, workers: int = 2, episodes: int = 2, updates: int = 8,
          intervals: int = 10, arrival: str = "uniform", seed: int = 0, m: int = 6, heads: int = 8,
          use_value: bool = True, explore: bool = True, replay: bool = True, reward_path: Path | None = None,
          time_budget_s: float | None = None, init: Path | None = None, imitate_episodes: int = 0,
          imitate_epochs: int = 4, teacher: str = "lif-quad", lr: float = 1e-4, eps0: float = 0.5,
          eval_every: int = 10, eval_seeds: int = 3, eval_intervals: int = 20, patience: int = 6,
          log: Any = print) -> tuple[Any, dict[str, Any]]:
    """Optional imitation warm start, then offline iterations on reward-model samples, then
    ``online`` iterations on simulator speeds. Every ``eval_every`` iterations the greedy policy
    is scored (average JCT in the environment with the simulator's speeds, ``eval_seeds`` fixed
    workloads of ``eval_intervals`` intervals); the best-scoring weights are returned. Converged:
    ``patience`` evaluations in a row without a gain of 1% over the best."""
    import multiprocessing as mp

    import torch

    from ..policies.drl.nets import PolicyNet

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    policy = PolicyNet(m, heads=heads)
    if init is not None:  # continue from earlier weights (the value network starts afresh)
        policy.load_state_dict(torch.load(init, map_location="cpu", weights_only=True))
    value = PolicyNet(m, heads=heads, value=True) if use_value else None
    reward_sd = torch.load(reward_path, map_location="cpu", weights_only=True) if reward_path is not None else None
    t0, w0 = time.process_time(), time.time()
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(workers) if workers > 1 else None
    seeds = [10_000 + i for i in range(eval_seeds)]
    report: dict[str, Any] = {}

    def run(args: list[Any]) -> list[list[Sample]]:
        return pool.map(_worker, args) if pool is not None else [_worker(a) for a in args]

    def cfg(**kw: Any) -> dict[str, Any]:
        return {"m": m, "heads": heads, "seed": int(rng.integers(1 << 30)), "intervals": intervals,
                "arrival": arrival, "epsilon": 0.0, **kw}

    try:
        report["eval_reference"] = evaluate(None, m, seeds, eval_intervals, arrival, rules=("bp", "lb", teacher))
        if imitate_episodes > 0:
            sd = {k: v.detach().clone() for k, v in policy.state_dict().items()}
            data = [s for b in run([(sd, None, cfg(rule=teacher)) for _ in range(imitate_episodes)]) for s in b]
            report["imitation"] = {"teacher": teacher, "episodes": imitate_episodes,
                                   **imitate(policy, data, epochs=imitate_epochs, seed=seed, log=log)}
        params = list(policy.parameters()) + (list(value.parameters()) if value is not None else [])
        opt = torch.optim.Adam(params, lr=lr)
        buffer: deque[Sample] = deque(maxlen=8192)
        baseline = [0.0]
        total = iterations + online
        history: list[dict[str, Any]] = []
        evals: list[dict[str, float]] = []
        best_sd = {k: v.detach().clone() for k, v in policy.state_dict().items()}
        best = evaluate(policy, m, seeds, eval_intervals, arrival, rules=("drl",))["drl"]
        evals.append({"iteration": 0, "avg_jct": best})
        log(f"start: environment avg JCT {best:.3f} (reference {report['eval_reference']})")
        stale, converged = 0, False
        for it in range(total):
            frac = it / max(total - 1, 1)
            eps = eps0 * (1.0 - frac) if explore else 0.0
            beta = 0.5 * (1.0 - frac) * 0.1  # annealed from 0.5 (scaled to the standardised advantage)
            offline = it < iterations and reward_sd is not None
            sd = {k: v.detach().clone() for k, v in policy.state_dict().items()}
            batches = run([(sd, reward_sd if offline else None, cfg(epsilon=eps)) for _ in range(episodes)])
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
            if (it + 1) % eval_every == 0 or it == total - 1:
                score = evaluate(policy, m, seeds, eval_intervals, arrival, rules=("drl",))["drl"]
                evals.append({"iteration": it + 1, "avg_jct": score})
                if score < best * 0.99:
                    best, stale = score, 0
                    best_sd = {k: v.detach().clone() for k, v in policy.state_dict().items()}
                else:
                    stale += 1
                    if score < best:
                        best = score
                        best_sd = {k: v.detach().clone() for k, v in policy.state_dict().items()}
                log(f"iteration {it + 1}/{total} ({'offline' if offline else 'online'}): {len(fresh)} samples, "
                    f"eps {eps:.2f}, loss {stats.get('loss', math.nan):.3f}, entropy "
                    f"{stats.get('entropy', math.nan):.3f}, eval avg JCT {score:.3f} (best {best:.3f}, "
                    f"{stale} without gain), {time.process_time() - t0:.0f} s CPU, {time.time() - w0:.0f} s wall")
                if stale >= patience:
                    converged = True
                    log(f"converged: {patience} evaluations without a 1% gain")
                    break
            if time_budget_s is not None and time.time() - w0 > time_budget_s:
                log(f"stopping after {it + 1} iterations: wall-time budget {time_budget_s:g} s spent")
                break
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    policy.load_state_dict(best_sd)
    report.update({
        "iterations_done": len(history), "offline_iterations": sum(1 for h in history if h["offline"]),
        "cpu_s_main": time.process_time() - t0, "wall_s": time.time() - w0,
        "samples_seen": int(sum(h["samples"] for h in history)),
        "convergence": {"criterion": f"greedy avg JCT in the environment (simulator speeds, seeds {seeds}, "
                                     f"{eval_intervals} intervals, {arrival}) every {eval_every} iterations; "
                                     f"converged after {patience} evaluations in a row without a 1% gain; "
                                     f"the best-scoring weights are kept",
                        "converged": converged, "best_avg_jct": best, "evaluations": evals}})
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
    servers: int = typer.Option(6, help="servers M (6: the 'drl' preset, 30: 'drl-30')"),
    heads: int = typer.Option(8, help="attention heads (1: Table II's ablation)"),
    no_value: bool = typer.Option(False, "--no-value", help="ablation: moving-average baseline"),
    no_explore: bool = typer.Option(False, "--no-explore", help="ablation: no epsilon exploration"),
    no_replay: bool = typer.Option(False, "--no-replay", help="ablation: no experience replay"),
    imitate_episodes: int = typer.Option(0, "--imitate", help="warm start: episodes of the teacher to imitate"),
    imitate_epochs: int = typer.Option(4, help="passes over the imitation data"),
    teacher: str = typer.Option("lif-quad", help="teacher of the warm start: lif-quad or lif-line"),
    lr: float = typer.Option(1e-4, help="Adam learning rate of the RL phase"),
    eps0: float = typer.Option(0.5, help="initial exploration probability (annealed to 0)"),
    eval_every: int = typer.Option(10, help="iterations between evaluations (convergence, best weights)"),
    patience: int = typer.Option(6, help="evaluations without a 1% gain before stopping (converged)"),
    eval_seeds: int = typer.Option(3, help="fixed workloads each evaluation plays"),
    eval_intervals: int = typer.Option(20, help="intervals of arrivals in each evaluation workload"),
    budget_s: float = typer.Option(0.0, "--budget-s", help="stop after this much wall time (0: no limit)"),
    reward: Path = typer.Option(DEFAULT_OUT / "reward.pt", help="reward model from 'cohabit train drl-reward'"),
    init: Path = typer.Option(None, help="start from these policy weights (continue a training)"),
    out: Path = typer.Option(DEFAULT_OUT / "policy.pt", help="where to write the policy weights (+ .json)"),
) -> None:
    """Train Harmony-DRL's policy: optional imitation warm start, offline on reward-model samples, then
    online (Bao et al. §V-B)."""
    import torch

    if arrival not in ("uniform", "poisson", "bursty"):
        raise typer.BadParameter(f"--arrival must be uniform, poisson or bursty, got {arrival!r}")
    if teacher not in ("lif-quad", "lif-line"):
        raise typer.BadParameter(f"--teacher must be lif-quad or lif-line, got {teacher!r}")
    if min(servers, eval_every, patience, eval_seeds, eval_intervals) < 1 or not lr > 0 or not 0 <= eps0 <= 1:
        raise typer.BadParameter("--servers, --eval-every, --patience, --eval-seeds and --eval-intervals must be >= 1, --lr > 0, --eps0 in [0, 1]")
    reward_path: Path | None = reward
    if iterations > 0:
        if not reward.is_file():
            raise typer.BadParameter(f"reward model {reward} not found: run 'cohabit train drl-reward' first")
        meta_r = reward.with_suffix(".json")
        if meta_r.is_file() and int(json.loads(meta_r.read_text()).get("servers", 6)) != servers:
            raise typer.BadParameter(f"reward model {reward} was trained for another number of servers than "
                                     f"--servers {servers}")
    else:
        reward_path = None
    torch.set_num_threads(1)
    policy, report = train(iterations=iterations, online=online, workers=workers, episodes=episodes,
                           updates=updates, intervals=intervals, arrival=arrival, seed=seed, m=servers, heads=heads,
                           use_value=not no_value, explore=not no_explore, replay=not no_replay,
                           reward_path=reward_path, time_budget_s=budget_s or None, init=init,
                           imitate_episodes=imitate_episodes, imitate_epochs=imitate_epochs, teacher=teacher,
                           lr=lr, eps0=eps0, eval_every=eval_every, patience=patience, eval_seeds=eval_seeds,
                           eval_intervals=eval_intervals,
                           log=lambda s: typer.echo(s, err=True))
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(policy.state_dict(), out)
    meta = {"command": "cohabit train drl " + " ".join(sys.argv[3:]), "seed": seed, "servers": servers,
            "heads": heads,
            "workload": f"drl_workload.generate({intervals} intervals, arrival={arrival!r}, fresh seed per episode)",
            "reward_model": str(reward.name) if reward_path else None, "init": str(init) if init else None,
            "ablations": {"no_value": no_value, "no_explore": no_explore, "no_replay": no_replay, "heads": heads},
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "params": int(sum(p.numel() for p in policy.parameters())), **report}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    conv = report["convergence"]
    typer.echo(f"wrote {out} ({meta['params']} parameters) after {report['iterations_done']} iterations, "
               f"{report['wall_s']:.0f} s; environment avg JCT (intervals): drl {conv['best_avg_jct']:.2f}, "
               f"reference {report['eval_reference']}; converged: {conv['converged']}")
