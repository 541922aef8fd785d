"""Online retraining of Harmony-DRL's reward model from the speeds running jobs report (Bao et
al., ToN'22, §IV: after the offline phase, "the reward model is updated online with the
observed training speeds").

At most once per scheduling interval (20 minutes of the view's clock) :class:`OnlineReward`
takes one sample from the cluster as a scheduler sees it: every running job's model,
architecture, workers, parameter servers and placement (the reward model's input, §VI), and as
label the speed the job last *reported* (one iteration over its ``iter_time``) divided by the
speed a profiling run measured for that job shape alone and consolidated (``data/drl/solo.json``;
jobs of a model not profiled there get no label but still count as co-located). The reward
network then takes a few Adam steps with the relative-error loss of §VI on a window of the
latest samples (full batch). Nothing here reads the simulator (``tests/test_barrier.py``).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from importlib import resources as ilr
from pathlib import Path
from typing import Any

import numpy as np

from ...engine.view import ClusterView
from .state import reward_token

INTERVAL_S = 1200.0


def load_solo(path: Path | None = None) -> dict[str, dict[str, float]]:
    """Profiled solo speeds per model and job shape (``data/drl/solo.json``)."""
    text = (path.read_text(encoding="utf-8") if path is not None
            else ilr.files("cohabit.data").joinpath("drl", "solo.json").read_text(encoding="utf-8"))
    return json.loads(text)["speeds"]


def solo_key(allreduce: bool, n_workers: int, n_ps: int) -> str:
    return f"allreduce {n_workers}" if allreduce else f"ps {n_workers} {n_ps}"


@dataclass
class Observation:
    """One interval's running jobs (reward-model tokens) and their observed normalised speeds
    (NaN where the job reported nothing yet or its shape was not profiled)."""

    time: float
    tokens: np.ndarray  # N x reward_dim
    label: np.ndarray  # N

    @property
    def labelled(self) -> int:
        return int(np.isfinite(self.label).sum())


class OnlineReward:
    """The reward network, retrained online on observed speeds (relative-error loss, Adam)."""

    def __init__(self, net: Any, solo: dict[str, dict[str, float]], *, lr: float = 1e-4, steps: int = 8,
                 window: int = 64) -> None:
        import torch

        self.net = net
        self.solo = solo
        self.steps = steps
        self.opt = torch.optim.Adam(net.parameters(), lr=lr)
        self.window: deque[Observation] = deque(maxlen=window)
        self.log: list[dict[str, float]] = []
        self._next = 0.0

    def observe(self, view: ClusterView) -> Observation | None:
        """The sample the running jobs give now (None when none of them reported a speed)."""
        toks, labels = [], []
        m = view.capacity.shape[0]
        for job in view.running.values():
            spec = job.spec
            allreduce = spec.num_ps == 0
            n_w = job.n_workers
            pw, pp = np.zeros(m, np.int64), np.zeros(m, np.int64)
            for i, s in enumerate(job.placement):
                (pw if i < n_w else pp)[s] += 1
            n_p = int(pp.sum())
            toks.append(reward_token(spec.model or "", allreduce, n_w, n_p, pw, pp))
            solo = self.solo.get(spec.model or "", {}).get(solo_key(allreduce, n_w, n_p))
            it = job.iter_time
            labels.append(1.0 / it / solo if it and solo else np.nan)
        if not toks:
            return None
        obs = Observation(view.now, np.stack(toks), np.array(labels, dtype=float))
        return obs if obs.labelled else None

    def error(self, observations: list[Observation]) -> float:
        """Mean relative error of the network's predictions on the labelled jobs of ``observations``."""
        import torch

        errs = []
        with torch.no_grad():
            for o in observations:
                pred = self.net(torch.from_numpy(o.tokens).unsqueeze(0), torch.zeros(1, len(o.label), dtype=torch.bool))
                ok = np.isfinite(o.label)
                errs.extend((np.abs(pred[0].numpy()[ok] - o.label[ok]) / o.label[ok]).tolist())
        return float(np.mean(errs)) if errs else float("nan")

    def update(self) -> dict[str, float]:
        """A few full-batch Adam steps on the window (relative-error loss of §VI over the labelled
        jobs); returns the error on the window before and after."""
        import torch

        from .nets import pad_batch

        data = list(self.window)
        before = self.error(data)
        x, pad = pad_batch([torch.from_numpy(o.tokens) for o in data], data[0].tokens.shape[1])
        y, _ = pad_batch([torch.from_numpy(o.label).float().unsqueeze(-1) for o in data], 1)
        y = y.squeeze(-1)
        ok = ~pad & torch.isfinite(y)
        label = torch.nan_to_num(y, nan=1.0).clamp(min=1e-3)
        self.net.train()
        for _ in range(self.steps):
            pred = self.net(x, pad)
            loss = ((pred - label).abs() / label)[ok].mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        self.net.eval()
        after = self.error(data)
        return {"before": before, "after": after}

    def step(self, view: ClusterView) -> None:
        """Once per interval: observe the running jobs, add the sample, retrain."""
        if view.now < self._next:
            return
        obs = self.observe(view)
        if obs is None:
            return
        self._next = view.now + INTERVAL_S
        self.window.append(obs)
        got = self.update()
        self.log.append({"time": view.now, "jobs": float(obs.labelled), **got})
