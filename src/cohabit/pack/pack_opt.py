"""``pack_opt``: which sampled configurations to train together (Liu, ch. 2, §2.4.2).

The search space is Table 2.3 (11 batch sizes x 4 optimizers x 6 learning
rates x 4 activations = 1056 configurations).  Heuristics:

* :func:`knn_pack` — the paper's nearest-neighbour heuristic: pick a random
  centroid, add the configurations closest to it while they are within a
  similarity ``threshold`` and the device memory holds the pack; repeat.
* distances — :func:`index_distance` maps a configuration to the index of each
  numeric value (batch size, learning rate) and to 0/1 for categorical ones
  (optimizer, activation).  The paper calls this a Euclidean distance, but its
  worked example (``[20, SGD, 0.01, ReLU]`` vs ``[40, Adagrad, 0.01, ReLU]``
  is 5 = 4 batch-size steps + 1 optimizer change) is the sum of the per-axis
  distances, so ``metric="l1"`` (the default) reproduces the example and
  ``metric="euclid"`` is the literal reading.  :class:`TimeDistance` is the
  "training time-based distance": the packed step time of two
  configurations over their sequential step time, measured.
* :func:`random_pack` — random groups filled until memory runs out.
* :func:`batch_size_pack` — only configurations with the same batch size are
  packed, greedily until memory runs out.
* :func:`no_pack` — singletons (original Hyperband).

Every heuristic returns a partition of its input into groups, each of which
``fits`` (the memory guard); a single configuration is always a valid group.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

OPTIMIZERS = ("adam", "sgd", "adagrad", "momentum")
ACTIVATIONS = ("sigmoid", "leaky_relu", "tanh", "relu")


@dataclass(frozen=True, order=True)
class Config:
    """One hyper-parameter configuration and its position (indices) in the space."""

    index: tuple[int, int, int, int]
    batch_size: int = field(compare=False)
    optimizer: str = field(compare=False)
    lr: float = field(compare=False)
    activation: str = field(compare=False)

    def label(self) -> str:
        return f"bs={self.batch_size} {self.optimizer} lr={self.lr:g} {self.activation}"


@dataclass(frozen=True)
class SearchSpace:
    """A grid of hyper-parameters; the default is Table 2.3."""

    batch_sizes: tuple[int, ...] = tuple(range(20, 71, 5))
    optimizers: tuple[str, ...] = OPTIMIZERS
    learning_rates: tuple[float, ...] = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
    activations: tuple[str, ...] = ACTIVATIONS

    def __post_init__(self) -> None:
        for name in ("batch_sizes", "optimizers", "learning_rates", "activations"):
            if not getattr(self, name):
                raise ValueError(f"search space axis {name!r} is empty")
        bad = [o for o in self.optimizers if o not in OPTIMIZERS]
        if bad:
            raise ValueError(f"unknown optimizers {bad}; expected some of {OPTIMIZERS}")

    def __len__(self) -> int:
        return len(self.batch_sizes) * len(self.optimizers) * len(self.learning_rates) * len(self.activations)

    def config(self, i: int, j: int, k: int, m: int) -> Config:
        return Config((i, j, k, m), self.batch_sizes[i], self.optimizers[j], self.learning_rates[k], self.activations[m])

    def all(self) -> list[Config]:
        dims = (len(self.batch_sizes), len(self.optimizers), len(self.learning_rates), len(self.activations))
        return [self.config(*ix) for ix in itertools.product(*(range(d) for d in dims))]

    def sample(self, n: int, rng: random.Random) -> list[Config]:
        """``n`` configurations drawn without replacement (Alg. 1 and 2, first line of the loop)."""
        if n > len(self):
            raise ValueError(f"cannot sample {n} configurations from a space of {len(self)}")
        dims = (len(self.batch_sizes), len(self.optimizers), len(self.learning_rates), len(self.activations))
        flat = rng.sample(range(len(self)), n)
        out = []
        for f in flat:
            ix = []
            for d in reversed(dims):
                ix.append(f % d)
                f //= d
            out.append(self.config(*reversed(ix)))
        return out


TABLE_2_3 = SearchSpace()


def index_distance(a: Config, b: Config, metric: str = "l1") -> float:
    """Index distance of §2.4.2: numeric axes by index, categorical ones 0/1."""
    parts = (
        abs(a.index[0] - b.index[0]),
        float(a.optimizer != b.optimizer),
        abs(a.index[2] - b.index[2]),
        float(a.activation != b.activation),
    )
    if metric == "l1":
        return float(sum(parts))
    if metric == "euclid":
        return math.sqrt(sum(p * p for p in parts))
    raise ValueError(f"unknown metric {metric!r}; expected 'l1' or 'euclid'")


Fits = Callable[[Sequence[Config]], bool]
Distance = Callable[[Config, Config], float]


def _always(_: Sequence[Config]) -> bool:
    return True


def _check_max(max_size: int | None) -> None:
    if max_size is not None and max_size < 1:
        raise ValueError(f"max_size must be >= 1, got {max_size}")


def knn_pack(configs: Sequence[Config], *, threshold: float, rng: random.Random,
             distance: Distance = index_distance, fits: Fits = _always,
             max_size: int | None = None) -> list[list[Config]]:
    """Nearest-neighbour packing around random centroids (§2.4.2)."""
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    _check_max(max_size)
    # Work on positions, not values: the same configuration may be sampled twice
    # (by two brackets) and each copy is its own trial.
    remaining = list(range(len(configs)))
    groups: list[list[Config]] = []
    while remaining:
        centroid = remaining.pop(rng.randrange(len(remaining)))
        group = [centroid]
        near = sorted(((distance(configs[centroid], configs[i]), configs[i], i) for i in remaining),
                      key=lambda d: (d[0], d[1], d[2]))
        for d, _, i in near:
            if d > threshold or (max_size is not None and len(group) >= max_size):
                break
            if not fits([configs[j] for j in (*group, i)]):
                break  # "until the device runs out of memory"
            group.append(i)
        taken = set(group)
        remaining = [i for i in remaining if i not in taken]
        groups.append([configs[i] for i in group])
    return groups


def random_pack(configs: Sequence[Config], *, rng: random.Random, fits: Fits = _always,
                max_size: int | None = None) -> list[list[Config]]:
    """Random Pack Hyperband's grouping: shuffle, then fill each group until memory is full."""
    _check_max(max_size)
    order = list(configs)
    rng.shuffle(order)
    return _greedy(order, fits, max_size)


def batch_size_pack(configs: Sequence[Config], *, fits: Fits = _always,
                    max_size: int | None = None) -> list[list[Config]]:
    """Batch-size Pack Hyperband's grouping: same batch size only, greedy by memory."""
    _check_max(max_size)
    by_bs: dict[int, list[Config]] = {}
    for c in configs:
        by_bs.setdefault(c.batch_size, []).append(c)
    groups: list[list[Config]] = []
    for bs in sorted(by_bs):
        groups.extend(_greedy(by_bs[bs], fits, max_size))
    return groups


def no_pack(configs: Sequence[Config]) -> list[list[Config]]:
    """Every configuration alone (original Hyperband, Alg. 1)."""
    return [[c] for c in configs]


def _greedy(order: Sequence[Config], fits: Fits, max_size: int | None) -> list[list[Config]]:
    groups: list[list[Config]] = []
    cur: list[Config] = []
    for c in order:
        if cur and ((max_size is not None and len(cur) >= max_size) or not fits([*cur, c])):
            groups.append(cur)
            cur = []
        cur.append(c)
    if cur:
        groups.append(cur)
    return groups


class TimeDistance:
    """Training time-based distance (§2.4.2): ``T_s(Pack(a, b)) / (T_s(a) + T_s(b))``.

    ``measure(a, b)`` returns ``(t_pack, t_a + t_b)`` for one training step.
    Step time depends on batch size, optimizer and activation but not on the
    learning rate, so results are cached on those three; the measurements
    themselves take real time, which counts against this variant.
    """

    def __init__(self, measure: Callable[[Config, Config], tuple[float, float]]) -> None:
        self.measure = measure
        self.cache: dict[tuple, float] = {}
        self.measurements = 0

    @staticmethod
    def _key(c: Config) -> tuple[int, str, str]:
        return (c.batch_size, c.optimizer, c.activation)

    def __call__(self, a: Config, b: Config) -> float:
        key = tuple(sorted((self._key(a), self._key(b))))
        d = self.cache.get(key)
        if d is None:
            t_pack, t_seq = self.measure(a, b)
            if t_seq <= 0:
                raise ValueError(f"sequential step time must be positive, got {t_seq}")
            d = t_pack / t_seq
            self.cache[key] = d
            self.measurements += 1
        return d
