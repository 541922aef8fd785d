"""Per-member optimizers applied to stacked parameters in one pass.

A packed model must leave every member's optimizer state exactly as if the
member trained alone (ch. 2, §2.1.2: "optimizer state is stored with the
model").  On the same-architecture fast path the parameters of ``k`` members
live in one stacked tensor ``[k, ...]``; calling ``k`` PyTorch optimizers on
``k`` views costs ``k`` Python loops per step, which on a CPU easily costs
more than the packed forward and backward together.  :class:`StackedOptimizer`
runs the same update rules (SGD, SGD with momentum/Nesterov, Adam, Adagrad —
the four optimizers of Table 2.3) once per block of members that share the
update *structure*, on one flat ``[k, P]`` buffer holding all parameters, with
per-member learning rates and coefficients broadcast along dim 0 and
per-member step counts.  The formulas follow
``torch.optim``'s single-tensor implementations, so results agree within
floating-point tolerance; :meth:`StackedOptimizer.export` writes the state
back in ``torch.optim`` format so the member's own optimizer can carry on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

_KINDS = {torch.optim.SGD: "sgd", torch.optim.Adam: "adam", torch.optim.Adagrad: "adagrad"}


@dataclass(frozen=True)
class OptSpec:
    """The update rule and coefficients of one member's optimizer."""

    kind: str
    lr: float
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    decoupled: bool = False
    lr_decay: float = 0.0
    initial_accumulator_value: float = 0.0

    @property
    def structure(self) -> tuple[str, bool, bool, bool, bool]:
        """Members whose structure is equal can be updated by one vectorised rule."""
        return (self.kind, self.momentum != 0.0, self.nesterov, self.weight_decay != 0.0, self.decoupled)

    @staticmethod
    def of(opt: torch.optim.Optimizer, params: list[Tensor]) -> OptSpec | None:
        """The spec of ``opt`` if it is a plain SGD/Adam/Adagrad over exactly ``params``, else None."""
        kind = _KINDS.get(type(opt))
        if kind is None or len(opt.param_groups) != 1:
            return None
        g = opt.param_groups[0]
        if len(g["params"]) != len(params) or any(a is not b for a, b in zip(g["params"], params)):
            return None
        if g.get("maximize") or g.get("differentiable") or g.get("capturable") or g.get("fused"):
            return None
        if isinstance(g["lr"], Tensor):
            return None
        if kind == "sgd":
            return OptSpec("sgd", float(g["lr"]), momentum=float(g["momentum"]), dampening=float(g["dampening"]),
                           nesterov=bool(g["nesterov"]), weight_decay=float(g["weight_decay"]))
        if kind == "adam":
            if g.get("amsgrad"):
                return None
            b1, b2 = g["betas"]
            if isinstance(b1, Tensor) or isinstance(b2, Tensor):
                return None
            return OptSpec("adam", float(g["lr"]), beta1=float(b1), beta2=float(b2), eps=float(g["eps"]),
                           weight_decay=float(g["weight_decay"]), decoupled=bool(g.get("decoupled_weight_decay", False)))
        return OptSpec("adagrad", float(g["lr"]), lr_decay=float(g["lr_decay"]), eps=float(g["eps"]),
                       weight_decay=float(g["weight_decay"]),
                       initial_accumulator_value=float(g["initial_accumulator_value"]))


_MEMO: dict[tuple, Tensor] = {}


def _coef(values: list[float], like: Tensor) -> float | Tensor:
    """A Python scalar when all members agree (exactly torch's arithmetic), else a ``[k, 1]`` column."""
    v0 = values[0]
    if all(v == v0 for v in values):
        return v0
    key = (tuple(values), like.dtype, like.device)
    t = _MEMO.get(key)
    if t is None:
        if len(_MEMO) > 4096:  # per-step coefficients (bias corrections) keep changing
            _MEMO.clear()
        t = torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, 1)
        _MEMO[key] = t
    return t


@dataclass(frozen=True)
class Segment:
    """Where one named parameter lives in a member's flat row."""

    name: str
    offset: int
    numel: int
    shape: tuple[int, ...]


@dataclass
class _Block:
    """Members ``[a, b)`` of a stacked group that share one update structure."""

    a: int
    b: int
    specs: list[OptSpec]
    steps: list[int]
    state: dict[str, Tensor] = field(default_factory=dict)  # slot -> [k, P]
    initialised: list[bool] = field(default_factory=list)  # SGD momentum buffers


class StackedOptimizer:
    """Apply each member's own optimizer rule to its row of a flat parameter buffer.

    ``flat`` (``[n, P]``) holds every member's parameters back to back (see
    ``segments``) and ``grad`` their gradients; members ``a..b`` of each block
    are contiguous rows, so one block's update is a handful of whole-buffer
    operations whatever the number of parameters.  ``states[i]`` is member
    ``i``'s torch optimizer state keyed by parameter name (``{}`` if fresh).
    """

    def __init__(self, flat: Tensor, grad: Tensor, segments: list[Segment], blocks: list[tuple[int, int]],
                 specs: list[OptSpec], states: list[dict[str, dict]]) -> None:
        self.flat, self.grad, self.segments = flat, grad, segments
        self.blocks: list[_Block] = []
        for a, b in blocks:
            sp = specs[a:b]
            if len({x.structure for x in sp}) != 1:
                raise ValueError(f"members {a}..{b - 1} mix optimizer structures {sorted({x.structure for x in sp})}")
            blk = _Block(a, b, sp, steps=[0] * (b - a), initialised=[False] * (b - a))
            self._import(blk, states[a:b])
            self.blocks.append(blk)

    # -- state in/out -------------------------------------------------------
    @staticmethod
    def _slots(kind: str, momentum: bool) -> tuple[str, ...]:
        return {"adam": ("exp_avg", "exp_avg_sq"), "adagrad": ("sum",), "sgd": ("momentum_buffer",) if momentum else ()}[kind]

    def _import(self, blk: _Block, states: list[dict[str, dict]]) -> None:
        kind, has_mom = blk.specs[0].kind, blk.specs[0].momentum != 0.0
        rows = self.flat[blk.a:blk.b]
        for slot in self._slots(kind, has_mom):
            if kind == "adagrad":
                t = torch.tensor([x.initial_accumulator_value for x in blk.specs], dtype=rows.dtype,
                                 device=rows.device).view(-1, 1).expand_as(rows).clone()
            else:
                t = torch.zeros_like(rows)
            for i, st in enumerate(states):
                for seg in self.segments:
                    v = st.get(seg.name, {}).get(slot)
                    if v is not None:
                        t[i, seg.offset:seg.offset + seg.numel] = v.detach().reshape(-1).to(rows.device, rows.dtype)
            blk.state[slot] = t
        for i, st in enumerate(states):
            any_state = next(iter(st.values()), {}) if st else {}
            if "step" in any_state:
                blk.steps[i] = int(float(any_state["step"]))
            if any_state.get("momentum_buffer") is not None:
                blk.initialised[i] = True

    def export(self, member: int) -> dict[str, dict]:
        """Member ``member``'s optimizer state in ``torch.optim`` format, keyed by parameter name."""
        for blk in self.blocks:
            if blk.a <= member < blk.b:
                i = member - blk.a
                spec = blk.specs[i]
                out: dict[str, dict] = {}
                for seg in self.segments:
                    st: dict = {k: v[i, seg.offset:seg.offset + seg.numel].view(seg.shape).clone()
                                for k, v in blk.state.items()}
                    if spec.kind in ("adam", "adagrad"):
                        st["step"] = torch.tensor(float(blk.steps[i]))
                    if spec.kind == "sgd" and spec.momentum != 0.0 and not blk.initialised[i]:
                        st["momentum_buffer"] = None
                    out[seg.name] = st
                return out
        raise ValueError(f"member index {member} is not in any optimizer block")

    # -- the update -----------------------------------------------------------
    @torch.no_grad()
    def step(self, touched: set[str] | None = None) -> None:
        """Update every block; ``touched`` names the parameters that got a gradient (None: all).

        Like ``torch.optim``, a parameter without a gradient is left alone,
        state included.
        """
        if touched is None or len(touched) == len(self.segments):
            cols = [slice(None)]
        else:
            cols = [slice(x.offset, x.offset + x.numel) for x in self.segments if x.name in touched]
        for blk in self.blocks:
            fn = getattr(self, "_" + blk.specs[0].kind)
            for c in cols:
                fn(blk, c)
            if cols:
                blk.steps = [x + 1 for x in blk.steps]
                if blk.specs[0].kind == "sgd" and blk.specs[0].momentum != 0.0:
                    blk.initialised = [True] * len(blk.specs)

    def _sgd(self, blk: _Block, c: slice) -> None:
        sp = blk.specs
        p, g = self.flat[blk.a:blk.b, c], self.grad[blk.a:blk.b, c]
        lr = _coef([-x.lr for x in sp], p)
        if sp[0].weight_decay != 0.0:
            g = g + _coef([x.weight_decay for x in sp], p) * p
        if sp[0].momentum != 0.0:
            mu = _coef([x.momentum for x in sp], p)
            buf = blk.state["momentum_buffer"][:, c]
            if all(blk.initialised):
                damp = _coef([1 - x.dampening for x in sp], p)
                if isinstance(damp, float):
                    buf.mul_(mu).add_(g, alpha=damp)
                else:
                    buf.mul_(mu).add_(g * damp)
            elif not any(blk.initialised):  # torch starts the buffer at the first gradient
                buf.copy_(g)
            else:
                for i, x in enumerate(sp):
                    if blk.initialised[i]:
                        buf[i].mul_(x.momentum).add_(g[i], alpha=1 - x.dampening)
                    else:
                        buf[i].copy_(g[i])
            g = g + mu * buf if sp[0].nesterov else buf
        if isinstance(lr, float):
            p.add_(g, alpha=lr)
        else:
            p.add_(g * lr)

    def _adam(self, blk: _Block, c: slice) -> None:
        sp = blk.specs
        steps = [x + 1 for x in blk.steps]
        p, g = self.flat[blk.a:blk.b, c], self.grad[blk.a:blk.b, c]
        m, v = blk.state["exp_avg"][:, c], blk.state["exp_avg_sq"][:, c]
        if sp[0].weight_decay != 0.0:
            if sp[0].decoupled:
                p.mul_(_coef([1 - x.lr * x.weight_decay for x in sp], p))
            else:
                g = g + _coef([x.weight_decay for x in sp], p) * p
        m.lerp_(g, _coef([1 - x.beta1 for x in sp], p))
        b2 = _coef([x.beta2 for x in sp], p)
        if isinstance(b2, float):
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
        else:
            v.mul_(b2).add_(g * g * (1 - b2))
        step_size = _coef([x.lr / (1 - x.beta1**k) for x, k in zip(sp, steps)], p)
        bc2 = _coef([math.sqrt(1 - x.beta2**k) for x, k in zip(sp, steps)], p)
        denom = (v.sqrt() / bc2).add_(_coef([x.eps for x in sp], p))
        if isinstance(step_size, float):
            p.addcdiv_(m, denom, value=-step_size)
        else:
            p.sub_(step_size * (m / denom))

    def _adagrad(self, blk: _Block, c: slice) -> None:
        sp = blk.specs
        steps = [x + 1 for x in blk.steps]
        p, g = self.flat[blk.a:blk.b, c], self.grad[blk.a:blk.b, c]
        if sp[0].weight_decay != 0.0:
            g = g + _coef([x.weight_decay for x in sp], p) * p
        clr = _coef([x.lr / (1 + (k - 1) * x.lr_decay) for x, k in zip(sp, steps)], p)
        acc = blk.state["sum"][:, c]
        acc.addcmul_(g, g, value=1)
        std = acc.sqrt().add_(_coef([x.eps for x in sp], p))
        if isinstance(clr, float):
            p.addcdiv_(g, std, value=-clr)
        else:
            p.sub_(clr * (g / std))
