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
from ..policies.mlfs.rl import N_FEATURES, MLFRL, Net, job_features
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
            x = np.stack([job_features(view, j, free) for j in jobs])
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


def train(jobs: int = 30, seed: int = 0, imitation_runs: int = 2, imitation_epochs: int = 200,
          pg_epochs: int = 6, lr: float = 0.01, hidden: int = 16, window: int = 2, tol: float = 0.05,
          compress: float = 50.0, log=print) -> tuple[Net, dict]:  # type: ignore[no-untyped-def]
    """Imitation then policy gradient; returns the network and its metadata."""
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

    # 2. policy gradient with Eq. 7
    returns: list[float] = []
    for ep in range(pg_epochs):
        pol = MLFRL(explore=True, seed=int(rng.integers(1 << 30)), net=current())
        result, backend = _run(pol, generate(jobs, seed=int(rng.integers(1 << 30)), compress=compress), cluster)
        if not pol.trajectory:
            returns.append(0.0)
            continue
        times = [t for _, _, t in pol.trajectory]
        r = round_rewards(result, backend, times, pol.tick_interval or 60.0)
        g = discounted(r)
        adv = g - g.mean()
        if adv.std() > 0:
            adv = adv / adv.std()
        opt.zero_grad()
        loss = torch.zeros(())
        for (x, a, _), A in zip(pol.trajectory, adv):
            s = scores(torch.as_tensor(x, dtype=torch.float32))
            loss = loss - float(A) * torch.log_softmax(s, 0)[a]
        (loss / len(pol.trajectory)).backward()
        opt.step()
        returns.append(float(r.sum()))
        log(f"policy gradient epoch {ep + 1}/{pg_epochs}: {len(pol.trajectory)} decisions, episode reward {r.sum():.3f}")
    conv = False
    if len(returns) >= 2 * window:
        a, b = np.mean(returns[-2 * window: -window]), np.mean(returns[-window:])
        conv = bool(abs(b - a) <= tol * max(abs(a), 1e-9))
    meta = {"imitation_rounds": len(samples), "imitation_loss": imitation_loss[-1:] + imitation_loss[:1],
            "imitation_agreement": agree, "episode_rewards": returns, "converged": conv,
            "criterion": f"mean episode reward of the last {window} epochs within {tol:.0%} of the {window} before"}
    return current(), meta


def train_mlfs_rl(
    out: Path = Path("src/cohabit/data/mlfs_rl/weights.json"),
    jobs: int = 30,
    seed: int = 0,
    imitation_runs: int = 2,
    imitation_epochs: int = 200,
    pg_epochs: int = 6,
    hidden: int = 16,
) -> None:
    """Train MLF-RL (imitation of MLF-H, then policy gradient with MLFS Eq. 7) and write its weights."""
    import typer

    if jobs < 2 or pg_epochs < 0 or imitation_runs < 0 or hidden < 1:
        typer.echo("error: --jobs must be >= 2; --pg-epochs, --imitation-runs >= 0; --hidden >= 1", err=True)
        raise typer.Exit(2)
    t0 = time.process_time()
    net, meta = train(jobs, seed, imitation_runs, imitation_epochs, pg_epochs, hidden=hidden, log=typer.echo)
    meta.update(command=(f"cohabit train mlfs-rl --out {out} --jobs {jobs} --seed {seed} --imitation-runs "
                         f"{imitation_runs} --imitation-epochs {imitation_epochs} --pg-epochs {pg_epochs} "
                         f"--hidden {hidden}"),
                seed=seed, workload=f"cohabit.sim.mlfs_workload.generate(jobs={jobs}, compress=50, seeds drawn from {seed})",
                cluster="mlfs", cpu_seconds=round(time.process_time() - t0, 1),
                time=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(net.to_json()) + "\n", encoding="utf-8")
    out.with_name(out.stem + ".meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    typer.echo(f"wrote {out} (converged: {meta['converged']}, {meta['cpu_seconds']} s CPU)")



