"""Ground-truth speed of jobs trained jointly as one packed model (Liu, Pack, ch. 2).

Source: ``data/profiles/pack_step_cpu.csv``, written by ``bench/pack_step.py
--export-profile`` from its measurements on this project's machine (2-core CPU,
one torch thread; see ``bench/results/pack_step.json``). For MLP-3 and a small
CNN, n = 2, 4, 8 models of one architecture on the same data with batch sizes
32, 64, 128, it holds the time of one step of the n models one after the other,
T_s(Seq) (Eq. 2.1), and of the packed model, T_s(Pack) (Eq. 2.2), and the
improvement IMPV = (T_s(Seq) - T_s(Pack)) / T_s(Seq) (Eq. 2.3). It is read by
:class:`cohabit.pack.profile.PackProfile` (linear in n with IMPV(1) = 0, linear
in batch size, clamped to the measured range; the mean over batch sizes when no
member declares one).

**Speed of a pack.** A packed step trains every member one step, so all members
advance at the same rate. With T_i = 1 / (member i's solo iterations per second)
the pack's step takes ``(1 - IMPV) * sum_i T_i`` and every member runs at its
inverse. For n identical members that is ``solo / (n (1 - IMPV))``: a gain over
time-slicing the device (``solo / n``) exactly when IMPV > 0.

**Names.** A job's ``model`` is resolved, ignoring case and punctuation, through
:data:`ALIASES`. A pack of different models, or of a model that was not measured,
gets IMPV = 0 (the device is time-sliced with no gain: the Table 2.2 ablation
measured no gain for two different models, and nothing is known of other models).

This module is simulator-only: policies never import it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...pack.profile import PackProfile, packaged_profile
from ._common import canonical

ALIASES: dict[str, str] = {
    "mlp": "mlp3", "mlp3": "mlp3", "torchmlp": "mlp3",
    "cnn": "cnn", "smallcnn": "cnn", "torchcnn": "cnn",
}
"""Model names (canonical form) that resolve to a measured packed model."""


def pack_profile() -> PackProfile:
    """The embedded profile (measured by ``bench/pack_step.py``)."""
    return packaged_profile()


def pack_impv(models: Sequence[str], batch: int | None = None) -> float:
    """IMPV of a pack of ``models`` (one entry per member) at its largest batch size ``batch``."""
    kinds = {ALIASES.get(canonical(m)) for m in models}
    (kind,) = kinds if len(kinds) == 1 else (None,)
    if kind is None or kind not in pack_profile().table:
        return 0.0
    return pack_profile().impv(kind, len(models), batch)


def pack_step_time(models: Sequence[str], solo_step_s: Sequence[float], batch: int | None = None) -> float:
    """Seconds per packed step of members ``models`` whose solo steps take ``solo_step_s``."""
    if not models or len(models) != len(solo_step_s):
        raise ValueError(f"need one solo step time per member, got {len(models)} models and "
                         f"{len(solo_step_s)} times")
    return (1.0 - pack_impv(models, batch)) * float(sum(solo_step_s))
