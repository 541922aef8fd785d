"""MLF-C's accuracy prediction: a weighted probabilistic learning-curve model (MLFS §3.5, after
Domhan et al., IJCAI'15 / [17] of the paper).

A job reports (iterations done, validation accuracy) pairs. With ``x = iterations / I_max`` the
model fits every member of a small library of saturating parametric curves to the observed
points and predicts the accuracy at ``x = 1`` (the specified maximum iteration):

* ``pow``:  y = c - a * x^(-k)           (k on a grid; Domhan's pow3)
* ``exp``:  y = c - a * exp(-k * x)      (exp3)
* ``hyp``:  y = c - a / (1 + k * x)      (a morgan-mercer-flodin-like hyperbola)
* ``log``:  y = c + a * log(x)           (log-linear; Domhan's log-power family)

Each member's nonlinear shape parameter ``k`` runs over a fixed grid and its linear
parameters are the least-squares solution, so a fit is a few small ``lstsq`` calls (no MCMC:
a deliberate, cheaper stand-in for the paper's sampler). Members are combined by Bayesian
model averaging: weight ∝ prior(family) x Gaussian likelihood of the observed points; the
family priors are the "one weighted learning curve for multiple types of ML jobs" of §3.5,
fitted on historical curves (:func:`fit_family_priors`, on the packaged real curves). The
prediction is a mixture of Gaussians, so it gives both a mean and the confidence that the
final accuracy exceeds a threshold (:meth:`CurvePrediction.prob_at_least`).

:func:`packaged_curves` reads the real curves shipped in ``cohabit/data/learning_curves``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..data.curve_files import packaged_curve_rows

FAMILIES = ("pow", "exp", "hyp", "log")
_GRID = {
    "pow": (0.25, 0.5, 1.0, 2.0),
    "exp": (1.0, 2.0, 4.0, 8.0, 16.0),
    "hyp": (2.0, 5.0, 10.0, 20.0, 50.0),
    "log": (1.0,),
}
#: family priors fitted on all 2,214 packaged curves: ``fit_family_priors([r.accuracy for runs in
#: packaged_curves().values() for r in runs])`` (observed 40 % of the epochs), rounded
DEFAULT_PRIORS: dict[str, float] = {"pow": 0.227, "exp": 0.349, "hyp": 0.222, "log": 0.202}
_MIN_SIGMA = 0.005


@dataclass(frozen=True)
class CurveRun:
    """One packaged learning curve."""

    family: str
    model: str
    params: int
    classes: int
    accuracy: list[float]


@lru_cache(maxsize=1)
def packaged_curves() -> dict[str, list[CurveRun]]:
    """The real learning curves shipped with cohabit, by model family (``data/learning_curves``)."""
    out: dict[str, list[CurveRun]] = {}
    for family, _, r in packaged_curve_rows():
        out.setdefault(family, []).append(CurveRun(family, str(r["model_name"]), int(r["num_parameters"]),
                                                   int(r.get("classes", 10)), [float(a) for a in r["accuracy"]]))
    return out


def _basis(family: str, k: float, x: np.ndarray) -> np.ndarray:
    """Design matrix [1, g(x)] of a family member: y = c + a * g(x)."""
    if family == "pow":
        g = -np.power(x, -k)
    elif family == "exp":
        g = -np.exp(-k * x)
    elif family == "hyp":
        g = -1.0 / (1.0 + k * x)
    else:
        g = np.log(x)
    return np.column_stack([np.ones_like(x), g])


@dataclass(frozen=True)
class CurvePrediction:
    """A mixture of Gaussians over the accuracy at the target point."""

    means: np.ndarray
    sigmas: np.ndarray
    weights: np.ndarray

    @property
    def mean(self) -> float:
        return float(np.dot(self.weights, self.means))

    def prob_at_least(self, threshold: float) -> float:
        """P(accuracy at the target >= ``threshold``) under the mixture."""
        z = (self.means - threshold) / self.sigmas
        cdf = 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
        return float(np.dot(self.weights, cdf))


def predict(xs: np.ndarray | list[float], ys: np.ndarray | list[float], target: float = 1.0,
            priors: dict[str, float] | None = None) -> CurvePrediction | None:
    """Predict the accuracy at ``target`` from points (``xs`` > 0 increasing, ``ys``).

    Needs at least 3 points; returns None otherwise. Members whose fit is not increasing
    (``a`` < 0) or that predict outside [0, 1] are dropped (an accuracy curve saturates)."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    keep = x > 0
    x, y = x[keep], y[keep]
    if len(x) < 3:
        return None
    pri = priors or DEFAULT_PRIORS
    means, sigmas, logw = [], [], []
    n = len(x)
    for fam in FAMILIES:
        p = pri.get(fam, 0.0)
        if p <= 0:
            continue
        for k in _GRID[fam]:
            A = _basis(fam, k, x)
            coef, *_ = np.linalg.lstsq(A, y, rcond=None)
            c, a = float(coef[0]), float(coef[1])
            if a < 0:
                continue
            mu = float((_basis(fam, k, np.array([target])) @ coef)[0])
            if not 0.0 <= mu <= 1.0:
                continue
            resid = y - A @ coef
            s2 = max(float(resid @ resid) / max(n - 2, 1), _MIN_SIGMA ** 2)
            # extrapolation widens the predictive spread with the distance past the data
            reach = max(target - float(x[-1]), 0.0) / max(float(x[-1]), 1e-9)
            sigma = math.sqrt(s2) * (1.0 + reach)
            means.append(mu)
            sigmas.append(sigma)
            logw.append(math.log(p / len(_GRID[fam])) - 0.5 * float(resid @ resid) / s2 - n * 0.5 * math.log(s2))
    if not means:
        return None
    lw = np.asarray(logw)
    w = np.exp(lw - lw.max())
    return CurvePrediction(np.asarray(means), np.asarray(sigmas), w / w.sum())


def fit_family_priors(curves: list[list[float]], observed: float = 0.4) -> dict[str, float]:
    """Family priors from historical curves: each family's share of being the most accurate
    predictor of a curve's last value from its first ``observed`` fraction of epochs (with
    add-one smoothing). The "weighted learning curve fitted on historical data" of §3.5."""
    wins = dict.fromkeys(FAMILIES, 1.0)
    for acc in curves:
        e = len(acc)
        m = max(3, int(round(observed * e)))
        if m >= e:
            continue
        xs = np.arange(1, m + 1) / e
        best, best_err = None, math.inf
        for fam in FAMILIES:
            pred = predict(xs, acc[:m], 1.0, {fam: 1.0})
            if pred is not None and abs(pred.mean - acc[-1]) < best_err:
                best, best_err = fam, abs(pred.mean - acc[-1])
        if best is not None:
            wins[best] += 1.0
    total = sum(wins.values())
    return {f: w / total for f, w in wins.items()}
