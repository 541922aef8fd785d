"""LIF-Quad: least-interference-first placement with a quadratic interference model (Bao et
al.'s baseline, ToN'22 §VII-B; after Chiang & Huang, SC'14). The rule is LIF-Line's
(:class:`.lif_line.LIFPolicy`); the slowdown is quadratic in the co-located CPU and bandwidth use."""

from __future__ import annotations

from .lif_line import LIFPolicy
from .params import build


def make(oracle: bool = False, **params: object) -> LIFPolicy:
    return build(LIFPolicy, params, policy="lif-quad", fixed={"kind": "quad"})
