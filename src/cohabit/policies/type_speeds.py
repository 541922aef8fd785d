"""Per-GPU-type speeds a policy observes, for heterogeneous clusters (nodes labelled ``gpu_model``).

A scheduler sees each running job's measured time per iteration (``JobView.iter_time``) and the
nodes it runs on, whose ``gpu_model`` label names the GPU type. :class:`TypeSpeeds` keeps, per job,
its latest observed speed (iterations per second) on each type at each worker count, and from the
jobs observed on two types the *relative speed* of those types (the median ratio, over the jobs of
the same model first, then over all jobs; with no job seen on both, from the median speeds of one
model's jobs on each, as jobs of one model run alike on one type). A job's speed on a type it has not run on is estimated
from its speed on a type it has run on times that ratio. Types are ranked for a job by that
estimate (types with no estimate after, in the order of the cluster-wide relative speeds, then by
name). Nothing here reads a job's true speed: only reports the scheduler received.

On a cluster with one GPU type (or none labelled) :meth:`TypeSpeeds.heterogeneous` is False and
policies keep their type-blind behaviour.
"""

from __future__ import annotations

from statistics import median

from ..engine.actions import Placement
from ..engine.job import JobView
from ..engine.view import ClusterView
from .placement import Draft, consolidated_first

#: a move to another type must make the job this much faster to be worth considering at all
MIN_GAIN = 1.05


def gpu_types(view: ClusterView) -> dict[str, list[int]]:
    """GPU type (node label ``gpu_model``, lower case; "" when unlabelled) -> indices of its GPU nodes."""
    out: dict[str, list[int]] = {}
    g = view.resource_index("gpu")
    for i, node in enumerate(view.cluster.nodes):
        if g is not None and view.capacity[i, g] <= 0:
            continue
        out.setdefault(str(node.labels.get("gpu_model", "")).lower(), []).append(i)
    return out


class TypeSpeeds:
    """Observed per-type speeds of jobs (see the module docstring)."""

    def __init__(self) -> None:
        self._types: dict[str, list[int]] | None = None
        self._node_type: dict[int, str] = {}
        self._seen: dict[str, dict[tuple[str, int], float]] = {}  # job -> (type, workers) -> iterations/s
        self._model: dict[str, str] = {}
        self._memo: dict[object, object] = {}  # ratios and relative speeds; cleared when observations change

    def types(self, view: ClusterView) -> dict[str, list[int]]:
        if self._types is None:
            self._types = gpu_types(view)
            self._node_type = {i: t for t, nodes in self._types.items() for i in nodes}
        return self._types

    def heterogeneous(self, view: ClusterView) -> bool:
        return len(self.types(view)) > 1

    def type_of(self, view: ClusterView, job: JobView) -> str | None:
        """The GPU type running ``job``'s workers are on (None: not running, or over several types)."""
        self.types(view)
        here = {self._node_type.get(n) for n in job.placement[: job.n_workers]}
        return next(iter(here)) if len(here) == 1 and None not in here else None

    def observe(self, view: ClusterView) -> None:
        """Record the speed of every running job that has reported on its current placement."""
        for job in view.running.values():
            if job.iter_time and job.iter_time > 0:
                t = self.type_of(view, job)
                if t is not None:
                    seen = self._seen.setdefault(job.id, {})
                    key, speed = (t, job.n_workers), 1.0 / job.iter_time
                    if seen.get(key) != speed:
                        seen[key] = speed
                        self._model[job.id] = job.spec.model
                        self._memo.clear()

    def forget(self, job: JobView) -> None:
        """Keep what ``job`` taught about the types (its ratios), but stop tracking it as active."""
        self._model.setdefault(job.id, job.spec.model)

    def ratio(self, t: str, ref: str, model: str | None = None) -> float | None:
        key = ("ratio", t, ref, model)
        if key not in self._memo:
            self._memo[key] = self._ratio(t, ref, model)
        return self._memo[key]  # type: ignore[return-value]

    def _ratio(self, t: str, ref: str, model: str | None = None) -> float | None:
        """Speed on ``t`` over speed on ``ref`` at one worker count: the median over the jobs observed on
        both (those of ``model`` if any were, else all); failing that, the median over the models whose
        jobs were observed on both of the ratio of their jobs' median speeds there (``model``'s own if
        it has one); None without either."""
        def pool(same_model: bool) -> list[float]:
            out = []
            for jid, seen in self._seen.items():
                if same_model and self._model.get(jid) != model:
                    continue
                for (tt, n), s in seen.items():
                    if tt == t and (ref, n) in seen:
                        out.append(s / seen[(ref, n)])
            return out
        vals = (pool(True) if model is not None else []) or pool(False)
        if vals:
            return median(vals)
        groups = self._groups()
        across = [g[(t, n)] / g[(ref, n)] for key, g in groups.items() if model is None or key == model
                  for (tt, n) in g if tt == t and (ref, n) in g]
        if not across and model is not None:
            across = [g[(t, n)] / g[(ref, n)] for g in groups.values() for (tt, n) in g if tt == t and (ref, n) in g]
        return median(across) if across else None

    def _groups(self) -> dict[str, dict[tuple[str, int], float]]:
        """model -> (type, workers) -> median speed of its jobs observed there (memoized)."""
        if "by_model" not in self._memo:
            self._memo["by_model"] = self._by_model()
        return self._memo["by_model"]  # type: ignore[return-value]

    def _by_model(self) -> dict[str, dict[tuple[str, int], float]]:
        """model -> (type, workers) -> median speed of its jobs observed there."""
        speeds: dict[str, dict[tuple[str, int], list[float]]] = {}
        for jid, seen in self._seen.items():
            per = speeds.setdefault(self._model.get(jid, ""), {})
            for key, s in seen.items():
                per.setdefault(key, []).append(s)
        return {m: {k: median(v) for k, v in per.items()} for m, per in speeds.items()}

    def speed(self, job: JobView, t: str, n: int) -> float | None:
        """``job``'s speed on ``n`` workers of type ``t``: observed, else estimated from a type it ran on."""
        seen = self._seen.get(job.id, {})
        if (t, n) in seen:
            return seen[(t, n)]
        for (ref, m), s in seen.items():
            if m == n:
                r = self.ratio(t, ref, job.spec.model)
                if r is not None:
                    return s * r
        return None

    def relative(self, t: str) -> float | None:
        key = ("relative", t)
        if key not in self._memo:
            self._memo[key] = self._relative(t)
        return self._memo[key]  # type: ignore[return-value]

    def _relative(self, t: str) -> float | None:
        """Median, over the jobs observed on ``t`` and on another type at one worker count, of their speed
        on ``t`` over their fastest observed speed at that count; None without such a job."""
        vals = []
        for seen in self._seen.values():
            for (tt, n), s in seen.items():
                others = [v for (u, m), v in seen.items() if m == n]
                if tt == t and len(others) > 1:
                    vals.append(s / max(others))
        return median(vals) if vals else None

    def ranked(self, view: ClusterView, job: JobView, n: int) -> list[str] | None:
        """The cluster's GPU types for ``job`` on ``n`` workers, fastest first: by the job's estimated speed,
        then by the types' relative speeds; None when nothing is known about any type."""
        names = sorted(self.types(view))
        est = {t: self.speed(job, t, n) for t in names}
        rel = {t: self.relative(t) for t in names}
        if all(v is None for v in est.values()) and all(v is None for v in rel.values()):
            return None
        return sorted(names, key=lambda t: (est[t] is None, -(est[t] or 0.0), rel[t] is None, -(rel[t] or 0.0), t))

    def place(self, draft: Draft, job: JobView, n: int) -> Placement | None:
        """A consolidated placement of ``n`` workers on the fastest type (estimated) where they fit, reserved;
        with nothing known about the types, the consolidated placement anywhere (``Draft.place``)."""
        order = self.ranked(draft.view, job, n)
        if order is None:
            return draft.place(job, n)
        types = self.types(draft.view)
        for t in order:
            p = consolidated_first(draft, job, n, types[t])
            if p is not None and draft.reserve(job, p):
                return p
        return None
