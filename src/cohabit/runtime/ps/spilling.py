"""Harmony's data spill/reload (Lee et al., §VI) inside a real PS worker: the ``spill`` workload option.

``workload: {name: ps-mlr, spill: {alpha: 0.5, blocks: 8}}`` (``ps-mlr`` and
``ps-lasso``, whose input is the rows of ``X`` / ``y``):

* ``blocks`` — the worker's input shard is cut into this many row blocks
  (an integer in ``[1, rows]``);
* ``alpha`` — the share of blocks kept on disk and reloaded behind compute
  (a number in ``[0, 1]``), or ``"auto"``: Harmony's hill climbing on the
  measured iteration time (:class:`~cohabit.runtime.harmony.spill.AlphaTuner`,
  one block's share per step), one step per progress report;
* ``memory_mb`` (optional, with ``"auto"``) — the worker's memory budget for
  input + model: the climb starts at Harmony's size-based estimate
  (:func:`~cohabit.runtime.harmony.spill.initial_alpha`) and never goes below
  the share that fits (:meth:`~cohabit.runtime.harmony.spill.NodeMemory.floor_alpha`);
  without it the climb starts with everything in memory.

Only the workers spill (the servers hold no input). Reloaded rows are bit for
bit the original ones, so a run with spill trains exactly like one without,
whatever alpha does; a worker's checkpoint part is unchanged (the input is
rebuilt from the seed, then spilled again, on resume). Blocks live under the
job's directory (``<store>/<job>/spill/worker-<r>``), removed when the worker
ends.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..harmony.spill import AlphaTuner, BlockSpill, NodeMemory, attach, initial_alpha
from ..workloads.base import WorkloadError

KEYS = ("alpha", "blocks", "memory_mb")
SPILL_REPORT_KEYS = ("alpha", "input_resident_mb", "reload_mb", "reload_stall_s")
"""What a spilling worker adds to its progress reports (:meth:`WorkerSpill.report`)."""
MB = float(2**20)


@dataclass(frozen=True, slots=True)
class SpillOption:
    """A validated ``spill`` option (see the module docstring); ``alpha`` None means ``"auto"``."""

    alpha: float | None
    blocks: int
    memory_mb: float | None = None


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def parse_spill(job: str, value: Any) -> SpillOption | None:
    """``spill`` of a job's workload mapping -> :class:`SpillOption` (None when absent); WorkloadError names the field."""
    if value is None:
        return None
    where = f"job {job!r}: workload.spill"
    if not isinstance(value, dict):
        raise WorkloadError(f"{where}: expected a mapping {{alpha: number in [0, 1] or 'auto', blocks: integer}}, "
                            f"got {value!r}")
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise WorkloadError(f"{where}: unknown key(s) {unknown}; expected {list(KEYS)}")
    for key in ("alpha", "blocks"):
        if key not in value:
            raise WorkloadError(f"{where}.{key} is missing")
    alpha, blocks, memory = value["alpha"], value["blocks"], value.get("memory_mb")
    if alpha != "auto" and not (_number(alpha) and 0.0 <= alpha <= 1.0):
        raise WorkloadError(f"{where}.alpha: expected a number in [0, 1] or 'auto', got {alpha!r}")
    if not isinstance(blocks, int) or isinstance(blocks, bool) or blocks < 1:
        raise WorkloadError(f"{where}.blocks: expected an integer >= 1, got {blocks!r}")
    if memory is not None:
        if alpha != "auto":
            raise WorkloadError(f"{where}.memory_mb: only with alpha 'auto' (it sets the climb's start and floor)")
        if not (_number(memory) and memory > 0):
            raise WorkloadError(f"{where}.memory_mb: expected a number of MB > 0, got {memory!r}")
    return SpillOption(None if alpha == "auto" else float(alpha), blocks,
                       None if memory is None else float(memory))


class WorkerSpill:
    """One worker's input behind a :class:`BlockSpill`, with its alpha fixed or tuned (see the module docstring)."""

    def __init__(self, workload: Any, option: SpillOption, spill_dir: Path) -> None:
        rows = len(workload.X)
        if option.blocks > rows:
            raise WorkloadError(f"job {workload.ctx.job!r}: workload.spill.blocks: expected at most the worker's "
                                f"{rows} input rows, got {option.blocks}")
        input_bytes = float(workload.X.nbytes + workload.y.nbytes)
        model_bytes = float(sum(a.nbytes for a in workload.init_model().values()))
        self.tuner: AlphaTuner | None = None
        alpha = option.alpha
        if alpha is None:
            alpha0, floor = 0.0, 0.0
            if option.memory_mb is not None:
                budget = option.memory_mb * MB
                alpha0 = initial_alpha(input_bytes, model_bytes, budget)
                floor = NodeMemory(budget).floor_alpha(input_bytes, model_bytes)
            self.tuner = AlphaTuner(alpha0, step=1.0 / option.blocks, floor=floor)
            alpha = self.tuner.alpha
        self.dir = spill_dir
        shutil.rmtree(self.dir, ignore_errors=True)  # blocks of a previous life of this worker
        self.spill: BlockSpill = attach(workload, n_blocks=option.blocks, alpha=alpha, spill_dir=self.dir)

    def observe(self, iter_time: float) -> None:
        """One measured iteration time (a progress window's mean) at the current alpha: with ``"auto"``,
        move alpha where the climb says (blocks are spilled or loaded now)."""
        if self.tuner is None:
            return
        nxt = self.tuner.observe(iter_time)
        if abs(nxt - self.spill.alpha) > 1e-12:
            self.spill.set_alpha(nxt)

    def report(self) -> dict[str, float]:
        """For progress reports: alpha now, input bytes resident (MB), reload volume (MB) and stall time (s)."""
        s = self.spill
        values = (s.alpha, s.resident_bytes / MB, s.reload_bytes / MB, s.stall_s)
        return dict(zip(SPILL_REPORT_KEYS, values, strict=True))

    def close(self) -> None:
        self.spill.close()
        shutil.rmtree(self.dir, ignore_errors=True)
