"""Per-member optimizers applied to stacked parameters in one pass.

A packed model must leave every member's optimizer state exactly as if the
member trained alone (ch. 2, §2.1.2: "optimizer state is stored with the
model").  On the same-architecture fast path the parameters of ``k`` members
live in one stacked tensor ``[k, ...]``; calling ``k`` PyTorch optimizers on
``k`` views costs ``k`` Python loops per step, which on a CPU easily costs
more than the packed forward and backward together.  :class:`StackedOptimizer`
runs the same update rules (SGD, SGD with momentum/Nesterov, Adam, Adagrad —
the four optimizers of Table 2.3) once per block of members that share the
update *structure*, with per-member learning rates and coefficients broadcast
along dim 0, and per-member step counts.  The formulas follow
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
    """A Python scalar when all members agree (exactly torch's arithmetic), else a ``[k,1,..]`` tensor."""
    v0 = values[0]
    if all(v == v0 for v in values):
        return v0
    key = (tuple(values), like.dim(), like.dtype, like.device)
    t = _MEMO.get(key)
    if t is None:
        if len(_MEMO) > 4096:  # per-step coefficients (bias corrections) keep changing
            _MEMO.clear()
        t = torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, *([1] * (like.dim() - 1)))
        _MEMO[key] = t
    return t


@dataclass
class _Block:
    """Members ``[a, b)`` of a stacked group that share one update structure."""

    a: int
    b: int
    specs: list[OptSpec]
    steps: list[int]
    state: dict[str, dict[str, Tensor]] = field(default_factory=dict)  # param name -> slot -> [k, ...]
    initialised: list[bool] = field(default_factory=list)  # SGD momentum buffers


class StackedOptimizer:
    """Apply each member's own optimizer rule to its rows of stacked parameters.

    ``params`` maps names to stacked leaf tensors ``[n, ...]``; members ``a..b``
    of each block are contiguous rows.  ``states[i]`` is member ``i``'s torch
    optimizer state keyed by parameter name (``{}`` for a fresh optimizer).
    """

    def __init__(self, params: dict[str, Tensor], blocks: list[tuple[int, int]],
                 specs: list[OptSpec], states: list[dict[str, dict]]) -> None:
        self.params = params
        self.blocks: list[_Block] = []
        for a, b in blocks:
            sp = specs[a:b]
            if len({s.structure for s in sp}) != 1:
                raise ValueError(f"members {a}..{b - 1} mix optimizer structures {sorted({s.structure for s in sp})}")
            blk = _Block(a, b, sp, steps=[0] * (b - a), initialised=[False] * (b - a))
            self._import(blk, states[a:b])
            self.blocks.append(blk)

    # -- state in/out -------------------------------------------------------
    def _slots(self, kind: str, momentum: bool) -> tuple[str, ...]:
        return {"adam": ("exp_avg", "exp_avg_sq"), "adagrad": ("sum",), "sgd": ("momentum_buffer",) if momentum else ()}[kind]

    def _import(self, blk: _Block, states: list[dict[str, dict]]) -> None:
        kind, has_mom = blk.specs[0].kind, blk.specs[0].momentum != 0.0
        for name, p in self.params.items():
            rows = p.detach()[blk.a:blk.b]
            blk.state[name] = {}
            for slot in self._slots(kind, has_mom):
                if kind == "adagrad":
                    init = [torch.full_like(rows[0], s.initial_accumulator_value) for s in blk.specs]
                else:
                    init = [torch.zeros_like(rows[0]) for _ in blk.specs]
                for i, st in enumerate(states):
                    t = st.get(name, {}).get(slot)
                    if t is not None:
                        init[i] = t.detach().to(rows.device, rows.dtype)
                blk.state[name][slot] = torch.stack(init)
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
                for name, slots in blk.state.items():
                    st: dict = {k: v[i].clone() for k, v in slots.items()}
                    if spec.kind in ("adam", "adagrad"):
                        st["step"] = torch.tensor(float(blk.steps[i]))
                    if spec.kind == "sgd" and spec.momentum != 0.0 and not blk.initialised[i]:
                        st["momentum_buffer"] = None
                    out[name] = st
                return out
        raise ValueError(f"member index {member} is not in any optimizer block")

    # -- the update -----------------------------------------------------------
    @torch.no_grad()
    def step(self) -> None:
        for blk in self.blocks:
            getattr(self, "_" + blk.specs[0].kind)(blk)
            blk.steps = [s + 1 for s in blk.steps]

    def _rows(self, blk: _Block, name: str) -> tuple[Tensor, Tensor | None]:
        p = self.params[name]
        g = p.grad
        return p.detach()[blk.a:blk.b], (None if g is None else g[blk.a:blk.b])

    def _sgd(self, blk: _Block) -> None:
        sp = blk.specs
        for name in self.params:
            p, g = self._rows(blk, name)
            if g is None:
                continue
            lr = _coef([-s.lr for s in sp], p)
            if sp[0].weight_decay != 0.0:
                g = g + _coef([s.weight_decay for s in sp], p) * p
            if sp[0].momentum != 0.0:
                mu = _coef([s.momentum for s in sp], p)
                buf = blk.state[name]["momentum_buffer"]
                if all(blk.initialised):
                    damp = _coef([1 - s.dampening for s in sp], p)
                    if isinstance(damp, float):
                        buf.mul_(mu).add_(g, alpha=damp)
                    else:
                        buf.mul_(mu).add_(g * damp)
                elif not any(blk.initialised):  # torch starts the buffer at the first gradient
                    buf.copy_(g)
                else:  # first step of some members: torch starts their buffer at the gradient
                    for i, s in enumerate(sp):
                        if blk.initialised[i]:
                            buf[i].mul_(s.momentum).add_(g[i], alpha=1 - s.dampening)
                        else:
                            buf[i].copy_(g[i])
                g = g + mu * buf if sp[0].nesterov else buf
            if isinstance(lr, float):
                p.add_(g, alpha=lr)
            else:
                p.add_(g * lr)
        if sp[0].momentum != 0.0:
            blk.initialised = [True] * len(sp)

    def _adam(self, blk: _Block) -> None:
        sp = blk.specs
        steps = [s + 1 for s in blk.steps]
        for name in self.params:
            p, g = self._rows(blk, name)
            if g is None:
                continue
            st = blk.state[name]
            m, v = st["exp_avg"], st["exp_avg_sq"]
            if sp[0].weight_decay != 0.0:
                wd = _coef([s.weight_decay for s in sp], p)
                if sp[0].decoupled:
                    p.mul_(_coef([1 - s.lr * s.weight_decay for s in sp], p))
                else:
                    g = g + wd * p
            m.lerp_(g, _coef([1 - s.beta1 for s in sp], p))
            b2 = _coef([s.beta2 for s in sp], p)
            if isinstance(b2, float):
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
            else:
                v.mul_(b2).add_(g * g * (1 - b2))
            step_size = _coef([s.lr / (1 - s.beta1**k) for s, k in zip(sp, steps)], p)
            bc2 = _coef([math.sqrt(1 - s.beta2**k) for s, k in zip(sp, steps)], p)
            denom = (v.sqrt() / bc2).add_(_coef([s.eps for s in sp], p))
            if isinstance(step_size, float):
                p.addcdiv_(m, denom, value=-step_size)
            else:
                p.sub_(step_size * (m / denom))

    def _adagrad(self, blk: _Block) -> None:
        sp = blk.specs
        steps = [s + 1 for s in blk.steps]
        for name in self.params:
            p, g = self._rows(blk, name)
            if g is None:
                continue
            if sp[0].weight_decay != 0.0:
                g = g + _coef([s.weight_decay for s in sp], p) * p
            clr = _coef([s.lr / (1 + (k - 1) * s.lr_decay) for s, k in zip(sp, steps)], p)
            acc = blk.state[name]["sum"]
            acc.addcmul_(g, g, value=1)
            std = acc.sqrt().add_(_coef([s.eps for s in sp], p))
            if isinstance(clr, float):
                p.addcdiv_(g, std, value=-clr)
            else:
                p.sub_(clr * (g / std))
