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

from .loss_curve import LossCurve, LossFits, fit_loss_curve
from .speed import SpeedModel, fit_speed
from .similar import JobTraits
from .tee import TEE, AccuracyCurve
from .tme import TME
from .ttr import TTR

__all__ = ["AccuracyCurve", "JobTraits", "LossCurve", "LossFits", "SpeedModel", "TEE", "TME", "TTR", "fit_loss_curve",
           "fit_speed"]
