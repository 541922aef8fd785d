"""Stacked forward for ``nn.Sequential`` members whose activations differ (Liu, ch. 2, §2.2.1, §2.4).

Hyper-parameter tuning packs models of one architecture that differ in their
hyper-parameters (Table 2.3), and the activation function is one of them.  A
``vmap`` over one module cannot run a ReLU for one member and a tanh for the
next, so such members would fall back to one forward each.  This engine runs
a stacked ``nn.Sequential`` layer by layer on parameters stacked ``[k, ...]``:

* ``Linear`` — one batched matmul for all members (``[B, in] @ [k, in, out]``
  when the input is shared, ``[k, B, in] @ [k, in, out]`` otherwise);
* ``Conv2d`` — on a shared input one convolution with the members' filters
  concatenated along the output channels; on per-member inputs one
  convolution per member (grouped convolutions are slow on CPUs);
* parameter-free layers (pooling, flatten) — once, on the batch of all members;
* elementwise activations — per run of consecutive members with the same
  activation, so a pack of ReLU, tanh, sigmoid and leaky-ReLU MLPs is one
  stacked group.

Members whose model is not such a ``Sequential`` keep the generic engines.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ELEMENTWISE = (nn.ReLU, nn.LeakyReLU, nn.Tanh, nn.Sigmoid, nn.GELU, nn.SiLU, nn.ELU, nn.Identity, nn.Softplus)
SHAPE_ONLY = (nn.Flatten, nn.MaxPool2d, nn.AvgPool2d)
WITH_PARAMS = (nn.Linear, nn.Conv2d)


def _attrs(mod: nn.Module) -> tuple:
    return tuple(sorted((k, v) for k, v in vars(mod).items()
                        if not k.startswith("_") and k != "training"
                        and isinstance(v, (int, float, str, bool, tuple, type(None)))))


def seq_signature(model: nn.Module) -> tuple | None:
    """Architecture key that ignores which elementwise activation each layer uses.

    ``None`` unless ``model`` is an ``nn.Sequential`` of supported layers with
    no buffers (see the module docstring).
    """
    if not isinstance(model, nn.Sequential) or type(model).forward is not nn.Sequential.forward:
        return None
    if any(True for _ in model.buffers()):
        return None
    ps = list(model.parameters())
    if not ps or len({(p.dtype, p.device) for p in ps}) != 1:
        return None
    parts: list[Any] = []
    for i, mod in enumerate(model):
        if isinstance(mod, ELEMENTWISE) and type(mod) in ELEMENTWISE:
            parts.append((i, "elementwise"))
        elif type(mod) in SHAPE_ONLY or type(mod) in WITH_PARAMS:
            if isinstance(mod, nn.Flatten) and (mod.start_dim != 1 or mod.end_dim != -1):
                return None
            if isinstance(mod, nn.Conv2d) and (mod.groups != 1 or mod.padding_mode != "zeros"):
                return None
            parts.append((i, type(mod), mod.training, _attrs(mod),
                          tuple((n, tuple(p.shape), p.dtype, str(p.device), p.requires_grad)
                                for n, p in mod.named_parameters())))
        else:
            return None
    return ("sequential", tuple(parts))


def activation_key(model: nn.Module) -> tuple:
    """Which activation each elementwise position uses (members are ordered by it)."""
    return tuple((type(m).__name__, _attrs(m)) for m in model if isinstance(m, ELEMENTWISE))


class SeqStack:
    """Layer-by-layer stacked forward of ``k`` ``nn.Sequential`` members."""

    def __init__(self, models: list[nn.Module]) -> None:
        self.k = len(models)
        first = models[0]
        self.layers: list[tuple[str, Any]] = []
        for i, mod in enumerate(first):
            if isinstance(mod, ELEMENTWISE):
                runs: list[tuple[int, int, nn.Module]] = []
                for j, m in enumerate(models):
                    act = m[i]
                    if runs and type(runs[-1][2]) is type(act) and _attrs(runs[-1][2]) == _attrs(act):
                        runs[-1] = (runs[-1][0], j + 1, runs[-1][2])
                    else:
                        runs.append((j, j + 1, act))
                self.layers.append(("act", runs))
            elif isinstance(mod, nn.Linear):
                self.layers.append(("linear", str(i)))
            elif isinstance(mod, nn.Conv2d):
                self.layers.append(("conv", (str(i), mod)))
            else:
                self.layers.append(("shape", mod))

    def __call__(self, params: dict[str, Tensor], x: Tensor, shared: bool) -> Tensor:
        """``x`` is ``[B, ...]`` when ``shared`` else ``[k, B, ...]``; returns ``[k, B, ...]``."""
        h, batched, k = x, not shared, self.k
        for kind, spec in self.layers:
            if kind == "linear":
                w, b = params[f"{spec}.weight"], params.get(f"{spec}.bias")
                if batched:
                    h = torch.matmul(h, w.transpose(1, 2)) if b is None else torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
                else:
                    h = torch.matmul(h, w.transpose(1, 2))  # [B, in] @ [k, in, out] -> [k, B, out]
                    if b is not None:
                        h = h + b.unsqueeze(1)
                batched = True
            elif kind == "conv":
                name, mod = spec
                w, b = params[f"{name}.weight"], params.get(f"{name}.bias")
                conv = dict(stride=mod.stride, padding=mod.padding, dilation=mod.dilation)
                if batched:
                    h = torch.stack([F.conv2d(h[j], w[j], None if b is None else b[j], **conv) for j in range(k)])
                else:
                    out = w.shape[1]
                    y = F.conv2d(h, w.reshape(k * out, *w.shape[2:]), None if b is None else b.reshape(-1), **conv)
                    h = y.unflatten(1, (k, out)).transpose(0, 1)
                batched = True
            elif kind == "shape":
                if batched:
                    if isinstance(spec, nn.Flatten):
                        h = h.flatten(2)
                    else:
                        h = spec(h.flatten(0, 1)).unflatten(0, (k, -1))
                else:
                    h = spec(h)
            else:
                runs = spec
                if len(runs) == 1:
                    h = runs[0][2](h)
                else:
                    if not batched:
                        h = h.expand(k, *h.shape)
                        batched = True
                    # split (not slicing): its backward is one concatenation, no zero-filled copies
                    parts = h.split([b - a for a, b, _ in runs])
                    h = torch.cat([act(part) for part, (_, _, act) in zip(parts, runs)])
        if not batched:
            h = h.expand(k, *h.shape)
        return h
