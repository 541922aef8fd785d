"""LIF interference models (Bu et al., HPDC'13; Chiang & Huang, SC'14), as Bao et al. use them
as baselines (ToN'22, §VII-B): a task's slowdown is a function of the CPU and bandwidth use of
what shares its server, linear (LIF-Line) or quadratic (LIF-Quad), with per-model coefficients
fitted by least squares to profiled samples.

Features of a job ``j`` on server ``s`` (:func:`server_features`):

* ``cpu``: CPU cores the *other* jobs' tasks on ``s`` use (profiled cores per worker / per
  parameter server of their model), over ``s``'s cores;
* ``bw``: their bandwidth intensity on ``s`` (the profiled communication share of their model
  per task; only jobs spread over several servers send traffic through the NIC).

``slowdown = theta . phi`` with ``phi = (1, cpu, bw)`` (line) or
``(1, cpu, bw, cpu^2, bw^2, cpu*bw)`` (quad); a job's predicted speed is
``1 - slowdown`` of the mean features over its tasks' servers (clamped to [0.05, 1]).
The profile and coefficients are data (``data/drl/lif.json``, written by ``cohabit train
drl-reward`` from the same profiling samples as the reward model); nothing here reads the
simulator.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources as ilr

import numpy as np

KINDS: tuple[str, ...] = ("line", "quad")


def phi(cpu: float, bw: float, kind: str) -> np.ndarray:
    """Regressors of the slowdown."""
    if kind == "line":
        return np.array([1.0, cpu, bw])
    if kind == "quad":
        return np.array([1.0, cpu, bw, cpu * cpu, bw * bw, cpu * bw])
    raise ValueError(f"LIF kind must be one of {', '.join(KINDS)}, got {kind!r}")


@dataclass(frozen=True)
class ModelProfile:
    """Profiled use of one model's tasks: CPU cores per worker and per PS, communication share."""

    cpu_worker: float
    cpu_ps: float
    comm: float


def fit(samples: Sequence[tuple[str, float, float, float]], kind: str) -> dict[str, list[float]]:
    """Per model, least-squares ``theta`` from ``(model, cpu, bw, slowdown)`` samples (numpy lstsq)."""
    by_model: dict[str, list[tuple[float, float, float]]] = {}
    for model, cpu, bw, slow in samples:
        by_model.setdefault(model, []).append((cpu, bw, slow))
    out: dict[str, list[float]] = {}
    for model, rows in sorted(by_model.items()):
        a = np.stack([phi(c, b, kind) for c, b, _ in rows])
        y = np.array([s for _, _, s in rows])
        theta, *_ = np.linalg.lstsq(a, y, rcond=None)
        out[model] = [float(t) for t in theta]
    return out


class LIFModel:
    """A fitted LIF model: profiles and coefficients per model."""

    def __init__(self, profiles: Mapping[str, ModelProfile], coefs: Mapping[str, Sequence[float]], kind: str):
        if kind not in KINDS:
            raise ValueError(f"LIF kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self.kind = kind
        self.profiles = dict(profiles)
        self.coefs = {m: np.asarray(c, dtype=float) for m, c in coefs.items()}
        mean = np.mean(list(self.coefs.values()), axis=0) if self.coefs else np.zeros(phi(0, 0, kind).size)
        self._default = mean
        vals = list(self.profiles.values())
        self._default_profile = (ModelProfile(float(np.mean([p.cpu_worker for p in vals])),
                                              float(np.mean([p.cpu_ps for p in vals])),
                                              float(np.mean([p.comm for p in vals])))
                                 if vals else ModelProfile(1.0, 1.0, 0.3))

    def profile(self, model: str) -> ModelProfile:
        return self.profiles.get(model, self._default_profile)

    def slowdown(self, model: str, cpu: float, bw: float) -> float:
        theta = self.coefs.get(model, self._default)
        return float(np.clip(phi(cpu, bw, self.kind) @ theta, 0.0, 0.95))

    def predict_speed(self, model: str, feats: Sequence[tuple[float, float]]) -> float:
        """Normalised speed (1 = alone) of a ``model`` job whose tasks see ``feats`` (cpu, bw)."""
        if not feats:
            return 1.0
        cpu = float(np.mean([f[0] for f in feats]))
        bw = float(np.mean([f[1] for f in feats]))
        return max(0.05, 1.0 - self.slowdown(model, cpu, bw))

    @classmethod
    def load(cls, kind: str, path: str | None = None) -> LIFModel:
        """The shipped fit (``data/drl/lif.json``) or the one at ``path``."""
        text = (open(path, encoding="utf-8").read() if path is not None
                else ilr.files("cohabit.data").joinpath("drl", "lif.json").read_text(encoding="utf-8"))
        data = json.loads(text)
        profiles = {m: ModelProfile(**p) for m, p in data["profiles"].items()}
        return cls(profiles, data[kind], kind)


def server_features(jobs: Sequence[tuple[str, Mapping[int, int], Mapping[int, int], bool]],
                    cores: Mapping[int, float], model: LIFModel) -> list[dict[int, tuple[float, float]]]:
    """Per job, per server it uses: ``(cpu, bw)`` of the other jobs there.

    ``jobs``: ``(model, workers per server, parameter servers per server, spread)`` with
    ``spread`` whether the job spans several servers (then its tasks use the NIC)."""
    cpu_on: dict[int, float] = {}
    bw_on: dict[int, float] = {}
    mine: list[tuple[dict[int, float], dict[int, float]]] = []
    for name, workers, ps, spread in jobs:
        prof = model.profile(name)
        c: dict[int, float] = {}
        b: dict[int, float] = {}
        for s in set(workers) | set(ps):
            n = workers.get(s, 0) + ps.get(s, 0)
            c[s] = workers.get(s, 0) * prof.cpu_worker + ps.get(s, 0) * prof.cpu_ps
            b[s] = n * prof.comm if spread else 0.0
            cpu_on[s] = cpu_on.get(s, 0.0) + c[s]
            bw_on[s] = bw_on.get(s, 0.0) + b[s]
        mine.append((c, b))
    out = []
    for c, b in mine:
        out.append({s: ((cpu_on[s] - c[s]) / max(cores.get(s, 8.0), 1e-9), bw_on[s] - b[s]) for s in c})
    return out
