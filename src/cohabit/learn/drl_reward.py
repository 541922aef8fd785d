"""``cohabit train drl-reward``: Harmony-DRL's reward model (Bao et al., ToN'22, §VI) and the
LIF baselines' least-squares fits, from random placements measured in the simulator.

Samples (:mod:`cohabit.sim.drl_samples`) are shuffled and split 90% / 10% (train / test) as in
§VII-C. The reward network (:class:`~cohabit.policies.drl.nets.RewardNet`) is trained with
Adam on minibatches of 32 samples to minimise the relative error
``L = 1/|N| sum_n |c'_n - c_n| / c'_n`` (§VI); the LIF models are fitted per model by least
squares on the training split (:func:`cohabit.models.interference.fit`). All three are scored on
the test split: mean relative error and the share of predictions within 10% (Fig. 13).

Outputs in ``--out`` (default: the package's ``data/drl``): ``reward.pt`` (state dict),
``lif.json`` (profiles + coefficients) and ``reward.json`` (command, seed, samples, sizes, time,
test errors). ``--servers 30``: ``reward-30.pt`` and ``reward-30.json`` for the ``drl-30``
preset (§VII-C: 1-10 workers / PS; samples as :func:`sample_config` says); ``lif.json`` is not
rewritten (the LIF errors in the JSON are of fits on the 30-server training split).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import typer

from ..models.interference import LIFModel, ModelProfile, fit, server_features
from ..policies.drl.state import reward_token
from ..sim.drl_samples import SampleJob, lif_profiles, samples

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / "drl"
#: reward-model file per number of servers
REWARD_FILES: dict[int, str] = {6: "reward.pt", 30: "reward-30.pt"}


def tokens(sample: list[SampleJob]) -> np.ndarray:
    return np.stack([reward_token(j.model, j.allreduce, j.n_workers, j.n_ps, j.placed_w, j.placed_p) for j in sample])


def lif_rows(sample: list[SampleJob], model: LIFModel, cores: float = 8.0) -> list[tuple[str, float, float, float]]:
    """``(model, cpu, bw, slowdown)`` per job: its mean LIF features over its servers and its label."""
    jobs = []
    for j in sample:
        w = {s: c for s, c in enumerate(j.placed_w) if c}
        p = {s: c for s, c in enumerate(j.placed_p) if c}
        jobs.append((j.model, w, p, len(set(w) | set(p)) > 1))
    feats = server_features(jobs, {s: cores for s in range(len(sample[0].placed_w))}, model)
    out = []
    for j, f in zip(sample, feats):
        cpu = float(np.mean([v[0] for v in f.values()]))
        bw = float(np.mean([v[1] for v in f.values()]))
        out.append((j.model, cpu, bw, 1.0 - j.speed))
    return out


def errors(pred: np.ndarray, label: np.ndarray) -> dict[str, float]:
    rel = np.abs(pred - label) / label
    return {"relative_error": float(rel.mean()), "within_10pct": float((rel <= 0.10).mean()), "n": int(rel.size)}


def predict(net: Any, data: list[list[SampleJob]]) -> np.ndarray:
    """The reward network's predicted normalised speed of every job of ``data``, in order."""
    import torch

    from ..policies.drl.nets import pad_batch

    preds: list[float] = []
    with torch.no_grad():
        for b in range(0, len(data), 64):
            chunk = data[b: b + 64]
            xb, pad = pad_batch([torch.from_numpy(tokens(s)) for s in chunk], tokens(chunk[0]).shape[1])
            out = net(xb, pad)
            for i, s in enumerate(chunk):
                preds.extend(out[i, : len(s)].tolist())
    return np.array(preds)


def sample_config(m: int) -> dict[str, Any]:
    """How the samples for ``m`` servers are drawn: the 6-server testbed's (1-3 tasks, random
    placements, as the shipped ``reward.pt``) or the 30-server rack's (§VII-C: 1-10 workers / PS;
    at most 16 jobs, about the concurrency of the ``drl-30`` workloads; random, packed, isolated
    and spread placements, :data:`cohabit.sim.drl_samples.RULES`)."""
    if m == 6:
        return {"max_tasks": 3, "max_jobs": None, "mix": False}
    return {"max_tasks": 10, "max_jobs": 16, "mix": True}


def train_reward(n_samples: int = 4000, epochs: int = 30, seed: int = 0, m: int = 6, lr: float = 1e-3,
                 time_budget_s: float | None = None, log: Any = print) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Train the reward model for ``m`` servers (samples drawn as :func:`sample_config` says) and
    fit LIF on the same training split; returns (net, lif json, report)."""
    import torch

    from ..policies.drl.nets import RewardNet, pad_batch

    torch.manual_seed(seed)
    t0 = time.process_time()
    data = samples(n_samples, seed=seed, m=m, **sample_config(m))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data))
    cut = int(0.9 * len(data))
    train = [data[i] for i in order[:cut]]
    test = [data[i] for i in order[cut:]]
    x_train = [torch.from_numpy(tokens(s)) for s in train]
    y_train = [torch.tensor([j.speed for j in s], dtype=torch.float32) for s in train]
    net = RewardNet(m)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs, 1))
    for epoch in range(epochs):
        perm = rng.permutation(len(train))
        total = 0.0
        for b in range(0, len(perm), 32):
            idx = perm[b: b + 32]
            xb, pad = pad_batch([x_train[i] for i in idx], x_train[0].shape[1])
            yb, _ = pad_batch([y_train[i].unsqueeze(-1) for i in idx], 1)
            pred = net(xb, pad)
            label = yb.squeeze(-1).clamp(min=1e-3)
            loss = ((pred - label).abs() / label)[~pad].mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        sched.step()
        log(f"epoch {epoch + 1}/{epochs}: train relative error {total / len(perm):.4f}")
        if time_budget_s is not None and time.process_time() - t0 > time_budget_s:
            log(f"stopping: CPU time budget {time_budget_s:g} s spent")
            break
    net.eval()
    label = np.array([j.speed for s in test for j in s])
    report: dict[str, Any] = {"reward_model": errors(predict(net, test), label)}
    profiles = lif_profiles()
    lif: dict[str, Any] = {"profiles": profiles}
    prof_model = LIFModel({k: ModelProfile(**v) for k, v in profiles.items()}, {}, "line")
    train_rows = [r for s in train for r in lif_rows(s, prof_model)]
    test_rows = [r for s in test for r in lif_rows(s, prof_model)]
    for kind in ("line", "quad"):
        lif[kind] = fit(train_rows, kind)
        model = LIFModel(prof_model.profiles, lif[kind], kind)
        pred = np.array([max(0.05, 1.0 - model.slowdown(mo, c, b)) for mo, c, b, _ in test_rows])
        report[f"lif_{kind}"] = errors(pred, np.array([1.0 - s for *_, s in test_rows]))
    report["cpu_s"] = time.process_time() - t0
    report["samples"] = {"train": len(train), "test": len(test), "jobs": int(sum(len(s) for s in data)),
                         **sample_config(m)}
    return net, lif, report


def train_drl_reward(
    samples_n: int = typer.Option(4000, "--samples", help="random placements to measure in the simulator"),
    epochs: int = typer.Option(30, help="passes over the training split"),
    seed: int = typer.Option(0, help="seed of the samples, the split and the initial weights"),
    budget_s: float = typer.Option(0.0, "--budget-s", help="stop after this much CPU time (0: no limit)"),
    servers: int = typer.Option(6, help="servers M: 6 (the 'drl' preset: reward.pt, lif.json) or 30 ('drl-30', "
                                         "1-10 workers / PS: reward-30.pt)"),
    out: Path = typer.Option(DEFAULT_OUT, help="directory for reward.pt (reward-30.pt), its JSON and lif.json"),
) -> None:
    """Train Harmony-DRL's reward model and fit LIF-Line / LIF-Quad on random placements (Bao et al. §VI)."""
    import torch

    if samples_n < 10 or epochs < 1:
        raise typer.BadParameter("--samples must be >= 10 and --epochs >= 1")
    if servers not in REWARD_FILES:
        raise typer.BadParameter(f"--servers must be 6 or 30 (the drl and drl-30 presets), got {servers}")
    torch.set_num_threads(1)
    net, lif, report = train_reward(samples_n, epochs, seed, m=servers, time_budget_s=budget_s or None,
                                    log=lambda s: typer.echo(s, err=True))
    out.mkdir(parents=True, exist_ok=True)
    name = REWARD_FILES[servers]
    torch.save(net.state_dict(), out / name)
    if servers == 6:  # the LIF baselines' coefficients come from the testbed's samples only
        (out / "lif.json").write_text(json.dumps(lif, indent=1) + "\n", encoding="utf-8")
    how = "random placements" if servers == 6 else "random / packed / isolated / spread placements (1-10 tasks)"
    meta = {"command": "cohabit train drl-reward " + " ".join(sys.argv[3:]), "seed": seed,
            "workload": f"{how} of drl_workload jobs on the {'drl' if servers == 6 else 'drl-30'} preset "
                        "(sim.drl_samples)",
            "servers": servers, "epochs": epochs, "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "params": int(sum(p.numel() for p in net.parameters())), **report}
    Path(out / name).with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    r = report
    typer.echo(f"reward model: relative error {r['reward_model']['relative_error']:.3f}, "
               f"{100 * r['reward_model']['within_10pct']:.0f}% within 10%; LIF-Line "
               f"{r['lif_line']['relative_error']:.3f} ({100 * r['lif_line']['within_10pct']:.0f}%), LIF-Quad "
               f"{r['lif_quad']['relative_error']:.3f} ({100 * r['lif_quad']['within_10pct']:.0f}%); "
               f"{r['cpu_s']:.0f} s CPU; wrote {out}")
