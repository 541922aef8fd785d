"""Model partitions over servers, and a PS job's checkpoints: one part per server and per worker.

A model is a dict of named arrays; :func:`partition` cuts every array into
row blocks, one per server, and :func:`assemble` glues them back.

Parts live in their own :class:`~cohabit.runtime.checkpoint.CheckpointStore`
under the job's directory of the backend's store (``<job dir>/ps/``), keyed
``server-<k>`` and ``worker-<r>``; each part is written atomically with a
checksum by the task that owns it, at the same iteration boundary as every
other part (the boundary the tasks agreed on, see :mod:`.server`), and its
header records the iteration and the layout (numbers of workers and servers).

A *restore point* is the newest iteration for which every part of one layout
exists and verifies. Since each store keeps the two newest parts per key, a
crash in the middle of a checkpoint (some parts at ``t``, some still at the
previous ``t'``) falls back to ``t'``. Every task of a restarted job computes
the same restore point from the same files; servers re-split the model when
the number of servers changed and NMF workers reshard their rows when the
number of workers changed (a Dorm-style resize).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import safestate
from ..checkpoint import CheckpointError, CheckpointStore

KEEP = 2
Arrays = dict[str, np.ndarray]


def partition(model: Arrays, n_servers: int) -> list[Arrays]:
    """Row blocks of every array, one dict per server (server ``k`` gets block ``k``)."""
    blocks = {k: np.array_split(v, n_servers, axis=0) for k, v in model.items()}
    return [{k: blocks[k][s] for k in model} for s in range(n_servers)]


def assemble(parts: list[Arrays]) -> Arrays:
    """Inverse of :func:`partition`: the full model from the servers' blocks, in server order."""
    return {k: np.concatenate([p[k] for p in parts], axis=0) for k in parts[0]}


def parts_store(store_root: str | Path, job: str, *, fsync: bool = True) -> CheckpointStore:
    """The parts store of ``job`` inside the backend's store rooted at ``store_root``."""
    return CheckpointStore(CheckpointStore(store_root, fsync=fsync).job_dir(job) / "ps", keep=KEEP, fsync=fsync)


def part_key(role: str, index: int) -> str:
    return f"{role}-{index}"


def save_part(parts: CheckpointStore, role: str, index: int, state: dict[str, Any], *, iteration: int,
              n_workers: int, n_servers: int) -> None:
    """Write one task's part for the boundary after ``iteration`` iterations."""
    parts.save(part_key(role, index), state, iteration=iteration, n_workers=n_workers, n_servers=n_servers)


@dataclass(frozen=True, slots=True)
class RestorePoint:
    """A consistent set of parts: the iteration, the layout that wrote it, and the parts' states."""

    iteration: int
    n_workers: int
    n_servers: int
    states: dict[str, Any]

    def servers(self) -> list[Arrays]:
        return [self.states[part_key("server", k)]["model"] for k in range(self.n_servers)]

    def workers(self) -> list[dict[str, Any]]:
        return [self.states[part_key("worker", r)]["local"] for r in range(self.n_workers)]


def _candidates(parts: CheckpointStore) -> dict[tuple[int, int, int], dict[str, Path]]:
    """(iteration, n_workers, n_servers) -> {part key: file} from the headers on disk."""
    out: dict[tuple[int, int, int], dict[str, Path]] = {}
    if not parts.root.is_dir():
        return out
    for d in sorted(parts.root.iterdir()):
        if not d.is_dir():
            continue
        for path in parts.paths(d.name):
            try:
                h, _ = parts.read_header(path)
                key = (int(h["iteration"]), int(h["n_workers"]), int(h["n_servers"]))
            except (CheckpointError, KeyError, ValueError):
                continue
            out.setdefault(key, {})[d.name] = path
    return out


def _complete(found: dict[str, Path], n_workers: int, n_servers: int) -> bool:
    need = [part_key("server", k) for k in range(n_servers)] + [part_key("worker", r) for r in range(n_workers)]
    return all(k in found for k in need)


def restore_point(parts: CheckpointStore, *, load: bool = True) -> RestorePoint | None:
    """The newest complete, verifying set of parts (None if there is none).

    With ``load=False`` only headers are read (cheap; for status displays).
    """
    cands = _candidates(parts)
    for (it, nw, ns) in sorted(cands, reverse=True):
        found = cands[(it, nw, ns)]
        if not _complete(found, nw, ns):
            continue
        if not load:
            return RestorePoint(it, nw, ns, {})
        try:
            states = {}
            for key in [part_key("server", k) for k in range(ns)] + [part_key("worker", r) for r in range(nw)]:
                _, payload = parts.verify(found[key])
                states[key] = safestate.loads(payload)
        except (CheckpointError, safestate.StateFormatError):
            continue
        return RestorePoint(it, nw, ns, states)
    return None


def checkpoint_iteration(store_root: str | Path, job: str) -> int | None:
    """Iteration of the job's newest complete checkpoint (headers only)."""
    rp = restore_point(parts_store(store_root, job, fsync=False), load=False)
    return None if rp is None else rp.iteration


def load_model(store_root: str | Path, job: str) -> tuple[int, Arrays, list[dict[str, Any]]] | None:
    """The newest complete checkpoint as (iteration, full model, workers' local states)."""
    rp = restore_point(parts_store(store_root, job, fsync=False))
    if rp is None:
        return None
    return rp.iteration, assemble(rp.servers()), rp.workers()


def clear_parts(store_root: str | Path, job: str) -> None:
    """Forget every part of ``job`` (a fresh start must not restore an old run)."""
    shutil.rmtree(parts_store(store_root, job, fsync=False).root, ignore_errors=True)
