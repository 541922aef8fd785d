"""Shared input stream with per-member progress (Liu, ch. 2, §2.2.2 and Fig. 2.2).

Every member of a pack that trains on the same data reads from one
:class:`DataStream`.  The stream walks one epoch order that is a pure function
of ``(seed, epoch)``, and each member keeps its own :class:`Cursor` (epoch and
position) into that order.  A member with batch size ``b`` takes the next ``b``
positions of its own cursor, so within an epoch it sees every sample exactly
once, whatever the other members' batch sizes are.  This is the paper's
"track the progress of each model individually ... no training data is
missing": the member with the largest batch leads and loads new samples, the
smaller ones slice samples that are already loaded.

Loading and preprocessing (decode, normalise, augment) happen once per
(epoch, position) for all members of the stream; the stream keeps a window of
loaded samples between the slowest and the fastest cursor and drops a sample
once every cursor passed it.  The last batch of an epoch is partial (never
dropped), so nothing is skipped either.

When a stacked group needs equal-sized inputs, :func:`pad_rows` pads a smaller
batch with zero rows up to the largest one; the loss later slices the padding
away, so the padding never reaches a gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

Preprocess = Callable[[Tensor, Tensor, int], Tensor]
"""``preprocess(raw_rows, sample_indices, epoch) -> rows``; must be deterministic in its arguments."""


@dataclass
class Cursor:
    """One member's progress through its stream: the next position of ``epoch``'s order."""

    batch_size: int
    epoch: int = 0
    pos: int = 0
    samples_seen: int = 0
    steps: int = 0

    def __post_init__(self) -> None:
        if int(self.batch_size) != self.batch_size or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")

    def copy(self) -> Cursor:
        return Cursor(self.batch_size, self.epoch, self.pos, self.samples_seen, self.steps)

    def window(self, n: int) -> tuple[int, int, int]:
        """``(epoch, start, stop)`` of the next batch for a dataset of ``n`` samples."""
        return self.epoch, self.pos, min(self.pos + self.batch_size, n)

    def advance(self, n: int) -> None:
        """Move past the next batch; wrap to the next epoch at the end of the order."""
        _, start, stop = self.window(n)
        self.samples_seen += stop - start
        self.steps += 1
        self.pos = stop
        if self.pos >= n:
            self.epoch += 1
            self.pos = 0

    def steps_until(self, n: int, samples: int) -> int:
        """Steps needed until ``samples_seen >= samples`` (partial last batches counted)."""
        c = self.copy()
        k = 0
        while c.samples_seen < samples:
            c.advance(n)
            k += 1
        return k


@dataclass(frozen=True)
class Batch:
    """A member's batch: rows ``order(epoch)[start:stop]`` of the stream."""

    x: Tensor
    y: Tensor
    key: tuple[int, int, int, int]  # (stream id, epoch, start, stop)

    @property
    def size(self) -> int:
        return int(self.y.shape[0])


class DataStream:
    """One input stream shared by every member that trains on the same data.

    ``inputs``/``targets`` hold the raw dataset (host memory, as in Fig. 2.1);
    ``preprocess`` runs once per loaded sample, shared by all members.
    ``max_buffer`` bounds the preprocessed rows kept between the slowest and
    the fastest reader (default: the data set size); ``chunk`` is the
    read-ahead: a load covers at least that many rows (a member alone reads
    through the same code, so the comparison stays fair).
    """

    _next_id = 0

    def __init__(
        self,
        inputs: Tensor,
        targets: Tensor,
        *,
        seed: int = 0,
        shuffle: bool = True,
        preprocess: Preprocess | None = None,
        device: torch.device | str | None = None,
        max_buffer: int | None = None,
        chunk: int = 256,
    ) -> None:
        if inputs.shape[0] != targets.shape[0]:
            raise ValueError(
                f"inputs and targets disagree on the number of samples: {inputs.shape[0]} vs {targets.shape[0]}"
            )
        if inputs.shape[0] == 0:
            raise ValueError("a DataStream needs at least one sample, got 0")
        self.inputs = inputs
        self.targets = targets
        self.seed = int(seed)
        self.shuffle = shuffle
        self.preprocess = preprocess
        self.device = torch.device(device) if device is not None else inputs.device
        self.max_buffer = len(self) if max_buffer is None else int(max_buffer)
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.chunk = int(chunk)
        """Rows loaded at least per load call (read-ahead; fewer, larger preprocessing calls)."""
        """Most rows kept loaded between the slowest and the fastest reader (default: one epoch)."""
        self.id = DataStream._next_id
        DataStream._next_id += 1
        self._orders: dict[int, Tensor] = {}
        # epoch -> (first loaded position, x rows, y rows)
        self._buf: dict[int, tuple[int, Tensor, Tensor]] = {}
        self.loaded_samples = 0
        """How many samples were loaded and preprocessed so far (the shared work)."""

    def __len__(self) -> int:
        return int(self.inputs.shape[0])

    def order(self, epoch: int) -> Tensor:
        """The sample order of ``epoch``: a pure function of ``(seed, epoch)``."""
        o = self._orders.get(epoch)
        if o is None:
            n = len(self)
            if self.shuffle:
                g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
                o = torch.randperm(n, generator=g)
            else:
                o = torch.arange(n)
            self._orders = {e: v for e, v in self._orders.items() if e >= epoch - 2}
            self._orders[epoch] = o
        return o

    def _load(self, epoch: int, start: int, stop: int) -> tuple[Tensor, Tensor]:
        idx = self.order(epoch)[start:stop]
        x = self.inputs[idx]
        if self.preprocess is not None:
            x = self.preprocess(x, idx, epoch)
        self.loaded_samples += stop - start
        return x.to(self.device), self.targets[idx].to(self.device)

    def _ensure(self, epoch: int, start: int, stop: int) -> None:
        """Make positions ``[start, stop)`` of ``epoch`` resident, loading only new ones."""
        cur = self._buf.get(epoch)
        if cur is None or not (cur[0] <= start and stop <= cur[0] + cur[1].shape[0]):
            stop = min(max(stop, start + self.chunk), len(self))  # read ahead
        if cur is not None:
            lo, bx, by = cur
            hi = lo + bx.shape[0]
            if lo <= start and stop <= hi:
                return
            if lo <= start <= hi:  # extend forward: the common, shared case
                nx, ny = self._load(epoch, hi, stop)
                self._buf[epoch] = (lo, torch.cat([bx, nx]), torch.cat([by, ny]))
                return
            if start < lo and stop >= lo:  # extend backward (a member was reloaded behind)
                px, py = self._load(epoch, start, lo)
                bx, by = torch.cat([px, bx]), torch.cat([py, by])
                lo = start
                hi = lo + bx.shape[0]
                if stop > hi:
                    nx, ny = self._load(epoch, hi, stop)
                    bx, by = torch.cat([bx, nx]), torch.cat([by, ny])
                self._buf[epoch] = (lo, bx, by)
                return
        x, y = self._load(epoch, start, stop)
        self._buf[epoch] = (start, x, y)

    def take(self, cursors: Sequence[Cursor]) -> list[Batch]:
        """The next batch of every cursor; loads each new sample once and advances the cursors.

        Cursors with the same window get the very same tensors (same ``key``),
        which lets a pack feed one input to all of them.
        """
        n = len(self)
        windows = [c.window(n) for c in cursors]
        by_epoch: dict[int, tuple[int, int]] = {}
        for e, s, t in windows:
            lo, hi = by_epoch.get(e, (s, t))
            by_epoch[e] = (min(lo, s), max(hi, t))
        # Windows of one epoch are loaded as one span and kept, so every sample
        # is loaded once for all readers; only if the span would exceed
        # ``max_buffer`` rows is each window loaded on its own (bounded memory).
        need = sum(t - s for _, s, t in windows)
        span = sum(hi - lo for lo, hi in by_epoch.values())
        shared = span <= max(self.max_buffer, need)
        if shared:
            for e, (lo, hi) in by_epoch.items():
                self._ensure(e, lo, hi)
        out: list[Batch] = []
        made: dict[tuple[int, int, int], Batch] = {}
        for (e, s, t), c in zip(windows, cursors, strict=True):
            b = made.get((e, s, t))
            if b is None:
                cur = self._buf.get(e)
                if cur is not None and cur[0] <= s and t <= cur[0] + cur[1].shape[0]:
                    lo, bx, by = cur
                    bx, by = bx[s - lo : t - lo], by[s - lo : t - lo]
                else:
                    bx, by = self._load(e, s, t)
                b = Batch(bx, by, (self.id, e, s, t))
                made[(e, s, t)] = b
            out.append(b)
            c.advance(n)
        if shared:
            self._evict(cursors)
        return out

    def _evict(self, cursors: Sequence[Cursor]) -> None:
        """Drop rows every cursor has passed (the window between slowest and fastest stays)."""
        if not cursors:
            self._buf.clear()
            return
        low = min((c.epoch, c.pos) for c in cursors)
        for e in list(self._buf):
            lo, bx, by = self._buf[e]
            if e < low[0]:
                del self._buf[e]
            elif e == low[0] and low[1] > lo:
                cut = min(low[1] - lo, bx.shape[0])
                self._buf[e] = (lo + cut, bx[cut:], by[cut:])

    def buffered(self) -> int:
        """Samples currently resident in the stream's window."""
        return sum(int(v[1].shape[0]) for v in self._buf.values())


def pad_rows(x: Tensor, rows: int) -> Tensor:
    """Pad ``x`` with zero rows along dim 0 up to ``rows`` (the "pad" of §2.2.2)."""
    b = x.shape[0]
    if b > rows:
        raise ValueError(f"cannot pad a batch of {b} rows down to {rows}")
    if b == rows:
        return x
    return torch.cat([x, x.new_zeros((rows - b, *x.shape[1:]))])
