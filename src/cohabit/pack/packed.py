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

import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from .batching import Batch
from .member import Checkpoint, LossFn, Member, free, load
from .stacking import ENGINES, _Single, _Stacked, packed_forward, signature, stack_key

__all__ = [
    "ENGINES", "Checkpoint", "LossFn", "Member", "PackedModel", "free", "load", "pack", "packed_forward",
    "signature", "stack_key",
]


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
