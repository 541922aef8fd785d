"""Small models and a generated data set for the pack experiments (Liu, ch. 2, §2.3.1).

* :class:`MLP3` — the paper's "Multilayer Perceptron with 3 hidden layers".
* :func:`small_cnn` — a two-convolution network standing in for the paper's
  CNNs (MobileNet/ResNet/DenseNet are far too big for a 2-core CPU).
* :func:`make_digits` — a seeded, generated 8x8 ten-class image set shaped
  like scikit-learn's digits (raw pixels are integers 0..16): each class is a
  random smooth stroke pattern; samples are shifted by up to one pixel,
  rescaled and noised, so the task is learnable but not trivial.  No data is
  downloaded.
* :func:`preprocess_digits` — the "preprocessing in the step" of Table 2.2:
  decode raw uint8 pixels to normalised floats and apply a deterministic
  per-(epoch, sample) augmentation (a one-pixel shift and a blur), so a shared
  stream and a member training alone see the same data.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "sigmoid": nn.Sigmoid,
    "leaky_relu": nn.LeakyReLU,
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
}


def activation(name: str) -> nn.Module:
    try:
        return ACTIVATIONS[name]()
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; expected one of {sorted(ACTIVATIONS)}") from None


class MLP3(nn.Sequential):
    """Flatten, then three hidden Linear+activation layers and a linear classifier."""

    def __init__(self, in_features: int = 64, hidden: int = 128, classes: int = 10, act: str = "relu") -> None:
        if in_features < 1 or hidden < 1 or classes < 2:
            raise ValueError(f"MLP3 needs in_features>=1, hidden>=1, classes>=2; got {in_features}, {hidden}, {classes}")
        super().__init__(
            nn.Flatten(),
            nn.Linear(in_features, hidden), activation(act),
            nn.Linear(hidden, hidden), activation(act),
            nn.Linear(hidden, hidden), activation(act),
            nn.Linear(hidden, classes),
        )


def small_cnn(channels: int = 1, side: int = 8, classes: int = 10, width: int = 16, act: str = "relu") -> nn.Sequential:
    """Conv(3x3)-act-Conv(3x3)-act-MaxPool(2)-Linear for ``side x side`` images."""
    if side < 4 or side % 2:
        raise ValueError(f"small_cnn needs an even image side >= 4, got {side}")
    return nn.Sequential(
        nn.Conv2d(channels, width, 3, padding=1), activation(act),
        nn.Conv2d(width, 2 * width, 3, padding=1), activation(act),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * width * (side // 2) ** 2, classes),
    )


def make_model(arch: str, act: str = "relu", *, side: int = 8, classes: int = 10, hidden: int = 128,
               width: int = 16) -> nn.Module:
    """``arch`` is ``"mlp3"`` or ``"cnn"``."""
    if arch == "mlp3":
        return MLP3(side * side, hidden, classes, act)
    if arch == "cnn":
        return small_cnn(1, side, classes, width, act)
    raise ValueError(f"unknown architecture {arch!r}; expected 'mlp3' or 'cnn'")


def make_digits(n: int = 2048, *, classes: int = 10, side: int = 8, noise: float = 0.35,
                seed: int = 0) -> tuple[Tensor, Tensor]:
    """Generated digit-like images: raw uint8 pixels ``[n, 1, side, side]`` in 0..16 and labels."""
    if n < classes:
        raise ValueError(f"need at least one sample per class: n={n} < classes={classes}")
    g = torch.Generator().manual_seed(seed)
    proto = torch.rand(classes, 1, side + 2, side + 2, generator=g)
    kernel = torch.ones(1, 1, 3, 3) / 9
    proto = F.conv2d(proto, kernel, padding=1)
    proto = (proto - proto.amin(dim=(2, 3), keepdim=True)) / (proto.amax(dim=(2, 3), keepdim=True) - proto.amin(dim=(2, 3), keepdim=True))
    proto = (proto > 0.55).float() * proto  # strokes: keep the bright ridges
    y = torch.arange(n) % classes
    y = y[torch.randperm(n, generator=g)]
    dx = torch.randint(0, 3, (n,), generator=g)
    dy = torch.randint(0, 3, (n,), generator=g)
    rows = torch.arange(side)
    r = (dy[:, None] + rows[None, :])[:, :, None]  # [n, side, 1]
    c = (dx[:, None] + rows[None, :])[:, None, :]  # [n, 1, side]
    x = proto[y][torch.arange(n)[:, None, None], 0, r, c].unsqueeze(1)  # one-pixel random crop
    scale = 0.7 + 0.6 * torch.rand(n, 1, 1, 1, generator=g)
    x = x * scale + noise * torch.randn(x.shape, generator=g)
    x = (x.clamp(0, 1) * 16).round().to(torch.uint8)
    return x, y


def preprocess_digits(raw: Tensor, index: Tensor, epoch: int, *, augment: bool = True) -> Tensor:
    """Decode uint8 0..16 pixels to normalised floats; augment deterministically per (epoch, sample).

    The augmentation (a cyclic one-pixel shift chosen by a hash of epoch and
    sample index, then a 3x3 blur) is a pure function of its arguments, so the
    shared stream and a member alone produce identical inputs.
    """
    x = raw.float() / 16.0
    x = (x - 0.45) / 0.3
    if not augment:
        return x
    h = (index * 1_103_515_245 + (epoch + 1) * 12_345) % 2_147_483_648
    shift = (h >> 8) % 3 - 1  # -1, 0, 1
    out = torch.empty_like(x)
    for s in (-1, 0, 1):
        sel = shift == s
        if bool(sel.any()):
            out[sel] = torch.roll(x[sel], shifts=int(s), dims=-1)
    c = out.shape[1]
    blur = torch.tensor([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]) / 16
    return F.conv2d(out, blur.expand(c, 1, 3, 3).contiguous(), padding=1, groups=c)


def split(x: Tensor, y: Tensor, val_fraction: float = 0.2, seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Seeded train/validation split."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n = x.shape[0]
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 7))
    k = int(round(n * val_fraction))
    va, tr = perm[:k], perm[k:]
    return x[tr], y[tr], x[va], y[va]
