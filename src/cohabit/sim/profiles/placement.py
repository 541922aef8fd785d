"""Ground-truth slowdown of a job spread across nodes versus consolidated on one.

Tiresias (Gu et al., NSDI'19: its motivation against over-aggressive job
consolidation and its model-profile-based placement) observed that placement
sensitivity is a property of the model: models with large, skewed tensors --
the VGG family and AlexNet, whose fully-connected layers hold most of the
parameters (VGG's 392 MB fc6 tensor against at most 9 MB for any ResNet-50
tensor, in the per-model tensor table of the Tiresias simulator) -- train
markedly slower when their GPUs sit on different machines, while ResNet and
Inception models barely notice. Tiresias therefore consolidates only the
former.

**Model.** With ``p`` the model's *penalty* (extra time per iteration at two
nodes, ``p = 1 / f2 - 1`` where ``f2`` is the configured factor), a job on
``n`` nodes runs at::

    speed_factor(n) = 1 / (1 + p * (1 + growth * (1 - 2 / n)))      n >= 2
    speed_factor(1) = 1

``f2`` at two nodes, decreasing mildly with ``n`` towards ``1 / (1 + p (1 +
growth))``. ``growth = 1`` is the bandwidth law of a hierarchical ring
all-reduce (inter-node traffic per node ``2 (n-1)/n`` times the gradient
size, i.e. ``(1 - 1/n) / (1/2)`` times its two-node value); ``growth = 0`` is
what Pollux's testbed shows between 2 and 4 nodes (no further loss). The
default, 0.5, sits between them.

**Default factors** (``f2``, speed at two nodes relative to one; keys are
canonical names -- lower case, letters and digits -- and also match as name
prefixes, longest first):

* *Measured*, from Pollux's placement profiles (``pollux_apps/*/
  placements.csv``): the median over local batch sizes of the step-time ratio
  of each spread placement to the one-node placement with the same replicas
  ("11", "12", "111", "22", "13", "112", "1111" against "2", "3", "4"), with
  ``p`` fitted by least squares to the model above (growth 0.5):
  ResNet-50 / ImageNet 0.90, ResNet-18 / CIFAR-10 0.88, DeepSpeech2 0.91,
  BERT 0.49, NCF 0.57, YOLOv3 0.57.
* *Families* without a profile follow Tiresias's ranking: ResNet, ResNeXt,
  Inception and GoogLeNet take ResNet-50's 0.90 (insensitive); VGG and
  AlexNet take 0.50, as sensitive as the most sensitive measured model
  (BERT; BERT-base's ~440 MB of fp32 gradients is close to VGG-16's 528 MB); transformers and
  recurrent language models take BERT's 0.49.
* ``default`` for any other model (e.g. Philly jobs, which carry no model):
  0.73, the median of the six measured factors.

These numbers are cohabit's calibration; Tiresias gives the ranking, not
these values. Pollux applications (``profiles.pollux``) and DL2
parameter-server jobs (``profiles.ps_speed``) have measured per-placement
speeds of their own and must not be scaled by this factor again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._common import as_count, canonical

#: Speed at two nodes relative to one node, per model or model family (module doc).
DEFAULT_SPREAD_FACTORS: dict[str, float] = {
    # measured: Pollux placement profiles, least-squares fit (module doc)
    "resnet50": 0.90,
    "imagenet": 0.90,  # Pollux application: ResNet-50 on ImageNet
    "resnet18": 0.88,
    "cifar10": 0.88,  # Pollux application: ResNet-18 on CIFAR-10
    "deepspeech": 0.91,
    "bert": 0.49,
    "ncf": 0.57,
    "neumf": 0.57,
    "yolo": 0.57,
    # families, after Tiresias's ranking
    "resnet": 0.90,
    "resnext": 0.90,
    "inception": 0.90,
    "googlenet": 0.90,
    "vgg": 0.50,
    "alexnet": 0.50,
    "transformer": 0.49,
    "gpt": 0.49,
    "lstm": 0.49,
    "seq2seq": 0.49,
    "wlm": 0.49,
}

DEFAULT_SPREAD = 0.73
DEFAULT_GROWTH = 0.5


def _check_factor(what: str, value: Any) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number in (0, 1], got {value!r}") from None
    if not 0.0 < f <= 1.0:
        raise ValueError(f"{what} must be in (0, 1], got {value!r}")
    return f


@dataclass(frozen=True)
class SpreadModel:
    """Per-model speed factor of a job spread over several nodes.

    ``factors`` maps model names or family prefixes to the speed at two nodes
    relative to one (in (0, 1]); ``default`` applies to models matching no
    key; ``growth`` (>= 0) sets how much further the speed drops with more
    nodes (module docstring). Treat ``factors`` as read-only.
    """

    factors: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_SPREAD_FACTORS))
    default: float = DEFAULT_SPREAD
    growth: float = DEFAULT_GROWTH
    _penalties: dict[str, float] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.factors, Mapping):
            raise ValueError(f"factors must be a mapping of model name to factor, got {self.factors!r}")
        clean: dict[str, float] = {}
        for name, value in self.factors.items():
            key = canonical(name)
            if not key:
                raise ValueError(f"factors has an empty model name: {name!r}")
            clean[key] = _check_factor(f"factors[{name!r}]", value)
        object.__setattr__(self, "factors", clean)
        object.__setattr__(self, "default", _check_factor("default", self.default))
        try:
            growth = float(self.growth)
        except (TypeError, ValueError):
            raise ValueError(f"growth must be a number >= 0, got {self.growth!r}") from None
        if not (growth >= 0.0 and math.isfinite(growth)):
            raise ValueError(f"growth must be a finite number >= 0, got {self.growth!r}")
        object.__setattr__(self, "growth", growth)

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.factors.items())), self.default, self.growth))

    @classmethod
    def from_dict(cls, config: Mapping[str, Any] | None) -> SpreadModel:
        """Build from a config mapping (e.g. parsed YAML)::

            default: 0.8          # optional
            growth: 0.5           # optional
            factors: {vgg16: 0.4} # optional, merged over the defaults
            inherit: true         # optional; false: use only these factors

        Unknown keys are a ``ValueError`` naming them.
        """
        config = dict(config or {})
        allowed = {"default", "growth", "factors", "inherit"}
        unknown = sorted(set(config) - allowed)
        if unknown:
            raise ValueError(f"unknown spread-model key(s) {unknown}; allowed: {sorted(allowed)}")
        inherit = config.get("inherit", True)
        if not isinstance(inherit, bool):
            raise ValueError(f"inherit must be true or false, got {inherit!r}")
        given = config.get("factors") or {}
        if not isinstance(given, Mapping):
            raise ValueError(f"factors must be a mapping of model name to factor, got {given!r}")
        factors = {**DEFAULT_SPREAD_FACTORS, **given} if inherit else dict(given)
        return cls(
            factors=factors,
            default=config.get("default", DEFAULT_SPREAD),
            growth=config.get("growth", DEFAULT_GROWTH),
        )

    def factor_at_two_nodes(self, model: str | None) -> float:
        """The configured factor that applies to ``model`` (exact, longest prefix, default)."""
        key = canonical(model) if model is not None else ""
        if key in self.factors:
            return self.factors[key]
        best = max((k for k in self.factors if key.startswith(k)), key=len, default=None)
        return self.factors[best] if best is not None else self.default

    def speed_factor(self, model: str | None, n_nodes: int) -> float:
        """Speed of a ``model`` job on ``n_nodes`` nodes relative to one node, in (0, 1].

        1.0 when ``n_nodes == 1``; a count below 1 is a ``ValueError``.
        """
        n = as_count(n_nodes, "n_nodes")
        if n == 1:
            return 1.0
        key = model if model is not None else ""
        penalty = self._penalties.get(key)
        if penalty is None:
            penalty = 1.0 / self.factor_at_two_nodes(model) - 1.0
            self._penalties[key] = penalty
        return 1.0 / (1.0 + penalty * (1.0 + self.growth * (1.0 - 2.0 / n)))
