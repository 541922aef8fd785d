"""The four parameter-server workloads: MLR, Lasso, NMF and LDA, split into worker and server halves.

A PS workload is a :class:`~cohabit.runtime.workloads.base.Workload` (seeded
mini-batches, counters, evaluation) with five more methods (:class:`PSWorkload`):

* ``init_model()`` — the full model at iteration 0: named 2-D arrays that the
  servers partition by ROW ranges (server ``k`` of ``S`` holds block ``k`` of
  ``np.array_split(a, S)`` of every array);
* ``compute(model)`` — a worker's COMP subtask: from the model it pulled, the
  update for its input shard at iteration ``self.iteration`` (arrays with the
  same row counts as the model, so they split the same way) and its metrics;
* ``apply(part, updates, iteration)`` — a server's rule: its block of the
  model after the updates of every worker, given in worker-rank order (a fixed
  summation order makes runs reproducible bit for bit);
* ``local_state()`` / ``load_local_states(states)`` — what a worker keeps
  between iterations besides its position (only NMF keeps anything: its rows
  of W), and how to rebuild it from the saved states of ALL workers of the
  previous layout (so a resize can reshard it).

Synchronous (BSP) semantics: every worker computes iteration ``t`` from the
same model; a server applies iteration ``t`` once every worker pushed it.

==============  ==============================================================
``ps-mlr``      softmax regression, mini-batch SGD; servers own row ranges of W
``ps-lasso``    Lasso by proximal gradient; servers own ranges of w and apply the
                soft-threshold (the proximal step) on their range
``ps-nmf``      NMF ``V ~ W H`` by Lee & Seung's multiplicative updates; H is the
                shared model (servers own column ranges of H), W rows stay local
                to the worker that owns those rows of V
``ps-lda``      LDA by online variational Bayes (Hoffman et al. 2010, Alg. 2);
                servers own word ranges of the topic-word parameter lambda
==============  ==============================================================

``ps-mlr`` and ``ps-lasso`` take the ``spill`` option (Harmony's data
spill/reload in the workers, :mod:`.spilling`).
"""

from __future__ import annotations

import inspect
from typing import Any, get_args

import numpy as np
from scipy.special import digamma

from ..workloads import data as D
from ..workloads.base import DataSource, Workload, WorkloadContext, WorkloadError
from ..workloads.numpy_models import (
    Lasso,
    MultinomialLogisticRegression,
    _check_choice,
    _check_positive,
    lasso_gradient,
    mlr_gradient,
    soft_threshold,
)
from .spilling import SpillOption, parse_spill

Arrays = dict[str, np.ndarray]


def _mean(updates: list[Arrays], name: str) -> np.ndarray:
    """Mean of one update over the workers, summed in rank order."""
    return np.add.reduce([u[name] for u in updates]) / len(updates)


class PSWorkload(Workload):
    """Interface of a parameter-server workload (see the module docstring)."""

    def init_model(self) -> Arrays:  # pragma: no cover - abstract
        raise NotImplementedError

    def observe(self, model: Arrays) -> None:
        """Take a pulled model as the current one (for :meth:`evaluate`); no-op when evaluation needs none."""
        return None

    def compute(self, model: Arrays) -> tuple[Arrays, dict[str, float]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply(self, part: Arrays, updates: list[Arrays], iteration: int) -> Arrays:  # pragma: no cover
        raise NotImplementedError

    def local_state(self) -> dict[str, Any]:
        return {}

    def load_local_states(self, states: list[dict[str, Any]]) -> None:
        return None

    def train_step(self, i: int) -> dict[str, float]:
        raise WorkloadError(f"job {self.ctx.job!r}: {self.name!r} is a parameter-server workload; "
                            f"give the job 'architecture: ps' with 'ps: {{count: N, ...}}'")


class SpillInput:
    """Takes the ``spill`` option (validated here, applied by the worker: :class:`.spilling.WorkerSpill`)
    before the workload's own parameters."""

    spill_option: SpillOption | None

    def __init__(self, ctx: WorkloadContext, *, spill: Any = None, **params: Any) -> None:
        self.spill_option = parse_spill(ctx.job, spill)
        super().__init__(ctx, **params)  # type: ignore[call-arg]


def _with_spill_parameter(cls: type, base: type) -> type:
    """Give ``cls`` the signature of ``base`` plus ``spill``, so the registry still checks every key by name."""
    params = list(inspect.signature(base.__init__, eval_str=True).parameters.values())[1:]  # type: ignore[misc]
    spill = inspect.Parameter("spill", inspect.Parameter.KEYWORD_ONLY, default=None)
    cls.__signature__ = inspect.Signature(params + [spill])  # type: ignore[attr-defined]
    return cls


class PSMultinomialLogisticRegression(SpillInput, MultinomialLogisticRegression, PSWorkload):
    """``ps-mlr``: the ``mlr`` workload's model and data; SGD step ``W -= lr * mean_w grad_w`` on the servers."""

    name = "ps-mlr"

    def init_model(self) -> Arrays:
        return {"W": np.zeros_like(self.W), "b": np.zeros((1, self.b.size))}

    def observe(self, model: Arrays) -> None:
        self.W, self.b = model["W"], model["b"][0]

    def compute(self, model: Arrays) -> tuple[Arrays, dict[str, float]]:
        self.observe(model)
        idx = self.batch(self.iteration)
        loss, gW, gb = mlr_gradient(self.X[idx], self.y[idx], self.W, self.b, self.l2)
        return {"W": gW, "b": gb[None, :]}, {"loss": loss}

    def apply(self, part: Arrays, updates: list[Arrays], iteration: int) -> Arrays:
        return {k: v - self.lr * _mean(updates, k) for k, v in part.items()}


class PSLasso(SpillInput, Lasso, PSWorkload):
    """``ps-lasso``: proximal gradient, ``w = soft_threshold(w - lr * mean_w g_w, lr * lam)`` on the servers."""

    name = "ps-lasso"

    def init_model(self) -> Arrays:
        return {"w": np.zeros((self.w.size, 1))}

    def observe(self, model: Arrays) -> None:
        self.w = model["w"][:, 0]

    def compute(self, model: Arrays) -> tuple[Arrays, dict[str, float]]:
        self.observe(model)
        idx = self.batch(self.iteration)
        loss, g = lasso_gradient(self.X[idx], self.y[idx], self.w, self.lam)
        return {"w": g[:, None]}, {"loss": loss}

    def apply(self, part: Arrays, updates: list[Arrays], iteration: int) -> Arrays:
        return {"w": soft_threshold(part["w"] - self.lr * _mean(updates, "w"), self.lr * self.lam)}


_with_spill_parameter(PSMultinomialLogisticRegression, MultinomialLogisticRegression)
_with_spill_parameter(PSLasso, Lasso)


class PSNMF(PSWorkload):
    """``ps-nmf``: ``V ~ W H`` with ``W, H >= 0`` by multiplicative updates (Lee & Seung 2001, Eq. 4).

    Worker ``r`` owns rows ``array_split(range(n), world)[r]`` of ``V`` and the
    same rows of ``W`` (local state, checkpointed). One iteration = one pass
    over its rows: ``W_r *= (V_r H^T) / (W_r H H^T)`` with the pulled ``H``,
    then it pushes ``num_r = V_r^T W_r`` and ``den_r = H^T (W_r^T W_r)``; the
    servers (column ranges of H, stored transposed as ``Ht``) apply
    ``Ht *= sum_r num_r / sum_r den_r`` — exactly the serial update, since
    ``W^T V`` and ``W^T W`` are sums over row blocks. Metric ``loss``: mean
    squared reconstruction error of the worker's rows.
    """

    name = "ps-nmf"

    def __init__(self, ctx: WorkloadContext, *, data: DataSource = "sample", n_rows: int = 400, n_cols: int = 300,
                 rank: int = 10, true_rank: int = 10, noise: float = 0.1, eps: float = 1e-9) -> None:
        _check_choice(ctx, "data", data, get_args(DataSource))
        _check_positive(ctx, eps=eps)
        if not isinstance(rank, int) or rank < 1:
            raise WorkloadError(f"job {ctx.job!r}: workload.rank must be a positive integer, got {rank!r}")
        if data == "sample":
            V = D.load_nmf_sample()
        else:
            try:
                V = D.nonnegative_matrix(n_rows, n_cols, rank=true_rank, noise=noise, seed=ctx.seed)
            except ValueError as exc:
                raise WorkloadError(f"job {ctx.job!r}: workload: {exc}") from None
        n = V.shape[0]
        super().__init__(ctx, n, max(1, n // max(ctx.world_size, 1)))
        self.V, self.k, self.eps = V, rank, float(eps)
        self.rows = np.array_split(np.arange(n), ctx.world_size)[ctx.rank]
        scale = float(np.sqrt(max(V.mean(), 1e-12) / rank))
        self.W = np.random.default_rng([ctx.seed, 1]).uniform(0.1, 1.0, (n, rank))[self.rows] * scale
        self._h_scale = scale

    def init_model(self) -> Arrays:
        m = self.V.shape[1]
        return {"Ht": np.random.default_rng([self.ctx.seed, 2]).uniform(0.1, 1.0, (m, self.k)) * self._h_scale}

    def compute(self, model: Arrays) -> tuple[Arrays, dict[str, float]]:
        Ht = model["Ht"]
        Vr = self.V[self.rows]
        r = Vr - self.W @ Ht.T
        loss = float((r * r).mean())
        self.W *= (Vr @ Ht) / (self.W @ (Ht.T @ Ht) + self.eps)
        return {"num": Vr.T @ self.W, "den": Ht @ (self.W.T @ self.W)}, {"loss": loss}

    def apply(self, part: Arrays, updates: list[Arrays], iteration: int) -> Arrays:
        num = np.add.reduce([u["num"] for u in updates])
        den = np.add.reduce([u["den"] for u in updates])
        return {"Ht": part["Ht"] * num / (den + self.eps)}

    def local_state(self) -> dict[str, Any]:
        return {"rows": self.rows.copy(), "W": self.W.copy()}

    def load_local_states(self, states: list[dict[str, Any]]) -> None:
        full = np.full((self.V.shape[0], self.k), np.nan)
        for s in states:
            if s["W"].shape[1] != self.k:
                raise WorkloadError(f"job {self.ctx.job!r}: checkpoint has NMF rank {s['W'].shape[1]}, "
                                    f"this workload has rank {self.k}")
            full[s["rows"]] = s["W"]
        mine = full[self.rows]
        if np.isnan(mine).any():
            raise WorkloadError(f"job {self.ctx.job!r}: the checkpoint lacks W rows of worker {self.ctx.rank}")
        self.W = mine


class PSLDA(PSWorkload):
    """``ps-lda``: LDA by online variational Bayes (Hoffman, Blei & Bach 2010, Alg. 2).

    Model: the topic-word variational parameter ``lambda`` (K x V), stored
    transposed (``lam_t``, V x K) so that servers own WORD ranges. A worker's
    COMP: the E-step (Eq. 6-7: ``gamma``/``phi`` fixed point, at most
    ``e_steps`` rounds) for its mini-batch of documents with the pulled
    ``lambda``, giving sufficient statistics ``sstats`` (K x V); the servers
    apply ``lambda = (1 - rho_t) lambda + rho_t (eta + D / B * sum_w sstats_w)``
    with ``rho_t = (tau0 + t)^-kappa`` and ``B`` the global mini-batch. Workers
    keep no state between iterations. Metric ``loss``: per-word negative
    log-likelihood of the mini-batch under ``theta = gamma / |gamma|`` and
    ``beta = lambda / |lambda|`` (lower is better; ``log V`` for a uniform model).
    """

    name = "ps-lda"

    def __init__(self, ctx: WorkloadContext, *, data: DataSource = "sample", n_docs: int = 1000,
                 vocab_size: int = 2000, doc_len: int = 100, n_topics: int = 10, alpha: float | None = None,
                 eta: float | None = None, tau0: float = 16.0, kappa: float = 0.7, e_steps: int = 30,
                 batch_size: int | None = None) -> None:
        _check_choice(ctx, "data", data, get_args(DataSource))
        if not isinstance(n_topics, int) or n_topics < 2:
            raise WorkloadError(f"job {ctx.job!r}: workload.n_topics must be an integer >= 2, got {n_topics!r}")
        if not isinstance(e_steps, int) or e_steps < 1:
            raise WorkloadError(f"job {ctx.job!r}: workload.e_steps must be a positive integer, got {e_steps!r}")
        _check_positive(ctx, tau0=tau0)
        if not 0.5 < kappa <= 1.0:
            raise WorkloadError(f"job {ctx.job!r}: workload.kappa must lie in (0.5, 1] (Hoffman et al.), "
                                f"got {kappa!r}")
        alpha = 1.0 / n_topics if alpha is None else alpha
        eta = 1.0 / n_topics if eta is None else eta
        _check_positive(ctx, alpha=alpha, eta=eta)
        if data == "sample":
            docs, vocab = D.load_lda_sample()
        else:
            try:
                docs, vocab = D.lda_corpus(n_docs, vocab_size, n_topics, doc_len=doc_len, seed=ctx.seed)
            except ValueError as exc:
                raise WorkloadError(f"job {ctx.job!r}: workload: {exc}") from None
        super().__init__(ctx, len(docs), batch_size or ctx.batch_size or 16)
        self.docs = [np.unique(d, return_counts=True) for d in docs]
        self.vocab, self.K = vocab, n_topics
        self.alpha, self.eta, self.tau0, self.kappa, self.e_steps = alpha, eta, tau0, kappa, e_steps

    def init_model(self) -> Arrays:
        lam = np.random.default_rng([self.ctx.seed, 3]).gamma(100.0, 0.01, (self.K, self.vocab))
        return {"lam_t": lam.T.copy()}

    def _e_step(self, ids: np.ndarray, cts: np.ndarray, expElogbeta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``gamma`` of one document and ``exp(E log theta)`` (Hoffman et al. Alg. 2, inner loop)."""
        eb = expElogbeta[:, ids]
        gamma = np.full(self.K, self.alpha + cts.sum() / self.K)
        for _ in range(self.e_steps):
            et = np.exp(digamma(gamma) - digamma(gamma.sum()))
            phinorm = et @ eb + 1e-100
            new = self.alpha + et * (eb @ (cts / phinorm))
            done = np.abs(new - gamma).mean() < 1e-3
            gamma = new
            if done:
                break
        return gamma, np.exp(digamma(gamma) - digamma(gamma.sum()))

    def compute(self, model: Arrays) -> tuple[Arrays, dict[str, float]]:
        lam = model["lam_t"].T
        expElogbeta = np.exp(digamma(lam) - digamma(lam.sum(axis=1))[:, None])
        beta = lam / lam.sum(axis=1, keepdims=True)
        sstats = np.zeros((self.K, self.vocab))
        nll, words = 0.0, 0.0
        for d in self.batch(self.iteration):
            ids, cts = self.docs[d]
            gamma, et = self._e_step(ids, cts, expElogbeta)
            phinorm = et @ expElogbeta[:, ids] + 1e-100
            sstats[:, ids] += np.outer(et, cts / phinorm)
            p = (gamma / gamma.sum()) @ beta[:, ids]
            nll -= float(cts @ np.log(p))
            words += float(cts.sum())
        sstats *= expElogbeta
        return {"sstats_t": sstats.T}, {"loss": nll / max(words, 1.0)}

    def apply(self, part: Arrays, updates: list[Arrays], iteration: int) -> Arrays:
        rho = (self.tau0 + iteration) ** -self.kappa
        total = np.add.reduce([u["sstats_t"] for u in updates])
        scale = self.n_train / (self.batch_size * self.ctx.world_size)
        return {"lam_t": (1.0 - rho) * part["lam_t"] + rho * (self.eta + scale * total)}
