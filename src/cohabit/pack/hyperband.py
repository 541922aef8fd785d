"""Hyperband and pack-aware Hyperband on real training (Liu, ch. 2, §2.4, Alg. 1 and 2).

:func:`hyperband` runs the successive-halving brackets of Hyperband (Li et
al.) with maximum resource ``R`` and reduction factor ``eta``.  One unit of
resource is ``Workload.unit_samples`` training samples; a configuration that
survives a rung resumes from its checkpoint (model, optimizer state and data
cursor) instead of starting over.

With ``packer=None`` every configuration trains alone in a plain PyTorch loop
(Alg. 1).  With a packer (``pack_opt``: kNN, random, batch-size or
time-distance grouping, :mod:`cohabit.pack.pack_opt`) each rung's
configurations are partitioned into packs that fit the device memory and each
pack trains as one :class:`~cohabit.pack.packed.PackedModel` (Alg. 2).  Members
with larger batches need fewer steps for the same samples; they are freed when
done and the next configuration is loaded into the running pack (§2.2.3,
Fig. 2.3).  Validation of a rung's survivors runs on one shared input, stacked
for the packed variants.

Every trial, pack and evaluation runs on ``Workload.device`` (``cpu`` or a
CUDA device: data batches, models and optimizer state live there; a member
freed from a pack goes back to it for evaluation and its next rung).

Because a packed member's training equals its training alone, the packed
variants see the same configurations (the sampling RNG is separate from the
packing RNG) and the same losses, up to floating point; they differ only in
wall time.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from .batching import DataStream
from .memory import Footprint, MemoryGuard, estimate_items, footprint
from .models import make_model, preprocess_digits
from .pack_opt import (
    TABLE_2_3,
    Config,
    SearchSpace,
    TimeDistance,
    batch_size_pack,
    index_distance,
    knn_pack,
    random_pack,
)
from .member import load
from .packed import Member, PackedModel, packed_forward
from .profile import PackProfile

Packer = Callable[[Sequence[Config]], list[list[Config]]]


def brackets(R: int, eta: int) -> list[list[tuple[int, float]]]:
    """Hyperband's brackets: for s = s_max..0 the rungs ``(n_i, r_i)``."""
    if R < 1:
        raise ValueError(f"R must be >= 1, got {R}")
    if eta < 2:
        raise ValueError(f"eta must be >= 2, got {eta}")
    s_max = 0
    while eta ** (s_max + 1) <= R:
        s_max += 1
    budget = (s_max + 1) * R
    out = []
    for s in range(s_max, -1, -1):
        n = math.ceil(budget / R * eta**s / (s + 1))
        r = R / eta**s
        out.append([(n // eta**i, r * eta**i) for i in range(s + 1)])
    return out


def make_optimizer(name: str, params, lr: float) -> torch.optim.Optimizer:  # noqa: ANN001
    """Table 2.3's optimizers; "momentum" is SGD with momentum 0.9."""
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    raise ValueError(f"unknown optimizer {name!r}; expected adam, sgd, momentum or adagrad")


class Workload:
    """What the tuner trains: architecture, data and the size of one resource unit."""

    def __init__(self, arch: str, x_train: Tensor, y_train: Tensor, x_val: Tensor, y_val: Tensor, *,
                 unit_samples: int, preprocess=preprocess_digits, seed: int = 0,  # noqa: ANN001
                 model_kwargs: dict | None = None, device: torch.device | str = "cpu") -> None:
        if unit_samples < 1:
            raise ValueError(f"unit_samples must be >= 1, got {unit_samples}")
        self.device = torch.device(device)  # where every trial trains and is evaluated
        self.arch = arch
        self.seed = seed
        self.unit_samples = unit_samples
        self.model_kwargs = model_kwargs or {}
        self.stream = DataStream(x_train, y_train, seed=seed, preprocess=preprocess, device=self.device)
        idx = torch.arange(x_val.shape[0])
        if preprocess is preprocess_digits:  # validation data is decoded, never augmented
            self.x_val = preprocess_digits(x_val, idx, 0, augment=False)
        else:
            self.x_val = preprocess(x_val, idx, 0) if preprocess is not None else x_val
        self.x_val, self.y_val = self.x_val.to(self.device), y_val.to(self.device)

    def member(self, c: Config, name: str | None = None) -> Member:
        """A fresh member for ``c``; its initial weights depend only on ``c`` and the seed."""
        torch.manual_seed(self.seed * 100_003 + hash(c.index) % 100_000)
        model = make_model(self.arch, c.activation, **self.model_kwargs).to(self.device)
        opt = make_optimizer(c.optimizer, model.parameters(), c.lr)
        m = Member(name or f"{c.index}", model, opt, c.batch_size, stream=self.stream)
        m.meta["config"] = c
        return m

    def steps_for(self, m: Member, units: float) -> int:
        """Total steps after which ``m`` has seen ``units`` resource units of samples."""
        target = int(round(units * self.unit_samples))
        return m.steps_done + m.cursor.steps_until(len(self.stream), target)

    @torch.no_grad()
    def evaluate(self, members: Sequence[Member], packed: bool) -> list[tuple[float, float]]:
        """Validation (loss, accuracy) of each member; ``packed`` evaluates them stacked."""
        for m in members:  # a member freed from its pack waits on the host
            load(m, self.device)
        models = [m.model for m in members]
        outs = packed_forward(models, self.x_val) if packed else [m(self.x_val) for m in models]
        res = []
        for o in outs:
            loss = float(F.cross_entropy(o, self.y_val))
            acc = float((o.argmax(1) == self.y_val).float().mean())
            res.append((loss if math.isfinite(loss) else math.inf, acc))
        return res


def train_alone(m: Member, steps: int) -> None:
    """The baseline: a plain PyTorch loop for one member (what Alg. 1 runs)."""
    stream = m.stream
    assert stream is not None
    load(m, stream.device)  # where its data arrives (a no-op when it is there already)
    model, opt = m.model, m.optimizer
    for _ in range(steps):
        b = stream.take([m.cursor])[0]
        opt.zero_grad(set_to_none=True)
        loss = m.loss(model(b.x), b.y)
        loss.backward()
        opt.step()
        m.steps_done += 1


@dataclass
class Trial:
    config: Config
    member: Member
    val_loss: float = math.inf
    val_acc: float = 0.0
    units: float = 0.0


@dataclass
class HyperbandResult:
    best: Trial
    wall_time: float
    trials: int
    steps: int
    packs: int
    mean_pack: float
    loaded_samples: int
    pack_opt_time: float = 0.0
    history: list[dict] = field(default_factory=list)
    cpu_time: float = 0.0

    def summary(self) -> dict:
        return {
            "best_config": self.best.config.label(),
            "best_val_loss": self.best.val_loss,
            "best_val_acc": self.best.val_acc,
            "wall_time_s": self.wall_time,
            "cpu_time_s": self.cpu_time,
            "trials": self.trials,
            "train_steps": self.steps,
            "packs": self.packs,
            "mean_pack_size": self.mean_pack,
            "loaded_samples": self.loaded_samples,
            "pack_opt_time_s": self.pack_opt_time,
        }


def _end_rung(trials: list[Trial], b: int, i: int, n_i: int, r_i: float, eta: int, last: bool,
              history: list[dict], log: Callable[[str], None] | None) -> list[Trial]:
    """Close rung ``i`` of bracket ``b`` (its ``trials`` evaluated after ``r_i`` units): record it in
    ``history`` (and ``log``) and return the trials that go on, the best ``n_i // eta`` by validation
    loss (at least one; none after the bracket's ``last`` rung): successive halving (Liu, Alg. 1)."""
    history.append({"bracket": b, "rung": i, "n": len(trials), "r": r_i,
                    "best_loss": min(t.val_loss for t in trials)})
    if log:
        log(f"bracket {b} rung {i}: {len(trials)} configs x {r_i:g} units, best loss {history[-1]['best_loss']:.4f}")
    keep = 0 if last else max(1, n_i // eta)
    return sorted(trials, key=lambda t: (t.val_loss, t.config))[:keep]


def _run_packs(groups: list[list[Trial]], guard: MemoryGuard | None, refill: bool,
               stats: dict, device: torch.device) -> None:
    """Train each group as a pack; finished members make room for the next configuration.

    Groups run longest first (by the most steps any member still needs), so
    with ``refill`` the long trainings share their pack with a stream of short
    ones instead of running alone at the end.
    """
    groups = sorted(groups, key=lambda g: -max((t.member.steps or 0) - t.member.steps_done for t in g))
    queue = deque(t for g in groups for t in g)
    starts = {id(g[0]) for g in groups if g}
    while queue:
        first = [queue.popleft()]
        while queue and id(queue[0]) not in starts:
            first.append(queue.popleft())
        members = [t.member for t in first]
        pm = PackedModel(members, device, memory_limit=guard.capacity if guard else None,
                         pad_ratio=stats.get("pad_ratio"))
        stats["packs"] += 1
        stats["sizes"].append(len(members))

        def on_free(_ckpt, pm=pm):  # noqa: ANN001, ANN202
            if not refill or not queue:
                return None
            cand = queue[0].member
            if guard is not None and not guard.fits([*pm.members, cand], fast=True):
                return None
            queue.popleft()
            stats["sizes"][-1] += 1
            return cand

        pm.train(on_free=on_free)


def hyperband(w: Workload, R: int = 81, eta: int = 3, *, space: SearchSpace = TABLE_2_3,
              packer: Packer | None = None, seed: int = 0, memory_limit: int | None = None,
              refill: bool = False, interleave: bool = False, chooser: Chooser | None = None,
              pad_ratio: float | None = None, log: Callable[[str], None] | None = None) -> HyperbandResult:
    """Hyperband (Alg. 1) or, with ``packer``, pack-aware Hyperband (Alg. 2).

    Returns the configuration with the smallest validation loss seen at the
    end of any rung ("Conf with the smallest intermediate loss so far").

    ``interleave=True`` runs the brackets in lockstep: rung ``i`` of every
    bracket trains in one wave, so ``pack_opt`` can pack configurations of
    different brackets together.  Brackets are independent (Hyperband's outer
    loop "can be trivially distributed", §2.4.1), so every bracket keeps the
    same configurations and makes the same decisions; only the order of the
    training changes.  ``refill=True`` loads the next configuration into a
    running pack as soon as a member finishes (§2.2.3, Fig. 2.3).

    ``chooser`` selects the asynchronous schedule (an extension beyond Alg. 2):
    one pack runs continuously; whenever a member finishes it is freed, and
    when a bracket's rung is complete its survivors become ready at once.
    ``chooser(pack_configs, ready_configs)`` names the ready configuration to
    load next (kNN: nearest to the pack's oldest member within the threshold;
    random; same batch size), as long as memory allows.  The brackets'
    decisions are again unchanged.
    """
    sample_rng = random.Random(seed)
    guard = MemoryGuard(memory_limit) if (memory_limit is not None and packer is not None) else None
    stats: dict = {"packs": 0, "sizes": [], "steps": 0, "pack_opt": 0.0, "pad_ratio": pad_ratio}
    history: list[dict] = []
    loaded0 = w.stream.loaded_samples
    t0, c0 = time.perf_counter(), time.process_time()
    plan = brackets(R, eta)
    # Sampling happens in bracket order whatever the schedule, so all variants see the same trials.
    live: list[list[Trial]] = []
    for b, rungs in enumerate(plan):
        cs = space.sample(rungs[0][0], sample_rng)
        live.append([Trial(c, w.member(c, f"b{b}:{c.index}")) for c in cs])
    trials_total = sum(len(t) for t in live)
    if chooser is not None:
        best = _async(w, plan, live, chooser, guard, eta, stats, history, log)
        sizes = stats["sizes"]
        return HyperbandResult(best, time.perf_counter() - t0, trials_total, stats["steps"], stats["packs"],
                               (sum(sizes) / len(sizes)) if sizes else 1.0, w.stream.loaded_samples - loaded0,
                               stats["pack_opt"], history, time.process_time() - c0)
    waves = ([[(b, i) for b in range(len(plan)) if i < len(plan[b])] for i in range(len(plan[0]))] if interleave
             else [[(b, i)] for b in range(len(plan)) for i in range(len(plan[b]))])
    best: Trial | None = None
    for wave in waves:
        batch: list[Trial] = []
        for b, i in wave:
            r_i = plan[b][i][1]
            for t in live[b]:
                t.member.steps = w.steps_for(t.member, r_i - t.units)
                stats["steps"] += t.member.steps - t.member.steps_done
            batch.extend(live[b])
        if packer is None:
            for t in batch:
                train_alone(t.member, t.member.steps - t.member.steps_done)
        else:
            tp = time.perf_counter()
            by_id = {id(t.config): t for t in batch}
            groups = packer([t.config for t in batch])
            stats["pack_opt"] += time.perf_counter() - tp
            _run_packs([[by_id[id(c)] for c in g] for g in groups], guard, refill, stats, w.device)
        results = w.evaluate([t.member for t in batch], packed=packer is not None)
        for t, (loss, acc) in zip(batch, results):
            t.val_loss, t.val_acc = loss, acc
            if best is None or loss < best.val_loss:
                best = t
        for b, i in wave:
            n_i, r_i = plan[b][i]
            for t in live[b]:
                t.units = r_i
            live[b] = _end_rung(live[b], b, i, n_i, r_i, eta, i + 1 == len(plan[b]), history, log)
    assert best is not None
    sizes = stats["sizes"]
    return HyperbandResult(best, time.perf_counter() - t0, trials_total, stats["steps"], stats["packs"],
                           (sum(sizes) / len(sizes)) if sizes else 1.0, w.stream.loaded_samples - loaded0,
                           stats["pack_opt"], history, time.process_time() - c0)


Chooser = Callable[[Sequence[Config], Sequence[Config]], int | None]


def _async(w: Workload, plan: list[list[tuple[int, float]]], live: list[list[Trial]], chooser: Chooser,
           guard: MemoryGuard | None, eta: int, stats: dict, history: list[dict],
           log: Callable[[str], None] | None) -> Trial:
    """One pack, always refilled from the configurations that are ready (see :func:`hyperband`)."""
    rung = [0] * len(plan)
    left = [len(ts) for ts in live]
    bracket_of: dict[int, int] = {}
    ready: list[Trial] = []
    best: Trial | None = None

    def start_rung(b: int) -> None:
        r_i = plan[b][rung[b]][1]
        for t in live[b]:
            t.member.steps = w.steps_for(t.member, r_i - t.units)
            stats["steps"] += t.member.steps - t.member.steps_done
            bracket_of[id(t.member)] = b
        left[b] = len(live[b])
        ready.extend(live[b])

    for b in range(len(plan)):
        start_rung(b)
    by_member = {id(t.member): t for ts in live for t in ts}
    pm = PackedModel([], w.device, memory_limit=guard.capacity if guard else None,
                     pad_ratio=stats.get("pad_ratio"))
    stats["packs"] = 1
    loaded = 0
    while ready or pm.members:
        while ready:
            tp = time.perf_counter()
            i = chooser([by_member[id(m)].config for m in pm.members], [t.config for t in ready])
            stats["pack_opt"] += time.perf_counter() - tp
            if i is None and not pm.members:
                i = 0  # an empty device takes any configuration
            if i is None:
                break
            cand = ready[i]
            if pm.members and guard is not None and not guard.fits([*pm.members, cand.member]):
                break
            ready.pop(i)
            pm.add(cand.member)
            loaded += 1
        done = [m for m in pm.members if m.done]
        if not done:
            pm.step()
            done = [m for m in pm.members if m.done]
        for m in done:
            pm.remove(m)
            b = bracket_of[id(m)]
            left[b] -= 1
            if left[b]:
                continue
            i = rung[b]
            n_i, r_i = plan[b][i]
            results = w.evaluate([t.member for t in live[b]], packed=True)
            for t, (loss, acc) in zip(live[b], results):
                t.val_loss, t.val_acc, t.units = loss, acc, r_i
                if best is None or loss < best.val_loss:
                    best = t
            live[b] = _end_rung(live[b], b, i, n_i, r_i, eta, i + 1 == len(plan[b]), history, log)
            if live[b]:  # (none go on after a bracket's last rung)
                rung[b] += 1
                start_rung(b)
    stats["sizes"] = [loaded]
    assert best is not None
    return best


def make_chooser(kind: str, *, threshold: float = 6.0, seed: int = 0) -> Chooser:
    """Refill rule of the asynchronous schedule for ``kind`` in knn, random, batch-size."""
    rng = random.Random(seed + 2)
    if kind == "knn":
        def knn(pack: Sequence[Config], ready: Sequence[Config]) -> int | None:
            if not pack:
                return rng.randrange(len(ready))  # a new random centroid
            d, i = min((index_distance(pack[0], c), i) for i, c in enumerate(ready))
            return i if d <= threshold else None
        return knn
    if kind == "random":
        return lambda pack, ready: rng.randrange(len(ready))
    if kind == "batch-size":
        def same_bs(pack: Sequence[Config], ready: Sequence[Config]) -> int | None:
            if not pack:
                counts: dict[int, int] = {}
                for c in ready:
                    counts[c.batch_size] = counts.get(c.batch_size, 0) + 1
                bs = max(counts, key=lambda b: (counts[b], -b))
                return next(i for i, c in enumerate(ready) if c.batch_size == bs)
            return next((i for i, c in enumerate(ready) if c.batch_size == pack[0].batch_size), None)
        return same_bs
    raise ValueError(f"unknown chooser {kind!r}; expected knn, random or batch-size")


class ConfigFits:
    """The memory guard on configurations: does a pack of these configs fit ``capacity`` bytes?

    Footprints are probed once per (optimizer, activation) on a real member of
    the workload; batch sizes enter through the estimate of §2.3.4.
    """

    def __init__(self, w: Workload, capacity: int) -> None:
        self.w = w
        self.capacity = int(capacity)
        self._fp: dict[tuple[str, str], Footprint] = {}

    def footprint(self, c: Config) -> Footprint:
        key = (c.optimizer, c.activation)
        if key not in self._fp:
            self._fp[key] = footprint(self.w.member(c))
        return self._fp[key]

    def estimate(self, configs: Sequence[Config]) -> int:
        # One architecture: the members stack whatever their activation (cohabit.pack.engines).
        items = [(str(i), self.footprint(c), c.batch_size, self.w.arch, "shared") for i, c in enumerate(configs)]
        return estimate_items(items).total

    def __call__(self, configs: Sequence[Config]) -> bool:
        return self.estimate(configs) <= self.capacity


def measure_pair(w: Workload, a: Config, b: Config, steps: int = 3) -> tuple[float, float]:
    """``(T_s(Pack(a, b)), T_s(a) + T_s(b))`` of one training step, measured (time distance)."""
    s = w.stream
    stream = DataStream(s.inputs, s.targets, seed=s.seed, preprocess=s.preprocess, device=w.device)

    def fresh(c: Config) -> Member:
        m = w.member(c)
        m.stream = stream
        return m

    seq = 0.0
    for c in (a, b):
        m = fresh(c)
        train_alone(m, 1)
        t = time.perf_counter()
        train_alone(m, steps)
        seq += time.perf_counter() - t
    ma, mb = fresh(a), fresh(b)
    mb.name += "'"
    pm = PackedModel([ma, mb], w.device)
    pm.step()
    t = time.perf_counter()
    for _ in range(steps):
        pm.step()
    return (time.perf_counter() - t) / steps, seq / steps


PACKERS = ("none", "batch-size", "random", "knn", "knn-time")


def make_packer(kind: str, w: Workload, *, memory_limit: int | None, threshold: float = 6.0,
                time_threshold: float = 0.9, max_size: int | None = None, seed: int = 0,
                profile: PackProfile | None = None) -> Packer | None:
    """The ``pack_opt`` of Alg. 2 for ``kind`` in :data:`PACKERS` (``"none"``: Alg. 1).

    With a measured step ``profile`` (``bench/pack_step.py``) the pack size is also bounded by the
    size whose measured IMPV (Eq. 2.3) is largest for this architecture (:meth:`PackProfile.best_n`):
    packs only grow while the profile says packing gains on this device."""
    if kind not in PACKERS:
        raise ValueError(f"unknown packer {kind!r}; expected one of {PACKERS}")
    if kind == "none":
        return None
    if profile is not None and w.arch in profile.table:
        best = profile.best_n(w.arch, max_n=max_size or 8)
        max_size = best if max_size is None else min(max_size, best)
    rng = random.Random(seed + 1)
    fits = ConfigFits(w, memory_limit) if memory_limit is not None else (lambda cs: True)
    if kind == "batch-size":
        return lambda cs: batch_size_pack(cs, fits=fits, max_size=max_size)
    if kind == "random":
        return lambda cs: random_pack(cs, rng=rng, fits=fits, max_size=max_size)
    if kind == "knn":
        return lambda cs: knn_pack(cs, threshold=threshold, rng=rng, fits=fits, max_size=max_size)
    dist = TimeDistance(lambda a, b: measure_pair(w, a, b))
    return lambda cs: knn_pack(cs, threshold=time_threshold, rng=rng, fits=fits, max_size=max_size, distance=dist)
