"""Near-miss names in error messages: ``unknown policy 'fifo+backfill' (did you mean 'fifo-backfill'?)``."""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches

#: How alike (difflib ratio) a known name must be to be suggested: ``gpus`` for ``gpu`` (0.86),
#: ``sample`` for ``sampel`` (0.83), but not ``gpu`` for ``cpu`` (0.67).
CUTOFF = 0.75


def nearest(word: str, known: Iterable[str]) -> str | None:
    """The known name most like ``word``, if one is alike enough (:data:`CUTOFF`)."""
    close = get_close_matches(word, list(known), n=1, cutoff=CUTOFF)
    return close[0] if close else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the nearest known name, or ``""``."""
    close = nearest(word, known)
    return f" (did you mean {close!r}?)" if close is not None else ""
