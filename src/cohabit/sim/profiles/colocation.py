"""Ground-truth slowdown of training jobs that share one GPU, from Lucid's pairs.

Source: ``data/profiles/colocation_pairs_lucid.csv``, the co-location
measurements released with Lucid (Hu et al., "Lucid: A Non-intrusive,
Scalable and Interpretable Scheduler for Deep Learning Training Jobs",
ASPLOS'23): 1,388 runs of two single-GPU jobs on one GPU, over 11 models
(MobileNetV3, ResNet18, MobileNetV2, EfficientNet, VGG, PointNet, DCGAN, PPO,
TD3, LSTM, NeuMF), batch sizes 32/64/128 and AMP on/off. ``speed1`` and
``speed2`` are each job's speed normalised to the same job running alone.

**Pair speeds.** ``colocated_speed(a, b)`` is the mean, over every measured
configuration of the pair (batch sizes, AMP), of the normalised speed of ``a``
next to ``b`` and of ``b`` next to ``a``. Lookup is symmetric:
``colocated_speed(b, a)`` is ``colocated_speed(a, b)`` reversed. For a model
paired with itself both jobs' speeds are pooled, so both get the same value.

**Cap at 1.** 20.6 % of the measured speeds exceed 1 (up to 1.498; pair means
up to 1.267 for VGG next to PointNet): the solo baseline was measured in a
separate run, so run-to-run noise shows up as "speed-ups". Sharing a GPU
cannot make a job faster than having the GPU alone, and a simulator that
rewarded co-location with free speed would flatter co-locating policies, so
results are capped at 1.0 by default (``cap=None`` returns the raw means,
which stay within (0, 1.5]).

**Names.** A model is resolved, ignoring case and punctuation, to a measured
model: first by exact name, then through :data:`ALIASES` (common trace names,
each mapped to the measured model of the closest kind: plain conv stacks with
large fully-connected layers -> VGG; residual / inception / detection conv
nets -> ResNet18; recurrent and transformer language models and speech ->
LSTM, the only measured sequence model; recommendation -> NeuMF; GANs ->
DCGAN; on-policy RL -> PPO; off-policy RL -> TD3), then by the name prefixes
in :data:`FAMILY_PREFIXES`. Anything else is *unknown*.

**Fallbacks**, for the speed of job ``a`` next to job ``b``:

1. both resolve and the pair was measured: the pair mean;
2. ``a`` resolves but the pair was not measured (10 of the 66 model pairs,
   e.g. NeuMF was only run next to NeuMF) or ``b`` is unknown: ``a``'s mean
   speed over all its measured partners (how sensitive ``a`` is, on average);
3. ``a`` is unknown: the mean over all 2,776 measured speeds (0.937).

**More than two jobs.** Only pairs were measured. For ``k >= 3`` jobs on one
GPU, job ``i`` runs at the product of its pairwise speeds next to each other
job, ``prod_{j != i} s(i | j)`` -- each co-runner independently takes the
same fraction of ``i``'s GPU time it takes when they are alone together --
floored at ``1/k``, the share plain time-slicing gives every job (a GPU never
does worse than round-robin among its ``k`` contexts, ignoring switch costs).
The product grows the aggregate throughput for a few light jobs and then
bends it back down as contention dominates, while the floor keeps the
aggregate at or above one job's solo throughput. For ``k = 2`` the result is
exactly the measured pair (the smallest pair mean, 0.666 for LSTM next to
LSTM, is above the 1/2 floor anyway).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from statistics import fmean

from ._common import canonical, profile_text

_DATA_FILE = "colocation_pairs_lucid.csv"

#: Models measured by Lucid, spelled as in the data file.
COLOCATION_MODELS: tuple[str, ...] = (
    "DCGAN",
    "EfficientNet",
    "LSTM",
    "MobileNetV2",
    "MobileNetV3",
    "NeuMF",
    "PPO",
    "PointNet",
    "ResNet18",
    "TD3",
    "VGG",
)

#: Trace model names (canonical form: lower case, letters and digits only)
#: mapped to the closest measured model; see the module docstring.
ALIASES: dict[str, str] = {
    # plain conv stacks with big fully-connected layers
    "alexnet": "VGG",
    # residual / inception / detection conv nets (Tiresias and Pollux traces)
    "resnet": "ResNet18",
    "resnet50": "ResNet18",
    "resnet101": "ResNet18",
    "resnet152": "ResNet18",
    "inception3": "ResNet18",
    "inception4": "ResNet18",
    "inceptionv3": "ResNet18",
    "inceptionbn": "ResNet18",
    "googlenet": "ResNet18",
    "densenet": "ResNet18",
    "yolov3": "ResNet18",
    "cifar10": "ResNet18",  # Pollux application: ResNet-18 on CIFAR-10
    "imagenet": "ResNet18",  # Pollux application: ResNet-50 on ImageNet
    # sequence models: the only one measured is an LSTM language model
    "lm": "LSTM",
    "wlm": "LSTM",
    "rnn": "LSTM",
    "gru": "LSTM",
    "seq2seq": "LSTM",
    "transformer": "LSTM",
    "bert": "LSTM",
    "gpt2": "LSTM",
    "deepspeech2": "LSTM",
    # recommendation
    "ncf": "NeuMF",
    "recommendation": "NeuMF",
    "dssm": "NeuMF",
    # generative
    "gan": "DCGAN",
    "cyclegan": "DCGAN",
    # reinforcement learning
    "a3c": "PPO",
    "dqn": "PPO",
    "ddpg": "TD3",
    "sac": "TD3",
    # small mobile nets
    "shufflenet": "MobileNetV2",
    "squeezenet": "MobileNetV2",
}

#: Name prefixes (canonical form) tried after :data:`ALIASES`, longest first.
FAMILY_PREFIXES: dict[str, str] = {
    "vgg": "VGG",
    "resnet": "ResNet18",
    "resnext": "ResNet18",
    "wideresnet": "ResNet18",
    "inception": "ResNet18",
    "densenet": "ResNet18",
    "yolo": "ResNet18",
    "mobilenet": "MobileNetV2",
    "efficientnet": "EfficientNet",
    "lstm": "LSTM",
    "bert": "LSTM",
    "gpt": "LSTM",
    "transformer": "LSTM",
    "deepspeech": "LSTM",
    "neumf": "NeuMF",
}


@dataclass(frozen=True, slots=True)
class _Table:
    pair: dict[tuple[str, str], float]  # (victim, aggressor) -> mean raw speed of victim
    solo_mean: dict[str, float]  # victim -> mean raw speed over all its runs
    overall: float  # mean raw speed over all runs
    runs: dict[tuple[str, str], int]  # unordered pair (sorted) -> number of runs


@cache
def _table() -> _Table:
    samples: dict[tuple[str, str], list[float]] = {}
    per_model: dict[str, list[float]] = {}
    runs: dict[tuple[str, str], int] = {}
    reader = csv.DictReader(io.StringIO(profile_text(_DATA_FILE)))
    for line, row in enumerate(reader, start=2):
        try:
            a, b = row["model1"], row["model2"]
            sa, sb = float(row["speed1"]), float(row["speed2"])
        except (KeyError, TypeError, ValueError) as exc:  # pragma: no cover - data is fixed
            raise ValueError(f"{_DATA_FILE}:{line}: bad row: {exc}") from exc
        samples.setdefault((a, b), []).append(sa)
        samples.setdefault((b, a), []).append(sb)  # for a == b this pools both jobs
        per_model.setdefault(a, []).append(sa)
        per_model.setdefault(b, []).append(sb)
        key = (min(a, b), max(a, b))
        runs[key] = runs.get(key, 0) + 1
    every = [s for values in per_model.values() for s in values]
    return _Table(
        pair={k: fmean(v) for k, v in samples.items()},
        solo_mean={k: fmean(v) for k, v in per_model.items()},
        overall=fmean(every),
        runs=runs,
    )


@cache
def _canonical_models() -> dict[str, str]:
    return {canonical(m): m for m in COLOCATION_MODELS}


@cache
def resolve_colocation_model(model: str) -> str | None:
    """The measured model that stands for ``model``, or ``None`` if unknown.

    Exact name (ignoring case and punctuation), then :data:`ALIASES`, then the
    longest matching prefix in :data:`FAMILY_PREFIXES`.
    """
    key = canonical(model)
    measured = _canonical_models()
    if key in measured:
        return measured[key]
    if key in ALIASES:
        return ALIASES[key]
    for prefix in sorted(FAMILY_PREFIXES, key=len, reverse=True):
        if key.startswith(prefix):
            return FAMILY_PREFIXES[prefix]
    return None


@cache
def _speed_next_to(victim: str, aggressor: str) -> float:
    """Raw (uncapped) mean speed of ``victim`` sharing a GPU with ``aggressor``."""
    table = _table()
    v = resolve_colocation_model(victim)
    if v is None:
        return table.overall
    a = resolve_colocation_model(aggressor)
    if a is not None and (v, a) in table.pair:
        return table.pair[(v, a)]
    return table.solo_mean[v]


def _capped(value: float, cap: float | None) -> float:
    return value if cap is None or value < cap else cap


def colocated_speed(model_a: str, model_b: str, *, cap: float | None = 1.0) -> tuple[float, float]:
    """Normalised speeds ``(speed of a, speed of b)`` when a and b share one GPU.

    1.0 is the job's speed alone on the GPU. Values are measured means capped
    at ``cap`` (``None``: raw means); see the module docstring for the name
    resolution and the fallbacks for unmeasured pairs and unknown models.
    """
    return (
        _capped(_speed_next_to(model_a, model_b), cap),
        _capped(_speed_next_to(model_b, model_a), cap),
    )


def shared_gpu_speed(models: Sequence[str], *, cap: float | None = 1.0) -> list[float]:
    """Normalised speed of each of ``models`` when all of them share one GPU.

    One model: ``[1.0]``. Two: :func:`colocated_speed`. Three or more: for
    each job the product of its pairwise speeds next to every other job,
    floored at ``1/k`` (module docstring). An empty list is a ``ValueError``.
    """
    k = len(models)
    if k == 0:
        raise ValueError("shared_gpu_speed needs at least one model, got an empty list")
    if k == 1:
        return [1.0]
    return list(_shared_speeds(tuple(models), cap))


@lru_cache(maxsize=1 << 16)
def _shared_speeds(models: tuple[str, ...], cap: float | None) -> tuple[float, ...]:
    """:func:`shared_gpu_speed` of two or more models, kept per tuple of models (the simulator asks it for
    the same few model mixes at every speed change of a time-shared GPU)."""
    k = len(models)
    if k == 2:
        return colocated_speed(models[0], models[1], cap=cap)
    floor = 1.0 / k
    out: list[float] = []
    for i, victim in enumerate(models):
        speed = 1.0
        for j, aggressor in enumerate(models):
            if i != j:
                speed *= _capped(_speed_next_to(victim, aggressor), cap)
        out.append(speed if speed > floor else floor)
    return tuple(out)


def colocation_runs(model_a: str, model_b: str) -> int:
    """How many measured runs stand behind the pair that ``model_a``, ``model_b`` resolve to."""
    a, b = resolve_colocation_model(model_a), resolve_colocation_model(model_b)
    if a is None or b is None:
        return 0
    return _table().runs.get((min(a, b), max(a, b)), 0)
