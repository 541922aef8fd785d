"""``cohabit train mlfs-rl``: train MLF-RL (§3.4, ``cohabit.policies.mlfs.rl``) — imitation of MLF-H, then policy gradient with Eq. 7.

1. **Imitation**: MLF-H runs on simulated MLFS workloads (:mod:`cohabit.sim.mlfs_workload`); at
   every full round the waiting jobs' features and the job MLF-H puts first are recorded; the
   network learns to put that job first (softmax cross-entropy over the queue).
2. **Policy gradient** (REINFORCE, Sutton et al. [51]): MLF-RL samples the first job of each
   round from its softmax; a round's reward is Eq. 7 over the jobs that ended before the next
   round, ``r = β1 g1 + β2 g2 + β3 g3 + β4 g4 + β5 g5`` with g1 = 1 / their mean JCT (hours),
   g2 = how many met their deadline, g3 = 1 / (1 + the GB they sent between nodes), g4 = how
   many reached their required accuracy, g5 = their mean accuracy; the return of a round is
   ``Σ_{i=0..m} η^i r_{t+i}`` (m = 10 rounds, η = 0.95), baseline = the episode's mean return.

torch is imported here only (never by the policy at decision time). The weights are written as
JSON with a ``.meta.json`` beside them naming the command, seed, workload and time, the loss and
reward history, and ``converged`` (the switch criterion in :mod:`cohabit.policies.mlfs.rl`).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..engine.loop import Scheduler
from ..engine.state import JobState
from ..policies.mlfs.heuristic import MLFH
from ..policies.mlfs.rl import N_FEATURES, MLFRL, Net, queue_features
from ..spec.cluster import preset
from ..sim.backend import SimBackend
from ..sim.mlfs_workload import generate
from ..sim.runner import config_for

BETA = (0.5, 0.55, 0.25, 0.15, 0.15)
ETA = 0.95
HORIZON_ROUNDS = 10


class _Recorder(MLFH):
    """MLF-H that records (features of the queue, index of the job it puts first)."""

    def __init__(self) -> None:
        super().__init__()
        self.samples: list[tuple[np.ndarray, int]] = []

    def queue(self, view, jobs):  # type: ignore[no-untyped-def, override]
        jobs = list(jobs)
        out = super().queue(view, jobs)
        if len(jobs) > 1:
            gcol = view.gpu_col
            free = float(np.asarray(view.free)[:, gcol].sum() / max(np.asarray(view.capacity)[:, gcol].sum(), 1e-9))
            x = queue_features(self._table, view, jobs, self._fallbacks(view, jobs), free)
            self.samples.append((x, jobs.index(out[0][1])))
        return out


def _run(policy, jobs, cluster):  # type: ignore[no-untyped-def]
    backend = SimBackend(jobs, config_for(cluster))
    from dataclasses import replace
    backend.cfg = replace(backend.cfg, report_interval_s=policy.report_interval)
    sched = Scheduler(cluster, policy, backend)
    result = sched.run([tj.spec for tj in jobs])
    return result, backend


def round_rewards(result, backend, times: list[float], interval: float) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Eq. 7 reward of each round at ``times`` (module docstring)."""
    ended = [j for j in result.jobs.values() if j.state in (JobState.FINISHED, JobState.STOPPED_EARLY)
             and j.end_time is not None]
    out = np.zeros(len(times))
    for k, t in enumerate(times):
        done = [j for j in ended if t < j.end_time <= t + interval]
        if not done:
            continue
        jct_h = np.mean([(j.end_time - j.spec.submit_time) / 3600.0 for j in done])
        g1 = 1.0 / max(jct_h, 1e-3)
        g2 = sum(1 for j in done if j.spec.absolute_deadline is None or j.end_time <= j.spec.absolute_deadline)
        gb = sum(backend.net_mb.get(j.id, 0.0) for j in done) / 1e3
        g3 = 1.0 / (1.0 + gb)
        accs = [j.metrics["accuracy"][-1][1] if j.metrics.get("accuracy") else 0.0 for j in done]
        g4 = sum(1 for j, a in zip(done, accs) if j.spec.accuracy is not None and a >= j.spec.accuracy)
        g5 = float(np.mean(accs))
        out[k] = sum(b * g for b, g in zip(BETA, (g1, g2, g3, g4, g5)))
    return out


def discounted(r: np.ndarray, eta: float = ETA, m: int = HORIZON_ROUNDS) -> np.ndarray:
    """Σ_{i=0..m} η^i r_{t+i} for every t (§3.4)."""
    out = np.zeros_like(r)
    for t in range(len(r)):
        seg = r[t: t + m + 1]
        out[t] = float(np.sum(seg * eta ** np.arange(len(seg))))
    return out


def episode_reward(result, backend, interval: float) -> float:  # type: ignore[no-untyped-def]
    """Eq. 7 summed over every scheduling interval of a whole run (the evaluation score)."""
    ends = [j.end_time for j in result.jobs.values() if j.end_time is not None]
    if not ends:
        return 0.0
    times = list(np.arange(0.0, max(ends) + interval, interval))
    return float(round_rewards(result, backend, [t - 1e-9 for t in times], interval).sum())


def is_converged(evals: list[float], window: int, tol: float) -> bool:
    """The switch criterion (§3.4 "converged"): the greedy policy's evaluation reward on the
    fixed held-out workloads moved by at most ``tol`` (relative to their mean) over the last
    ``window`` policy-gradient epochs, i.e. the last ``window + 1`` evaluations lie within a band
    of width ``tol x |mean|``."""
    if window < 1 or len(evals) < window + 1:
        return False
    last = np.asarray(evals[-(window + 1):], dtype=float)
    return bool(last.max() - last.min() <= tol * max(abs(float(last.mean())), 1e-9))


def train(jobs: int = 30, seed: int = 0, imitation_runs: int = 2, imitation_epochs: int = 200,
          pg_epochs: int = 6, lr: float = 0.01, hidden: int = 16, window: int = 3, tol: float = 0.02,
          compress: float = 50.0, batch: int = 4, eval_runs: int = 3, lr_decay: float = 0.95,
          min_epochs: int = 10, lr_pg: float | None = None, log=print) -> tuple[Net, dict]:  # type: ignore[no-untyped-def]
    """Imitation then policy gradient until converged (:func:`is_converged`) or ``pg_epochs``.

    Each policy-gradient epoch plays ``batch`` episodes on fresh random workloads (the gradient
    is their mean), then scores the greedy policy on ``eval_runs`` fixed held-out workloads
    (the same every epoch, so the score changes only when the policy does); the step size
    decays by ``lr_decay`` per epoch. Training stops at the criterion, but not before
    ``min_epochs`` epochs (a policy that imitation left unchanged by the first steps is not yet
    "trained"). MLF-H's score on the same workloads is recorded beside."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    cluster = preset("mlfs")
    rng = np.random.default_rng(seed)
    w1 = torch.nn.Linear(N_FEATURES, hidden)
    w2 = torch.nn.Linear(hidden, 1)
    params = [*w1.parameters(), *w2.parameters()]
    opt = torch.optim.Adam(params, lr=lr)

    def scores(x: torch.Tensor) -> torch.Tensor:
        return w2(torch.tanh(w1(x))).squeeze(-1)

    # 1. imitation of MLF-H
    samples: list[tuple[np.ndarray, int]] = []
    for k in range(imitation_runs):
        rec = _Recorder()
        _run(rec, generate(jobs, seed=int(rng.integers(1 << 30)), compress=compress), cluster)
        samples += rec.samples
    imitation_loss: list[float] = []
    agree = 0.0
    if samples:
        for ep in range(imitation_epochs):
            opt.zero_grad()
            loss = torch.zeros(())
            for x, y in samples:
                s = scores(torch.as_tensor(x, dtype=torch.float32))
                loss = loss - torch.log_softmax(s, 0)[y]
            loss = loss / len(samples)
            loss.backward()
            opt.step()
            imitation_loss.append(float(loss.detach()))
        with torch.no_grad():
            agree = float(np.mean([int(torch.argmax(scores(torch.as_tensor(x, dtype=torch.float32)))) == y
                                   for x, y in samples]))
        log(f"imitation: {len(samples)} rounds, loss {imitation_loss[0]:.3f} -> {imitation_loss[-1]:.3f}, "
            f"agrees with MLF-H on the first job in {agree:.0%} of rounds")

    def current() -> Net:
        return Net(w1.weight.detach().numpy().astype(float).copy(), w1.bias.detach().numpy().astype(float).copy(),
                   w2.weight.detach().numpy()[0].astype(float).copy(), float(w2.bias.detach().numpy()[0]))

    held_out = [generate(jobs, seed=int(rng.integers(1 << 30)), compress=compress) for _ in range(eval_runs)]

    def evaluate(make_pol) -> float:  # type: ignore[no-untyped-def]
        out = []
        for wl in held_out:
            pol = make_pol()
            result, backend = _run(pol, wl, cluster)
            out.append(episode_reward(result, backend, pol.tick_interval or 60.0))
        return float(np.mean(out)) if out else 0.0

    eval_h = evaluate(MLFH) if eval_runs else 0.0
    evals = [evaluate(lambda: MLFRL(net=current()))] if eval_runs else []
    if eval_runs:
        log(f"held-out score (Eq. 7 per episode, {eval_runs} workloads): MLF-H {eval_h:.2f}, "
            f"after imitation {evals[0]:.2f}")

    imitated = [t.detach().clone() for t in params]
    # 2. policy gradient with Eq. 7 (its own step size, decayed per epoch)
    for group in opt.param_groups:
        group["lr"] = lr_pg if lr_pg is not None else lr
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=lr_decay)
    returns: list[float] = []
    conv = False
    for ep in range(pg_epochs):
        opt.zero_grad()
        batch_r: list[float] = []
        for b in range(max(batch, 1)):
            pol = MLFRL(explore=True, seed=int(rng.integers(1 << 30)), net=current())
            result, backend = _run(pol, generate(jobs, seed=int(rng.integers(1 << 30)), compress=compress), cluster)
            if not pol.trajectory:
                continue
            times = [t for _, _, t in pol.trajectory]
            r = round_rewards(result, backend, times, pol.tick_interval or 60.0)
            g = discounted(r)
            adv = g - g.mean()
            if adv.std() > 0:
                adv = adv / adv.std()
            loss = torch.zeros(())
            for (x, a, _), A in zip(pol.trajectory, adv):
                s = scores(torch.as_tensor(x, dtype=torch.float32))
                loss = loss - float(A) * torch.log_softmax(s, 0)[a]
            (loss / (len(pol.trajectory) * max(batch, 1))).backward()
            batch_r.append(float(r.sum()))
        opt.step()
        sched.step()
        returns.append(float(np.mean(batch_r)) if batch_r else 0.0)
        if eval_runs:
            evals.append(evaluate(lambda: MLFRL(net=current())))
        log(f"policy gradient epoch {ep + 1}/{pg_epochs}: mean episode reward {returns[-1]:.2f}"
            + (f", held-out score {evals[-1]:.2f} (MLF-H {eval_h:.2f})" if eval_runs else ""))
        conv = ep + 1 >= min_epochs and is_converged(evals, window, tol)
        if conv:
            log(f"converged after {ep + 1} epochs")
            break
    meta = {"imitation_rounds": len(samples), "imitation_loss": imitation_loss[-1:] + imitation_loss[:1],
            "imitation_agreement": agree, "episode_rewards": returns, "held_out_scores": evals,
            "held_out_score_mlfh": eval_h, "epochs": len(returns), "converged": conv,
            "pg_weight_change": float(sum(float(((t.detach() - t0) ** 2).sum()) for t, t0 in zip(params, imitated))) ** 0.5,
            "criterion": (f"greedy policy's mean Eq. 7 episode reward on {eval_runs} fixed held-out workloads "
                          f"within {tol:.0%} (max - min over |mean|) over the last {window} epochs "
                          f"({window + 1} evaluations), after at least {min_epochs} epochs; "
                          f"batch {batch} episodes per epoch, step {lr_pg if lr_pg is not None else lr} x {lr_decay}^epoch")}
    return current(), meta


def train_mlfs_rl(
    out: Path = Path("src/cohabit/data/mlfs_rl/weights.json"),
    jobs: int = 30,
    seed: int = 0,
    imitation_runs: int = 2,
    imitation_epochs: int = 200,
    pg_epochs: int = 60,
    hidden: int = 16,
    batch: int = 4,
    eval_runs: int = 3,
    window: int = 3,
    tol: float = 0.02,
    min_epochs: int = 20,
    lr_pg: float = 0.05,
) -> None:
    """Train MLF-RL (imitation of MLF-H, then policy gradient with MLFS Eq. 7 until the held-out
    score settles, at most --pg-epochs epochs) and write its weights."""
    import typer

    if jobs < 2 or pg_epochs < 0 or imitation_runs < 0 or hidden < 1 or batch < 1 or eval_runs < 0 \
            or window < 1 or not 0.0 < tol < 1.0 or min_epochs < 0 or not 0.0 < lr_pg < 1.0:
        typer.echo("error: --jobs must be >= 2; --pg-epochs, --imitation-runs, --eval-runs >= 0; --hidden, "
                   "--batch, --window >= 1; --min-epochs >= 0; --tol, --lr-pg in (0, 1)", err=True)
        raise typer.Exit(2)
    t0 = time.process_time()
    net, meta = train(jobs, seed, imitation_runs, imitation_epochs, pg_epochs, hidden=hidden, window=window,
                      tol=tol, batch=batch, eval_runs=eval_runs, min_epochs=min_epochs, lr_pg=lr_pg, log=typer.echo)
    meta.update(command=(f"cohabit train mlfs-rl --out {out} --jobs {jobs} --seed {seed} --imitation-runs "
                         f"{imitation_runs} --imitation-epochs {imitation_epochs} --pg-epochs {pg_epochs} "
                         f"--hidden {hidden} --batch {batch} --eval-runs {eval_runs} --window {window} --tol {tol} "
                         f"--min-epochs {min_epochs} --lr-pg {lr_pg}"),
                seed=seed, workload=f"cohabit.sim.mlfs_workload.generate(jobs={jobs}, compress=50, seeds drawn from {seed})",
                cluster="mlfs", cpu_seconds=round(time.process_time() - t0, 1),
                time=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(net.to_json()) + "\n", encoding="utf-8")
    out.with_name(out.stem + ".meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    typer.echo(f"wrote {out} (converged: {meta['converged']}, {meta['cpu_seconds']} s CPU)")
