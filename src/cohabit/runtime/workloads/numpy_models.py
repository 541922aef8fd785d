"""numpy workloads: multinomial logistic regression (``mlr``) and Lasso (``lasso``).

Both train by mini-batch gradient steps over seeded epoch permutations
(:meth:`Workload.batch`), so a run that is paused and resumed from a
checkpoint computes exactly what an uninterrupted run computes.

``data: sample`` (default) uses the packaged real samples (abridged MNIST for
MLR, the authors' sparse regression for Lasso, with their held-out test
files); ``data: synthetic`` uses the seeded generators of
:mod:`cohabit.runtime.workloads.data` at any size.
"""

from __future__ import annotations

from typing import Any, get_args

import numpy as np

from . import data as D
from .base import DataSource, Workload, WorkloadContext, WorkloadError


def _check_choice(ctx: WorkloadContext, field: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise WorkloadError(f"job {ctx.job!r}: workload.{field} must be one of {', '.join(choices)}; got {value!r}",
                            field=field)


def _check_positive(ctx: WorkloadContext, **values: float) -> None:
    for field, v in values.items():
        if not isinstance(v, (int, float)) or not v > 0:
            raise WorkloadError(f"job {ctx.job!r}: workload.{field} must be a positive number, got {v!r}")


def softmax_probs(X: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Class probabilities ``softmax(X W + b)`` row by row (max-shifted for stability)."""
    z = X @ W + b
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def cross_entropy(p: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log-likelihood of labels ``y`` under probabilities ``p``."""
    return float(-np.log(np.maximum(p[np.arange(len(y)), y], 1e-12)).mean())


def mlr_gradient(X: np.ndarray, y: np.ndarray, W: np.ndarray, b: np.ndarray,
                 l2: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Mini-batch cross-entropy and its gradient in ``(W, b)`` with an L2 term ``l2/2 |W|^2``."""
    p = softmax_probs(X, W, b)
    loss = cross_entropy(p, y)
    p[np.arange(len(y)), y] -= 1.0
    p /= len(y)
    return loss, X.T @ p + l2 * W, p.sum(axis=0)


def lasso_objective(X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float) -> float:
    """``0.5 * mean((X w - y)^2) + lam * |w|_1``."""
    r = X @ w - y
    return float(0.5 * (r @ r) / len(y) + lam * np.abs(w).sum())


def lasso_gradient(X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float) -> tuple[float, np.ndarray]:
    """Lasso objective on a mini-batch and the gradient of its smooth part, ``X^T (X w - y) / n``."""
    r = X @ w - y
    return float(0.5 * (r @ r) / len(y) + lam * np.abs(w).sum()), X.T @ r / len(y)


def soft_threshold(z: np.ndarray, t: float) -> np.ndarray:
    """The proximal operator of ``t |.|_1``: ``sign(z) * max(|z| - t, 0)``."""
    return np.sign(z) * np.maximum(np.abs(z) - t, 0.0)


def lasso_step_size(X: np.ndarray) -> float:
    """``0.5 / L`` with ``L`` the largest eigenvalue of ``X^T X / n`` (a safe mini-batch step)."""
    return 0.5 / float(np.linalg.norm(X, 2) ** 2 / len(X))


class MultinomialLogisticRegression(Workload):
    """Softmax regression by mini-batch SGD with L2 regularisation.

    Metrics: ``loss`` (mini-batch cross-entropy) every step; at epoch ends
    ``train_loss`` (full training set) and ``accuracy`` (test set).
    """

    name = "mlr"

    def __init__(
        self,
        ctx: WorkloadContext,
        *,
        data: DataSource = "sample",
        n_samples: int = 20_000,
        n_features: int = 100,
        n_classes: int = 10,
        lr: float = 0.1,
        l2: float = 1e-4,
        batch_size: int | None = None,
        test_fraction: float = 0.1,
    ) -> None:
        _check_choice(ctx, "data", data, get_args(DataSource))
        _check_positive(ctx, lr=lr)
        if l2 < 0:
            raise WorkloadError(f"job {ctx.job!r}: workload.l2 must be >= 0, got {l2!r}")
        if data == "sample":
            X, y = D.load_sample("sample_mlr")
            Xt, yt = D.load_sample("sample_mlr_test")
            y, yt = y.astype(np.int64), yt.astype(np.int64)
            k = int(max(y.max(), yt.max())) + 1
        else:
            try:
                Xa, ya = D.classification(n_samples, n_features, n_classes, seed=ctx.seed)
                tr, te = D.split(n_samples, test_fraction, ctx.seed)
            except ValueError as exc:
                raise WorkloadError(f"job {ctx.job!r}: workload: {exc}") from None
            X, y, Xt, yt = Xa[tr], ya[tr], Xa[te], ya[te]
            k = n_classes
        super().__init__(ctx, len(X), batch_size or ctx.batch_size or 32)
        self.X, self.y, self.Xt, self.yt = X, y, Xt, yt
        self.lr, self.l2 = float(lr), float(l2)
        self.W = np.zeros((X.shape[1], k))
        self.b = np.zeros(k)

    def _probs(self, X: np.ndarray) -> np.ndarray:
        return softmax_probs(X, self.W, self.b)

    def _loss(self, p: np.ndarray, y: np.ndarray) -> float:
        return cross_entropy(p, y)

    def train_step(self, i: int) -> dict[str, float]:
        idx = self.batch(i)
        loss, gW, gb = mlr_gradient(self.X[idx], self.y[idx], self.W, self.b, self.l2)
        if self.comm is not None:
            self.comm.allreduce_mean([gW, gb])
        self.W -= self.lr * gW
        self.b -= self.lr * gb
        return {"loss": loss}

    def evaluate(self) -> dict[str, float]:
        out = {"train_loss": self._loss(self._probs(self.X), self.y)}
        if len(self.yt):
            out["accuracy"] = float((self._probs(self.Xt).argmax(axis=1) == self.yt).mean())
        return out

    def model_state(self) -> dict[str, Any]:
        return {"W": self.W.copy(), "b": self.b.copy()}

    def load_model_state(self, state: dict[str, Any]) -> None:
        if state["W"].shape != self.W.shape:
            raise WorkloadError(f"job {self.ctx.job!r}: checkpoint has W of shape {state['W'].shape}, "
                                f"this workload has {self.W.shape} (was the workload changed?)")
        self.W = np.array(state["W"], dtype=np.float64)
        self.b = np.array(state["b"], dtype=np.float64)


class Lasso(Workload):
    """Lasso regression, ``0.5 * mean((X w - y)^2) + lam * |w|_1``, by proximal mini-batch gradient steps.

    The step size defaults to ``0.5 / L`` with ``L`` the largest eigenvalue of
    ``X^T X / n`` (a safe step for mini-batches). Metrics: ``loss`` (mini-batch
    objective); at epoch ends ``train_loss`` (full objective), ``test_mse``
    and, when the true coefficients are known, ``coef_error`` (L2 distance).
    """

    name = "lasso"

    #: The coefficients the authors generated ``sample_lasso`` from (its header).
    SAMPLE_BETA = np.array([1.0, 0.0, -2.0, 0.0, 3.0, 0.0, -4.0, 0.0, 5.0, 0.0])

    def __init__(
        self,
        ctx: WorkloadContext,
        *,
        data: DataSource = "sample",
        n_samples: int = 5_000,
        n_features: int = 100,
        nnz: int = 10,
        noise: float = 0.1,
        lam: float = 0.05,
        lr: float | None = None,
        batch_size: int | None = None,
        test_fraction: float = 0.1,
    ) -> None:
        _check_choice(ctx, "data", data, get_args(DataSource))
        if lam < 0:
            raise WorkloadError(f"job {ctx.job!r}: workload.lam must be >= 0, got {lam!r}")
        if data == "sample":
            X, y = D.load_sample("sample_lasso")
            Xt, yt = D.load_sample("sample_lasso_test")
            beta: np.ndarray | None = self.SAMPLE_BETA
        else:
            try:
                Xa, ya, beta = D.sparse_regression(n_samples, n_features, nnz=nnz, noise=noise, seed=ctx.seed)
                tr, te = D.split(n_samples, test_fraction, ctx.seed)
            except ValueError as exc:
                raise WorkloadError(f"job {ctx.job!r}: workload: {exc}") from None
            X, y, Xt, yt = Xa[tr], ya[tr], Xa[te], ya[te]
        super().__init__(ctx, len(X), batch_size or ctx.batch_size or 50)
        self.X, self.y, self.Xt, self.yt, self.beta = X, y, Xt, yt, beta
        if lr is None:
            lr = lasso_step_size(X)
        _check_positive(ctx, lr=lr)
        self.lr, self.lam = float(lr), float(lam)
        self.w = np.zeros(X.shape[1])

    def _objective(self, X: np.ndarray, y: np.ndarray) -> float:
        return lasso_objective(X, y, self.w, self.lam)

    def train_step(self, i: int) -> dict[str, float]:
        idx = self.batch(i)
        loss, g = lasso_gradient(self.X[idx], self.y[idx], self.w, self.lam)
        if self.comm is not None:
            self.comm.allreduce_mean([g])
        self.w = soft_threshold(self.w - self.lr * g, self.lr * self.lam)  # the L1 proximal step
        return {"loss": loss}

    def evaluate(self) -> dict[str, float]:
        out = {"train_loss": self._objective(self.X, self.y)}
        if len(self.yt):
            r = self.Xt @ self.w - self.yt
            out["test_mse"] = float((r @ r) / len(r))
        if self.beta is not None:
            out["coef_error"] = float(np.linalg.norm(self.w - self.beta))
        return out

    def model_state(self) -> dict[str, Any]:
        return {"w": self.w.copy()}

    def load_model_state(self, state: dict[str, Any]) -> None:
        if state["w"].shape != self.w.shape:
            raise WorkloadError(f"job {self.ctx.job!r}: checkpoint has w of shape {state['w'].shape}, "
                                f"this workload has {self.w.shape}")
        self.w = np.array(state["w"], dtype=np.float64)
