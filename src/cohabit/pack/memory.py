"""Peak-memory estimate and guard for packs (Liu, ch. 2, §2.3.2 "Memory", §2.3.4).

A pack must never exceed the device memory: when the peak goes over capacity
the training process dies (OOM).  The estimate of one member's peak is

    params + grads + optimizer state + activations(batch) + input(batch)

where the optimizer contributes 0 (SGD), 1 (momentum, Adagrad) or 2 (Adam)
copies of the parameters, and the activations are measured, not guessed: a
probe forward at batch sizes 1 and 2 records the bytes autograd saves for the
backward (``torch.autograd.graph.saved_tensors_hooks``), giving a fixed part
and a per-sample part.  In a pack, members of one stacked group are padded to
the group's largest batch, so their activations count at that batch; members
that read the same stream share one input batch.

:func:`measure_step_peak` measures a real packed step: on CUDA it reads the
allocator's peak; on the CPU it adds the bytes of the live parameter,
gradient and optimizer tensors to the saved activations recorded during the
step (CPU PyTorch has no allocator statistics).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .optim import OptSpec
from .packed import Member, PackedModel, signature, stack_key

_OPT_COPIES = {"sgd": 0, "adam": 2, "adagrad": 1}


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def optimizer_copies(member: Member) -> int:
    """Copies of the parameters the member's optimizer keeps (2 when unknown, to be safe)."""
    spec = OptSpec.of(member.optimizer, list(member.model.parameters()))
    if spec is None:
        return 2
    if spec.kind == "sgd":
        return 1 if spec.momentum != 0.0 else 0
    return _OPT_COPIES[spec.kind]


def _saved_bytes(model: nn.Module, x: Tensor) -> int:
    """Bytes autograd saves for backward in one forward of ``x`` (parameters excluded)."""
    param_ptrs = {p.data_ptr() for p in model.parameters()}
    seen: set[tuple[int, int]] = set()
    total = 0

    def pack_hook(t: Tensor) -> Tensor:
        nonlocal total
        try:
            key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        except (RuntimeError, NotImplementedError):
            return t
        if key[0] not in param_ptrs and key not in seen:
            seen.add(key)
            total += key[1]
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack_hook, lambda t: t):
        out = model(x)
        total += out.numel() * out.element_size()
    return total


@dataclass(frozen=True)
class Footprint:
    """Static bytes (params, grads, optimizer) and batch-dependent bytes of one member."""

    params: int
    grads: int
    optimizer: int
    act_fixed: int
    act_per_sample: int
    input_per_sample: int

    @property
    def static(self) -> int:
        return self.params + self.grads + self.optimizer

    def at(self, batch: int) -> int:
        """Peak bytes of the member alone at ``batch`` rows."""
        return self.static + self.act_fixed + batch * (self.act_per_sample + self.input_per_sample)


_PROBE_CACHE: dict[tuple, tuple[int, int, int]] = {}


def _example(member: Member, example: Tensor | None) -> Tensor:
    if example is not None:
        return example
    if member.stream is not None:
        s = member.stream
        x = s.inputs[:2]
        if s.preprocess is not None:
            x = s.preprocess(x, torch.arange(2), 0)
        return x
    raise ValueError(f"member {member.name!r} has no stream; pass example= (one or more input rows)")


def footprint(member: Member, example: Tensor | None = None) -> Footprint:
    """Estimate one member's memory footprint (probe forward at batch 1 and 2).

    Cached on the member (per model and optimizer object) unless ``example`` is given.
    """
    tag = (id(member.model), id(member.optimizer), id(member.stream))
    cached = member.meta.get("_footprint")
    if example is None and cached is not None and cached[0] == tag:
        return cached[1]
    fp = _footprint(member, example)
    if example is None:
        member.meta["_footprint"] = (tag, fp)
    return fp


def _footprint(member: Member, example: Tensor | None) -> Footprint:
    params = sum(p.numel() * p.element_size() for p in member.model.parameters())
    grads = sum(p.numel() * p.element_size() for p in member.model.parameters() if p.requires_grad)
    x = _example(member, example)
    sig = signature(member.model)
    key = (sig, tuple(x.shape[1:]), x.dtype) if sig is not None else None
    if key is not None and key in _PROBE_CACHE:
        fixed, per, inp = _PROBE_CACHE[key]
    else:
        probe = copy.deepcopy(member.model)  # the probe must not touch the member (e.g. BN statistics)
        x1, x2 = x[:1], torch.cat([x[:1], x[:1]]) if x.shape[0] < 2 else x[:2]
        s1, s2 = _saved_bytes(probe, x1), _saved_bytes(probe, x2)
        per = max(s2 - s1, 0)
        fixed = max(s1 - per, 0)
        inp = x[0].numel() * x.element_size()
        if key is not None:
            _PROBE_CACHE[key] = (fixed, per, inp)
    return Footprint(params, grads, params * optimizer_copies(member), fixed, per, inp)


@dataclass(frozen=True)
class PackEstimate:
    """Estimated peak bytes of a pack, and each member's share of it."""

    total: int
    per_member: dict[str, int]


def estimate_items(items: Sequence[tuple[str, Footprint, int, object, object]]) -> PackEstimate:
    """Estimate from ``(name, footprint, batch_size, stack_key, stream_key)`` tuples.

    Members with equal, non-None ``stack_key`` are stacked and padded to their
    group's largest batch; members with equal ``stream_key`` share one input
    batch (the largest of them).
    """
    groups: dict[object, list[tuple[str, Footprint, int]]] = {}
    streams: dict[object, tuple[int, int]] = {}
    for name, f, b, sk, stream in items:
        groups.setdefault(sk if sk is not None else ("single", name), []).append((name, f, b))
        rows, size = streams.get(stream, (0, f.input_per_sample))
        streams[stream] = (max(rows, b), size)
    per: dict[str, int] = {}
    for g in groups.values():
        rows = max(b for _, _, b in g)
        for name, f, b in g:
            per[name] = f.static + f.act_fixed + (rows if len(g) > 1 else b) * f.act_per_sample
    inputs = sum(r * s for r, s in streams.values())
    return PackEstimate(sum(per.values()) + inputs, per)


def estimate_pack(members: Sequence[Member], *, fast: bool = True,
                  examples: dict[str, Tensor] | None = None) -> PackEstimate:
    """Estimated peak memory of packing ``members`` (padding and input sharing included)."""
    examples = examples or {}
    items = []
    for m in members:
        sig = _cached_key(m) if fast else None
        stream = id(m.stream) if m.stream is not None else ("own", m.name)
        items.append((m.name, footprint(m, examples.get(m.name)), m.batch_size, sig, stream))
    return estimate_items(items)


def _cached_key(m: Member) -> object:
    tag = id(m.model)
    cached = m.meta.get("_mem_key")
    if cached is None or cached[0] != tag:
        cached = (tag, stack_key(m.model))
        m.meta["_mem_key"] = cached
    return cached[1]


def device_capacity(device: torch.device | str = "cpu") -> int:
    """Total memory of ``device`` in bytes (for the CPU: the memory available now)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return int(torch.cuda.get_device_properties(dev).total_memory)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    raise ValueError(f"cannot determine the memory of device {str(dev)!r}; pass a capacity in bytes")


class MemoryGuard:
    """Refuse packs whose estimated peak exceeds ``capacity`` bytes (§2.3.4)."""

    def __init__(self, capacity: int | None = None, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.capacity = int(capacity) if capacity is not None else device_capacity(self.device)
        if self.capacity <= 0:
            raise ValueError(f"memory capacity must be positive, got {capacity!r}")

    def fits(self, members: Sequence[Member], *, fast: bool = True) -> bool:
        return estimate_pack(members, fast=fast).total <= self.capacity

    def check(self, members: Sequence[Member], *, fast: bool = True) -> PackEstimate:
        """Return the estimate, or raise ValueError naming the sizes when it does not fit."""
        est = estimate_pack(members, fast=fast)
        if est.total > self.capacity:
            sizes = ", ".join(f"{n}={_fmt(b)}" for n, b in est.per_member.items())
            raise ValueError(
                f"pack of {len(members)} members needs an estimated {_fmt(est.total)} "
                f"({est.total} bytes; {sizes}) but device {str(self.device)!r} has "
                f"{_fmt(self.capacity)} ({self.capacity} bytes)"
            )
        return est


def _live_bytes(tensors: Iterable[Tensor]) -> int:
    seen: set[int] = set()
    total = 0
    for t in tensors:
        if t is None or not isinstance(t, Tensor):
            continue
        st = t.untyped_storage()
        if st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            total += st.nbytes()
    return total


def measure_step_peak(packed: PackedModel) -> int:
    """Measured peak bytes of one training step of ``packed`` (the step is really taken)."""
    if packed.device.type == "cuda":
        torch.cuda.synchronize(packed.device)
        torch.cuda.reset_peak_memory_stats(packed.device)
        packed.step()
        torch.cuda.synchronize(packed.device)
        return int(torch.cuda.max_memory_allocated(packed.device))
    saved: dict[tuple[int, int], int] = {}

    def pack_hook(t: Tensor) -> Tensor:
        try:
            st = t.untyped_storage()
            saved[(st.data_ptr(), st.nbytes())] = st.nbytes()
        except (RuntimeError, NotImplementedError):
            pass
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack_hook, lambda t: t):
        packed.step()
    static = []
    for m in packed.members:
        for p in m.model.parameters():
            static.append(p)
            static.append(p.grad)
    for u in packed._units:
        params = getattr(u, "params", {})
        static.extend(params.values())
        static.extend(s.grad for s in params.values())
        opt = getattr(u, "opt", None)
        if opt is not None:
            for blk in opt.blocks:
                static.extend(blk.state.values())
    for m in packed.members:
        for st in m.optimizer.state.values():
            static.extend(v for v in st.values() if isinstance(v, Tensor))
    static_bytes = _live_bytes(static)
    params_ptrs = {t.untyped_storage().data_ptr() for t in static if isinstance(t, Tensor)}
    act = sum(v for (ptr, _), v in saved.items() if ptr not in params_ptrs)
    return static_bytes + act
