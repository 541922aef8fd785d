"""Tiresias's placement profile (Gu et al., NSDI'19, §3.3): how skewed a model's tensor sizes are.

Only models whose largest tensor holds most of the parameters (VGG's and AlexNet's fully-connected
layers) suffer when spread across machines; ``policies.tiresias`` consolidates those.
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
