"""``torch-pipeline``: a model-parallel PyTorch job, one process per model partition (MLFS §3.2).

The model is :class:`~.torch_models.TorchMLP`'s kind (Linear + ReLU blocks) with ``depth`` hidden
layers, built whole under the job's seed and cut into ``stages`` contiguous partitions (the
job's tasks: ``graph.partitions`` with ``replicas: 1``, so ``stages`` is the job's world size and
task ``k`` runs partition ``k``). Every iteration each stage

1. takes the mini-batch's activations from the stage before (stage 0: the input rows),
2. runs its partition forward and sends the activations to the next stage (the last stage
   computes the loss and starts the backward pass),
3. takes the gradient of its output from the next stage, back-propagates, sends the gradient of
   its input to the stage before, and updates its own parameters (SGD with momentum, written out
   as in :mod:`.torch_models`).

Activations and gradients travel by ``torch.distributed`` send/recv over gloo on 127.0.0.1 (the
process group the worker opens for every multi-task job). The last stage's loss (and, at epoch
ends, its held-out metrics) is broadcast, so every stage reports the same numbers.

Checkpoints: each stage holds only its own partition, so each saves its own state
(``per_rank_state``: the worker stores rank ``k``'s under :func:`stage_key`); a halt is agreed
by all stages at one iteration boundary, so the states belong together. A job moved to other
nodes restarts every stage from its checkpoint (the gloo group is formed anew; a stage whose
node did not change restores in place), and training goes on with the same losses: the
mini-batches are the seeded epoch permutations of :class:`~.base.Workload`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from . import data as D
from .base import Workload, WorkloadContext, WorkloadError

MAX_STAGES = 8


def stage_key(job: str, rank: int) -> str:
    """The checkpoint key of a pipeline job's stage ``rank`` (stage 0: the job's own key)."""
    return job if rank == 0 else f"{job}.stage{rank}"


def split_blocks(n_blocks: int, stages: int) -> list[range]:
    """Contiguous, as even as possible, non-empty ranges of ``n_blocks`` blocks for ``stages`` stages."""
    if not 1 <= stages <= n_blocks:
        raise ValueError(f"cannot cut {n_blocks} layers into {stages} stages")
    cuts = np.linspace(0, n_blocks, stages + 1).round().astype(int)
    return [range(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]


class TorchPipeline(Workload):
    """An MLP cut into pipeline stages, one per task (see the module docstring)."""

    name = "torch-pipeline"
    per_rank_state = True  # the worker saves and restores each rank's own checkpoint

    def __init__(
        self,
        ctx: WorkloadContext,
        *,
        n_samples: int = 2048,
        n_features: int = 32,
        n_classes: int = 8,
        hidden: int = 64,
        depth: int = 3,
        lr: float = 0.05,
        momentum: float = 0.9,
        batch_size: int | None = None,
        test_fraction: float = 0.2,
    ) -> None:
        import torch
        from torch import nn

        stages, stage = ctx.world_size, ctx.rank
        if not 2 <= stages <= MAX_STAGES:
            raise WorkloadError(f"job {ctx.job!r}: torch-pipeline runs one stage per task: give the job 2 to "
                                f"{MAX_STAGES} tasks (graph partitions with replicas: 1), got {stages}")
        if not isinstance(depth, int) or depth < stages - 1:
            raise WorkloadError(f"job {ctx.job!r}: workload.depth must be an integer >= stages - 1 = {stages - 1} "
                                f"(each stage needs a layer), got {depth!r}")
        for field, v in (("lr", lr), ("momentum", momentum)):
            if not isinstance(v, (int, float)) or v < 0 or (field == "lr" and v == 0):
                raise WorkloadError(f"job {ctx.job!r}: workload.{field} must be a "
                                    f"{'positive' if field == 'lr' else 'non-negative'} number, got {v!r}")
        try:
            X, y = D.classification(n_samples, n_features, n_classes, seed=ctx.seed, spread=1.0)
            D._check_sizes(hidden=hidden)
            tr, te = D.split(len(y), test_fraction, ctx.seed)
        except ValueError as exc:
            raise WorkloadError(f"job {ctx.job!r}: workload: {exc}") from None
        # every stage sees the whole mini-batch: batches are cut as for one worker
        super().__init__(replace(ctx, rank=0, world_size=1), len(tr), batch_size or ctx.batch_size or 64)
        self.stage, self.stages = stage, stages
        self.first, self.last = stage == 0, stage == stages - 1
        self.X = torch.from_numpy(np.ascontiguousarray(X[tr], dtype=np.float32))
        self.y = torch.from_numpy(y[tr])
        self.Xt = torch.from_numpy(np.ascontiguousarray(X[te], dtype=np.float32))
        self.yt = torch.from_numpy(y[te])
        widths = [n_features] + [hidden] * depth + [n_classes]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(ctx.seed)  # the whole model, as one process would build it
            blocks = [nn.Sequential(nn.Linear(a, b), nn.ReLU()) if i < depth else nn.Linear(a, b)
                      for i, (a, b) in enumerate(zip(widths[:-1], widths[1:]))]
        mine = split_blocks(len(blocks), stages)[stage]
        self.in_width = widths[mine.start]
        self.part = nn.Sequential(*(blocks[i] for i in mine))
        self.params = list(self.part.parameters())
        self.momentum_buf = [torch.zeros_like(p) for p in self.params]
        self.lr, self.momentum = float(lr), float(momentum)
        self._torch = torch
        self._dist = torch.distributed

    # ------------------------------------------------------------ one pass
    def _forward(self, rows: Any, n: int, grad: bool) -> tuple[Any, Any]:
        """(this stage's input, its output) for ``n`` rows: stage 0 reads ``rows``; the others
        receive the activations of the stage before."""
        torch, dist = self._torch, self._dist
        if self.first:
            x = rows
        else:
            x = torch.empty(n, self.in_width)
            dist.recv(x, src=self.stage - 1)
            x.requires_grad_(grad)
        out = self.part(x)
        if not self.last:
            dist.send(out.detach().contiguous(), dst=self.stage + 1)
        return x, out

    def _from_last(self, values: list[float]) -> list[float]:
        """The last stage's ``values``, on every stage."""
        t = self._torch.tensor(values, dtype=self._torch.float64)
        self._dist.broadcast(t, src=self.stages - 1)
        return t.tolist()

    def train_step(self, i: int) -> dict[str, float]:
        torch, dist = self._torch, self._dist
        idx = torch.from_numpy(self.batch(i))
        for p in self.params:
            p.grad = None
        x, out = self._forward(self.X[idx] if self.first else None, len(idx), grad=True)
        loss_value = 0.0
        if self.last:
            loss = torch.nn.functional.cross_entropy(out, self.y[idx])
            loss.backward()
            loss_value = float(loss.detach())
        else:
            g = torch.empty_like(out)
            dist.recv(g, src=self.stage + 1)
            out.backward(g)
        if not self.first:
            dist.send(x.grad.contiguous(), dst=self.stage - 1)
        with torch.no_grad():
            for p, buf in zip(self.params, self.momentum_buf):
                buf.mul_(self.momentum).add_(p.grad)
                p.sub_(buf, alpha=self.lr)
        return {"loss": self._from_last([loss_value])[0]}

    def evaluate(self) -> dict[str, float]:
        n = len(self.yt)
        if n == 0:
            return {}
        v = (n + 1) // 2  # validation half (what the scheduler sees), held-out half
        vals = [0.0, 0.0, 0.0]
        with self._torch.no_grad():
            _, out = self._forward(self.Xt if self.first else None, n, grad=False)
            if self.last:
                hit = (out.argmax(dim=1) == self.yt).float()
                vals = [float(self._torch.nn.functional.cross_entropy(out[:v], self.yt[:v])), float(hit[:v].mean()),
                        float(hit[v:].mean()) if n > v else float("nan")]
        test_loss, acc, held = self._from_last(vals)
        res = {"test_loss": test_loss, "accuracy": acc}
        if n > v:
            res["heldout_accuracy"] = held
        return res

    # ----------------------------------------------------------- state
    def model_state(self) -> dict[str, Any]:
        return {"stage": self.stage, "stages": self.stages,
                "model": {k: v.detach().clone() for k, v in self.part.state_dict().items()},
                "momentum": [b.clone() for b in self.momentum_buf]}

    def load_model_state(self, state: dict[str, Any]) -> None:
        if int(state.get("stage", -1)) != self.stage or int(state.get("stages", -1)) != self.stages:
            raise WorkloadError(f"job {self.ctx.job!r}: checkpoint of stage {state.get('stage')} of "
                                f"{state.get('stages')} restored into stage {self.stage} of {self.stages}")
        try:
            self.part.load_state_dict(state["model"])
        except RuntimeError as exc:
            raise WorkloadError(f"job {self.ctx.job!r}: checkpoint does not fit stage {self.stage} "
                                f"(was the workload changed?): {str(exc).splitlines()[0]}") from None
        with self._torch.no_grad():
            for buf, saved in zip(self.momentum_buf, state["momentum"]):
                buf.copy_(saved)
