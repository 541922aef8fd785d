"""Tiresias's placement profile (Gu et al., NSDI'19, §3.3): how skewed a model's tensor sizes are.

Tiresias's profiler finds that only models with a highly *skewed* tensor-size
distribution (a few huge tensors, e.g. VGG's and AlexNet's fully-connected
layers) suffer when spread across machines; it consolidates those (all
workers on the fewest machines, waiting if need be) and relaxes the
constraint for the others. :data:`MODEL_TENSOR_SKEW` is ``tiresias``'s own
profile: the share of a model's parameters held by its largest tensor,
computed from the published architectures (e.g. VGG-16: fc6 has 102.8 M of
138.4 M parameters, 0.74; ResNet-50: its largest 3x3 conv has 2.4 M of
25.6 M, 0.09). A model whose skew is at least ``skew_threshold`` (0.5) is
consolidated; unknown models are consolidated unless
``consolidate_unknown=False`` (no profile, be safe). Relaxed jobs still go
to one machine when one has room (``placement.consolidated_first``).
"""

from __future__ import annotations

from collections.abc import Mapping


#: Share of all parameters held by the largest tensor, from the published architectures
#: (keys: lower-case letters and digits; also matched as name prefixes, longest first).
MODEL_TENSOR_SKEW: dict[str, float] = {
    "vgg11": 0.77, "vgg13": 0.77, "vgg16": 0.74, "vgg19": 0.72, "vgg": 0.74,  # fc6 25088x4096
    "alexnet": 0.62,  # fc6 9216x4096 of 61.1 M
    "resnet18": 0.20, "resnet34": 0.11, "resnet50": 0.09, "resnet101": 0.05, "resnet152": 0.04,
    "resnet": 0.09, "resnext": 0.09,
    "inception3": 0.09, "inceptionv3": 0.09, "inception4": 0.04, "inceptionv4": 0.04, "inception": 0.09,
    "googlenet": 0.15,  # fc 1024x1000 of 6.8 M
    "bert": 0.21,  # word embeddings 30522x768 of 110 M
}
DEFAULT_SKEW_THRESHOLD = 0.5


def canonical(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def tensor_skew(model: str | None, table: Mapping[str, float] = MODEL_TENSOR_SKEW) -> float | None:
    """The skew of ``model`` in ``table`` (exact name, then longest prefix); None if unknown."""
    key = canonical(model or "")
    if not key:
        return None
    if key in table:
        return table[key]
    best = max((k for k in table if key.startswith(k)), key=len, default=None)
    return table[best] if best is not None else None
