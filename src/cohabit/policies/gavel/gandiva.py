"""Gavel's Gandiva (``gandiva``, Gavel's ``GandivaPolicy``) on Gavel's round mechanism (:mod:`.rounds`).

Gavel reimplements Gandiva's packing (Xiao et al., OSDI'18) as an allocation over *job
combinations* (Narayanan et al., OSDI'20, §4 "Gandiva"; its ``policies/gandiva.py``): the
scheduling units are single jobs and pairs of jobs of the same GPU count sharing the same GPUs
(:meth:`GavelGandiva.units`: every such pair of active jobs, as Gavel's scheduler tracks them).
At each allocation (Gavel computes it only at a reset, see :mod:`.rounds`):

1. Pairs formed earlier are kept while both jobs are active and their *normalized packed
   throughput* ``sum over GPU types t, over the two jobs i of packed_i(t) / alone_i(t)`` is at
   least 1; it is 0 (the pair is dropped) when either job has no measured packed throughput on
   some type of the cluster. Unpaired jobs are always reconsidered.
2. If the jobs' GPUs fit the cluster, every job gets an equal split of each type
   (``x_j(t) = N_t / m / s_j``, rows scaled down to sum to at most 1) and no pair runs.
3. Otherwise unpaired jobs are paired at random: up to ``n`` (their number) draws of two of them
   (``random.Random(seed).sample``, the draws Gavel makes, in its job order); a draw of two jobs with
   different GPU counts is discarded. Each combination (pair or single) then gets the equal split
   above, ``m`` counting combinations.

Gavel's pairs of multi-GPU jobs have no measured packed throughput (the table's entries are 0), so
such a pair is allocated time it cannot use (the mechanism never runs it on a type where it has
no throughput, :meth:`GavelGandiva.unit_runs`): its jobs run only on GPUs left over, until the
next allocation drops the pair (step 1). That is Gavel's behaviour, and its JCTs include it.

GPU types are filled in Gavel's fixed order for its packing policies (``v100``, ``p100``,
``k80``; no shuffle). What the policy reads: the jobs' declared GPU counts and job types
(``JobSpec.model``, Gavel's job type names) and Gavel's measured throughput table
(``data.gavel_table``), the profile a Gavel deployment schedules with; a job whose type the table
does not list is never paired.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from ...data.gavel_table import JobKey, pair_throughput, solo_throughputs
from ...engine.job import JobView
from ...engine.view import ClusterView
from ..params import build
from .rounds import Allocation, GavelRounds, Unit

#: Gavel's type order for its packing policies (``scheduler.py``, ``_schedule_jobs_on_workers``).
TYPE_ORDER = ("v100", "p100", "k80")


class GavelGandiva(GavelRounds):
    """Random pairs of same-size jobs sharing GPUs, equal time per combination, in Gavel's rounds."""

    name = "gavel-gandiva"

    def __init__(self, round_s: float = 360.0, min_reset_s: float = 1920.0, seed: int = 0) -> None:
        super().__init__(round_s=round_s, min_reset_s=min_reset_s, seed=seed)
        self._pair_rng = random.Random(seed)
        self._partner: dict[str, str] = {}  # job -> the job it is paired with (both directions)

    # ------------------------------------------------------------------ units
    @staticmethod
    def _key(view: ClusterView, job: JobView) -> JobKey:
        return job.spec.model, int(round(GavelRounds._gpus_of(view, job)))

    def units(self, view: ClusterView, jobs: list[JobView]) -> list[Unit]:
        """Each job, followed by its pairs with every earlier job of the same GPU count (Gavel adds a
        job's combinations when it arrives, in this order)."""
        out: list[Unit] = []
        seen: list[JobView] = []
        for j in jobs:
            out.append(j.id)
            n = self._gpus_of(view, j)
            out.extend((o.id, j.id) for o in seen if self._gpus_of(view, o) == n)
            seen.append(j)
        return out

    def unit_runs(self, view: ClusterView, unit: tuple[str, str], gpu_type: str) -> bool:
        a, b = (self._key(view, view.jobs[x]) for x in unit)
        both = pair_throughput(gpu_type, a, b)
        return both is not None and both[0] > 0 and both[1] > 0

    def type_order(self, names: list[str]) -> list[str]:
        return [t for t in TYPE_ORDER if t in names] + [t for t in names if t not in TYPE_ORDER]

    # -------------------------------------------------------------- allocation
    def normalized_throughput(self, view: ClusterView, a: JobView, b: JobView, types: Mapping[str, float]) -> float:
        """Gavel's ``_get_normalized_throughput`` of the pair over the cluster's GPU types (0 when either
        job has no measured packed throughput on one of them)."""
        ka, kb = self._key(view, a), self._key(view, b)
        solo = solo_throughputs()
        total = 0.0
        for t in types:
            both = pair_throughput(t, ka, kb)
            alone = (solo.get(t, {}).get(ka, 0.0), solo.get(t, {}).get(kb, 0.0))
            if both is None or both[0] <= 0 or both[1] <= 0 or alone[0] <= 0 or alone[1] <= 0:
                return 0.0
            total += both[0] / alone[0] + both[1] / alone[1]
        return total

    def keep_pairs(self, view: ClusterView, active: set[str], types: Mapping[str, float]) -> None:
        """Step 1: drop the pairs with a job no longer active or a normalized throughput below 1."""
        for jid in list(self._partner):
            other = self._partner.get(jid)
            if other is None:
                continue
            if (jid not in active or other not in active
                    or self.normalized_throughput(view, view.jobs[jid], view.jobs[other], types) < 1.0):
                self._partner.pop(jid, None)
                self._partner.pop(other, None)

    def allocation(self, view: ClusterView, jobs: list[JobView], types: Mapping[str, float]) -> Allocation:
        ids = [j.id for j in jobs]
        gpus = {j.id: max(self._gpus_of(view, j), 1.0) for j in jobs}
        self.keep_pairs(view, set(ids), types)
        combos: list[Unit]
        if sum(gpus.values()) <= sum(types.values()):
            combos = list(ids)
        else:
            known = solo_throughputs().get(TYPE_ORDER[0], {})
            free = [jid for jid in ids if jid not in self._partner and self._key(view, view.jobs[jid]) in known]
            n = len(free)
            tries = 0
            while len(free) > 1 and tries < n:
                tries += 1
                a, b = self._pair_rng.sample(free, 2)
                if gpus[a] != gpus[b]:
                    continue
                free.remove(a)
                free.remove(b)
                self._partner[a], self._partner[b] = b, a
            seq = {j.id: j.seq for j in jobs}
            combos = [jid for jid in ids if jid not in self._partner]
            combos += sorted({tuple(sorted((jid, self._partner[jid]), key=seq.__getitem__))  # type: ignore[misc]
                              for jid in ids if jid in self._partner}, key=lambda p: seq[p[0]])
        out: Allocation = {u: {t: 0.0 for t in types} for u in self.units(view, jobs)}
        m = len(combos)
        for c in combos:
            s = gpus[c if isinstance(c, str) else c[0]]
            row = {t: n_t / m / s for t, n_t in types.items()}
            total = sum(row.values())
            scale = max(total, 1.0)
            out[c] = {t: x / scale for t, x in row.items()}
        return out


def make(oracle: bool = False, **params: object) -> GavelGandiva:
    return build(GavelGandiva, params, policy="gavel-gandiva")
