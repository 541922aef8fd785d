"""Online performance models fitted from what a scheduler observes.

* :mod:`.loss_curve` — training loss as a function of iterations done,
  ``l(k) = 1 / (beta0 * k + beta1) + beta2`` (Optimus, Peng et al., EuroSys'18, §3.1),
  fitted from reported (iterations, loss) points; predicts loss reductions and
  the iterations left to convergence.
* :mod:`.speed` — training speed as a function of (#parameter servers, #workers)
  (Optimus §3.2, Eq. 3-4), fitted by non-negative least squares from measured
  (p, w, speed) points.

Nothing here reads simulator ground truth: inputs are the reports a job makes
(``JobView.metrics["loss"]``, ``JobView.iter_time``).
"""

from __future__ import annotations

from .loss_curve import LossCurve, LossFits, fit_loss_curve
from .speed import SpeedModel, fit_speed

__all__ = ["LossCurve", "LossFits", "SpeedModel", "fit_loss_curve", "fit_speed"]
