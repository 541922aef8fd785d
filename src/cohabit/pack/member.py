"""Training tasks and the ``load`` / ``free`` primitives (Liu, ch. 2, §2.1.2, §2.2.3).

A :class:`Member` carries the four traits of a training task (model with its
optimizer, device, batch size, steps) plus its data stream and progress.
``load`` places a member on a device, ``free`` moves it off and returns a
:class:`Checkpoint`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .batching import Cursor, DataStream

LossFn = Callable[[Tensor, Tensor], Tensor]


@dataclass(eq=False)
class Member:
    """One training task: model, its optimizer, batch size and data (the four traits of §2.1.2).

    ``loss_fn=None`` means mean cross-entropy, which the stacked path fuses
    across members.  ``steps`` is the number of training steps the member
    wants in total (``None``: no limit).
    """

    name: str
    model: nn.Module
    optimizer: torch.optim.Optimizer
    batch_size: int
    stream: DataStream | None = None
    loss_fn: LossFn | None = None
    steps: int | None = None
    steps_done: int = 0
    cursor: Cursor = field(init=False)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a member needs a non-empty name")
        self.cursor = Cursor(self.batch_size)
        if self.steps is not None and self.steps < 0:
            raise ValueError(f"member {self.name!r}: steps must be >= 0, got {self.steps}")

    @property
    def done(self) -> bool:
        return self.steps is not None and self.steps_done >= self.steps

    def loss(self, out: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(out, y) if self.loss_fn is None else self.loss_fn(out, y)


@dataclass(eq=False)
class Checkpoint:
    """What ``free`` returns: the member, moved off the device, with its progress."""

    member: Member

    @property
    def name(self) -> str:
        return self.member.name

    def state_dict(self) -> dict[str, Any]:
        m = self.member
        c = m.cursor
        return {
            "name": m.name,
            "model": {k: v.detach().clone() for k, v in m.model.state_dict().items()},
            "optimizer": copy.deepcopy(m.optimizer.state_dict()),
            "cursor": {"batch_size": c.batch_size, "epoch": c.epoch, "pos": c.pos,
                       "samples_seen": c.samples_seen, "steps": c.steps},
            "steps_done": m.steps_done,
            "steps": m.steps,
        }

    def save(self, path: str | Path) -> None:
        torch.save(self.state_dict(), Path(path))


def _move_optimizer_state(opt: torch.optim.Optimizer, device: torch.device) -> None:
    for st in opt.state.values():
        for k, v in list(st.items()):
            # Adam/Adagrad keep their scalar "step" on the CPU; leave it there.
            if isinstance(v, Tensor) and not (k == "step" and v.dim() == 0):
                st[k] = v.to(device)


def load(member: Member | Checkpoint, device: torch.device | str = "cpu") -> Member:
    """Place a member (or a checkpointed one) and its optimizer state on ``device`` (§2.1.2)."""
    m = member.member if isinstance(member, Checkpoint) else member
    dev = torch.device(device)
    m.model.to(dev)
    _move_optimizer_state(m.optimizer, dev)
    return m


def free(member: Member, device: torch.device | str = "cpu") -> Checkpoint:
    """Copy a member out of ``device`` and return its checkpoint (§2.1.2, §2.2.3).

    A member that is part of a pack must be freed through
    :meth:`PackedModel.remove`, which first unstacks it.
    """
    if member.meta.get("_packed"):
        raise ValueError(f"member {member.name!r} is inside a pack; use PackedModel.remove({member.name!r})")
    del device  # the host is the checkpoint's home whatever device the member was on
    load(member, "cpu")
    for p in member.model.parameters():
        p.grad = None
    return Checkpoint(member)
