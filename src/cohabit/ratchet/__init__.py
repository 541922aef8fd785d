"""Ratchet (Liu dissertation, ch. 4): checkpointing for progressive, iterative jobs.

Chapter 4 is a proposal; this package builds what it proposes (see ``docs/ratchet.md``):

* :mod:`.trigger` — (a) *checkpoint triggering*: when to checkpoint, only at operator (batch,
  iteration) boundaries, from the measured checkpoint cost and the job's remaining cost; the same
  rule drives training jobs' periodic checkpoints (CheckFreq's 3.5% overhead bound) and the
  arbiter's choice of which job to preempt;
* (b) *staleness* lives with the query state itself (:meth:`cohabit.aqp.online.ProgressiveQuery.checkpoint`:
  the batch cursor is saved with the merged state it produced);
* :mod:`.tiering` — (c) *resource-aware checkpointing*: paused jobs' states in memory or on disk
  under a memory budget, by the measured cost of each tier.
"""

from .tiering import TieredStateStore, TierCosts
from .trigger import CheckpointTrigger

__all__ = ["CheckpointTrigger", "TierCosts", "TieredStateStore"]
