"""The workload interface: what a task process needs from a trainable job.

A workload is an object with

* ``step() -> dict[str, float]`` — run one iteration (one mini-batch) and
  return its metrics (``loss`` at least; ``accuracy`` etc. when known);
* ``state_dict()`` / ``load_state_dict(state)`` — everything needed to
  continue exactly where it stopped (parameters, optimizer state, counters),
  as picklable values (numpy arrays, torch tensors, numbers);
* ``iteration`` (iterations done), ``total_iterations`` and ``done``.

Built-in workloads subclass :class:`Workload`, which keeps the counters, cuts
epochs into seeded mini-batches (:meth:`Workload.batch`) and evaluates at
every epoch boundary; a subclass writes ``train_step``, ``model_state``,
``load_model_state`` and ``evaluate``. A user's own object needs only
``step``, ``state_dict`` and ``load_state_dict``: :class:`Counted` adds the
counters (and honours a ``done`` attribute for early convergence).

Factories are called as ``factory(ctx, **params)`` where ``ctx`` is a
:class:`WorkloadContext` (job id, seed, length, batch size, rank and world
size, threads, ``device``) and ``params`` the job's ``workload:`` mapping minus the
reserved keys ``name``, ``entry`` and ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np


#: Where the numpy and parameter-server workloads take their data from (``data:`` option).
DataSource = Literal["sample", "synthetic"]


class WorkloadError(ValueError):
    """A workload that cannot be built: unknown name, bad parameter, missing length.

    ``field`` names the ``workload:`` key at fault when one is (``"data"``), so that a
    jobs file can point at its line.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class WorkloadContext:
    """What the scheduler tells a workload about the task it runs in."""

    job: str
    seed: int = 0
    iterations: int | None = None
    epochs: int | None = None
    batch_size: int | None = None
    rank: int = 0
    world_size: int = 1
    threads: int = 1
    device: str = "cpu"  # where torch workloads train: "cuda:0" when the task was given a GPU torch can use
    mem_gb: float | None = None  # the task's memory demand (a query job's DuckDB memory_limit); None: not given

    def total_iterations(self, iters_per_epoch: int | None) -> int:
        """``iterations`` if given, else ``epochs * iters_per_epoch``; WorkloadError if neither is known."""
        if self.iterations is not None:
            return int(self.iterations)
        if self.epochs is not None:
            if not iters_per_epoch:
                raise WorkloadError(f"job {self.job!r}: 'epochs' needs a workload that knows its epoch length; "
                                    f"give 'iterations' instead")
            return int(self.epochs) * int(iters_per_epoch)
        raise WorkloadError(f"job {self.job!r}: give 'iterations' or 'epochs' so the workload knows when it is done")


@runtime_checkable
class Trainable(Protocol):
    """What the worker drives (built-in workloads, or a user object wrapped by :class:`Counted`)."""

    iteration: int
    total_iterations: int

    @property
    def done(self) -> bool: ...

    def step(self) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class Communicator(Protocol):
    """Gradient averaging across the ranks of a data-parallel job (set by the worker)."""

    def allreduce_mean(self, arrays: list[Any]) -> None: ...


class Workload:
    """Base of the built-in workloads: counters, seeded epoch batches, evaluation at epoch ends.

    Subclasses call ``super().__init__(ctx, n_train, batch_size)`` once they
    know their data, and implement :meth:`train_step`, :meth:`model_state`,
    :meth:`load_model_state` and :meth:`evaluate`.
    """

    name = "workload"

    def __init__(self, ctx: WorkloadContext, n_train: int, batch_size: int) -> None:
        if batch_size < 1:
            raise WorkloadError(f"job {ctx.job!r}: workload.batch_size must be >= 1, got {batch_size!r}")
        global_batch = batch_size * ctx.world_size
        if global_batch > n_train:
            raise WorkloadError(
                f"job {ctx.job!r}: batch_size {batch_size} x {ctx.world_size} worker(s) exceeds the "
                f"{n_train} training instances; use a smaller batch_size or more data"
            )
        self.ctx = ctx
        self.n_train = n_train
        self.batch_size = batch_size
        self.iters_per_epoch = n_train // global_batch
        self.total_iterations = ctx.total_iterations(self.iters_per_epoch)
        self.iteration = 0
        self.comm: Communicator | None = None
        self._perm_epoch = -1
        self._perm = np.empty(0, dtype=np.int64)

    # ------------------------------------------------------------ counters
    @property
    def done(self) -> bool:
        return self.iteration >= self.total_iterations

    @property
    def epoch(self) -> int:
        return self.iteration // self.iters_per_epoch

    def batch(self, i: int) -> np.ndarray:
        """Training indices of this rank for iteration ``i``.

        Each epoch is a permutation seeded by (seed, epoch), so a resumed run
        sees exactly the batches an uninterrupted one would; the global batch
        is cut into ``world_size`` contiguous shards.
        """
        e, pos = divmod(i, self.iters_per_epoch)
        if e != self._perm_epoch:
            self._perm = np.random.default_rng([self.ctx.seed, e]).permutation(self.n_train)
            self._perm_epoch = e
        g = self.batch_size * self.ctx.world_size
        start = pos * g + self.ctx.rank * self.batch_size
        return self._perm[start:start + self.batch_size]

    # --------------------------------------------------------------- step
    def step(self) -> dict[str, float]:
        """One iteration; at an epoch end (and the last iteration) also the evaluation metrics."""
        if self.done:
            raise RuntimeError(f"job {self.ctx.job!r}: step() after the last iteration ({self.total_iterations})")
        metrics = self.train_step(self.iteration)
        self.iteration += 1
        if self.iteration % self.iters_per_epoch == 0 or self.done:
            metrics.update(self.evaluate())
            metrics["epoch"] = float(self.iteration / self.iters_per_epoch)
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "model": self.model_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.load_model_state(state["model"])
        self.iteration = int(state["iteration"])

    # ---------------------------------------------------- for subclasses
    def train_step(self, i: int) -> dict[str, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def model_state(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def load_model_state(self, state: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def evaluate(self) -> dict[str, float]:
        """Held-out (or full training) metrics; ``{}`` if the workload has none."""
        return {}


class Counted:
    """Wraps a user object that has ``step``/``state_dict``/``load_state_dict`` but no counters.

    Counts iterations itself; the job is done after ``total_iterations`` steps
    or as soon as the object's own ``done`` attribute (if any) is true.
    """

    def __init__(self, obj: Any, ctx: WorkloadContext) -> None:
        for method in ("step", "state_dict", "load_state_dict"):
            if not callable(getattr(obj, method, None)):
                raise WorkloadError(f"job {ctx.job!r}: the workload object {type(obj).__name__} has no "
                                    f"{method}() method; see cohabit.runtime.workloads.base for the interface")
        self.obj = obj
        self.ctx = ctx
        self.iteration = 0
        self.total_iterations = ctx.total_iterations(getattr(obj, "iters_per_epoch", None))
        self.comm: Communicator | None = None

    @property
    def done(self) -> bool:
        return self.iteration >= self.total_iterations or bool(getattr(self.obj, "done", False))

    def step(self) -> dict[str, float]:
        out = self.obj.step()
        self.iteration += 1
        if out is None:
            return {}
        if not isinstance(out, dict):
            raise WorkloadError(f"job {self.ctx.job!r}: step() must return a dict of metrics, got {type(out).__name__}")
        return {str(k): float(v) for k, v in out.items() if isinstance(v, (int, float, np.floating, np.integer))}

    def state_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "user": self.obj.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.obj.load_state_dict(state["user"])
        self.iteration = int(state["iteration"])

    def evaluate(self) -> dict[str, float]:
        fn = getattr(self.obj, "evaluate", None)
        return dict(fn()) if callable(fn) else {}
