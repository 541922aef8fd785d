"""Online performance models fitted from what a scheduler observes.

* :mod:`.loss_curve` — training loss as a function of iterations done,
  ``l(k) = 1 / (beta0 * k + beta1) + beta2`` (Optimus, Peng et al., EuroSys'18, §3.1),
  fitted from reported (iterations, loss) points; predicts loss reductions and
  the iterations left to convergence.
* :mod:`.speed` — training speed as a function of (#parameter servers, #workers)
  (Optimus §3.2, Eq. 3-4), fitted by non-negative least squares from measured
  (p, w, speed) points.
* :mod:`.tee`, :mod:`.tme`, :mod:`.ttr` — Rotary-DLT's training epoch estimator (accuracy
  versus epoch from similar finished jobs plus the job's own evaluations), training memory
  estimator (peak memory versus batch size, +5%) and training time recorder (step times per
  device, first step discarded); :mod:`.similar` — the similarity they rank jobs by.

Nothing here reads simulator ground truth: inputs are the reports a job makes
(``JobView.metrics["loss"]``, ``JobView.iter_time``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .loss_curve import LossCurve, fit_loss_curve
    from .loss_fits import LossFits
    from .similar import JobTraits
    from .speed import SpeedModel, fit_speed
    from .tee import TEE, AccuracyCurve
    from .tme import TME
    from .ttr import TTR

#: exported name -> its module. Imported on first use (PEP 562): the simulator imports
#: :mod:`.goodput` through this package on every run, and a trace replay needs none of these
#: (~1,100 lines; docs/speed.md, "Thirteenth session ... (speed17b)").
_WHERE = {
    "LossCurve": "loss_curve", "LossFits": "loss_fits", "fit_loss_curve": "loss_curve",
    "SpeedModel": "speed", "fit_speed": "speed", "JobTraits": "similar",
    "TEE": "tee", "AccuracyCurve": "tee", "TME": "tme", "TTR": "ttr",
}

__all__ = ["AccuracyCurve", "JobTraits", "LossCurve", "LossFits", "SpeedModel", "TEE", "TME", "TTR", "fit_loss_curve",
           "fit_speed"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
