"""Dorm applications: the submission 6-tuple (Sun et al., §III-B) mapped onto cohabit jobs.

A Dorm user submits ``(executor, d, w, n_max, n_min, cmd)``:

==========  ===============================================  ======================================
Dorm        meaning                                          cohabit JobSpec
==========  ===============================================  ======================================
executor    computation engine ("MxNet", "TensorFlow", ...)  ``model`` when no model is named
d           demand vector of one container                   ``workers.demand``
w           integer weight                                   ``weight``
n_max       most containers                                  ``n_max``
n_min       fewest containers                                ``n_min``
cmd         start and resume scripts                         ``workload`` (see below)
==========  ===============================================  ======================================

Each application is its own tenant unless one is given, so weighted DRF (the
baseline) and Dorm's theoretical shares both treat applications as users.
``containers`` is the count the application starts with under a policy that
does not size partitions (FIFO, DRF, the static baseline); default ``n_min``.

``cmd`` is either a cohabit workload mapping — the runtime starts it fresh and
resumes it from its newest checkpoint, which is exactly Dorm's start/resume
pair (``{name: mlr, data: sample}``, ``{entry: "pkg.mod:make"}``) — or a pair of
shell commands ``[start, resume]`` as in the paper's example, kept in the
workload as ``{start: ..., resume: ...}`` for the record; the simulator runs
such jobs, the local runtime cannot (it runs Python workloads only).

Three ways in: Python (:class:`DormApp`, :func:`to_jobs`), YAML
(:func:`load_apps`: a top-level ``applications:`` list of mappings with the
fields below) and the command line::

    python -m cohabit.policies.dorm.app apps.yaml -o jobs.yaml
    cohabit run jobs.yaml --policy dorm
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ...spec.job import JobSpec, TaskGroup
from ...spec.resources import Resources


class DormApp(BaseModel):
    """One Dorm application (the 6-tuple plus when it arrives and how much it trains)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    executor: str = Field(min_length=1)
    demand: Resources
    weight: float = Field(default=1.0, gt=0.0)
    n_max: int = Field(ge=1)
    n_min: int = Field(default=1, ge=1)
    cmd: dict[str, Any] | tuple[str, str]
    containers: int | None = Field(default=None, ge=1)
    submit_time: float = Field(default=0.0, ge=0.0)
    iterations: int | None = Field(default=None, ge=1)
    epochs: int | None = Field(default=None, ge=1)
    batch_size: int | None = Field(default=None, ge=1)
    model: str | None = None
    tenant: str | None = None

    @model_validator(mode="after")
    def _check(self) -> DormApp:
        if self.n_min > self.n_max:
            raise ValueError(f"n_min={self.n_min} must be <= n_max={self.n_max}")
        c = self.containers
        if c is not None and not self.n_min <= c <= self.n_max:
            raise ValueError(f"containers={c} must lie in [n_min={self.n_min}, n_max={self.n_max}]")
        if not self.demand.is_nonnegative() or not any(v > 0 for v in self.demand.values()):
            raise ValueError("demand must be non-negative and ask for something")
        return self

    @property
    def start_cmd(self) -> str | dict[str, Any]:
        return self.cmd[0] if isinstance(self.cmd, tuple) else dict(self.cmd)

    @property
    def resume_cmd(self) -> str | dict[str, Any]:
        """A workload mapping resumes itself from its checkpoint (the runtime's restore)."""
        return self.cmd[1] if isinstance(self.cmd, tuple) else dict(self.cmd)

    def to_spec(self) -> JobSpec:
        """The cohabit job for this application (see the module table)."""
        count = self.containers if self.containers is not None else self.n_min
        workload = (dict(self.cmd) if not isinstance(self.cmd, tuple)
                    else {"start": self.cmd[0], "resume": self.cmd[1]})
        return JobSpec(
            id=self.id, submit_time=self.submit_time, tenant=self.tenant or self.id,
            architecture="single" if self.n_max == 1 else "allreduce",
            workers=TaskGroup(count=count, demand=self.demand), n_min=self.n_min, n_max=self.n_max,
            weight=self.weight, model=self.model or self.executor, iterations=self.iterations, epochs=self.epochs,
            batch_size=self.batch_size, workload=workload,
        )


def to_jobs(apps: Iterable[DormApp]) -> list[JobSpec]:
    return [a.to_spec() for a in apps]


def parse_apps(data: Any, source: str = "<data>") -> list[DormApp]:
    """Applications from parsed YAML/JSON: ``{applications: [...]}`` or a bare list."""
    items = data.get("applications") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError(f"{source}: expected a list under 'applications:'")
    out: list[DormApp] = []
    for k, item in enumerate(items):
        try:
            out.append(DormApp.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"{source}: applications[{k}]{'.' + where if where else ''}: {first['msg']}") from None
    ids = [a.id for a in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{source}: duplicate application ids")
    return out


def load_apps(path: str | Path) -> list[DormApp]:
    text = Path(path).read_text(encoding="utf-8")
    return parse_apps(yaml.safe_load(text), str(path))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cohabit.policies.dorm.app APPS.yaml [-o JOBS.yaml]``: Dorm applications -> cohabit jobs."""
    from ...spec.yamlio import dump_jobs

    ap = argparse.ArgumentParser(prog="python -m cohabit.policies.dorm.app", description=main.__doc__)
    ap.add_argument("apps", help="YAML file with an 'applications:' list of Dorm 6-tuples")
    ap.add_argument("-o", "--out", help="write the cohabit jobs YAML here (default: stdout)")
    args = ap.parse_args(argv)
    try:
        jobs = to_jobs(load_apps(args.apps))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = dump_jobs(jobs, args.out)
    if args.out is None:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
