"""PyTorch workloads on generated classification data: ``torch-mlp`` and ``torch-cnn``.

torch is imported when a workload is built, not when this module is
imported, so the scheduler process can validate parameters without paying
for torch. Models are initialised under ``torch.manual_seed(seed)`` inside a
forked RNG (the caller's RNG is untouched); mini-batches come from the seeded
epoch permutations of :class:`~cohabit.runtime.workloads.base.Workload`, and
the models have no dropout, so a resumed run reproduces an uninterrupted one
(on the same thread count and device).

Device: model, data and optimizer state live on ``ctx.device`` (``cuda:0``
when the task was given a GPU torch can use, see :mod:`cohabit.runtime.devices`);
checkpoints hold CPU tensors, so a job paused on one device resumes on another. Training is SGD with momentum on cross-entropy,
written out here (``buf = momentum * buf + grad + weight_decay * p``,
``p -= lr * buf``, PyTorch's rule) because building ``torch.optim.SGD``
imports TorchDynamo, which costs ~2 s at every start and resume.

Data-parallel: when the worker sets ``comm``, gradients are averaged across
ranks after ``backward`` (each rank takes its shard of the global batch).

Metrics: ``loss`` (mini-batch) every step; at epoch ends ``test_loss`` and
``accuracy`` on a validation half of the held-out split (what the scheduler and
completion criteria see), and ``heldout_accuracy`` on its other half (the
"true" accuracy a user checks afterwards: false attainment, Rotary §3.2.2; the
local backend keeps it out of the metrics policies see).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from . import data as D
from .base import Workload, WorkloadContext, WorkloadError


class _TorchClassifier(Workload):
    def _setup(self, ctx: WorkloadContext, X: np.ndarray, y: np.ndarray, *, test_fraction: float,
               batch_size: int, build: Callable[[], Any], lr: float, momentum: float, weight_decay: float) -> None:
        import torch

        for field, v in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay)):
            if not isinstance(v, (int, float)) or v < 0 or (field == "lr" and v == 0):
                raise WorkloadError(f"job {ctx.job!r}: workload.{field} must be a {'positive' if field == 'lr' else 'non-negative'} "
                                    f"number, got {v!r}")
        try:
            tr, te = D.split(len(y), test_fraction, ctx.seed)
        except ValueError as exc:
            raise WorkloadError(f"job {ctx.job!r}: workload: {exc}") from None
        super().__init__(ctx, len(tr), batch_size)
        self.device = torch.device(ctx.device)
        dev = self.device
        self.X = torch.from_numpy(np.ascontiguousarray(X[tr], dtype=np.float32)).to(dev)
        self.y = torch.from_numpy(y[tr]).to(dev)
        self.Xt = torch.from_numpy(np.ascontiguousarray(X[te], dtype=np.float32)).to(dev)
        self.yt = torch.from_numpy(y[te]).to(dev)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(ctx.seed)
            self.model = build()  # initialised on the CPU (the same weights on every device), then moved
        self.model.to(dev)
        self.params = [p for p in self.model.parameters()]
        self.momentum_buf = [torch.zeros_like(p) for p in self.params]
        self.lr, self.momentum, self.weight_decay = float(lr), float(momentum), float(weight_decay)
        self._loss = torch.nn.functional.cross_entropy
        self._torch = torch

    def train_step(self, i: int) -> dict[str, float]:
        torch = self._torch
        idx = torch.from_numpy(self.batch(i)).to(self.device)
        for p in self.params:
            p.grad = None
        loss = self._loss(self.model(self.X[idx]), self.y[idx])
        loss.backward()
        grads = [p.grad for p in self.params]
        if self.comm is not None:
            self.comm.allreduce_mean(grads)
        with torch.no_grad():
            for p, g, buf in zip(self.params, grads, self.momentum_buf):
                if self.weight_decay:
                    g = g.add(p, alpha=self.weight_decay)
                buf.mul_(self.momentum).add_(g)
                p.sub_(buf, alpha=self.lr)
        return {"loss": float(loss.detach())}

    def evaluate(self) -> dict[str, float]:
        n = len(self.yt)
        if n == 0:
            return {}
        v = (n + 1) // 2  # validation half (first), held-out half (second)
        with self._torch.no_grad():
            out = self.model(self.Xt)
            hit = (out.argmax(dim=1) == self.yt).float()
            res = {
                "test_loss": float(self._loss(out[:v], self.yt[:v])),
                "accuracy": float(hit[:v].mean()),
            }
            if n > v:
                res["heldout_accuracy"] = float(hit[v:].mean())
            return res

    def model_state(self) -> dict[str, Any]:
        # CPU copies: a checkpoint restores on any device (a GPU task resumes on the CPU and back)
        return {
            "model": {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()},
            "momentum": [b.to("cpu", copy=True) for b in self.momentum_buf],
        }

    def load_model_state(self, state: dict[str, Any]) -> None:
        try:
            self.model.load_state_dict(state["model"])
        except RuntimeError as exc:
            raise WorkloadError(f"job {self.ctx.job!r}: checkpoint does not fit this model "
                                f"(was the workload changed?): {str(exc).splitlines()[0]}") from None
        bufs = state["momentum"]
        if len(bufs) != len(self.momentum_buf):
            raise WorkloadError(f"job {self.ctx.job!r}: checkpoint has {len(bufs)} momentum buffers, "
                                f"the model has {len(self.momentum_buf)} parameters")
        with self._torch.no_grad():
            for buf, saved in zip(self.momentum_buf, bufs):
                buf.copy_(saved)


def _with_defaults(cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` over the keyword defaults of ``cls``'s constructor."""
    out = {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
           if p.default is not inspect.Parameter.empty}
    out.update(params)
    return out


class TorchMLP(_TorchClassifier):
    """A two-hidden-layer ReLU MLP on Gaussian-cluster data (:func:`data.classification`)."""

    name = "torch-mlp"

    @classmethod
    def parameter_count(cls, params: dict[str, Any]) -> int:
        """Trainable parameters of the model ``workload: params`` builds (without importing torch)."""
        p = _with_defaults(cls, params)
        f, h, c = int(p["n_features"]), int(p["hidden"]), int(p["n_classes"])
        return (f + 1) * h + (h + 1) * h + (h + 1) * c

    def __init__(
        self,
        ctx: WorkloadContext,
        *,
        n_samples: int = 4096,
        n_features: int = 32,
        n_classes: int = 8,
        hidden: int = 64,
        lr: float = 0.05,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        batch_size: int | None = None,
        test_fraction: float = 0.2,
    ) -> None:
        try:
            X, y = D.classification(n_samples, n_features, n_classes, seed=ctx.seed, spread=1.0)
            D._check_sizes(hidden=hidden)
        except ValueError as exc:
            raise WorkloadError(f"job {ctx.job!r}: workload: {exc}") from None

        def build() -> Any:
            from torch import nn

            return nn.Sequential(
                nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                nn.Linear(hidden, n_classes),
            )

        self._setup(ctx, X, y, test_fraction=test_fraction, batch_size=batch_size or ctx.batch_size or 64,
                    build=build, lr=lr, momentum=momentum, weight_decay=weight_decay)


class TorchCNN(_TorchClassifier):
    """A small CNN (two 3x3 conv layers, max-pool, global average pool, linear) on :func:`data.images`."""

    name = "torch-cnn"

    @classmethod
    def parameter_count(cls, params: dict[str, Any]) -> int:
        """Trainable parameters of the model ``workload: params`` builds (without importing torch)."""
        p = _with_defaults(cls, params)
        c, k = int(p["channels"]), int(p["n_classes"])
        return (9 * c + c) + (9 * c * 2 * c + 2 * c) + (2 * c * k + k)

    def __init__(
        self,
        ctx: WorkloadContext,
        *,
        n_samples: int = 2048,
        image_size: int = 12,
        n_classes: int = 4,
        channels: int = 8,
        lr: float = 0.05,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        batch_size: int | None = None,
        test_fraction: float = 0.2,
    ) -> None:
        try:
            X, y = D.images(n_samples, image_size, n_classes, seed=ctx.seed)
            D._check_sizes(channels=channels)
        except ValueError as exc:
            raise WorkloadError(f"job {ctx.job!r}: workload: {exc}") from None
        if image_size < 4:
            raise WorkloadError(f"job {ctx.job!r}: workload.image_size must be >= 4, got {image_size!r}")

        def build() -> Any:
            from torch import nn

            c = channels
            return nn.Sequential(
                nn.Conv2d(1, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                nn.Linear(2 * c, n_classes),
            )

        self._setup(ctx, X, y, test_fraction=test_fraction, batch_size=batch_size or ctx.batch_size or 32,
                    build=build, lr=lr, momentum=momentum, weight_decay=weight_decay)
