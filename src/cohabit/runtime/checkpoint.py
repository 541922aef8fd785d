"""On-disk checkpoint store: atomic writes, sha256 checksums, fallback to the last good checkpoint.

Layout: ``<root>/<job>/ckpt-<seq>.ckpt`` where ``seq`` increases with every
save. One file holds a one-line JSON header and the payload::

    COHCKPT1 {"sha256": "...", "size": 1234, "seq": 7, "iteration": 120, ...}\\n
    <payload: the state in :mod:`cohabit.runtime.safestate` form, ``size`` bytes>

Writes go to a temporary file in the same directory, are flushed and
fsync'ed, then ``os.replace``'d onto the final name (atomic on POSIX), and
the directory is fsync'ed; a crash mid-write leaves at most a stray temporary
file, never a half-written checkpoint under a real name. Loading verifies the
size and the sha256 of the payload; a corrupt newest checkpoint is renamed to
``*.corrupt`` and the previous good one is returned. ``keep`` checkpoints are
kept per job (default 2: the newest and one good fallback).

The payload is what the workload's ``state_dict()`` returns, written by
:func:`cohabit.runtime.safestate.dumps`: JSON for the structure and a numpy
``.npz`` archive read with ``allow_pickle=False`` for arrays and tensors.
Reading a checkpoint never runs code, so a tampered file (even one with a
recomputed checksum) can at worst hold wrong numbers; the checksum detects
corruption. A payload that does not parse counts as corrupt.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import safestate

MAGIC = b"COHCKPT1 "
_NAME = re.compile(r"ckpt-(\d{8,})\.ckpt\Z")
_JOB_ID = re.compile(r"[A-Za-z0-9._-]+\Z")


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be used (truncated, bad checksum, unreadable)."""


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """Header of one stored checkpoint."""

    job: str
    seq: int
    iteration: int
    size: int
    sha256: str
    created: float
    path: Path


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class CheckpointStore:
    """Checkpoints of many jobs under one ``root`` directory.

    Safe to share between processes as long as only one process writes a
    given job at a time (the job's worker; the scheduler only reads).
    """

    def __init__(self, root: str | Path, *, keep: int = 2, fsync: bool = True) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1 checkpoint per job, got {keep!r}")
        self.root = Path(root)
        self.keep = keep
        self.fsync = fsync
        self.last_errors: list[str] = []  # why newer checkpoints were skipped by the last load()
        self.root.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ paths
    def job_dir(self, job: str) -> Path:
        if not _JOB_ID.match(job) or job in (".", ".."):
            # keep arbitrary job ids usable while never escaping the root directory
            safe = hashlib.sha256(job.encode()).hexdigest()[:16]
            return self.root / f"job-{safe}"
        return self.root / job

    def _files(self, job: str) -> list[tuple[int, Path]]:
        d = self.job_dir(job)
        if not d.is_dir():
            return []
        out = []
        for p in d.iterdir():
            m = _NAME.match(p.name)
            if m:
                out.append((int(m.group(1)), p))
        out.sort(reverse=True)
        return out

    # ------------------------------------------------------------------ write
    def save(self, job: str, state: Any, *, iteration: int, **meta: Any) -> CheckpointInfo:
        """Store ``state`` as the newest checkpoint of ``job``; returns its header.

        ``meta`` (JSON-serialisable) is kept in the header, e.g. the workload name.
        """
        payload = safestate.dumps(state)
        files = self._files(job)
        seq = files[0][0] + 1 if files else 1
        info = {
            "job": job, "seq": seq, "iteration": int(iteration), "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(), "created": time.time(), **meta,
        }
        header = MAGIC + json.dumps(info, separators=(",", ":"), default=str).encode() + b"\n"
        d = self.job_dir(job)
        d.mkdir(parents=True, exist_ok=True)
        final = d / f"ckpt-{seq:08d}.ckpt"
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".ckpt", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(payload)
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())
            os.replace(tmp, final)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        if self.fsync:
            _fsync_dir(d)
        self._prune(job)
        return CheckpointInfo(job, seq, int(iteration), len(payload), info["sha256"], info["created"], final)

    def _prune(self, job: str) -> None:
        """Delete all but the ``keep`` newest checkpoints (and stale temporaries of dead writers)."""
        for _, p in self._files(job)[self.keep:]:
            try:
                p.unlink()
            except OSError:
                pass

    # ------------------------------------------------------------------- read
    @staticmethod
    def read_header(path: Path) -> tuple[dict[str, Any], int]:
        """The header dict of a checkpoint file and the payload's offset; raises CheckpointError."""
        try:
            with open(path, "rb") as f:
                line = f.readline(1 << 16)
        except OSError as exc:
            raise CheckpointError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if not line.startswith(MAGIC) or not line.endswith(b"\n"):
            raise CheckpointError(f"{path}: not a cohabit checkpoint (bad or truncated header)")
        try:
            header = json.loads(line[len(MAGIC):])
        except ValueError:
            raise CheckpointError(f"{path}: header is not valid JSON") from None
        for key in ("sha256", "size", "seq", "iteration"):
            if key not in header:
                raise CheckpointError(f"{path}: header lacks {key!r}")
        return header, len(line)

    def verify(self, path: Path) -> tuple[dict[str, Any], bytes]:
        """Header and payload of ``path`` after checking size and sha256; raises CheckpointError."""
        header, offset = self.read_header(path)
        with open(path, "rb") as f:
            f.seek(offset)
            payload = f.read()
        if len(payload) != header["size"]:
            raise CheckpointError(f"{path}: payload is {len(payload)} bytes, header says {header['size']} (truncated)")
        digest = hashlib.sha256(payload).hexdigest()
        if digest != header["sha256"]:
            raise CheckpointError(f"{path}: sha256 mismatch (stored {header['sha256'][:12]}…, got {digest[:12]}…)")
        return header, payload

    def load(self, job: str) -> tuple[Any, CheckpointInfo] | None:
        """The newest checkpoint of ``job`` that verifies, or None if there is none.

        Corrupt newer files are renamed ``*.corrupt`` (kept for inspection,
        never read again) and reported in :attr:`last_errors`.
        """
        self.last_errors = []
        for _, path in self._files(job):
            try:
                header, payload = self.verify(path)
                state = safestate.loads(payload)
            except (CheckpointError, safestate.StateFormatError) as exc:
                self.last_errors.append(str(exc))
                try:
                    os.replace(path, path.with_suffix(".corrupt"))
                except OSError:
                    pass
                continue
            info = CheckpointInfo(job, int(header["seq"]), int(header["iteration"]), int(header["size"]),
                                  header["sha256"], float(header.get("created", 0.0)), path)
            return state, info
        return None

    def latest(self, job: str) -> CheckpointInfo | None:
        """Header of the newest checkpoint whose header parses (payload not verified; cheap)."""
        for _, path in self._files(job):
            try:
                h, _ = self.read_header(path)
            except CheckpointError:
                continue
            return CheckpointInfo(job, int(h["seq"]), int(h["iteration"]), int(h["size"]), h["sha256"],
                                  float(h.get("created", 0.0)), path)
        return None

    def paths(self, job: str) -> list[Path]:
        """Checkpoint files of ``job``, newest first."""
        return [p for _, p in self._files(job)]

    def clear(self, job: str) -> None:
        """Remove every checkpoint of ``job`` (a job started afresh must not restore an old run)."""
        d = self.job_dir(job)
        if not d.is_dir():
            return
        for p in d.iterdir():
            if p.suffix in (".ckpt", ".corrupt") or p.name.startswith(".tmp-"):
                try:
                    p.unlink()
                except OSError:
                    pass
