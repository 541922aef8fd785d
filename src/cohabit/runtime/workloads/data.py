"""Inputs for the built-in workloads: the packaged real samples and seeded generators.

Real samples (``cohabit/data/ps_samples/``, see the data README): libsvm-like
text, one instance per line ``label index:value ...`` with 0-based feature
indices; ``#`` lines are comments. :func:`load_sample` returns dense arrays.

Generators (every one takes a ``seed`` and returns the same arrays for the
same arguments, on any machine):

* :func:`classification` — Gaussian clusters around random class centres,
  for multinomial logistic regression and the torch MLP;
* :func:`sparse_regression` — ``y = X beta + noise`` with a sparse ``beta``,
  for Lasso (like the authors' sample, but of any size);
* :func:`images` — small one-channel images: a per-class smooth pattern plus
  noise, for the torch CNN;
* :func:`nonnegative_matrix` — a low-rank non-negative matrix plus noise, for NMF;
* :func:`lda_corpus` — documents drawn from LDA's generative process, for LDA.

The NMF sample (``sample_nmf``: ``row: col,value col,value ...``, 1-based) and
the LDA sample (``sample_lda``: one document per line, word ids separated by
spaces) have their own readers, :func:`load_nmf_sample` and
:func:`load_lda_sample`.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources as ilr

import numpy as np

#: Sample name -> number of features (from each file's header).
SAMPLES: dict[str, int] = {
    "sample_mlr": 784, "sample_mlr_test": 784, "sample_lasso": 10, "sample_lasso_test": 10,
}


@lru_cache(maxsize=8)
def _parse(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name not in SAMPLES:
        raise ValueError(f"unknown sample {name!r}; packaged samples: {', '.join(sorted(SAMPLES))}")
    d = SAMPLES[name]
    rows: list[np.ndarray] = []
    labels: list[float] = []
    text = ilr.files("cohabit.data").joinpath(f"ps_samples/{name}").read_text(encoding="utf-8")
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        x = np.zeros(d)
        try:
            labels.append(float(parts[0]))
            for item in parts[1:]:
                k, v = item.split(":", 1)
                x[int(k)] = float(v)
        except (ValueError, IndexError):
            raise ValueError(f"ps_samples/{name}:{lineno}: expected 'label index:value ...' with index < {d}, "
                             f"got {line[:60]!r}") from None
        rows.append(x)
    X = np.vstack(rows)
    y = np.asarray(labels)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def load_sample(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Dense ``(X, y)`` of a packaged sample (read-only arrays, cached per process)."""
    return _parse(name)


def _sample_lines(name: str) -> list[tuple[int, str]]:
    """(line number, text) of the non-comment, non-blank lines of a packaged sample."""
    text = ilr.files("cohabit.data").joinpath(f"ps_samples/{name}").read_text(encoding="utf-8")
    return [(i, ln.strip()) for i, ln in enumerate(text.splitlines(), 1) if ln.strip() and not ln.startswith("#")]


@lru_cache(maxsize=1)
def load_nmf_sample() -> np.ndarray:
    """The authors' NMF sample as a dense non-negative matrix (100 x 100, values 0..5; read-only)."""
    entries: list[tuple[int, int, float]] = []
    for lineno, line in _sample_lines("sample_nmf"):
        try:
            head, _, rest = line.partition(":")
            row = int(head)
            for item in rest.split():
                col, val = item.split(",")
                entries.append((row - 1, int(col) - 1, float(val)))
        except ValueError:
            raise ValueError(f"ps_samples/sample_nmf:{lineno}: expected 'row: col,value col,value ...' "
                             f"(1-based indices), got {line[:60]!r}") from None
    idx = np.array([(r, c) for r, c, _ in entries])
    if idx.size == 0 or idx.min() < 0:
        raise ValueError("ps_samples/sample_nmf: no entries, or an index below 1")
    V = np.zeros((int(idx[:, 0].max()) + 1, int(idx[:, 1].max()) + 1))
    V[idx[:, 0], idx[:, 1]] = [v for _, _, v in entries]
    V.setflags(write=False)
    return V


#: Vocabulary size of ``sample_lda`` (its header: word ids 0..17934).
LDA_SAMPLE_VOCAB = 17935


@lru_cache(maxsize=1)
def load_lda_sample() -> tuple[tuple[np.ndarray, ...], int]:
    """The abridged NYTimes corpus: one int64 array of word ids per document, and the vocabulary size."""
    docs = []
    for lineno, line in _sample_lines("sample_lda"):
        try:
            ids = np.array([int(t) for t in line.split()], dtype=np.int64)
        except ValueError:
            raise ValueError(f"ps_samples/sample_lda:{lineno}: expected word ids separated by spaces, "
                             f"got {line[:60]!r}") from None
        if ids.size and (ids.min() < 0 or ids.max() >= LDA_SAMPLE_VOCAB):
            raise ValueError(f"ps_samples/sample_lda:{lineno}: word ids must lie in [0, {LDA_SAMPLE_VOCAB}), "
                             f"got {ids.min()}..{ids.max()}")
        docs.append(ids)
    return tuple(docs), LDA_SAMPLE_VOCAB


def nonnegative_matrix(n: int, m: int, *, rank: int, noise: float, seed: int) -> np.ndarray:
    """``n x m`` matrix ``W H + noise * |N(0, 1)|`` with non-negative rank-``rank`` factors."""
    _check_sizes(n=n, m=m, rank=rank)
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise!r}")
    rng = np.random.default_rng(seed)
    W = rng.gamma(1.0, 1.0, size=(n, rank))
    H = rng.gamma(1.0, 1.0, size=(rank, m))
    return W @ H + noise * np.abs(rng.standard_normal((n, m)))


def lda_corpus(n_docs: int, vocab: int, topics: int, *, doc_len: int, seed: int,
               alpha: float = 0.1, eta: float = 0.05) -> tuple[tuple[np.ndarray, ...], int]:
    """Documents from LDA's generative process (Blei et al. 2003): per-topic word
    distributions ``~ Dir(eta)``, per-document topic mixtures ``~ Dir(alpha)``, and
    ``doc_len`` words each. Returns word-id arrays and the vocabulary size."""
    _check_sizes(n_docs=n_docs, vocab=vocab, topics=topics, doc_len=doc_len)
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.full(vocab, eta), size=topics)
    theta = rng.dirichlet(np.full(topics, alpha), size=n_docs)
    docs = []
    for d in range(n_docs):
        z = rng.choice(topics, size=doc_len, p=theta[d])
        counts = np.bincount(z, minlength=topics)
        words = [rng.choice(vocab, size=c, p=beta[k]) for k, c in enumerate(counts) if c]
        docs.append(np.sort(np.concatenate(words)).astype(np.int64))
    return tuple(docs), vocab


def classification(n: int, d: int, k: int, *, seed: int, spread: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points in ``d`` dimensions from ``k`` Gaussian clusters; labels 0..k-1 (int64).

    Class centres are random with norm about 3; points scatter around them
    with standard deviation ``spread`` per coordinate, so classes overlap and
    the problem is learnable but not trivially separable.
    """
    _check_sizes(n=n, d=d, k=k)
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * (3.0 / np.sqrt(d))
    y = rng.integers(0, k, size=n)
    X = centres[y] + rng.standard_normal((n, d)) * spread
    return X.astype(np.float64), y.astype(np.int64)


def sparse_regression(n: int, d: int, *, nnz: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, beta)`` with ``y = X beta + noise * N(0, 1)`` and ``nnz`` non-zero coefficients."""
    _check_sizes(n=n, d=d)
    if not 0 < nnz <= d:
        raise ValueError(f"nnz must be in [1, d={d}], got {nnz!r}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise!r}")
    rng = np.random.default_rng(seed)
    beta = np.zeros(d)
    support = rng.choice(d, size=nnz, replace=False)
    beta[support] = rng.uniform(1.0, 5.0, size=nnz) * rng.choice([-1.0, 1.0], size=nnz)
    X = rng.standard_normal((n, d))
    y = X @ beta + noise * rng.standard_normal(n)
    return X, y, beta


def images(n: int, size: int, k: int, *, seed: int, noise: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images ``(1, size, size)`` float32 in ``k`` classes; labels int64.

    Each class has a smooth random template (low-frequency cosines); an image
    is its class template, shifted by up to one pixel, plus Gaussian noise.
    """
    _check_sizes(n=n, size=size, k=k)
    rng = np.random.default_rng(seed)
    grid = np.linspace(0.0, np.pi, size)
    yy, xx = np.meshgrid(grid, grid, indexing="ij")
    templates = np.zeros((k, size, size))
    for c in range(k):
        for _ in range(3):
            fy, fx = rng.integers(1, 4, size=2)
            phase = rng.uniform(0, 2 * np.pi)
            templates[c] += rng.uniform(0.5, 1.0) * np.cos(fy * yy + fx * xx + phase)
    y = rng.integers(0, k, size=n)
    shifts = rng.integers(-1, 2, size=(n, 2))
    X = np.empty((n, 1, size, size), dtype=np.float32)
    for i in range(n):
        X[i, 0] = np.roll(templates[y[i]], tuple(shifts[i]), axis=(0, 1))
    X += (noise * rng.standard_normal(X.shape)).astype(np.float32)
    return X, y.astype(np.int64)


def split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and test index arrays: a seeded permutation cut at ``test_fraction``."""
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction!r}")
    perm = np.random.default_rng(seed + 7919).permutation(n)
    cut = int(round(n * test_fraction))
    return perm[cut:], perm[:cut]


def _check_sizes(**sizes: int) -> None:
    for name, v in sizes.items():
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
