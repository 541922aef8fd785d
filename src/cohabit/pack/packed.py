"""The ``pack``, ``load`` and ``free`` primitives (Liu, ch. 2, §2.1.2 and §2.2).

``pack(members)`` returns a :class:`PackedModel` that trains all members in one
step on one device and keeps each member's semantics: its outputs, gradients,
parameters and optimizer state after ``N`` steps equal those of training it
alone on the same batches (within floating-point tolerance).

Two execution paths share one autograd graph and one backward call per step:

* **Stacked (fast) path** — members with the same architecture (same module
  tree, same parameter shapes, no buffers) are stacked: their parameters become
  rows of one tensor ``[k, ...]`` and the forward runs once under
  :func:`torch.func.vmap` (batched matmuls / grouped convolutions).  Each
  member's parameters stay valid ``nn.Parameter`` objects that are views of
  their row, so user code that holds the model keeps working.  Optimizer
  updates run per block of members in :class:`~cohabit.pack.optim.StackedOptimizer`.
  When the members read the same batch (same stream, same window) the input is
  passed once (``in_dims=None``), which is the redundancy elimination of §2.2.4.
  Otherwise their batches are zero-padded to the largest and stacked; the loss
  slices the padding away (§2.2.2).
* **Concatenated path** — members of different architectures are evaluated in
  the same graph, their losses summed (``[out1 out2] = packed_nn([in1 in2])``)
  and differentiated together; each uses its own optimizer.

Members whose steps run out are removed with :meth:`PackedModel.remove`
(``free``: a :class:`Checkpoint` is returned) and new ones added with
:meth:`PackedModel.add` (``load``) without restarting the others (§2.2.3,
Fig. 2.3).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, vmap

from .batching import Batch, Cursor, DataStream, pad_rows
from .engines import SeqStack, activation_key, seq_signature
from .optim import OptSpec, Segment, StackedOptimizer

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

    ``auto`` picks ``seq`` for supported ``nn.Sequential`` models (activations
    may differ), else ``loop`` for convolutional models on a CPU (measured:
    ``vmap`` turns per-member convolutions into grouped ones, slower there),
    else ``vmap``.
    """
    if engine in ("auto", "seq"):
        sk = seq_signature(model)
        if sk is not None:
            return ("seq", sk)
        if engine == "seq":
            engine = "auto"
    sig = signature(model)
    if sig is None:
        return None
    if engine == "auto":
        has_conv = any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())
        engine = "loop" if (has_conv and torch.device(device).type == "cpu") else "vmap"
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


# --------------------------------------------------------------------------
# The packed model
# --------------------------------------------------------------------------

class PackedModel:
    """Several members trained jointly in one step on one device (§2.2.1).

    ``memory_limit`` (bytes) makes :meth:`add` refuse a member that would push
    the pack's estimated peak memory over it (see :mod:`cohabit.pack.memory`).
    ``fast=False`` puts every member on the concatenated path.  ``engine``
    picks how a stacked group computes: ``"seq"`` (layer by layer for
    ``nn.Sequential`` models; members may differ in their activations, see
    :mod:`cohabit.pack.engines`), ``"vmap"`` (batched kernels), ``"loop"``
    (one member after another on rows of the stacked parameters, still one
    graph and one fused optimizer step) or ``"auto"`` (see :func:`stack_key`).
    ``pad_ratio`` splits a stacked group by batch size so that no member's
    batch is padded to more than ``pad_ratio`` times its size (``None``: pad
    everything to the largest batch, as the paper does).
    """

    def __init__(self, members: Sequence[Member] = (), device: torch.device | str = "cpu", *,
                 fast: bool = True, memory_limit: int | None = None, engine: str = "auto",
                 pad_ratio: float | None = None) -> None:
        if pad_ratio is not None and pad_ratio < 1:
            raise ValueError(f"pad_ratio must be >= 1 (or None), got {pad_ratio}")
        self.pad_ratio = pad_ratio
        if engine not in ("auto", *ENGINES):
            raise ValueError(f"engine must be 'auto' or one of {ENGINES}, got {engine!r}")
        self.device = torch.device(device)
        self.fast = fast
        self.engine = engine
        self.memory_limit = memory_limit
        self.members: list[Member] = []
        self._units: list[_Single | _Stacked] = []
        names = [m.name for m in members]
        if len(set(names)) != len(names):
            raise ValueError(f"member names must be unique, got {names}")
        self._guard(list(members))
        for m in members:
            load(m, self.device)
            m.meta["_packed"] = True
            self.members.append(m)
        self._rebuild()

    # -- membership -----------------------------------------------------------
    def __len__(self) -> int:
        return len(self.members)

    def __iter__(self) -> Iterator[Member]:
        return iter(self.members)

    def __getitem__(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(f"no member named {name!r} in the pack (members: {[m.name for m in self.members]})")

    def _guard(self, members: list[Member]) -> None:
        if self.memory_limit is not None:
            from .memory import MemoryGuard

            MemoryGuard(self.memory_limit, device=self.device).check(members, fast=self.fast)

    def _key(self, m: Member) -> Any:
        """The member's stacking key (cached per model object; ``("single", id)`` if never stacked)."""
        tag = (id(m.model), self.engine, self.fast, self.device.type)
        cached = m.meta.get("_stack_key")
        if cached is None or cached[0] != tag:
            key = stack_key(m.model, self.engine, self.device) if self.fast else None
            m.meta["_stack_key"] = (tag, key if key is not None else ("single", id(m)))
        return m.meta["_stack_key"][1]

    def _dissolve(self) -> None:
        for u in self._units:
            u.dissolve()
        self._units = []

    def _rebuild(self, keys: set | None = None) -> None:
        """Restack the units of ``keys`` (all units if None); other units keep running untouched."""
        if keys is None:
            self._dissolve()
            kept: list[_Single | _Stacked] = []
            keys = {self._key(m) for m in self.members}
        else:
            kept = []
            for u in self._units:
                if self._key(u.members[0]) in keys:
                    u.dissolve()
                else:
                    kept.append(u)
        units: list[_Single | _Stacked] = []
        for key in keys:
            g = [m for m in self.members if self._key(m) == key]
            if key[0] == "single":
                units.extend(_Single(m) for m in g)
                continue
            for bucket in self._buckets(g):
                if len(bucket) >= 2:
                    units.append(_Stacked(bucket, key[0]))
                else:
                    units.extend(_Single(m) for m in bucket)
        self._units = kept + units

    def _buckets(self, group: list[Member]) -> list[list[Member]]:
        """Split a stackable group so no member is padded beyond ``pad_ratio`` x its batch."""
        if self.pad_ratio is None:
            return [group]
        out: list[list[Member]] = []
        for m in sorted(group, key=lambda m: m.batch_size):
            if out and m.batch_size <= self.pad_ratio * out[-1][0].batch_size:
                out[-1].append(m)
            else:
                out.append([m])
        return out

    def sync(self) -> None:
        """Write every member's optimizer state back into its own ``torch.optim`` object."""
        self._rebuild()

    def add(self, member: Member) -> None:
        """``load`` a member into the running pack; the others keep their progress (Fig. 2.3)."""
        if any(m.name == member.name for m in self.members):
            raise ValueError(f"a member named {member.name!r} is already in the pack")
        self._guard([*self.members, member])
        load(member, self.device)
        member.meta["_packed"] = True
        self.members.append(member)
        self._rebuild({self._key(member)})

    def remove(self, member: Member | str) -> Checkpoint:
        """Take a member out of the pack and ``free`` it; returns its checkpoint (§2.2.3)."""
        m = self[member] if isinstance(member, str) else member
        if m not in self.members:
            raise ValueError(f"member {m.name!r} is not in this pack")
        key = self._key(m)
        for u in [u for u in self._units if self._key(u.members[0]) == key]:
            u.dissolve()
            self._units.remove(u)
        self.members.remove(m)
        m.meta.pop("_packed", None)
        ckpt = free(m)
        self._rebuild_missing(key)
        return ckpt

    def _rebuild_missing(self, key: Any) -> None:
        """Rebuild the units of ``key`` after they were dissolved and taken out."""
        g = [m for m in self.members if self._key(m) == key]
        if not g:
            return
        if key[0] == "single":
            self._units.extend(_Single(m) for m in g)
            return
        for bucket in self._buckets(g):
            self._units.append(_Stacked(bucket, key[0]) if len(bucket) >= 2 else _Single(bucket[0]))

    def grads(self, member: Member | str) -> dict[str, Tensor | None]:
        """The member's gradients from the last step, by parameter name."""
        m = self[member] if isinstance(member, str) else member
        for u in self._units:
            if isinstance(u, _Stacked) and m in u.members:
                i = u.members.index(m)
                return {n: u.grad_of(i, n) for n in u.params}
        return {n: p.grad for n, p in m.model.named_parameters()}

    @property
    def layout(self) -> list[list[str]]:
        """Member names per execution unit (stacked groups have more than one)."""
        return [[m.name for m in u.members] for u in self._units]

    # -- compute --------------------------------------------------------------
    def __call__(self, inputs: Tensor | Sequence[Tensor]) -> list[Tensor]:
        return self.forward(inputs)

    def forward(self, inputs: Tensor | Sequence[Tensor]) -> list[Tensor]:
        """``[out_1 .. out_n] = packed_nn([in_1 .. in_n])``; one tensor feeds every member."""
        if isinstance(inputs, Tensor):
            xs = {m.name: inputs for m in self.members}
        else:
            if len(inputs) != len(self.members):
                raise ValueError(f"expected {len(self.members)} inputs (one per member), got {len(inputs)}")
            xs = {m.name: x for m, x in zip(self.members, inputs)}
        outs: dict[str, Tensor] = {}
        for u in self._units:
            for m, o in zip(u.members, u.forward([xs[m.name] for m in u.members])):
                outs[m.name] = o
        return [outs[m.name] for m in self.members]

    def next_batches(self) -> list[Batch]:
        """One batch per member from its stream; members of one stream share loading (§2.2.2)."""
        per_stream: dict[int, list[Member]] = {}
        for m in self.members:
            if m.stream is None:
                raise ValueError(f"member {m.name!r} has no stream; pass its batches to step()")
            per_stream.setdefault(id(m.stream), []).append(m)
        got: dict[str, Batch] = {}
        for ms in per_stream.values():
            for m, b in zip(ms, ms[0].stream.take([m.cursor for m in ms])):  # type: ignore[union-attr]
                got[m.name] = b
        return [got[m.name] for m in self.members]

    def step(self, batches: Sequence[Batch | tuple[Tensor, Tensor]] | None = None) -> Tensor:
        """One synchronised training step of every member; returns the per-member losses."""
        if not self.members:
            raise ValueError("cannot step an empty pack")
        if batches is None:
            bl = self.next_batches()
        else:
            if len(batches) != len(self.members):
                raise ValueError(f"expected {len(self.members)} batches (one per member), got {len(batches)}")
            bl = [b if isinstance(b, Batch) else Batch(b[0], b[1], (-1, id(b[0]), 0, 0)) for b in batches]
        by_name = {m.name: b for m, b in zip(self.members, bl)}
        losses: dict[str, Tensor] = {}
        parts: list[Tensor] = []
        for u in self._units:
            u.zero_grad()
            ls = u.losses([by_name[m.name] for m in u.members])
            parts.append(ls)
            for m, v in zip(u.members, ls):
                losses[m.name] = v
        with warnings.catch_warnings():
            # Stacked gradients are strided views of one flat buffer, by design.
            warnings.filterwarnings("ignore", message="grad and param do not obey the gradient layout")
            torch.cat(parts).sum().backward()
        for u in self._units:
            u.step()
        for m in self.members:
            m.steps_done += 1
        return torch.stack([losses[m.name].detach() for m in self.members])

    def train(self, steps: int | None = None,
              on_free: Callable[[Checkpoint], Member | None] | None = None) -> list[Checkpoint]:
        """Step until every member is done (or ``steps`` steps); free finished members.

        ``on_free(ckpt)`` may return a new member, which is loaded into the pack
        at once (misaligned step counts, §2.2.3).  Returns the checkpoints of
        the freed members in the order they finished.
        """
        if steps is None and any(m.steps is None for m in self.members):
            raise ValueError("train() without steps= needs every member to have a step budget")
        out: list[Checkpoint] = []
        k = 0
        while self.members and (steps is None or k < steps):
            for m in [m for m in self.members if m.done]:
                out.append(self._finish(m, on_free))
            if not self.members:
                break
            self.step()
            k += 1
            for m in [m for m in self.members if m.done]:
                out.append(self._finish(m, on_free))
        return out

    def _finish(self, m: Member, on_free: Callable[[Checkpoint], Member | None] | None) -> Checkpoint:
        ckpt = self.remove(m)
        if on_free is not None:
            new = on_free(ckpt)
            if new is not None:
                self.add(new)
        return ckpt


def pack(members: Sequence[Member], device: torch.device | str = "cpu", *, fast: bool = True,
         memory_limit: int | None = None, engine: str = "auto", pad_ratio: float | None = None) -> PackedModel:
    """Pack ``members`` into one :class:`PackedModel` on ``device`` (§2.1.2)."""
    if not members:
        raise ValueError("pack() needs at least one member, got none")
    return PackedModel(members, device, fast=fast, memory_limit=memory_limit, engine=engine, pad_ratio=pad_ratio)


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
