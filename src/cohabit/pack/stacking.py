"""Execution units of a pack: stacked groups and single members (Liu, ch. 2, §2.2.1, §2.2.4).

* :class:`_Stacked` — members of one architecture whose parameters live in one
  flat ``[k, P]`` buffer; the forward runs once for all of them (``seq``,
  ``vmap`` or ``loop`` engine, see :func:`stack_key`) and the optimizers run
  as one :class:`~cohabit.pack.optim.StackedOptimizer` step.
* :class:`_Single` — one member on the concatenated path: its own forward in
  the shared graph and its own optimizer.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, vmap

from .batching import Batch, pad_rows
from .engines import SeqStack, activation_key, seq_signature
from .member import Member
from .optim import OptSpec, Segment, StackedOptimizer


def signature(model: nn.Module) -> tuple | None:
    """Architecture key: equal keys run the same function of their parameters.

    ``None`` means the model cannot be stacked (it has buffers, e.g. BatchNorm
    running statistics, which ``vmap`` cannot update per member).  The key holds
    each submodule's type, training flag and plain attributes (so two MLPs that
    pick their activation through a string attribute differ) and each
    parameter's name, shape, dtype, device and ``requires_grad``.
    """
    if any(True for _ in model.buffers()):
        return None
    parts: list[Any] = []
    for name, mod in model.named_modules():
        attrs = []
        for k, v in sorted(vars(mod).items()):
            if k.startswith("_") or k == "training":
                continue
            if isinstance(v, (int, float, str, bool, type(None))) or (
                isinstance(v, tuple) and all(isinstance(e, (int, float, str, bool)) for e in v)
            ):
                attrs.append((k, v))
        parts.append((name, type(mod), mod.training, tuple(attrs)))
    ps = list(model.parameters())
    if not ps or len({(p.dtype, p.device) for p in ps}) != 1:
        return None  # one flat buffer per stacked group needs one dtype and device
    for name, p in model.named_parameters():
        parts.append((name, tuple(p.shape), p.dtype, str(p.device), p.requires_grad))
    return tuple(parts)


ENGINES = ("seq", "vmap", "loop")


def stack_key(model: nn.Module, engine: str = "auto", device: torch.device | str = "cpu") -> tuple | None:
    """``(engine, key)``: members with equal keys are stacked; ``None`` means never stacked.

    ``auto`` picks, as measured on a 2-core CPU (bench/pack_step.py): ``loop``
    for convolutional models on a CPU (one convolution per member beats both
    the grouped convolutions of ``vmap`` and the concatenated-filter
    convolution of ``seq`` there), else ``seq`` for supported ``nn.Sequential``
    models (activations may differ), else ``vmap``.
    """
    has_conv = any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())
    on_cpu = torch.device(device).type == "cpu"
    if engine == "seq" or (engine == "auto" and not (has_conv and on_cpu)):
        sk = seq_signature(model)
        if sk is not None:
            return ("seq", sk)
        engine = "auto"
    sig = signature(model)
    if sig is None:
        return None
    if engine == "auto":
        engine = "loop" if (has_conv and on_cpu) else "vmap"
    return (engine, sig)


# --------------------------------------------------------------------------
# Execution units
# --------------------------------------------------------------------------

class _Single:
    """A member on the concatenated path: its own forward and its own optimizer."""

    def __init__(self, member: Member) -> None:
        self.members = [member]

    def forward(self, xs: Sequence[Tensor]) -> list[Tensor]:
        return [self.members[0].model(xs[0])]

    def losses(self, batches: Sequence[Batch]) -> Tensor:
        m, b = self.members[0], batches[0]
        return m.loss(m.model(b.x), b.y).reshape(1)

    def zero_grad(self) -> None:
        self.members[0].optimizer.zero_grad(set_to_none=True)

    def step(self) -> None:
        self.members[0].optimizer.step()

    def dissolve(self) -> None:
        pass


class _Stacked:
    """Members of one architecture with stacked parameters (the fast path)."""

    def __init__(self, members: list[Member], engine: str = "vmap") -> None:
        if engine not in ENGINES:
            raise ValueError(f"unknown stacked engine {engine!r}; expected one of {ENGINES}")
        self.engine = engine
        specs = [OptSpec.of(m.optimizer, list(m.model.parameters())) for m in members]
        # Fused members first, grouped by update structure into contiguous blocks.
        order = sorted(range(len(members)), key=lambda i: (
            specs[i] is None, repr(specs[i].structure) if specs[i] else "",
            repr(activation_key(members[i].model)) if engine == "seq" else ""))
        self.members = [members[i] for i in order]
        specs = [specs[i] for i in order]
        first = self.members[0].model
        self.base = None if engine == "seq" else copy.deepcopy(first).to("meta")
        named = [list(m.model.named_parameters()) for m in self.members]
        self.names = [n for n, _ in named[0]]
        segs, off = [], 0
        for n, p in named[0]:
            segs.append(Segment(n, off, p.numel(), tuple(p.shape)))
            off += p.numel()
        self.segments = segs
        p0 = named[0][0][1]
        k = len(self.members)
        # One flat buffer holds every member's parameters (row i = member i) and one its
        # gradients; each stacked parameter is a leaf view into it, and so is each
        # member's own nn.Parameter.  Autograd accumulates into the preset .grad views.
        self.flat = torch.empty(k, off, dtype=p0.dtype, device=p0.device)
        self.grad = torch.zeros_like(self.flat)
        self.params: dict[str, Tensor] = {}
        self.touched: set[str] = set()
        with torch.no_grad():
            for i, ps in enumerate(named):
                for seg, (_, p) in zip(segs, ps):
                    self.flat[i, seg.offset:seg.offset + seg.numel] = p.detach().reshape(-1)
            for seg, (_, p) in zip(segs, named[0]):
                view = self.flat[:, seg.offset:seg.offset + seg.numel].view(k, *seg.shape)
                view.requires_grad_(p.requires_grad)
                view.grad = self.grad[:, seg.offset:seg.offset + seg.numel].view(k, *seg.shape)
                view.register_post_accumulate_grad_hook(lambda _t, name=seg.name: self.touched.add(name))
                self.params[seg.name] = view
            for i, ps in enumerate(named):
                for seg, (_, p) in zip(segs, ps):
                    p.data = self.flat[i, seg.offset:seg.offset + seg.numel].view(seg.shape)
                    p.grad = None
        n_fused = sum(s is not None for s in specs)
        blocks: list[tuple[int, int]] = []
        a = 0
        while a < n_fused:
            b = a
            while b < n_fused and specs[b].structure == specs[a].structure:  # type: ignore[union-attr]
                b += 1
            blocks.append((a, b))
            a = b
        states = [self._torch_state(m) if s is not None else {} for m, s in zip(self.members, specs)]
        self.opt = StackedOptimizer(self.flat, self.grad, segs, blocks, specs[:n_fused], states[:n_fused])  # type: ignore[arg-type]
        self.n_fused = n_fused
        self._seq = SeqStack([m.model for m in self.members]) if engine == "seq" else None
        self._fn = vmap(self._call, in_dims=(0, 0), randomness="different")
        self._fn_shared = vmap(self._call, in_dims=(0, None), randomness="different")

    @staticmethod
    def _torch_state(m: Member) -> dict[str, dict]:
        st = m.optimizer.state
        return {n: dict(st[p]) for n, p in m.model.named_parameters() if p in st}

    def _call(self, params: dict[str, Tensor], x: Tensor) -> Tensor:
        return functional_call(self.base, params, (x,))

    def run(self, xs: Sequence[Tensor], shared: bool) -> Tensor:
        """Outputs ``[k, B, ...]``; ``shared`` feeds ``xs[0]`` to every member."""
        if self._seq is not None:
            if shared:
                return self._seq(self.params, xs[0], True)
            rows = max(x.shape[0] for x in xs)
            return self._seq(self.params, torch.stack([pad_rows(x, rows) for x in xs]), False)
        if self.engine == "loop":
            # One member at a time on its row of the stacked parameters: per-member
            # kernels (no grouped convolutions) but one graph, one backward, fused optimizer.
            rows = max(x.shape[0] for x in xs)
            per = {n: s.unbind(0) for n, s in self.params.items()}
            outs = []
            for i, x in enumerate(xs):
                o = functional_call(self.base, {n: v[i] for n, v in per.items()}, (x,))
                outs.append(pad_rows(o, rows))
            return torch.stack(outs)
        if shared:
            return self._fn_shared(self.params, xs[0])
        rows = max(x.shape[0] for x in xs)
        return self._fn(self.params, torch.stack([pad_rows(x, rows) for x in xs]))

    def forward(self, xs: Sequence[Tensor]) -> list[Tensor]:
        shared = all(x is xs[0] for x in xs)
        out = self.run(xs, shared)
        return [out[i, : x.shape[0]] for i, x in enumerate(xs)]

    def losses(self, batches: Sequence[Batch]) -> Tensor:
        shared = all(b.key == batches[0].key for b in batches)
        out = self.run([b.x for b in batches], shared)
        k, rows = out.shape[0], out.shape[1]
        if all(m.loss_fn is None for m in self.members) and out.dim() == 3:
            # Mean cross-entropy of each member over its own (unpadded) rows, fused.
            if shared:
                y = batches[0].y.repeat(k)
                per = F.cross_entropy(out.reshape(k * rows, -1), y, reduction="none").view(k, rows)
                return per.mean(1)
            y = torch.stack([pad_rows(b.y, rows) for b in batches])
            per = F.cross_entropy(out.reshape(k * rows, -1), y.reshape(-1), reduction="none").view(k, rows)
            sizes = torch.tensor([b.size for b in batches], device=out.device)
            mask = (torch.arange(rows, device=out.device)[None, :] < sizes[:, None]).to(per.dtype)
            return (per * mask).sum(1) / sizes.to(per.dtype)
        return torch.stack([m.loss(out[i, : b.size], b.y) for i, (m, b) in enumerate(zip(self.members, batches))])

    def zero_grad(self) -> None:
        self.grad.zero_()
        self.touched.clear()

    def grad_of(self, i: int, name: str) -> Tensor | None:
        if name not in self.touched:
            return None
        return self.params[name].grad[i]  # type: ignore[index]

    def step(self) -> None:
        self.opt.step(self.touched)
        if self.n_fused < len(self.members):
            for i in range(self.n_fused, len(self.members)):
                m = self.members[i]
                for n, p in m.model.named_parameters():
                    p.grad = self.grad_of(i, n)
                m.optimizer.step()
                for p in m.model.parameters():
                    p.grad = None

    def dissolve(self) -> None:
        """Give every member its own storage and its optimizer state back in torch format."""
        with torch.no_grad():
            for i, m in enumerate(self.members):
                exported = self.opt.export(i) if i < self.n_fused else None
                for n, p in m.model.named_parameters():
                    p.data = p.data.clone()
                    p.grad = None
                    if exported is not None:
                        st = exported[n]
                        if st:
                            m.optimizer.state[p] = st
                        else:
                            m.optimizer.state.pop(p, None)
        self.params = {}
        self.flat = self.grad = torch.empty(0)


@torch.no_grad()
def packed_forward(models: Sequence[nn.Module], x: Tensor) -> list[Tensor]:
    """Evaluate ``models`` on one shared input; stackable ones run stacked (§2.2.4)."""
    groups: dict[Any, list[int]] = {}
    for i, m in enumerate(models):
        key = stack_key(m, "auto", x.device)
        groups.setdefault(key if key is not None else ("single", i), []).append(i)
    out: list[Tensor | None] = [None] * len(models)
    for key, idx in groups.items():
        if len(idx) == 1:
            out[idx[0]] = models[idx[0]](x)
            continue
        names = [n for n, _ in models[idx[0]].named_parameters()]
        params = {n: torch.stack([dict(models[i].named_parameters())[n].detach() for i in idx]) for n in names}
        if key[0] == "seq":
            res = SeqStack([models[i] for i in idx])(params, x, True)
        else:
            base = copy.deepcopy(models[idx[0]]).to("meta")
            res = vmap(lambda p, xx: functional_call(base, p, (xx,)), in_dims=(0, None), randomness="different")(params, x)
        for j, i in enumerate(idx):
            out[i] = res[j]
    return out  # type: ignore[return-value]
