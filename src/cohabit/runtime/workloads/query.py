"""``tpch-query``: a progressive TPC-H query as a cohabit workload (a job of kind ``query``).

One *step* reads one batch (:class:`cohabit.aqp.online.ProgressiveQuery`); the job's
``iterations`` are its batches. Each step reports, and the worker sends at every batch
(``report_each_step``), the metrics a real AQP system can observe:

* ``accuracy`` — the envelope estimate of the running answer's accuracy (§3.2.1), what the
  completion criterion ``accuracy >= 0.95 within 600s`` is checked against;
* ``batches`` — batches read; ``rows_scanned`` — rows of the sampled fact table read so far;
* ``state_rows`` — rows of the merged partial state (what a checkpoint holds);
* ``query_mem_mb`` — memory DuckDB holds after the batch;
* ``threads`` — DuckDB's thread count for that batch (raised or lowered by ``SetShare`` between
  batches: Rotary-AQP's extra cores).

Each batch is one evaluation of the completion criterion; the job's *running epoch* is
``iterations / epochs`` batches of its spec (no ``epoch`` is reported: the criteria tracker counts
epochs from the iterations, so an arbiter may preempt the query only at the end of an epoch).

With ``heldout: true`` the task first computes the exact final answer (the whole query at once)
and also reports ``heldout_accuracy``, the *true* accuracy of the running answer: the backend
keeps it from policies (false-attainment accounting only; it costs one full run of the query).

The task's CPU demand is DuckDB's ``threads`` (the worker's thread count), its ``mem_gb`` demand
DuckDB's ``memory_limit``. The state dict is the query's checkpoint (partial state + batch-level
progress): a resumed task continues at the next unread batch.

Options (``workload:`` keys): ``query`` (``q1`` .. ``q22`` or 1 .. 22), ``scale`` (TPC-H scale
factor, generated with ``tpchgen-cli`` on first use and cached), ``data`` (a directory holding the
tables as Parquet instead), ``window`` (the envelope's window, in batches). The batch order is
shuffled by the workload's ``seed``.
"""

from __future__ import annotations

from typing import Any

from .base import WorkloadContext, WorkloadError


class TPCHQuery:
    """One progressive TPC-H query (module docstring)."""

    report_each_step = True

    @staticmethod
    def check_params(job: str, params: dict[str, Any]) -> None:
        """Check option values when the jobs file is loaded (WorkloadError names the key)."""
        from ...aqp.queries import query_spec

        try:
            query_spec(params.get("query", "q6"))
        except ValueError as exc:
            raise WorkloadError(f"job {job!r}: workload.query: {exc}", field="query") from None
        if int(params.get("window", 3)) < 2:
            raise WorkloadError(f"job {job!r}: workload.window must be >= 2 batches, got {params['window']!r}",
                                field="window")
        scale = params.get("scale", 0.01)
        if not 0 < float(scale) <= 100:
            raise WorkloadError(f"job {job!r}: workload.scale must be a TPC-H scale factor in (0, 100], got {scale!r}",
                                field="scale")

    def __init__(self, ctx: WorkloadContext, *, query: str | int = "q6", scale: float = 0.01,
                 data: str | None = None, window: int = 3, heldout: bool = False) -> None:
        from ...aqp.data import DataError, resolve_data
        from ...aqp.online import ProgressiveQuery
        from ...aqp.queries import query_spec

        try:
            spec = query_spec(query)
        except ValueError as exc:
            raise WorkloadError(f"job {ctx.job!r}: workload.query: {exc}", field="query") from None
        if window < 2:
            raise WorkloadError(f"job {ctx.job!r}: workload.window must be >= 2 batches, got {window!r}", field="window")
        if ctx.iterations is None:
            raise WorkloadError(f"job {ctx.job!r}: a query job needs 'iterations' (its number of batches)")
        try:
            path = resolve_data(data, float(scale))
        except DataError as exc:
            raise WorkloadError(f"job {ctx.job!r}: {exc}", field="data" if data is not None else "scale") from None
        memory_mb = int(ctx.mem_gb * 1024) if ctx.mem_gb else None
        self.ctx = ctx
        self.query = ProgressiveQuery(spec, path, batches=int(ctx.iterations), seed=ctx.seed, threads=ctx.threads,
                                      memory_mb=memory_mb, window=window, scale_factor=float(scale))
        self.total_iterations = int(ctx.iterations)
        self.final = None
        if heldout:
            whole = ProgressiveQuery(spec, path, batches=1, threads=ctx.threads, memory_mb=memory_mb,
                                     scale_factor=float(scale))
            self.final = whole.run()
            whole.close()

    @property
    def iteration(self) -> int:
        return self.query.done

    @property
    def done(self) -> bool:
        return self.query.finished

    def step(self) -> dict[str, float]:
        from ...aqp.accuracy import accuracy

        rep = self.query.step()
        out = {"accuracy": rep.estimate, "batches": float(rep.index),
               "rows_scanned": float(self.query.rows_scanned), "batch_rows": float(rep.rows),
               "state_rows": float(self.query.state_rows()), "query_mem_mb": self.query.memory_mb(),
               "threads": float(self.query.threads())}
        if self.final is not None:
            out["heldout_accuracy"] = accuracy(self.query.answer(), self.final, self.query.spec)
        return out

    def set_share(self, *, threads: int, mem_gb: float | None = None) -> None:
        """A new share (``SetShare``, Rotary-AQP's extra cores): DuckDB's ``threads`` and, if given,
        ``memory_limit`` from the next batch on (the worker calls it between batches)."""
        self.query.set_resources(threads=threads, memory_mb=int(mem_gb * 1024) if mem_gb else None)

    def evaluate(self) -> dict[str, float]:
        return {"accuracy": self.query.estimate(), "batches": float(self.query.done)}

    def state_dict(self) -> dict[str, Any]:
        return {"iteration": self.query.done, "query": self.query.checkpoint()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.query.restore(state["query"])
