"""Checks of command-line options, run before any work starts.

Each check returns ``None`` when the option is fine, else the message to
print (naming the option, what was expected and what was given), so a
command can refuse a bad ``--seed`` or an unwritable ``--json`` before a run
of minutes whose results it could then not keep.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

#: Image formats ``--plot`` can write (matplotlib's raster and vector back-ends).
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")
#: Malformed rows ``--skip-bad-rows`` skips before it gives up (the default of ``--max-bad-rows``).
DEFAULT_MAX_BAD_ROWS = 1000
#: Largest seed (numpy's legacy seeding takes 32 bits).
MAX_SEED = 2**32 - 1


def number(option: str, value: float | int | None, *, lo: float, hi: float = math.inf,
           lo_open: bool = False, allow_inf: bool = False) -> str | None:
    """``value`` must be a number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``), finite unless ``allow_inf``."""
    if value is None:
        return None
    bad = math.isnan(value) or (math.isinf(value) and not allow_inf) or value > hi
    bad = bad or (value <= lo if lo_open else value < lo)
    if not bad:
        return None
    low = f"> {lo:g}" if lo_open else f">= {lo:g}"
    rng = low if math.isinf(hi) else f"{low} and <= {hi:g}"
    kind = "a number" + ("" if allow_inf else " (finite)")
    return f"{option}: expected {kind} {rng}, got {value:g}"


def seed(value: int) -> str | None:
    """``--seed``: an integer in ``[0, 2**32 - 1]``."""
    if 0 <= value <= MAX_SEED:
        return None
    return f"--seed: expected an integer in [0, {MAX_SEED}], got {value}"


def _writable_dir(directory: Path) -> str | None:
    """Create ``directory`` (and parents) if needed and prove a file can be written there."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".cohabit-check-"):
            pass
    except OSError as exc:
        return f"cannot write in {str(directory)!r}: {exc.strerror or exc}"
    return None


def output_file(option: str, path: Path | None, *, suffixes: tuple[str, ...] = ()) -> str | None:
    """``path`` can be written: not a directory, its folder exists or can be made and is writable.

    ``suffixes``: the file name must end with one of these (case-insensitive).
    """
    if path is None:
        return None
    if suffixes and path.suffix.lower() not in suffixes:
        return f"{option}: {str(path)!r} must end with one of {', '.join(suffixes)}"
    if path.is_dir():
        return f"{option}: {str(path)!r} is a directory; give a file name"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{option}: {str(path)!r} exists and is not writable"
    problem = _writable_dir(path.parent)
    return None if problem is None else f"{option}: {problem}"


def output_dir(option: str, path: Path | None) -> str | None:
    """``path`` is (or can be made) a writable directory."""
    if path is None:
        return None
    if path.exists() and not path.is_dir():
        return f"{option}: {str(path)!r} exists and is not a directory"
    problem = _writable_dir(path)
    return None if problem is None else f"{option}: {problem}"


def first(*problems: str | None) -> str | None:
    """The first problem found, or None."""
    return next((p for p in problems if p is not None), None)
